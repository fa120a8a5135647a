// The CPU backend's loops against the reference, split over 1 to 4 threads
// with parts small enough that every split is exercised.
#include "server/cpu/cpu_kernels.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "reference/reference.h"
#include "server/cpu/sanitizers.h"

namespace primserve::cpu {
namespace {

template <typename T>
std::vector<T> RandomValues(size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (T& x : v) {
    if constexpr (std::is_integral_v<T>) {
      x = static_cast<T>(rng());  // wraps under SUM and PROD
    } else {
      x = static_cast<T>(std::uniform_real_distribution<double>(-4, 4)(rng));
      const uint64_t pick = rng() % 64;
      if (pick == 0) x = std::numeric_limits<T>::quiet_NaN();
      if (pick == 1) x = -0.0;
      if (pick == 2) x = 0.0;
      if (pick == 3) x = std::numeric_limits<T>::infinity();
    }
  }
  return v;
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// SameBits, except that for a float SUM or PROD any NaN matches any NaN.
// Where two NaNs meet (inf * 0 gives x86's negative default NaN, which then
// meets a quiet NaN of the input) IEEE 754 leaves open whose payload and sign
// the answer carries, and x86 gives the first operand's: a * b and b * a
// differ, and the compiler may emit either for the reference's
// Combine(acc, x) (the TSan build of the reference does swap them). Every
// other bit is the left fold's; MIN/MAX's NaN (the first) is exact.
template <typename T>
bool SameScanBits(const std::vector<T>& a, const std::vector<T>& b, Op op) {
  if (std::is_integral_v<T> || (op != Op::kSum && op != Op::kProd)) return SameBits(a, b);
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return false;
  }
  return true;
}

std::vector<uint64_t> RandomStarts(uint64_t n, std::mt19937_64& rng) {
  std::vector<uint64_t> starts{0};
  while (rng() % 3 != 0) starts.push_back(std::min<uint64_t>(n, starts.back() + rng() % 40));
  return starts;
}

template <typename T>
class CpuKernelsTest : public ::testing::Test {};
using Types = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
TYPED_TEST_SUITE(CpuKernelsTest, Types);

TYPED_TEST(CpuKernelsTest, ScanGivesTheReferenceBitsForEverySplit) {
  using T = TypeParam;
  std::mt19937_64 rng(7);
  for (uint64_t n : {0, 1, 2, 7, 64, 1000, 4099}) {
    const std::vector<T> input = RandomValues<T>(n, rng);
    for (Op op : {Op::kSum, Op::kProd, Op::kMin, Op::kMax}) {
      for (bool exclusive : {false, true}) {
        for (bool segmented : {false, true}) {
          const std::vector<uint64_t> starts = segmented ? RandomStarts(n, rng) : std::vector<uint64_t>{};
          const std::vector<T> expected = reference::Scan<T>(input, op, exclusive, starts);
          for (int threads : {1, 2, 3, 4}) {
            const Parallelism parallelism{threads, 5, threads == 2 ? 7u : 64u};
            std::vector<T> out(n, T{42});
            Scan<T>(input, op, exclusive, starts, absl::MakeSpan(out), parallelism);
            EXPECT_TRUE(SameScanBits(out, expected, op)) << "n " << n << " op " << OpName(op) << " exclusive "
                                                 << exclusive << " threads " << threads;
            std::vector<T> in_place = input;
            Scan<T>(in_place, op, exclusive, starts, absl::MakeSpan(in_place), parallelism);
            EXPECT_TRUE(SameScanBits(in_place, expected, op)) << "in place, n " << n << " op " << OpName(op);
          }
        }
      }
    }
  }
}

TYPED_TEST(CpuKernelsTest, ReduceGivesTheReferenceValues) {
  using T = TypeParam;
  std::mt19937_64 rng(11);
  for (uint64_t n : {0, 1, 15, 16, 17, 1000, 4099}) {
    std::vector<T> input = RandomValues<T>(n, rng);
    for (Op op : {Op::kSum, Op::kProd, Op::kMin, Op::kMax}) {
      for (bool segmented : {false, true}) {
        const std::vector<uint64_t> starts = segmented ? RandomStarts(n, rng) : std::vector<uint64_t>{};
        const std::vector<T> expected = reference::Reduce<T>(input, op, starts).values;
        for (int threads : {1, 2, 4}) {
          std::vector<T> out(expected.size(), T{42});
          Reduce<T>(input, op, starts, absl::MakeSpan(out), {threads, 5});
          if (std::is_integral_v<T> || op != Op::kSum) {
            EXPECT_TRUE(SameBits(out, expected)) << "n " << n << " op " << OpName(op);
            continue;
          }
          ASSERT_EQ(out.size(), expected.size());
          for (size_t s = 0; s < out.size(); ++s) {
            if (std::isnan(expected[s]) || std::isinf(expected[s])) {
              EXPECT_EQ(std::isnan(out[s]), std::isnan(expected[s])) << "segment " << s;
              if (!std::isnan(expected[s])) EXPECT_EQ(out[s], expected[s]);
              continue;
            }
            // Lanes sum in another order: within rounding of the magnitudes.
            const double scale = 8.0 * n;
            EXPECT_NEAR(out[s], expected[s], scale * 8 * std::numeric_limits<T>::epsilon() + 1e-30)
                << "n " << n << " op " << OpName(op) << " segment " << s;
          }
        }
      }
    }
  }
}

// Large arrays, as the server gets them: few NaNs (with other payloads
// than the quiet NaN's), both zeros, negatives and runs of equal values, so
// that MIN/MAX's blocks with and without a NaN are both met and the threaded
// scan crosses many chunks and rounds.
template <typename T>
std::vector<T> LargeValues(size_t n, int nans, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (T& x : v) {
    if constexpr (std::is_integral_v<T>) {
      x = static_cast<T>(rng() % 4 == 0 ? rng() : rng() % 2001) - static_cast<T>(1000);
    } else {
      x = static_cast<T>(std::uniform_real_distribution<double>(-1e6, 1e6)(rng));
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    for (int k = 0; k < nans; ++k) {
      T nan = std::numeric_limits<T>::quiet_NaN();
      using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
      Bits bits;
      std::memcpy(&bits, &nan, sizeof(T));
      bits |= static_cast<Bits>(k + 1) | (k % 2 == 0 ? Bits{1} << (8 * sizeof(T) - 1) : 0);
      std::memcpy(&nan, &bits, sizeof(T));
      v[rng() % n] = nan;
    }
    v[rng() % n] = T(-0.0);
    v[rng() % n] = T(0.0);
  }
  return v;
}

TYPED_TEST(CpuKernelsTest, LargeScansAndExtremesGiveTheReferenceBits) {
  using T = TypeParam;
  std::mt19937_64 rng(13);
  // Under a sanitizer 100000 is the largest (instrumented, the test neared
  // its timeout): still 8 rounds of 3 threads' chunks.
  for (uint64_t n : kSanitized ? std::vector<uint64_t>{4095, 4096, 100000}
                               : std::vector<uint64_t>{4095, 4096, 100000, 300001}) {
    for (int nans : {0, 1, 3}) {
      const std::vector<T> input = LargeValues<T>(n, nans, rng);
      for (Op op : {Op::kSum, Op::kMin, Op::kMax}) {
        const std::vector<T> reduced = reference::Reduce<T>(input, op, {}).values;
        const std::vector<T> scanned = reference::Scan<T>(input, op, false, {});
        for (int threads : {1, 2, 3}) {
          const Parallelism parallelism{threads, 1000, 4097};
          if (std::is_integral_v<T> || op != Op::kSum) {
            std::vector<T> out(1, T{42});
            Reduce<T>(input, op, {}, absl::MakeSpan(out), parallelism);
            EXPECT_TRUE(SameBits(out, reduced))
                << "reduce n " << n << " nans " << nans << " op " << OpName(op) << " threads " << threads;
            std::vector<T> scan(n, T{42});
            Scan<T>(input, op, false, {}, absl::MakeSpan(scan), parallelism);
            EXPECT_TRUE(SameBits(scan, scanned))
                << "scan n " << n << " nans " << nans << " op " << OpName(op) << " threads " << threads;
          }
        }
      }
    }
  }
}

TYPED_TEST(CpuKernelsTest, ExtremeOfZerosAndInfinitiesKeepsTheOrder) {
  using T = TypeParam;
  if constexpr (std::is_floating_point_v<T>) {
    const T inf = std::numeric_limits<T>::infinity();
    std::mt19937_64 rng(17);
    for (const std::vector<T>& pool : std::vector<std::vector<T>>{
             {T(-0.0), T(0.0)}, {T(-0.0)}, {T(0.0)}, {-inf, T(-0.0)}, {inf, -inf}, {-inf}}) {
      std::vector<T> input(10000);
      for (T& x : input) x = pool[rng() % pool.size()];
      for (Op op : {Op::kMin, Op::kMax}) {
        const std::vector<T> expected = reference::Reduce<T>(input, op, {}).values;
        for (int threads : {1, 2}) {
          std::vector<T> out(1, T{42});
          Reduce<T>(input, op, {}, absl::MakeSpan(out), {threads, 1000});
          EXPECT_TRUE(SameBits(out, expected)) << OpName(op) << " of " << pool.size() << " kinds";
        }
      }
    }
  }
}

// A long float SUM keeps about numpy's pairwise precision: 4M times 0.1f,
// whose eight lanes folded left (512K elements each) were off by 4.1e-3 of
// the sum; halves added pairwise down to 2048 elements (256 a lane), 1e-5 at
// most.
TEST(CpuKernelsTest, LongFloatSumIsPairwiseExact) {
  const std::vector<float> tenths(size_t{1} << 22, 0.1f);
  const double exact = static_cast<double>(0.1f) * tenths.size();
  float one_thread = 0;
  Reduce<float>(tenths, Op::kSum, {}, absl::MakeSpan(&one_thread, 1), {1, 1000});
  for (int threads : {1, 2, 3}) {
    float out = 0;
    Reduce<float>(tenths, Op::kSum, {}, absl::MakeSpan(&out, 1), {threads, 1000});
    EXPECT_NEAR(out, exact, 1e-5 * exact) << "threads " << threads;
    // Its halves on two threads: one thread's bits.
    EXPECT_EQ(std::memcmp(&out, &one_thread, sizeof(float)), 0) << "threads " << threads;
    double wide = 0;
    Reduce<float, double>(tenths, Op::kSum, {}, absl::MakeSpan(&wide, 1), {threads, 1000});
    EXPECT_NEAR(wide, exact, 1e-12 * exact) << "threads " << threads;
  }
}

TEST(CpuKernelsTest, FloatSumOfNegativeZerosStaysNegative) {
  const std::vector<float> zeros(100, -0.0f);
  float out = 1;
  Reduce<float>(zeros, Op::kSum, {}, absl::MakeSpan(&out, 1), {4, 5});
  EXPECT_TRUE(std::signbit(out));
  EXPECT_EQ(out, 0.0f);
}

}  // namespace
}  // namespace primserve::cpu
