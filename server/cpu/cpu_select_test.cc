// The CPU backend's Select against the reference: every dtype, predicate
// kind, flags, partition, and splits over 1 to 4 threads with parts small
// enough that every split is exercised.
#include "server/cpu/cpu_select.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"
#include "reference/reference.h"

namespace primserve::cpu {
namespace {

template <typename T>
std::vector<T> SmallValues(size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (T& x : v) {
    x = static_cast<T>(rng() % 9);  // repeats, so EQ and NE keep some
    if constexpr (std::is_floating_point_v<T>) {
      if (rng() % 32 == 0) x = std::numeric_limits<T>::quiet_NaN();
      if (rng() % 32 == 0) x = -0.0;
    }
  }
  return v;
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Our Select of `input` with mask `keep` from Keep/KeepFlags (its count
// `count`) against the reference's for that mask.
template <typename T>
void ExpectCompactLikeTheReference(const std::vector<T>& input, std::vector<uint8_t> keep,
                                   uint64_t count, const Parallelism& parallelism,
                                   const std::string& what) {
  const std::vector<bool> as_bools(keep.begin(), keep.end());
  for (bool partition : {false, true}) {
    const reference::SelectResult<T> expected = reference::Select<T>(input, as_bools, partition);
    ASSERT_EQ(count, expected.count) << what;
    std::vector<T> values(expected.values.size());
    std::vector<int64_t> indices(expected.indices.size());
    Compact<T>(input, keep, count, partition, absl::MakeSpan(values), absl::MakeSpan(indices),
               parallelism);
    EXPECT_TRUE(SameBits(values, expected.values)) << what << " partition " << partition;
    EXPECT_EQ(indices, expected.indices) << what << " partition " << partition;
    std::vector<int64_t> only_indices(expected.indices.size());
    Compact<T>(input, keep, count, partition, absl::Span<T>(), absl::MakeSpan(only_indices),
               parallelism);
    EXPECT_EQ(only_indices, expected.indices) << what << " indices only";
  }
}

template <typename T>
class CpuSelectTest : public ::testing::Test {};
using Types = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
TYPED_TEST_SUITE(CpuSelectTest, Types);

TYPED_TEST(CpuSelectTest, PredicatesGiveTheReferenceAnswerForEverySplit) {
  using T = TypeParam;
  std::mt19937_64 rng(11);
  for (uint64_t n : {0, 1, 7, 1000, 4099}) {
    const std::vector<T> input = SmallValues<T>(n, rng);
    for (PredicateKind kind :
         {PredicateKind::kNonzero, PredicateKind::kEq, PredicateKind::kNe, PredicateKind::kLt,
          PredicateKind::kLe, PredicateKind::kGt, PredicateKind::kGe, PredicateKind::kInRange}) {
      Predicate<T> predicate;
      predicate.kind = kind;
      predicate.operand = static_cast<T>(rng() % 9);
      predicate.upper = static_cast<T>(predicate.operand + rng() % 5);
      for (int threads : {1, 2, 3, 4}) {
        const Parallelism parallelism{threads, 5};
        const std::string what = "n " + std::to_string(n) + " kind " +
                                 std::to_string(static_cast<int>(kind)) + " threads " +
                                 std::to_string(threads);
        std::vector<uint8_t> keep(n);
        const uint64_t count = Keep<T>(input, predicate, absl::MakeSpan(keep), parallelism);
        EXPECT_EQ(Keep<T>(input, predicate, {}, parallelism), count) << what << " count only";
        const std::vector<bool> expected = reference::EvaluatePredicate<T>(input, predicate);
        EXPECT_EQ(std::vector<bool>(keep.begin(), keep.end()), expected) << what;
        ExpectCompactLikeTheReference<T>(input, keep, count, parallelism, what);
      }
    }
  }
}

TYPED_TEST(CpuSelectTest, FlagsGiveTheReferenceAnswerForEverySplit) {
  using T = TypeParam;
  std::mt19937_64 rng(12);
  for (uint64_t n : {0, 1, 7, 1000, 4099}) {
    const std::vector<T> flags = SmallValues<T>(n, rng);  // NaN and -0.0 flags included
    const std::vector<int32_t> input = SmallValues<int32_t>(n, rng);
    for (int threads : {1, 2, 3, 4}) {
      const Parallelism parallelism{threads, 5};
      const std::string what = "n " + std::to_string(n) + " threads " + std::to_string(threads);
      std::vector<uint8_t> keep(n);
      const uint64_t count = KeepFlags<T>(flags, absl::MakeSpan(keep), parallelism);
      EXPECT_EQ(KeepFlags<T>(flags, {}, parallelism), count) << what << " count only";
      const std::vector<bool> expected = reference::EvaluateFlags<T>(flags);
      EXPECT_EQ(std::vector<bool>(keep.begin(), keep.end()), expected) << what;
      ExpectCompactLikeTheReference<int32_t>(input, keep, count, parallelism, what);
    }
  }
}

}  // namespace
}  // namespace primserve::cpu
