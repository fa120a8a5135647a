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
            std::vector<T> out(n, T{42});
            Scan<T>(input, op, exclusive, starts, absl::MakeSpan(out), {threads, 5});
            EXPECT_TRUE(SameBits(out, expected)) << "n " << n << " op " << OpName(op) << " exclusive "
                                                 << exclusive << " threads " << threads;
            std::vector<T> in_place = input;
            Scan<T>(in_place, op, exclusive, starts, absl::MakeSpan(in_place), {threads, 5});
            EXPECT_TRUE(SameBits(in_place, expected)) << "in place, n " << n << " op " << OpName(op);
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

TEST(CpuKernelsTest, FloatSumOfNegativeZerosStaysNegative) {
  const std::vector<float> zeros(100, -0.0f);
  float out = 1;
  Reduce<float>(zeros, Op::kSum, {}, absl::MakeSpan(&out, 1), {4, 5});
  EXPECT_TRUE(std::signbit(out));
  EXPECT_EQ(out, 0.0f);
}

}  // namespace
}  // namespace primserve::cpu
