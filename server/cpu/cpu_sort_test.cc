// The CPU backend's threaded sort against the reference permutation, with
// parts small enough that every split and merge round runs: random keys,
// few distinct keys (stability), NaN / -0.0 / inf for floats, descending,
// segments (empty, one-key, long enough to be split).
#include "server/cpu/cpu_sort.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "reference/sort.h"

namespace primserve::cpu {
namespace {

template <typename K>
std::vector<K> RandomKeys(size_t n, bool few_distinct, std::mt19937_64& rng) {
  std::vector<K> keys(n);
  for (K& k : keys) {
    const uint64_t bits = few_distinct ? rng() % 5 : rng();
    if constexpr (std::is_floating_point_v<K>) {
      k = few_distinct ? static_cast<K>(bits) - 2
                       : static_cast<K>(std::uniform_real_distribution<double>(-8, 8)(rng));
      const uint64_t pick = rng() % 16;
      if (pick == 0) k = std::numeric_limits<K>::quiet_NaN();
      if (pick == 1) k = -std::numeric_limits<K>::quiet_NaN();
      if (pick == 2) k = K(-0.0);
      if (pick == 3) k = K(0.0);
      if (pick == 4) k = -std::numeric_limits<K>::infinity();
    } else {
      k = static_cast<K>(bits);
    }
  }
  return keys;
}

// Segment starts: empty and one-key segments, short ones and one longer
// than the split threshold below.
std::vector<uint64_t> MixedStarts(uint64_t n, std::mt19937_64& rng) {
  std::vector<uint64_t> starts{0};
  if (n > 0) starts.insert(starts.end(), {0, 1});
  while (starts.back() < n) {
    const uint64_t len = rng() % 4 == 0 ? 700 : rng() % 40;
    starts.push_back(std::min(n, starts.back() + len));
  }
  return starts;
}

template <typename T>
class CpuSortTest : public ::testing::Test {};
using Types = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
TYPED_TEST_SUITE(CpuSortTest, Types);

TYPED_TEST(CpuSortTest, GivesTheReferencePermutationForEverySplit) {
  using K = TypeParam;
  std::mt19937_64 rng(11);
  for (uint64_t n : {0, 1, 2, 5, 999, 5003}) {
    for (bool few_distinct : {false, true}) {
      const std::vector<K> keys = RandomKeys<K>(n, few_distinct, rng);
      for (bool descending : {false, true}) {
        for (bool segmented : {false, true}) {
          const std::vector<uint64_t> starts =
              segmented ? MixedStarts(n, rng) : std::vector<uint64_t>{};
          const std::vector<int64_t> want =
              reference::SortPermutation<K>(keys, descending, starts);
          for (int threads : {1, 2, 3, 4, 7}) {
            // Parts of 100 keys: segments of 200 or more are split.
            const Parallelism parallelism{threads, 100};
            EXPECT_EQ(SortPermutation<K>(keys, descending, starts, parallelism), want)
                << "n=" << n << " few_distinct=" << few_distinct
                << " descending=" << descending << " segmented=" << segmented
                << " threads=" << threads;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace primserve::cpu
