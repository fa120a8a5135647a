// Tests of the CPU sort reference (reference/sort.h): hand-worked orders for
// NaN, the zeros, descending and segments, and a seeded check against an
// oracle written differently (std::sort of (rank class, key, position)).
#include "reference/sort.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace primserve::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename T>
uint64_t Bits(T x) {
  uint64_t b = 0;
  std::memcpy(&b, &x, sizeof(T));
  return b;
}

TEST(SortReference, IntegersStableAscendingAndDescending) {
  const std::vector<int32_t> keys = {3, -1, 3, 0, -1, 7};
  EXPECT_EQ(SortPermutation<int32_t>(keys, false), (std::vector<int64_t>{1, 4, 3, 0, 2, 5}));
  EXPECT_EQ(SortPermutation<int32_t>(keys, true), (std::vector<int64_t>{5, 0, 2, 3, 1, 4}));
}

TEST(SortReference, UnsignedExtremes) {
  const std::vector<uint64_t> keys = {~uint64_t{0}, 0, uint64_t{1} << 63, 5};
  EXPECT_EQ(SortPermutation<uint64_t>(keys, false), (std::vector<int64_t>{1, 3, 2, 0}));
}

TEST(SortReference, NaNLastBothWaysAndZerosEqual) {
  const double neg_nan = -kNaN;
  const std::vector<double> keys = {kNaN, 0.0, -kInf, -0.0, neg_nan, kInf, 1.5, 0.0};
  // Ascending: -inf, the zeros in input order (0.0 at 1, -0.0 at 3, 0.0 at 7), 1.5, inf, NaNs.
  EXPECT_EQ(SortPermutation<double>(keys, false),
            (std::vector<int64_t>{2, 1, 3, 7, 6, 5, 0, 4}));
  // Descending: inf, 1.5, the zeros still in input order, -inf, NaNs still last in input order.
  EXPECT_EQ(SortPermutation<double>(keys, true),
            (std::vector<int64_t>{5, 6, 1, 3, 7, 2, 0, 4}));
  // Keys come back bit for bit: the NaN's sign bit and -0.0 survive.
  const std::vector<double> sorted = Permute<double>(keys, SortPermutation<double>(keys, false));
  EXPECT_EQ(Bits(sorted[2]), Bits(-0.0));
  EXPECT_EQ(Bits(sorted[7]), Bits(neg_nan));
}

TEST(SortReference, SegmentsSortAlone) {
  const std::vector<float> keys = {5, 4, 3, 2, 1, 0};
  const std::vector<uint64_t> starts = {0, 0, 2, 2, 5};  // empty, [0,2), empty, [2,5), [5,6)
  EXPECT_EQ(SortPermutation<float>(keys, false, starts),
            (std::vector<int64_t>{1, 0, 4, 3, 2, 5}));
  EXPECT_EQ(SortPermutation<float>(keys, true, starts),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(SortReference, EmptyInput) {
  EXPECT_TRUE(SortPermutation<int64_t>({}, false).empty());
  EXPECT_TRUE(SortPermutation<int64_t>({}, true, std::vector<uint64_t>{0}).empty());
}

// Rank class 0 for numbers, 1 for NaN; zeros compared as +0.0.
template <typename T>
std::vector<int64_t> OracleOrder(const std::vector<T>& keys, bool descending) {
  std::vector<std::tuple<int, T, int64_t>> rows;
  for (size_t i = 0; i < keys.size(); ++i) {
    const bool nan = std::isnan(static_cast<double>(keys[i]));
    T key = nan ? T{0} : (keys[i] == T{0} ? T{0} : keys[i]);
    if (descending && !nan) key = -key;
    rows.emplace_back(nan ? 1 : 0, key, static_cast<int64_t>(i));
  }
  std::sort(rows.begin(), rows.end());
  std::vector<int64_t> order;
  for (const auto& row : rows) order.push_back(std::get<2>(row));
  return order;
}

TEST(SortReference, MatchesOracleOnRandomFloats) {
  std::mt19937_64 rng(20261128);
  std::uniform_int_distribution<int> pick(0, 9);
  std::uniform_real_distribution<float> value(-4, 4);
  for (int round = 0; round < 20; ++round) {
    std::vector<float> keys(1 + rng() % 2000);
    for (float& k : keys) {
      const int p = pick(rng);
      k = p == 0 ? std::nanf("") : p == 1 ? -0.0f : p == 2 ? 0.0f
          : std::round(value(rng));  // few distinct values: many ties
    }
    for (bool descending : {false, true}) {
      EXPECT_EQ(SortPermutation<float>(keys, descending), OracleOrder(keys, descending))
          << "round " << round << " descending " << descending;
    }
  }
}

}  // namespace
}  // namespace primserve::reference
