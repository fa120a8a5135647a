// A lane and its device blocks on a real device: a lane given back has
// nothing of its batch in flight, pinned staging stays within its limit, a
// block's memory returns to the budget only once its free has run on the
// stream, small batches reuse the lane's kept memory, and only some are
// timed. Needs a GPU (tagged "gpu").
#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/cuda/fault_kernels.h"
#include "server/cuda/lane.h"
#include "server/engine/memory_budget.h"

namespace primserve::cuda {
namespace {

constexpr uint64_t kSpinNanoseconds = 200'000'000;  // 0.2 s

std::unique_ptr<Lane> MakeLane(MemoryBudget& budget, size_t pinned_limit = size_t{1} << 20) {
  absl::StatusOr<std::unique_ptr<Lane>> lane = Lane::Create(0, pinned_limit, &budget, nullptr);
  EXPECT_TRUE(lane.ok()) << lane.status();
  return lane.ok() ? *std::move(lane) : nullptr;
}

// A batch that returned early with a copy back into staging still queued
// (behind a slow kernel); the next batch on the lane stages its input there.
// The copy must land before the lane is handed out again, not on top of the
// next batch's input.
TEST(LaneTest, AReleasedLaneHasNothingInFlight) {
  MemoryBudget budget(std::map<int, uint64_t>{{0, uint64_t{1} << 30}});
  std::vector<std::unique_ptr<Lane>> lanes;
  lanes.push_back(MakeLane(budget));
  ASSERT_NE(lanes.front(), nullptr);
  LanePool pool(std::move(lanes));
  constexpr size_t kBytes = 64 << 10;

  Lane* lane = pool.Acquire();
  absl::StatusOr<char*> staging = lane->Staging(kBytes);
  ASSERT_TRUE(staging.ok()) << staging.status();
  {
    absl::StatusOr<DeviceBlock> block =
        DeviceBlock::Allocate(*lane, kBytes, absl::InfiniteFuture());
    ASSERT_TRUE(block.ok()) << block.status();
    ASSERT_EQ(cudaMemsetAsync(block->at(0), 0xAB, kBytes, lane->stream()), cudaSuccess);
    ASSERT_EQ(gpu::LaunchSpin(lane->stream(), kSpinNanoseconds), cudaSuccess);
    ASSERT_EQ(
        cudaMemcpyAsync(*staging, block->at(0), kBytes, cudaMemcpyDeviceToHost, lane->stream()),
        cudaSuccess);
  }  // the batch returns early: its block's free queues on the stream
  const absl::Time released = absl::Now();
  ASSERT_TRUE(pool.Release(lane).ok());
  EXPECT_GE(absl::Now() - released, absl::Milliseconds(100)) << "the release did not wait";

  Lane* next = pool.Acquire();
  ASSERT_EQ(next, lane);
  EXPECT_EQ(cudaStreamQuery(next->stream()), cudaSuccess);
  staging = next->Staging(kBytes);
  ASSERT_TRUE(staging.ok()) << staging.status();
  std::memset(*staging, 0x11, kBytes);  // the next batch's input
  ASSERT_EQ(cudaStreamSynchronize(next->stream()), cudaSuccess);
  std::vector<char> expected(kBytes, 0x11);
  EXPECT_EQ(std::memcmp(*staging, expected.data(), kBytes), 0)
      << "the last batch's copy landed on the next batch's staged input";
  ASSERT_TRUE(pool.Release(next).ok());
}

TEST(LaneTest, PinnedStagingStaysWithinItsLimit) {
  MemoryBudget budget(std::map<int, uint64_t>{{0, uint64_t{1} << 30}});
  constexpr size_t kLimit = size_t{1} << 20;
  std::unique_ptr<Lane> lane = MakeLane(budget, kLimit);
  ASSERT_NE(lane, nullptr);
  auto pinned = [](const char* p) {
    cudaPointerAttributes attributes;
    EXPECT_EQ(cudaPointerGetAttributes(&attributes, p), cudaSuccess);
    return attributes.type == cudaMemoryTypeHost;
  };
  absl::StatusOr<char*> small = lane->Staging(kLimit / 4);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(pinned(*small));
  // Beyond the limit: ordinary memory for this batch, and pinned stays put.
  absl::StatusOr<char*> large = lane->Staging(16 * kLimit);
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_FALSE(pinned(*large));
  std::memset(*large, 1, 16 * kLimit);  // it is all there
  EXPECT_LE(lane->pinned_bytes(), kLimit);
  ASSERT_TRUE(lane->Drain().ok());
  // Up to the limit, pinned grows and is kept.
  absl::StatusOr<char*> full = lane->Staging(kLimit);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_TRUE(pinned(*full));
  EXPECT_EQ(lane->pinned_bytes(), kLimit);
}

TEST(LaneTest, BudgetComesBackWhenTheFreeHasRun) {
  MemoryBudget budget(std::map<int, uint64_t>{{0, uint64_t{64} << 20}});
  std::unique_ptr<Lane> lane = MakeLane(budget);
  ASSERT_NE(lane, nullptr);
  {
    absl::StatusOr<DeviceBlock> block =
        DeviceBlock::Allocate(*lane, uint64_t{48} << 20, absl::InfiniteFuture());
    ASSERT_TRUE(block.ok()) << block.status();
    ASSERT_EQ(gpu::LaunchSpin(lane->stream(), kSpinNanoseconds), cudaSuccess);
  }  // the free is queued behind the spin
  EXPECT_EQ(budget.in_use(0), uint64_t{48} << 20) << "released before the free ran";
  // Another batch's wait for the memory ends at its deadline meanwhile.
  absl::StatusOr<DeviceBlock> waiting =
      DeviceBlock::Allocate(*lane, uint64_t{32} << 20, absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(waiting.status().code(), absl::StatusCode::kDeadlineExceeded) << waiting.status();
  ASSERT_EQ(cudaStreamSynchronize(lane->stream()), cudaSuccess);
  EXPECT_EQ(budget.in_use(0), 0u);
  absl::StatusOr<DeviceBlock> after =
      DeviceBlock::Allocate(*lane, uint64_t{32} << 20, absl::Now() + absl::Milliseconds(20));
  EXPECT_TRUE(after.ok()) << after.status();
}

// Small batches take the lane's kept batch memory: the second allocates
// nothing and the budget counts the kept bytes once, until the lane goes.
TEST(LaneTest, SmallBatchesReuseTheKeptBatchMemory) {
  MemoryBudget budget(std::map<int, uint64_t>{{0, uint64_t{1} << 30}});
  {
    std::unique_ptr<Lane> lane = MakeLane(budget);
    ASSERT_NE(lane, nullptr);
    absl::StatusOr<void*> first = lane->BatchMemory(4096, absl::InfiniteFuture());
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_NE(*first, nullptr);
    const uint64_t kept = budget.in_use(0);
    EXPECT_GE(kept, 4096u);
    EXPECT_EQ(kept, lane->batch_memory_bytes());
    absl::StatusOr<void*> second = lane->BatchMemory(8192, absl::InfiniteFuture());
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(*second, *first) << "a small batch allocated again";
    EXPECT_EQ(budget.in_use(0), kept);
    // It is device memory the stream can use.
    ASSERT_EQ(cudaMemsetAsync(*second, 0x5A, 8192, lane->stream()), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(lane->stream()), cudaSuccess);
    // Growing replaces it, and the budget counts the new size alone.
    absl::StatusOr<void*> grown = lane->BatchMemory(2 * kept, absl::InfiniteFuture());
    ASSERT_TRUE(grown.ok()) << grown.status();
    ASSERT_NE(*grown, nullptr);
    EXPECT_EQ(budget.in_use(0), lane->batch_memory_bytes());
    EXPECT_GE(lane->batch_memory_bytes(), 2 * kept);
    // Beyond the limit: not kept (the batch takes a DeviceBlock).
    absl::StatusOr<void*> large =
        lane->BatchMemory(Lane::kBatchMemoryLimit + 1, absl::InfiniteFuture());
    ASSERT_TRUE(large.ok()) << large.status();
    EXPECT_EQ(*large, nullptr);
  }
  EXPECT_EQ(budget.in_use(0), 0u) << "the lane kept its batch memory counted after it went";
}

// Small batches are timed once in a period, large ones always; an untimed
// batch's later marks record nothing.
TEST(LaneTest, SmallBatchesAreTimedOnceInAPeriod) {
  MemoryBudget budget(std::map<int, uint64_t>{{0, uint64_t{1} << 30}});
  std::unique_ptr<Lane> lane = MakeLane(budget);
  ASSERT_NE(lane, nullptr);
  int timed = 0;
  for (uint64_t i = 0; i < 2 * Lane::kTimingPeriod; ++i) {
    ASSERT_TRUE(lane->MarkSampledStart(4096).ok());
    ASSERT_TRUE(lane->Mark(Lane::kInputsIn).ok());
    timed += lane->timed();
  }
  EXPECT_EQ(timed, 2);
  ASSERT_TRUE(lane->MarkSampledStart(Lane::kAlwaysTimedBytes).ok());
  EXPECT_TRUE(lane->timed());
  ASSERT_TRUE(lane->Mark(Lane::kInputsIn).ok());
  ASSERT_TRUE(lane->Mark(Lane::kKernelDone).ok());
  ASSERT_TRUE(lane->Mark(Lane::kOutputsOut).ok());
  ASSERT_TRUE(lane->Drain().ok());
  EXPECT_GE(lane->Between(Lane::kStart, Lane::kOutputsOut), absl::ZeroDuration());
  // A plain kStart (a runner that does not sample) is always timed.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(lane->MarkSampledStart(4096).ok());
    ASSERT_TRUE(lane->Mark(Lane::kStart).ok());
    EXPECT_TRUE(lane->timed());
  }
}

}  // namespace
}  // namespace primserve::cuda
