// Tiny requests that ask for huge answers (issue: a 30-byte AggregateByKey
// with num_keys near 2^31, Reduce with many empty segments) are refused at
// validation, within milliseconds, without the server allocating the answer;
// and the server answers the next request.
#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "tests/rpc_api.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;

// The process's peak resident set (VmHWM), in MiB: server and client share it.
double PeakRssMib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  }
  return -1;
}

// The CPU backend, counting the tasks that reach it.
class CountingBackend final : public ExecutionBackend {
 public:
  std::string name() const override { return "counting"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override {
    tasks_ += batch.size();
    cpu_.Execute(std::move(batch));
  }
  int tasks() const { return tasks_; }

 private:
  std::atomic<int> tasks_{0};
  CpuBackend cpu_;
};

class AmplificationTest : public ::testing::Test {
 protected:
  void Start(uint64_t max_response_bytes) {
    ServerOptions options;
    options.rpc_api = TestRpcApi();
    options.address = "127.0.0.1:0";
    options.limits.max_response_bytes = max_response_bytes;  // max_elements at its default
    auto backend = std::make_unique<CountingBackend>();
    backend_ = backend.get();
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::move(backend));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<PrimitivesClient>(
        PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", server_->port())));
  }
  void ExpectNextRequestAnswered() {
    const std::vector<int32_t> input = {4, -1, 9};
    absl::StatusOr<std::vector<int32_t>> sums = client_->Scan<int32_t>(input, Op::kSum);
    ASSERT_TRUE(sums.ok()) << sums.status();
    EXPECT_EQ(*sums, (std::vector<int32_t>{4, 3, 12}));
  }

  CountingBackend* backend_ = nullptr;  // owned by server_
  std::unique_ptr<PrimServer> server_;
  std::unique_ptr<PrimitivesClient> client_;
};

TEST_F(AmplificationTest, AggregateByKeyWithHugeNumKeysIsRefusedAtOnce) {
  Start(uint64_t{1} << 30);
  ExpectNextRequestAnswered();  // warm: connection and threads up
  v1::AggregateByKeyRequest request;
  request.mutable_keys()->set_dtype(v1::INT32);
  request.mutable_values()->set_dtype(v1::FLOAT64);
  request.set_op(v1::SUM);
  request.set_num_keys((uint64_t{1} << 31) - 1);  // 16 GiB of answer before the fix
  ASSERT_LT(request.ByteSizeLong(), 32u);
  [[maybe_unused]] const double peak_before = PeakRssMib();  // unread under ASan
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::AggregateByKeyResponse> response = client_->Call(request);
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(response.status().code(), absl::StatusCode::kResourceExhausted) << response.status();
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr("over the server's limit of 1073741824 (--max_response_bytes)"));
  EXPECT_LT(took, absl::Milliseconds(200));
  EXPECT_LT(PeakRssMib() - peak_before, 8.0);
  EXPECT_EQ(backend_->tasks(), 1) << "the refused request reached the backend";
  ExpectNextRequestAnswered();
}

TEST_F(AmplificationTest, ReduceWithManyEmptySegmentsIsRefusedBeforeItsAnswerIsBuilt) {
  Start(uint64_t{16} << 20);
  ExpectNextRequestAnswered();
  // 4M one-byte offsets: 4 MB on the wire, 32 MB once parsed, and an ARGMIN
  // answer of 64 MB (values and indices) that the old path built and copied.
  v1::ReduceRequest request;
  request.mutable_input()->set_dtype(v1::INT64);
  request.set_op(v1::ARGMIN);
  constexpr int kSegments = 4 << 20;
  request.mutable_segment_offsets()->Resize(kSegments, 0);
  [[maybe_unused]] const double peak_before = PeakRssMib();  // unread under ASan
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::ReduceResponse> response = client_->Call(request);
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(response.status().code(), absl::StatusCode::kResourceExhausted) << response.status();
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr("Reduce could take 67108864 bytes, over the server's limit of 16777216"));
  EXPECT_LT(took, absl::Seconds(2));
  EXPECT_EQ(backend_->tasks(), 1) << "the refused request reached the backend";
#ifndef __SANITIZE_ADDRESS__  // ASan's redzones and quarantine inflate every copy
  // The request's own copies (serialized, received, parsed: about 40 MB) but
  // not the 64 MB answer and its serialized copy.
  EXPECT_LT(PeakRssMib() - peak_before, 80.0);
#endif
  ExpectNextRequestAnswered();
}

}  // namespace
}  // namespace primserve
