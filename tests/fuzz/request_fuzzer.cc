// libFuzzer entry point over the request path below gRPC (request_path.h).
// Built with clang by `bazel build --config=fuzz`; run by tools/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "tests/fuzz/request_path.h"

// Protobuf logs every string field of invalid UTF-8 it parses (and the
// request path parses each input several times): dropped, so that the log
// shows libFuzzer's lines and a finding's report.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel level, const char* file, int line,
                                     const std::string& message) {
    if (level >= google::protobuf::LOGLEVEL_FATAL) {
      std::fprintf(stderr, "[libprotobuf FATAL %s:%d] %s\n", file, line, message.c_str());
    }
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  primserve::fuzz::RunRequestBytes(absl::MakeConstSpan(data, size));
  return 0;
}
