// Test helpers for reading /metrics and querying Prometheus's API: a minimal
// HTTP/1.0 GET over loopback (no HTTP client library is among the build's
// packages) and a reader of Prometheus's text format.
#ifndef PRIMSERVE_TESTS_HTTP_TESTING_H_
#define PRIMSERVE_TESTS_HTTP_TESTING_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace primserve::testing {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// GET http://127.0.0.1:<port><target>; fails on connection errors and after
// 10 s without data, not on HTTP error statuses.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& target);

// Percent-encodes `text` for a URL query value.
std::string UrlEncode(absl::string_view text);

// The value of the sample in `exposition` (Prometheus text format) whose name
// and labels are exactly `series`, e.g. `up{job="x"}`; nullopt when absent.
std::optional<double> SampleValue(absl::string_view exposition, absl::string_view series);

}  // namespace primserve::testing

#endif  // PRIMSERVE_TESTS_HTTP_TESTING_H_
