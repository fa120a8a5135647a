// CUDA faults injected into the real engine (CudaFaultInjector), each through
// the same code path as the real failure: every RPC answers a failed device
// allocation with RESOURCE_EXHAUSTED and a refused kernel launch with
// INTERNAL, health stays SERVING (neither harms the context), the device
// pool gets back all it handed out, and the same request then succeeds with the CPU backend's
// answer. Needs a GPU (tagged "gpu"); the sticky error is in
// cuda_sticky_gpu_test, since it ends the process's CUDA context.
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/cuda/cuda_backend.h"
#include "server/cuda/fault_injector.h"
#include "server/server.h"

namespace primserve {
namespace {

// Device memory the backend's pool has handed out and not taken back, once
// every queued free has run.
uint64_t PoolBytesInUse() {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemPool_t pool;
  EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  uint64_t in_use = 0;
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &in_use), cudaSuccess);
  return in_use;
}

// One request of each RPC on fresh random int32 data, plus a scan large
// enough for the chunked pipeline; each as a call that returns the response
// of `client` or its error.
using Call = std::function<absl::StatusOr<std::string>(PrimitivesClient&)>;

template <typename Request>
Call CallOf(Request request) {
  return [request](PrimitivesClient& client) -> absl::StatusOr<std::string> {
    auto response = client.Call(request);
    if (!response.ok()) return response.status();
    return response->SerializeAsString();
  };
}

std::vector<std::pair<std::string, Call>> OneOfEach(std::mt19937_64& rng) {
  auto array = [&](uint64_t n, int32_t distinct) {
    std::vector<int32_t> values(n);
    for (int32_t& v : values) v = static_cast<int32_t>(rng() % distinct) - distinct / 2;
    return PackArray<int32_t>(values);
  };
  constexpr uint64_t kN = 5000;
  std::vector<std::pair<std::string, Call>> calls;
  v1::ScanRequest scan;
  *scan.mutable_input() = array(kN, 1000);
  scan.set_op(v1::SUM);
  calls.emplace_back("Scan", CallOf(scan));
  v1::ScanRequest large_scan;
  *large_scan.mutable_input() = array(uint64_t{20} << 20, 1000);  // 80 MB: pipelined
  large_scan.set_op(v1::MAX);
  calls.emplace_back("Scan (pipelined)", CallOf(large_scan));
  v1::ReduceRequest reduce;
  *reduce.mutable_input() = array(kN, 1000);
  reduce.set_op(v1::ARGMIN);
  calls.emplace_back("Reduce", CallOf(reduce));
  v1::SelectRequest select;
  *select.mutable_input() = array(kN, 1000);
  select.mutable_predicate()->set_kind(v1::Predicate::GT);
  select.mutable_predicate()->mutable_operand()->set_int_value(0);
  select.set_output(v1::SelectRequest::VALUES_AND_INDICES);
  select.set_partition(true);
  calls.emplace_back("Select", CallOf(select));
  v1::UniqueRequest unique;
  *unique.mutable_input() = array(kN, 4);
  calls.emplace_back("Unique", CallOf(unique));
  v1::RunLengthEncodeRequest rle;
  *rle.mutable_input() = array(kN, 4);
  calls.emplace_back("RunLengthEncode", CallOf(rle));
  v1::ReduceByKeyRequest by_key;
  *by_key.mutable_keys() = array(kN, 4);
  *by_key.mutable_values() = array(kN, 1000);
  by_key.set_op(v1::SUM);
  calls.emplace_back("ReduceByKey", CallOf(by_key));
  v1::AggregateByKeyRequest aggregate;
  std::vector<int32_t> keys(kN);
  for (int32_t& k : keys) k = static_cast<int32_t>(rng() % 64);
  *aggregate.mutable_keys() = PackArray<int32_t>(keys);
  *aggregate.mutable_values() = array(kN, 1000);
  aggregate.set_op(v1::SUM);
  aggregate.set_num_keys(64);
  calls.emplace_back("AggregateByKey", CallOf(aggregate));
  return calls;
}

class CudaFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.batcher.batch_timeout_micros = 0;  // each call alone meets its fault
    CudaBackendOptions cuda_options;
    cuda_options.faults = &faults_;
    absl::StatusOr<std::unique_ptr<CudaBackend>> cuda = CudaBackend::Create(cuda_options);
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    std::printf("GPU: %s\n", (*cuda)->device_names().c_str());
    absl::StatusOr<std::unique_ptr<PrimServer>> gpu = PrimServer::Start(options, *std::move(cuda));
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = *std::move(gpu);
    absl::StatusOr<std::unique_ptr<PrimServer>> cpu =
        PrimServer::Start(options, std::make_unique<CpuBackend>());
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *std::move(cpu);
    gpu_client_ = std::make_unique<PrimitivesClient>(
        PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", gpu_->port())));
    cpu_client_ = std::make_unique<PrimitivesClient>(
        PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", cpu_->port())));
  }

  // Arms `fault` once per RPC; each call must fail with `code` and a message
  // naming `error`, then succeed when retried, matching the CPU backend.
  void EachRpcRecoversFrom(CudaFault fault, absl::StatusCode code, const std::string& error) {
    std::mt19937_64 rng(static_cast<uint64_t>(fault) + 1);
    const uint64_t baseline = PoolBytesInUse();
    for (const auto& [rpc, call] : OneOfEach(rng)) {
      SCOPED_TRACE(rpc);
      faults_.Arm(fault);
      absl::StatusOr<std::string> failed = call(*gpu_client_);
      ASSERT_FALSE(failed.ok());
      EXPECT_EQ(failed.status().code(), code) << failed.status();
      EXPECT_NE(failed.status().message().find(error), std::string::npos) << failed.status();
      std::printf("%s: %s\n", rpc.c_str(), failed.status().ToString().c_str());
      // Consumed by this call: a later call would fail otherwise.
      EXPECT_FALSE(faults_.Fire(fault));
      EXPECT_TRUE(gpu_client_->IsServing());
      absl::StatusOr<std::string> retried = call(*gpu_client_);
      absl::StatusOr<std::string> expected = call(*cpu_client_);
      ASSERT_TRUE(retried.ok()) << retried.status();
      ASSERT_TRUE(expected.ok()) << expected.status();
      EXPECT_TRUE(*retried == *expected) << "retried answer differs from the CPU backend's";
      EXPECT_EQ(PoolBytesInUse(), baseline) << "device memory still held after the calls";
    }
    EXPECT_TRUE(gpu_->backend().Health().ok()) << gpu_->backend().Health();
  }

  CudaFaultInjector faults_;
  std::unique_ptr<PrimServer> gpu_, cpu_;
  std::unique_ptr<PrimitivesClient> gpu_client_, cpu_client_;
};

TEST_F(CudaFaultTest, AllocationFailureIsResourceExhaustedAndServingGoesOn) {
  EachRpcRecoversFrom(CudaFault::kAllocation, absl::StatusCode::kResourceExhausted,
                      "cudaErrorMemoryAllocation");
}

TEST_F(CudaFaultTest, LaunchFailureIsInternalAndServingGoesOn) {
  EachRpcRecoversFrom(CudaFault::kLaunch, absl::StatusCode::kInternal,
                      "kernel launch: cudaErrorInvalidValue");
}

}  // namespace
}  // namespace primserve
