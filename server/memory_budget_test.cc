#include "server/memory_budget.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace primserve {
namespace {

TEST(MemoryBudgetTest, RefusesMoreThanTheWholeBudget) {
  MemoryBudget budget(1000);
  absl::Status status = budget.Acquire(1001);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST(MemoryBudgetTest, WaitsUntilEnoughIsReleased) {
  MemoryBudget budget(1000);
  ASSERT_TRUE(budget.Acquire(700).ok());
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    ASSERT_TRUE(budget.Acquire(400).ok());
    acquired = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(acquired) << "400 bytes do not fit beside 700 of 1000";
  budget.Release(700);
  waiter.join();
  EXPECT_TRUE(acquired);
  EXPECT_EQ(budget.in_use(), 400u);
}

}  // namespace
}  // namespace primserve
