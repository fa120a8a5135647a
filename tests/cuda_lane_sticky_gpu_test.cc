// After a sticky error on a lane's stream (a trapping kernel), the lane's
// drain and its stage marks report it (UNAVAILABLE, cudaErrorLaunchFailure)
// rather than passing it on silently to the next launch. Its own process: the
// CUDA context does not survive it. Needs a GPU (tagged "gpu").
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "server/cuda/fault_kernels.h"
#include "server/cuda/lane.h"
#include "server/engine/memory_budget.h"

namespace primserve::cuda {
namespace {

TEST(LaneStickyTest, DrainAndMarksReportTheLostContext) {
  MemoryBudget budget(std::map<int, uint64_t>{{0, uint64_t{1} << 30}});
  absl::StatusOr<std::unique_ptr<Lane>> lane = Lane::Create(0, size_t{1} << 20, &budget, nullptr);
  ASSERT_TRUE(lane.ok()) << lane.status();
  ASSERT_TRUE((*lane)->Mark(Lane::kStart).ok());
  ASSERT_EQ(gpu::LaunchTrappingKernel((*lane)->stream()), cudaSuccess);
  absl::Status drained = (*lane)->Drain();
  EXPECT_EQ(drained.code(), absl::StatusCode::kUnavailable) << drained;
  EXPECT_NE(drained.message().find("cudaErrorLaunchFailure"), std::string::npos) << drained;
  absl::Status marked = (*lane)->Mark(Lane::kInputsIn);
  EXPECT_EQ(marked.code(), absl::StatusCode::kUnavailable) << marked;
}

}  // namespace
}  // namespace primserve::cuda
