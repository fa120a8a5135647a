#include "client/loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "core/primitives.h"

namespace primserve {
namespace {

std::string Milliseconds(double ms) { return std::isnan(ms) ? "-" : absl::StrFormat("%.3f", ms); }

std::string FormatErrors(const std::map<std::string, uint64_t>& errors) {
  if (errors.empty()) return "0";
  return absl::StrJoin(errors, ";", absl::PairFormatter("="));
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1000) return absl::StrCat(bytes, " B");
  if (bytes < 1000 * 1000) return absl::StrFormat("%.1f kB", bytes / 1e3);
  if (bytes < 1000 * 1000 * 1000) return absl::StrFormat("%.1f MB", bytes / 1e6);
  return absl::StrFormat("%.2f GB", bytes / 1e9);
}

}  // namespace

void PrintHeader(const Options& options, const Workload& workload) {
  std::string arrays;  // how the arrays travel, unless whole in each message
  if (options.placement != Placement::kInline) {
    arrays = absl::StrCat(" (arrays in a ", FormatBytes(workload.region_bytes()),
                          options.placement == Placement::kSystem ? " POSIX shared-memory region"
                                                                  : " CUDA IPC region",
                          options.in_place ? ", in place" : "", "; inline the response would be ",
                          FormatBytes(workload.first_response_bytes()), ")");
  }
  if (options.stream_piece_bytes > 0) {
    arrays = absl::StrCat(" (streamed in pieces of about ", FormatBytes(options.stream_piece_bytes),
                          ")");
  }
  std::cout << absl::StreamFormat(
      "primload: %s %s%s, %d elements per request, %d distinct; request %s, response %s%s; %d "
      "channel%s to %s; %g s warmup + %g s measured per level\n",
      options.rpc.flag, DTypeName(options.spec.dtype),
      options.rpc.ops.empty() ? "" : absl::StrCat(" ", OpName(options.spec.op)), options.spec.n,
      options.distinct_requests, FormatBytes(workload.first_request_bytes()),
      options.placement == Placement::kInline ? FormatBytes(workload.first_response_bytes())
                                              : "placed",
      arrays, options.channels, options.channels == 1 ? "" : "s", options.address,
      absl::ToDoubleSeconds(options.warmup), absl::ToDoubleSeconds(options.measure));
}

std::vector<std::string> Columns(const Options& options) {
  std::vector<std::string> columns = {"target", options.open_loop ? "rate" : "concurrency"};
  for (const char* column : {"requests/s", "items/s", "GB/s", "p50_ms", "p90_ms", "p99_ms", "ok",
                             "verified", "mismatches", "errors"}) {
    columns.push_back(column);
  }
  return columns;
}

std::vector<std::string> MeasuredRow(const std::string& target, const std::string& level,
                                     const LevelStats& stats, const Summary& s) {
  return {target,
          level,
          absl::StrFormat("%.1f", s.requests_per_second),
          absl::StrFormat("%.4g", s.items_per_second),
          absl::StrFormat("%.3f", s.gigabytes_per_second),
          Milliseconds(s.p50_ms),
          Milliseconds(s.p90_ms),
          Milliseconds(s.p99_ms),
          absl::StrCat(stats.latencies_ms.size()),
          absl::StrCat(stats.verified),
          absl::StrCat(stats.mismatches),
          FormatErrors(stats.errors)};
}

std::vector<std::string> RatioRow(const std::string& target, const std::string& level,
                                  const Summary& primitive, const Summary& echo) {
  const auto ratio = [](double a, double b) { return absl::StrFormat("%.3f", a / b); };
  return {target,
          level,
          ratio(primitive.requests_per_second, echo.requests_per_second),
          ratio(primitive.items_per_second, echo.items_per_second),
          ratio(primitive.gigabytes_per_second, echo.gigabytes_per_second),
          ratio(primitive.p50_ms, echo.p50_ms),
          ratio(primitive.p90_ms, echo.p90_ms),
          ratio(primitive.p99_ms, echo.p99_ms),
          "-",
          "-",
          "-",
          "-"};
}

Table::Table(std::vector<std::string> columns, size_t first_width, std::ofstream csv)
    : csv_(std::move(csv)) {
  for (const std::string& column : columns) {
    widths_.push_back(std::max(column.size(), widths_.empty() ? first_width : size_t{10}));
  }
  Print(columns);
}

void Table::Print(const std::vector<std::string>& row) {
  std::string line = absl::StrFormat("%-*s", widths_[0], row[0]);
  for (size_t i = 1; i + 1 < row.size(); ++i) {
    absl::StrAppendFormat(&line, " %*s", widths_[i], row[i]);
  }
  absl::StrAppend(&line, "  ", row.back());
  std::cout << line << std::endl;
  if (csv_.is_open()) csv_ << absl::StrJoin(row, ",") << std::endl;
}

}  // namespace primserve
