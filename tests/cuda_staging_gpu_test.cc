// Staging through the real engine where its sizes are at their edges: an
// ARGMIN's values and indices on a fresh lane (whose staging once ran short
// of the indices), and requests larger than a lane's pinned staging (staged
// through ordinary memory). Each answer must equal the CPU backend's. Needs a
// GPU (tagged "gpu").
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/cuda/cuda_backend.h"
#include "server/server.h"

namespace primserve {
namespace {

// A server over a fresh CUDA backend with one lane, so the request below is
// the first its staging sees.
class FreshServer {
 public:
  explicit FreshServer(size_t pinned_bytes_per_lane = size_t{128} << 20) {
    CudaBackendOptions cuda_options;
    cuda_options.streams_per_device = 1;
    cuda_options.pinned_bytes_per_lane = pinned_bytes_per_lane;
    absl::StatusOr<std::unique_ptr<CudaBackend>> cuda = CudaBackend::Create(cuda_options);
    EXPECT_TRUE(cuda.ok()) << cuda.status();
    if (!cuda.ok()) return;
    server_ = Start(*std::move(cuda));
  }
  static std::unique_ptr<PrimServer> Start(std::unique_ptr<ExecutionBackend> backend) {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::move(backend));
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }
  PrimitivesClient client() const {
    return PrimitivesClient(PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", server_->port())));
  }
  bool ok() const { return server_ != nullptr; }

 private:
  std::unique_ptr<PrimServer> server_;
};

PrimitivesClient CpuClient() {
  static PrimServer* cpu = FreshServer::Start(std::make_unique<CpuBackend>()).release();
  return PrimitivesClient(PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", cpu->port())));
}

template <typename Request>
void ExpectSameAsCpu(const FreshServer& gpu, const Request& request) {
  auto on_gpu = gpu.client().Call(request);
  auto on_cpu = CpuClient().Call(request);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  EXPECT_EQ(on_gpu->SerializeAsString(), on_cpu->SerializeAsString());
}

TEST(CudaStagingTest, ArgMinOfEmptySegmentsOnAFreshLane) {
  // One segment (an empty input); 1,365 empty int32 segments, whose indices
  // once ended 168 bytes past a 16 KiB staging buffer (INTERNAL).
  for (int segments : {0, 1365, 4000}) {
    SCOPED_TRACE(segments);
    FreshServer gpu;
    ASSERT_TRUE(gpu.ok());
    for (v1::Op op : {v1::ARGMIN, v1::ARGMAX}) {
      v1::ReduceRequest request;
      *request.mutable_input() = PackArray<int32_t>({});
      request.set_op(op);
      for (int s = 0; s < segments; ++s) request.add_segment_offsets(0);
      ExpectSameAsCpu(gpu, request);
    }
  }
}

TEST(CudaStagingTest, RequestsLargerThanPinnedStaging) {
  // 64 KiB of pinned staging per lane: every request below stages through
  // ordinary memory, the large scan without the pipeline.
  FreshServer gpu(size_t{64} << 10);
  ASSERT_TRUE(gpu.ok());
  std::mt19937_64 rng(std::random_device{}());
  std::vector<int32_t> values((size_t{3} << 20) + 11);
  for (int32_t& v : values) v = static_cast<int32_t>(rng() % 2001) - 1000;
  v1::ScanRequest scan;
  *scan.mutable_input() = PackArray<int32_t>(values);
  scan.set_op(v1::SUM);
  ExpectSameAsCpu(gpu, scan);
  v1::ReduceRequest reduce;
  *reduce.mutable_input() = PackArray<int32_t>(values);
  reduce.set_op(v1::ARGMAX);
  for (uint64_t s = 0; s < values.size(); s += 1 + rng() % 5000) reduce.add_segment_offsets(s);
  ExpectSameAsCpu(gpu, reduce);
  v1::SelectRequest select;
  *select.mutable_input() = PackArray<int32_t>(values);
  select.mutable_predicate()->set_kind(v1::Predicate::NONZERO);
  select.set_output(v1::SelectRequest::VALUES_AND_INDICES);
  ExpectSameAsCpu(gpu, select);
  // And a small one after them, back in pinned staging.
  v1::ScanRequest small;
  *small.mutable_input() = PackArray<int32_t>(
      absl::Span<const int32_t>(values).subspan(0, 100));
  small.set_op(v1::MAX);
  ExpectSameAsCpu(gpu, small);
}

}  // namespace
}  // namespace primserve
