// libFuzzer entry point over the request path below gRPC (request_path.h).
// Built with clang by `bazel build --config=fuzz`; run by tools/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/request_path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  primserve::fuzz::RunRequestBytes(absl::MakeConstSpan(data, size));
  return 0;
}
