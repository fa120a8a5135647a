// The CPU backend's Select against the reference: every dtype, predicate
// kind, flags, partition, and splits over 1 to 4 threads with parts small
// enough that every split is exercised.
#include "server/cpu/cpu_select.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"
#include "reference/reference.h"
#include "server/cpu/sanitizers.h"

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

// `compact(partition, values, indices)` against the reference's Select of
// `input` with the mask `expected_keep`.
template <typename T, typename Compact>
void ExpectCompactLikeTheReference(const std::vector<T>& input,
                                   const std::vector<bool>& expected_keep, Compact compact,
                                   const std::string& what) {
  for (bool partition : {false, true}) {
    const reference::SelectResult<T> expected = reference::Select<T>(input, expected_keep, partition);
    std::vector<T> values(expected.values.size());
    std::vector<int64_t> indices(expected.indices.size());
    compact(partition, absl::MakeSpan(values), absl::MakeSpan(indices));
    EXPECT_TRUE(SameBits(values, expected.values)) << what << " partition " << partition;
    EXPECT_EQ(indices, expected.indices) << what << " partition " << partition;
    std::vector<T> only_values(expected.values.size());
    compact(partition, absl::MakeSpan(only_values), absl::Span<int64_t>());
    EXPECT_TRUE(SameBits(only_values, expected.values)) << what << " values only";
    std::vector<int64_t> only_indices(expected.indices.size());
    compact(partition, absl::Span<T>(), absl::MakeSpan(only_indices));
    EXPECT_EQ(only_indices, expected.indices) << what << " indices only";
  }
}

uint64_t Count(const std::vector<bool>& keep) {
  return std::count(keep.begin(), keep.end(), true);
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
        const std::vector<bool> expected = reference::EvaluatePredicate<T>(input, predicate);
        const KeptCounts counts = CountPassing<T>(input, predicate, parallelism);
        EXPECT_EQ(counts.total, Count(expected)) << what;
        ExpectCompactLikeTheReference<T>(
            input, expected,
            [&](bool partition, absl::Span<T> values, absl::Span<int64_t> indices) {
              CompactPassing<T>(input, predicate, counts, partition, values, indices, parallelism);
            },
            what);
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
      const KeptCounts counts = CountFlagged<T>(flags, absl::MakeSpan(keep), parallelism);
      EXPECT_EQ(CountFlagged<T>(flags, {}, parallelism).total, counts.total) << what << " count only";
      const std::vector<bool> expected = reference::EvaluateFlags<T>(flags);
      EXPECT_EQ(std::vector<bool>(keep.begin(), keep.end()), expected) << what;
      EXPECT_EQ(counts.total, Count(expected)) << what;
      ExpectCompactLikeTheReference<int32_t>(
          input, expected,
          [&](bool partition, absl::Span<int32_t> values, absl::Span<int64_t> indices) {
            CompactMarked<int32_t>(input, keep, counts, partition, values, indices, parallelism);
          },
          what);
    }
  }
}

