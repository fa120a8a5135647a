// The CPU backend's sort against the reference permutation, with parts
// small enough that every split runs: random keys, few distinct keys
// (stability), NaN / -NaN / -0.0 / inf for floats, descending, segments
// (empty, one-key, short ones for the comparison sort, long ones for the
// radix sort).
#include "server/cpu/cpu_sort.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "reference/sort.h"
#include "server/cpu/sanitizers.h"

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

// Segment starts: empty and one-key segments, short ones, some longer than
// the split threshold below and some radix sorted.
std::vector<uint64_t> MixedStarts(uint64_t n, std::mt19937_64& rng) {
  std::vector<uint64_t> starts{0};
  if (n > 0) starts.insert(starts.end(), {0, 1});
  while (starts.back() < n) {
    const uint64_t pick = rng() % 8;
    const uint64_t len = pick == 0 ? 700 : pick == 1 ? kRadixSortItems + rng() % 1000 : rng() % 40;
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
  // Under a sanitizer 40000 keys ran past the timeout: 5003 still radix
  // sorts (over up to 7 threads) and holds a radix-sorted segment; 1, 3 and
  // 7 threads there.
  std::vector<uint64_t> sizes = {0, 1, 2, 5, 999, 2047, 2048, 5003};
  if (!kSanitized) sizes.push_back(40000);
  for (uint64_t n : sizes) {
    for (bool few_distinct : {false, true}) {
      const std::vector<K> keys = RandomKeys<K>(n, few_distinct, rng);
      for (bool descending : {false, true}) {
        for (bool segmented : {false, true}) {
          const std::vector<uint64_t> starts =
              segmented ? MixedStarts(n, rng) : std::vector<uint64_t>{};
          const std::vector<int64_t> want =
              reference::SortPermutation<K>(keys, descending, starts);
          for (int threads : kSanitized ? std::vector<int>{1, 3, 7} : std::vector<int>{1, 2, 3, 4, 7}) {
            // Parts of 100 keys: segments of 200 or more are split.
            const Parallelism parallelism{threads, 100};
            std::vector<K> sorted(n, K(42));
            std::vector<int64_t> order(n, -1);
            Sort<K>(keys, descending, starts, parallelism, absl::MakeSpan(sorted),
                    absl::MakeSpan(order));
            const std::string what = "n=" + std::to_string(n) +
                                     " few_distinct=" + std::to_string(few_distinct) +
                                     " descending=" + std::to_string(descending) +
                                     " segmented=" + std::to_string(segmented) +
                                     " threads=" + std::to_string(threads);
            EXPECT_EQ(order, want) << what;
            // The keys with their own bits: the -0.0 or the NaN that was there.
            const std::vector<K> want_keys = reference::Permute<K>(keys, want);
            EXPECT_TRUE(n == 0 || std::memcmp(sorted.data(), want_keys.data(), n * sizeof(K)) == 0)
                << what;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace primserve::cpu
