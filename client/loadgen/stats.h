// What the calls of one load level came to: the calls that ended inside its
// measurement window (Recorder), and their rates and latency percentiles
// (Summary).
#ifndef PRIMSERVE_CLIENT_LOADGEN_STATS_H_
#define PRIMSERVE_CLIENT_LOADGEN_STATS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/loadgen/target.h"

namespace primserve {

// The calls of one level that ended inside its measurement window.
struct LevelStats {
  std::vector<double> latencies_ms;  // of the ok calls
  uint64_t bytes = 0;                // request + response, of the ok calls
  uint64_t verified = 0;
  uint64_t mismatches = 0;
  std::map<std::string, uint64_t> errors;  // failed calls by status code

  uint64_t failures() const;
};

// Gathers the LevelStats of the calls that end in [start + warmup,
// start + warmup + measure), from any thread.
class Recorder {
 public:
  Recorder(absl::Time start, absl::Duration warmup, absl::Duration measure)
      : window_start_(start + warmup), window_end_(window_start_ + measure) {}

  absl::Time end() const { return window_end_; }

  // A call sent (or, open loop, due) at `sent` that ended at `ended`.
  void Record(absl::Time sent, absl::Time ended, const CallOutcome& outcome);

  // Open loop: a call due at `due` was not sent (--max_outstanding).
  void RecordNotSent(absl::Time due);

  LevelStats Take();

 private:
  bool InWindow(absl::Time t) const { return t >= window_start_ && t < window_end_; }

  const absl::Time window_start_;
  const absl::Time window_end_;
  absl::Mutex mu_;
  LevelStats stats_ ABSL_GUARDED_BY(mu_);
};

struct Summary {
  double requests_per_second = 0;
  double items_per_second = 0;
  double gigabytes_per_second = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
};

// The rates over a window of `measure` of requests of `items` elements, and
// the latency percentiles (NaN without ok calls). Sorts the latencies.
Summary Summarize(LevelStats& stats, absl::Duration measure, size_t items);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_STATS_H_