// Arrays large enough for the server's threads (more than min_items in a
// part), with NaNs, negatives and duplicates, and parts whose last elements
// are rejected (the write that runs ahead of the last kept one).
TYPED_TEST(CpuSelectTest, LargeArraysGiveTheReferenceAnswer) {
  using T = TypeParam;
  std::mt19937_64 rng(13);
  // Under a sanitizer the full sizes ran past the timeout; these still
  // make two and three parts of at least min_items (10000).
  for (uint64_t n : kSanitized ? std::vector<uint64_t>{29999, 65536}
                               : std::vector<uint64_t>{99999, 262144}) {
    std::vector<T> input(n);
    for (T& x : input) {
      x = static_cast<T>(static_cast<int64_t>(rng() % 2001) - 1000);
      if constexpr (std::is_floating_point_v<T>) {
        if (rng() % 1000 == 0) x = std::numeric_limits<T>::quiet_NaN();
      }
    }
    for (PredicateKind kind : {PredicateKind::kGt, PredicateKind::kNe, PredicateKind::kInRange}) {
      Predicate<T> predicate;
      predicate.kind = kind;
      predicate.operand = static_cast<T>(kind == PredicateKind::kGt ? 990 : 0);
      predicate.upper = static_cast<T>(500);
      for (int threads : {1, 2, 3}) {
        const Parallelism parallelism{threads, 10000};
        const std::string what = "n " + std::to_string(n) + " kind " +
                                 std::to_string(static_cast<int>(kind)) + " threads " +
                                 std::to_string(threads);
        const std::vector<bool> expected = reference::EvaluatePredicate<T>(input, predicate);
        const KeptCounts counts = CountPassing<T>(input, predicate, parallelism);
        EXPECT_EQ(counts.total, Count(expected)) << what;
        ExpectCompactLikeTheReference<T>(
            input, expected,
            [&](bool partition, absl::Span<T> values, absl::Span<int64_t> indices) {
              CompactPassing<T>(input, predicate, counts, partition, values, indices, parallelism);
            },
            what);
      }
    }
  }
}

// Runs of random lengths (1 to 40) of values with negatives, both zeros and
// NaNs of two payloads, at sizes below and above the threads' parts: the
// runs that cross a part's cut are one run.
TYPED_TEST(CpuSelectTest, RunsGiveTheReferenceUniqueAndRunLengths) {
  using T = TypeParam;
  std::mt19937_64 rng(17);
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{1000},
                     uint64_t{kSanitized ? 29999 : 99999}}) {
    std::vector<T> input;
    while (input.size() < n) {
      T x = static_cast<T>(static_cast<int64_t>(rng() % 21) - 10);
      if constexpr (std::is_floating_point_v<T>) {
        const uint64_t pick = rng() % 8;
        if (pick == 0) x = std::numeric_limits<T>::quiet_NaN();
        if (pick == 1) x = -std::numeric_limits<T>::quiet_NaN();
        if (pick == 2) x = T(-0.0);
        if (pick == 3) x = T(0.0);
      }
      input.resize(std::min<uint64_t>(n, input.size() + 1 + rng() % 40), x);
    }
    const std::vector<T> unique = reference::Unique<T>(input);
    const reference::Runs<T> runs = reference::RunLengthEncode<T>(input);
    for (int threads : {1, 2, 3, 4}) {
      const Parallelism parallelism{threads, 5000};
      const std::string what = "n " + std::to_string(n) + " threads " + std::to_string(threads);
      const KeptCounts counts = CountRuns<T>(input, parallelism);
      ASSERT_EQ(counts.total, unique.size()) << what;
      std::vector<T> values(counts.total);
      CompactRuns<T>(input, counts, absl::MakeSpan(values), {}, parallelism);
      EXPECT_TRUE(SameBits(values, unique)) << what;
      std::vector<T> run_values(counts.total);
      std::vector<int64_t> lengths(counts.total);
      CompactRuns<T>(input, counts, absl::MakeSpan(run_values), absl::MakeSpan(lengths),
                     parallelism);
      EXPECT_TRUE(SameBits(run_values, runs.values)) << what;
      EXPECT_EQ(lengths, runs.lengths) << what;
    }
  }
}

// Values for ReduceRuns: integers that wrap under SUM and PROD; floats with
// NaNs, infinities and both zeros.
template <typename V>
std::vector<V> FoldValues(size_t n, std::mt19937_64& rng) {
  std::vector<V> v(n);
  for (V& x : v) {
    if constexpr (std::is_integral_v<V>) {
      x = static_cast<V>(rng());
    } else {
      x = static_cast<V>(std::uniform_real_distribution<double>(-4, 4)(rng));
      const uint64_t pick = rng() % 64;
      if (pick == 0) x = std::numeric_limits<V>::quiet_NaN();
      if (pick == 1) x = V(-0.0);
      if (pick == 2) x = V(0.0);
      if (pick == 3) x = std::numeric_limits<V>::infinity();
    }
  }
  return v;
}

