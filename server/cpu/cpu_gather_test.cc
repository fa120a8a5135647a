// The CPU backend's Gather against a plain loop over random indices, over 1
// to 3 threads with parts small enough that every split runs, and the index
// check's answer for indices out of range at either end.
#include "server/cpu/cpu_gather.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace primserve::cpu {
namespace {

template <typename T>
class CpuGatherTest : public ::testing::Test {};
using Types = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
TYPED_TEST_SUITE(CpuGatherTest, Types);

TYPED_TEST(CpuGatherTest, ReadsTheValuesAtTheIndices) {
  using T = TypeParam;
  std::mt19937_64 rng(19);
  for (uint64_t n : {1, 17, 1000, 70001}) {
    std::vector<T> values(n);
    for (T& v : values) v = static_cast<T>(static_cast<int64_t>(rng() % 200001) - 100000);
    for (uint64_t count : {0, 1, 16, 17, 5000, 100003}) {
      std::vector<int64_t> indices(count);
      for (int64_t& i : indices) i = static_cast<int64_t>(rng() % n);
      std::vector<T> expected(count);
      for (uint64_t i = 0; i < count; ++i) expected[i] = values[indices[i]];
      for (int threads : {1, 2, 3}) {
        const Parallelism parallelism{threads, 1000};
        const std::string what = "n " + std::to_string(n) + " count " + std::to_string(count) +
                                 " threads " + std::to_string(threads);
        EXPECT_EQ(FirstIndexOutOfRange(indices, n, parallelism), -1) << what;
        std::vector<T> out(count, T(42));
        Gather<T>(values, indices, absl::MakeSpan(out), parallelism);
        EXPECT_EQ(out, expected) << what;
      }
    }
  }
}

TEST(CpuGatherTest, FindsTheFirstIndexOutOfRange) {
  std::mt19937_64 rng(23);
  const uint64_t n = 1000;
  std::vector<int64_t> indices(50000);
  for (int64_t& i : indices) i = static_cast<int64_t>(rng() % n);
  for (int threads : {1, 2, 3}) {
    const Parallelism parallelism{threads, 1000};
    std::vector<int64_t> bad = indices;
    bad[40000] = -1;
    EXPECT_EQ(FirstIndexOutOfRange(bad, n, parallelism), 40000);
    bad[30001] = static_cast<int64_t>(n);
    EXPECT_EQ(FirstIndexOutOfRange(bad, n, parallelism), 30001);
    bad[0] = INT64_MIN;
    EXPECT_EQ(FirstIndexOutOfRange(bad, n, parallelism), 0);
    EXPECT_EQ(FirstIndexOutOfRange(bad, 0, parallelism), 0);
  }
}

}  // namespace
}  // namespace primserve::cpu
