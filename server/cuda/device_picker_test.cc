#include "server/cuda/device_picker.h"

#include <map>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace primserve::cuda {
namespace {

TEST(DevicePickerTest, IdleDevicesAreTakenInTurn) {
  DevicePicker picker({0, 1, 2});
  // Each claim is finished at once: every device stays idle, so ties decide.
  std::vector<int> picked;
  for (int i = 0; i < 6; ++i) {
    const int device = picker.Claim(100);
    picked.push_back(device);
    picker.Finish(device, 100);
  }
  EXPECT_EQ(picked, (std::vector<int>{0, 1, 2, 0, 1, 2}));
}

TEST(DevicePickerTest, LeastQueuedBytesWinsOverTurn) {
  DevicePicker picker({0, 1});
  ASSERT_EQ(picker.Claim(1000), 0);
  ASSERT_EQ(picker.Claim(10), 1);
  // Device 1 holds 10 bytes against device 0's 1000: it takes the next two,
  // though turn-taking alone would give one to device 0.
  EXPECT_EQ(picker.Claim(10), 1);
  EXPECT_EQ(picker.Claim(10), 1);
  EXPECT_EQ(picker.bytes(1), 30u);
  EXPECT_EQ(picker.batches(1), 3u);
  picker.Finish(0, 1000);
  EXPECT_EQ(picker.bytes(0), 0u);
  EXPECT_EQ(picker.Claim(5), 0);
}

TEST(DevicePickerTest, FewerBatchesBreakEqualBytes) {
  DevicePicker picker({0, 1});
  // Two empty batches on device 0, one on device 1: device 1 is less busy.
  ASSERT_TRUE(picker.ClaimOn(0, 0));
  ASSERT_TRUE(picker.ClaimOn(0, 0));
  ASSERT_TRUE(picker.ClaimOn(1, 0));
  EXPECT_EQ(picker.Claim(0), 1);
}

TEST(DevicePickerTest, DeviceOutOfServiceIsNeverPicked) {
  DevicePicker picker({0, 1});
  ASSERT_TRUE(picker.ClaimOn(0, 1 << 30));
  picker.MarkDown(1);
  EXPECT_FALSE(picker.up(1));
  EXPECT_TRUE(picker.up(0));
  // Device 0 is busy and device 1 idle, but only device 0 serves.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(picker.Claim(1), 0);
  EXPECT_FALSE(picker.ClaimOn(1, 1));
  EXPECT_EQ(picker.batches(1), 0u);
  picker.MarkDown(0);
  EXPECT_EQ(picker.Claim(1), -1);
}

TEST(DevicePickerTest, UnservedDeviceIsRefused) {
  DevicePicker picker({2, 5});
  EXPECT_FALSE(picker.ClaimOn(0, 1));
  EXPECT_FALSE(picker.up(0));
  // Finishing what was never claimed changes nothing.
  picker.Finish(0, 1);
  picker.Finish(2, 1);
  EXPECT_EQ(picker.bytes(2), 0u);
  EXPECT_EQ(picker.batches(2), 0u);
  EXPECT_EQ(picker.Claim(1), 2);
  EXPECT_EQ(picker.Claim(1), 5);
}

TEST(DevicePickerTest, ConcurrentClaimsBalanceAndBalanceOut) {
  DevicePicker picker({0, 1});
  std::vector<std::thread> threads;
  std::map<int, int> counts;
  absl::Mutex mu;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        const int device = picker.Claim(64);
        ASSERT_GE(device, 0);
        {
          absl::MutexLock lock(&mu);
          ++counts[device];
        }
        picker.Finish(device, 64);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counts[0] + counts[1], 8000);
  // Equal work spreads over both devices.
  EXPECT_GT(counts[0], 2000);
  EXPECT_GT(counts[1], 2000);
  EXPECT_EQ(picker.bytes(0) + picker.bytes(1), 0u);
  EXPECT_EQ(picker.batches(0) + picker.batches(1), 0u);
}

}  // namespace
}  // namespace primserve::cuda