// Bit for bit, except that for a float SUM or PROD any NaN matches any NaN
// (where two NaNs meet, which one's payload and sign the answer keeps is the
// compiler's choice of operand order: see cpu_kernels_test's SameScanBits).
template <typename V>
bool SameFoldBits(const std::vector<V>& a, const std::vector<V>& b, Op op) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if constexpr (std::is_floating_point_v<V>) {
      if ((op == Op::kSum || op == Op::kProd) && std::isnan(a[i]) && std::isnan(b[i])) continue;
    }
    if (std::memcmp(&a[i], &b[i], sizeof(V)) != 0) return false;
  }
  return true;
}

template <typename K, typename V>
void ExpectReduceRunsLikeTheReference(const std::vector<K>& keys, std::mt19937_64& rng,
                                      const std::string& what) {
  const std::vector<V> values = FoldValues<V>(keys.size(), rng);
  for (Op op : {Op::kSum, Op::kProd, Op::kMin, Op::kMax}) {
    const reference::KeyedValues<K, V> expected = reference::ReduceByKey<K, V>(keys, values, op);
    // Under a sanitizer 1 and 3 threads (the test neared its timeout).
    for (int threads : kSanitized ? std::vector<int>{1, 3} : std::vector<int>{1, 2, 3, 4}) {
      const Parallelism parallelism{threads, 5000};
      const KeptCounts runs = CountRuns<K>(keys, parallelism);
      ASSERT_EQ(runs.total, expected.keys.size()) << what;
      std::vector<K> keys_out(runs.total, K(42));
      std::vector<V> values_out(runs.total, V(42));
      ReduceRuns<K, V>(keys, values, op, runs, absl::MakeSpan(keys_out), absl::MakeSpan(values_out),
                       parallelism);
      EXPECT_TRUE(SameBits(keys_out, expected.keys)) << what << " op " << OpName(op) << " threads "
                                                     << threads;
      EXPECT_TRUE(SameFoldBits(values_out, expected.values, op))
          << what << " op " << OpName(op) << " threads " << threads;
    }
  }
}

// ReduceRuns (the CPU backend's ReduceByKey) against reference::ReduceByKey:
// keys in runs of 1 to 3, 40 or 20000 (runs across the parts' cuts, and
// over whole parts), with NaNs of two payloads and both zeros for float
// keys; values of four dtypes.
TYPED_TEST(CpuSelectTest, ReduceRunsGiveTheReferenceReduceByKey) {
  using K = TypeParam;
  std::mt19937_64 rng(19);
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{1000},
                     uint64_t{kSanitized ? 29999 : 99999}}) {
    for (uint64_t longest : {3, 40, 20000}) {
      std::vector<K> keys;
      while (keys.size() < n) {
        K x = static_cast<K>(static_cast<int64_t>(rng() % 21) - 10);
        if constexpr (std::is_floating_point_v<K>) {
          const uint64_t pick = rng() % 8;
          if (pick == 0) x = std::numeric_limits<K>::quiet_NaN();
          if (pick == 1) x = -std::numeric_limits<K>::quiet_NaN();
          if (pick == 2) x = K(-0.0);
          if (pick == 3) x = K(0.0);
        }
        keys.resize(std::min<uint64_t>(n, keys.size() + 1 + rng() % longest), x);
      }
      const std::string what = "n " + std::to_string(n) + " runs up to " + std::to_string(longest);
      ExpectReduceRunsLikeTheReference<K, K>(keys, rng, what + " values K");
      ExpectReduceRunsLikeTheReference<K, double>(keys, rng, what + " values float64");
      if (kSanitized) continue;  // instrumented, the test neared its timeout
      ExpectReduceRunsLikeTheReference<K, int32_t>(keys, rng, what + " values int32");
      ExpectReduceRunsLikeTheReference<K, float>(keys, rng, what + " values float32");
    }
  }
}

}  // namespace
}  // namespace primserve::cpu
