#include "client/loadgen/stats.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"

namespace primserve {
namespace {

// The nearest-rank percentile `p` of sorted values; NaN for none.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return std::nan("");
  const size_t rank = static_cast<size_t>(std::ceil(p * sorted.size()));
  return sorted[std::max<size_t>(rank, 1) - 1];
}

}  // namespace

uint64_t LevelStats::failures() const {
  uint64_t failed = mismatches;
  for (const auto& [code, count] : errors) failed += count;
  return failed;
}

void Recorder::Record(absl::Time sent, absl::Time ended, const CallOutcome& outcome) {
  if (!InWindow(ended)) return;
  absl::MutexLock lock(&mu_);
  stats_.verified += outcome.verified;
  if (!outcome.status.ok()) {
    ++stats_.errors[absl::StatusCodeToString(
        static_cast<absl::StatusCode>(outcome.status.error_code()))];
  } else if (outcome.mismatch) {
    ++stats_.mismatches;
  } else {
    stats_.latencies_ms.push_back(absl::ToDoubleMilliseconds(ended - sent));
    stats_.bytes += outcome.bytes;
  }
}

void Recorder::RecordNotSent(absl::Time due) {
  if (!InWindow(due)) return;
  absl::MutexLock lock(&mu_);
  ++stats_.errors["NOT_SENT"];
}

LevelStats Recorder::Take() {
  absl::MutexLock lock(&mu_);
  return std::move(stats_);
}

Summary Summarize(LevelStats& stats, absl::Duration measure, size_t items) {
  std::sort(stats.latencies_ms.begin(), stats.latencies_ms.end());
  const double seconds = absl::ToDoubleSeconds(measure);
  Summary summary;
  summary.requests_per_second = stats.latencies_ms.size() / seconds;
  summary.items_per_second = summary.requests_per_second * items;
  summary.gigabytes_per_second = stats.bytes / seconds / 1e9;
  summary.p50_ms = Percentile(stats.latencies_ms, 0.50);
  summary.p90_ms = Percentile(stats.latencies_ms, 0.90);
  summary.p99_ms = Percentile(stats.latencies_ms, 0.99);
  return summary;
}

}  // namespace primserve
