#include "server/engine/memory_budget.h"

#include <atomic>
#include <map>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace primserve {
namespace {

TEST(MemoryBudgetTest, RefusesMoreThanTheWholeBudget) {
  MemoryBudget budget(std::map<int, uint64_t>{{0, 1000}});
  absl::Status status = budget.Acquire(0, 1001);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("--gpu_memory_budget_bytes"), std::string::npos) << status;
  EXPECT_EQ(budget.in_use(0), 0u);
}

TEST(MemoryBudgetTest, WaitsUntilEnoughIsReleased) {
  MemoryBudget budget(std::map<int, uint64_t>{{0, 1000}});
  ASSERT_TRUE(budget.Acquire(0, 700).ok());
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    ASSERT_TRUE(budget.Acquire(0, 400).ok());
    acquired = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(acquired) << "400 bytes do not fit beside 700 of 1000";
  budget.Release(0, 700);
  waiter.join();
  EXPECT_TRUE(acquired);
  EXPECT_EQ(budget.in_use(0), 400u);
}

TEST(MemoryBudgetTest, AWaitEndsAtTheDeadline) {
  MemoryBudget budget(std::map<int, uint64_t>{{0, 1000}});
  ASSERT_TRUE(budget.Acquire(0, 700).ok());
  const absl::Time start = absl::Now();
  absl::Status status = budget.Acquire(0, 400, start + absl::Milliseconds(100));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_GE(waited, absl::Milliseconds(90));
  EXPECT_LT(waited, absl::Seconds(5));
  EXPECT_EQ(budget.in_use(0), 700u) << "a wait that timed out holds nothing";
  // A deadline already past still takes memory that fits now.
  EXPECT_TRUE(budget.Acquire(0, 300, absl::InfinitePast()).ok());
  EXPECT_EQ(budget.in_use(0), 1000u);
}

TEST(MemoryBudgetTest, EachDeviceHasItsOwnBudget) {
  MemoryBudget budget(std::map<int, uint64_t>{{0, 1000}, {3, 5000}});
  EXPECT_EQ(budget.total(0), 1000u);
  EXPECT_EQ(budget.total(3), 5000u);
  // More than device 0 could ever hold fits on the larger device 3.
  EXPECT_EQ(budget.Acquire(0, 4000).code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(budget.Acquire(3, 4000).ok());
  // Device 0 full does not hold up device 3, nor the other way round.
  ASSERT_TRUE(budget.Acquire(0, 1000).ok());
  EXPECT_TRUE(budget.Acquire(3, 1000, absl::Now()).ok());
  EXPECT_EQ(budget.Acquire(0, 1, absl::Now() + absl::Milliseconds(20)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(budget.in_use(0), 1000u);
  EXPECT_EQ(budget.in_use(3), 5000u);
  budget.Release(0, 1000);
  EXPECT_TRUE(budget.Acquire(0, 1, absl::Now()).ok());
  EXPECT_EQ(budget.Acquire(1, 1).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace primserve
