// Tests of the GPU-order emulation (reference/gpu_order.h): the geometry
// against the kernels' constants, the indexing against the plain reference
// on data where every association gives the same bits, chunked scans with
// carries against one scan, the segmented reduce against the segmented scan,
// and hand-worked inputs whose bits depend on the kernels' tree.
#include "reference/gpu_order.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/primitives.h"
#include "gtest/gtest.h"
#include "kernels/detail/tuning.cuh"
#include "reference/reference.h"

namespace primserve::reference {
namespace {

// ------------------------------------------------------------- geometry

namespace kd = ::primserve::gpu::detail;
using ScanPolicy = kd::DefaultScanPolicy;
static_assert(kGpuScanThreads == ScanPolicy::kThreads);
static_assert(kGpuScanInputBytesPerThread == ScanPolicy::kBytesPerThread);
static_assert(kGpuScanValueBytesPerThread == ScanPolicy::kValueBytesPerThread);
static_assert(kGpuReduceThreads == kd::kBlockThreads);
static_assert(kGpuReduceInputBytesPerThread == kd::kBytesPerThread);
static_assert(kGpuReduceValueBytesPerThread == kd::kScanValueBytesPerThread);
static_assert(kGpuWarpPerSegmentMaxAverage == kd::kWarpPerSegmentMaxAverage);
static_assert(kGpuReduceFixedGrid == kd::kFixedOrderReduceGrid);
static_assert(kGpuReduceSingleBlockMaxBytes == kd::kReduceSingleBlockMaxBytes);
static_assert(kGpuReduceItemsPerThread<float> == kd::kBytesPerThread / 4);  // reduce.cu kReduceItems
static_assert(kGpuReduceItemsPerThread<double> == kd::kBytesPerThread / 8);
// The in-order look-back reads one slot per lane (lookback.cuh).
static_assert(ScanPolicy::Lookback::kSlotsPerLane == 1);

template <typename T>
constexpr bool ItemsMatchKernels() {
  using V = GpuFlagged<T>;  // layout of operators.cuh Flagged<T>
  return kGpuScanItemsPerThread<T, false> ==
             kd::kItemsPerThreadFor<T, T, ScanPolicy::kBytesPerThread,
                                    ScanPolicy::kValueBytesPerThread> &&
         kGpuScanItemsPerThread<T, true> ==
             kd::kItemsPerThreadFor<T, V, ScanPolicy::kBytesPerThread,
                                    ScanPolicy::kValueBytesPerThread> &&
         kGpuSegmentedReduceItemsPerThread<T> == kd::kItemsPerThread<T, V>;
}
static_assert(ItemsMatchKernels<float>());
static_assert(ItemsMatchKernels<double>());
static_assert(ItemsMatchKernels<int32_t>());
static_assert(ItemsMatchKernels<uint64_t>());
static_assert(sizeof(GpuFlagged<float>) == 8 && sizeof(GpuFlagged<double>) == 16);

TEST(GpuOrderGeometry, TileItems) {
  EXPECT_EQ(GpuScanTileItems(DType::kFloat32, false), 8192u);
  EXPECT_EQ(GpuScanTileItems(DType::kFloat64, false), 4096u);
  EXPECT_EQ(GpuScanTileItems(DType::kFloat32, true), 4096u);
  EXPECT_EQ(GpuScanTileItems(DType::kFloat64, true), 2048u);
  EXPECT_EQ(GpuScanTileItems(DType::kInt32, false), 8192u);
  EXPECT_EQ(GpuScanTileItems(DType::kUint64, true), 2048u);
  EXPECT_EQ(GpuSegmentedReduceTileItems(DType::kFloat32), 4096u);
  EXPECT_EQ(GpuSegmentedReduceTileItems(DType::kFloat64), 2048u);
  EXPECT_TRUE(GpuReduceTakesWarpPath(4096, 1));
  EXPECT_FALSE(GpuReduceTakesWarpPath(4097, 1));
  EXPECT_TRUE(GpuReduceTakesWarpPath(8192, 2));
  EXPECT_EQ(GpuReduceGrid(DType::kFloat32, 0), 1u);
  EXPECT_EQ(GpuReduceGrid(DType::kFloat32, 16384), 1u);  // 64 KiB: one block
  EXPECT_EQ(GpuReduceGrid(DType::kFloat32, 16385), 5u);  // ceil(16385 / 4096) tiles
  EXPECT_EQ(GpuReduceGrid(DType::kFloat64, 8192), 1u);
  EXPECT_EQ(GpuReduceGrid(DType::kFloat64, 8193), 5u);   // ceil(8193 / 2048)
  EXPECT_EQ(GpuReduceGrid(DType::kFloat32, uint64_t{1} << 28), 528u);
}

// ------------------------------------------------------------- helpers

template <typename T>
uint64_t Bits(T x) {
  if constexpr (sizeof(T) == 4) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    return b;
  } else {
    uint64_t b;
    std::memcpy(&b, &x, 8);
    return b;
  }
}

template <typename T>
std::string Show(T x) {
  return absl::StrCat(x, " (bits 0x", absl::Hex(Bits(x)), ")");
}

template <typename T>
::testing::AssertionResult BitsEq(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << ", expected " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!GpuOrderSameBits(got[i], want[i])) {
      return ::testing::AssertionFailure()
             << "at [" << i << "] of " << got.size() << ": got " << Show(got[i]) << ", expected "
             << Show(want[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult SameBits(T got, T want) {
  if (GpuOrderSameBits(got, want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << Show(got) << ", expected " << Show(want);
}

template <typename T>
size_t CountDifferent(const std::vector<T>& a, const std::vector<T>& b) {
  size_t count = 0;
  for (size_t i = 0; i < a.size(); ++i) count += !GpuOrderSameBits(a[i], b[i]);
  return count;
}

// Values for which every association gives the same bits: small integers
// for SUM (all partial sums stay below 2^24), +-1 with rare 2 and 1/2 for
// PROD (powers of two, exponent well inside the range); any value for the
// integer types (wrapping arithmetic is associative).
template <typename T>
std::vector<T> ExactInput(size_t n, Op op, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (T& x : v) {
    if constexpr (std::is_integral_v<T>) {
      x = static_cast<T>(rng());
    } else if (op == Op::kSum) {
      x = static_cast<T>(static_cast<int>(rng() % 17) - 8);
    } else {
      const uint64_t r = rng() % 64;
      x = r == 0 ? T(2) : r == 1 ? T(0.5) : (r & 2) ? T(-1) : T(1);
    }
  }
  return v;
}

// Mixed magnitudes (2^-20 .. 2^20, both signs) for SUM; factors 2^(+-0.1)
// for PROD (products stay far from overflow and subnormals): the
// association changes the bits.
template <typename T>
std::vector<T> MixedInput(size_t n, Op op, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<T> v(n);
  for (T& x : v) {
    if (op == Op::kSum) {
      const double sign = rng() % 2 ? 1.0 : -1.0;
      x = static_cast<T>(sign * std::ldexp(1.0 + unit(rng), static_cast<int>(rng() % 41) - 20));
    } else {
      x = static_cast<T>(std::exp2(0.2 * unit(rng) - 0.1));
    }
  }
  return v;
}

// num_segments starts in [0, n], sorted, first 0, with repeats (empty
// segments) and some at n.
std::vector<uint64_t> RandomStarts(size_t n, size_t num_segments, std::mt19937_64& rng) {
  std::vector<uint64_t> starts{0};
  while (starts.size() < num_segments) {
    const uint64_t r = rng() % 8;
    starts.push_back(r == 0 ? starts.back() : r == 1 ? n : rng() % (n + 1));
  }
  std::sort(starts.begin(), starts.end());
  return starts;
}

template <typename T>
std::vector<T> EmulatedScan(const std::vector<T>& in, Op op, bool exclusive,
                            std::optional<T> carry_in = std::nullopt, T* carry_out = nullptr) {
  std::vector<T> out(in.size());
  GpuOrderScan<T>(in, absl::MakeSpan(out), op, exclusive, carry_in, carry_out);
  return out;
}

template <typename T>
std::vector<T> EmulatedSegmentedScan(const std::vector<T>& in, const std::vector<uint64_t>& starts,
                                     Op op, bool exclusive) {
  std::vector<T> out(in.size());
  GpuOrderSegmentedScan<T>(in, absl::MakeSpan(out), starts, op, exclusive);
  return out;
}

template <typename T>
std::vector<T> EmulatedReduce(const std::vector<T>& in, const std::vector<uint64_t>& starts,
                              Op op) {
  std::vector<T> values(starts.empty() ? 1 : starts.size());
  GpuOrderSegmentedReduce<T>(in, starts, op, absl::MakeSpan(values));
  return values;
}

// Lengths around the warp, thread and tile boundaries of `tile`.
std::vector<size_t> LengthsAround(size_t tile, size_t items) {
  return {0,        1,         31,       32,       33,       items - 1, items,    items + 1,
          32 * items - 1, 32 * items + 1, tile - 1, tile,     tile + 1, 2 * tile, 3 * tile + 5};
}

template <typename T>
class GpuOrderTyped : public ::testing::Test {};
using AllTypes = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GpuOrderTyped, AllTypes);

template <typename T>
class GpuOrderFloat : public ::testing::Test {};
TYPED_TEST_SUITE(GpuOrderFloat, FloatTypes);

constexpr Op kCombineOps[] = {Op::kSum, Op::kProd, Op::kMin, Op::kMax};

// ------------------------------------------- indexing (exact data)

TYPED_TEST(GpuOrderTyped, ScanEqualsLeftFoldOnExactData) {
  using T = TypeParam;
  std::mt19937_64 rng(11);
  const size_t tile = GpuScanTileItems(DTypeOf<T>(), false);
  for (const Op op : kCombineOps) {
    for (const size_t n : LengthsAround(tile, kGpuScanItemsPerThread<T, false>)) {
      const std::vector<T> in = ExactInput<T>(n, op, rng);
      for (const bool exclusive : {false, true}) {
        SCOPED_TRACE(absl::StrCat(OpName(op), " n=", n, " exclusive=", exclusive));
        T carry_out{};
        EXPECT_TRUE(BitsEq(EmulatedScan<T>(in, op, exclusive, std::nullopt, &carry_out),
                           Scan<T>(in, op, exclusive)));
        // Also through the segmented entry without starts.
        EXPECT_TRUE(BitsEq(EmulatedSegmentedScan<T>(in, {}, op, exclusive),
                           Scan<T>(in, op, exclusive)));
        EXPECT_TRUE(SameBits(carry_out, Reduce<T>(in, op).values[0]));
      }
    }
  }
}

TYPED_TEST(GpuOrderTyped, ScanWithCarryEqualsLeftFoldOnExactData) {
  using T = TypeParam;
  std::mt19937_64 rng(12);
  const size_t tile = GpuScanTileItems(DTypeOf<T>(), false);
  for (const Op op : {Op::kSum, Op::kProd, Op::kMax}) {
    for (const size_t n : {size_t{0}, size_t{1}, size_t{33}, tile, 2 * tile + 7}) {
      std::vector<T> with_carry = ExactInput<T>(n + 1, op, rng);
      const T carry = with_carry[0];
      const std::vector<T> in(with_carry.begin() + 1, with_carry.end());
      for (const bool exclusive : {false, true}) {
        SCOPED_TRACE(absl::StrCat(OpName(op), " n=", n, " exclusive=", exclusive));
        // The scan of [carry, in...] without its first element.
        std::vector<T> want = Scan<T>(with_carry, op, exclusive);
        want.erase(want.begin());
        T carry_out{};
        EXPECT_TRUE(BitsEq(EmulatedScan<T>(in, op, exclusive, carry, &carry_out), want));
        EXPECT_TRUE(SameBits(carry_out, Reduce<T>(with_carry, op).values[0]));
      }
    }
  }
}

TYPED_TEST(GpuOrderTyped, SegmentedScanEqualsLeftFoldOnExactData) {
  using T = TypeParam;
  std::mt19937_64 rng(13);
  const size_t tile = GpuScanTileItems(DTypeOf<T>(), true);
  for (const Op op : kCombineOps) {
    for (const size_t n : LengthsAround(tile, kGpuScanItemsPerThread<T, true>)) {
      const std::vector<T> in = ExactInput<T>(n, op, rng);
      for (const size_t segments : {size_t{1}, size_t{2}, size_t{7}, n / 50 + 3}) {
        const std::vector<uint64_t> starts = RandomStarts(n, segments, rng);
        for (const bool exclusive : {false, true}) {
          SCOPED_TRACE(absl::StrCat(OpName(op), " n=", n, " segments=", segments,
                                    " exclusive=", exclusive));
          EXPECT_TRUE(BitsEq(EmulatedSegmentedScan<T>(in, starts, op, exclusive),
                             Scan<T>(in, op, exclusive, starts)));
        }
      }
    }
  }
}

TYPED_TEST(GpuOrderTyped, SegmentedReduceEqualsLeftFoldOnExactData) {
  using T = TypeParam;
  std::mt19937_64 rng(14);
  const size_t tile = GpuSegmentedReduceTileItems(DTypeOf<T>());
  for (const Op op : kCombineOps) {
    for (const size_t n : {size_t{0}, size_t{1}, size_t{33}, size_t{4096}, size_t{4097}, tile + 1,
                           3 * tile + 5, size_t{20000}}) {
      const std::vector<T> in = ExactInput<T>(n, op, rng);
      for (const size_t segments : {size_t{0}, size_t{1}, size_t{3}, n / 50 + 2}) {
        const std::vector<uint64_t> starts =
            segments == 0 ? std::vector<uint64_t>{} : RandomStarts(n, segments, rng);
        SCOPED_TRACE(absl::StrCat(OpName(op), " n=", n, " segments=", segments, " warp path=",
                                  GpuReduceTakesWarpPath(n, starts.empty() ? 1 : starts.size())));
        EXPECT_TRUE(BitsEq(EmulatedReduce<T>(in, starts, op), Reduce<T>(in, op, starts).values));
      }
    }
  }
}

TYPED_TEST(GpuOrderFloat, InPlace) {
  using T = TypeParam;
  std::mt19937_64 rng(15);
  const size_t n = 3 * GpuScanTileItems(DTypeOf<T>(), false) + 17;
  const std::vector<T> in = MixedInput<T>(n, Op::kSum, rng);
  const std::vector<uint64_t> starts = RandomStarts(n, 9, rng);
  for (const bool exclusive : {false, true}) {
    std::vector<T> data = in;
    GpuOrderScan<T>(data, absl::MakeSpan(data), Op::kSum, exclusive);
    EXPECT_TRUE(BitsEq(data, EmulatedScan<T>(in, Op::kSum, exclusive)));
    data = in;
    GpuOrderSegmentedScan<T>(data, absl::MakeSpan(data), starts, Op::kSum, exclusive);
    EXPECT_TRUE(BitsEq(data, EmulatedSegmentedScan<T>(in, starts, Op::kSum, exclusive)));
  }
}

// ------------------------------------------- chunks and carries

// Scanning in chunks of whole tiles, each chunk's carry_out the next one's
// carry_in (as the server's pipelined scan and ScanWithCarry do), gives the
// bits of one scan, carry_out included; chunks cut inside a tile do not.
TYPED_TEST(GpuOrderFloat, ChunksOfWholeTilesGiveTheBitsOfOneScan) {
  using T = TypeParam;
  std::mt19937_64 rng(21);
  const size_t tile = GpuScanTileItems(DTypeOf<T>(), false);
  const size_t n = 7 * tile + 123;
  for (const Op op : {Op::kSum, Op::kProd}) {
    const std::vector<T> in = MixedInput<T>(n, op, rng);
    for (const bool exclusive : {false, true}) {
      for (const std::optional<T> first_carry : {std::optional<T>{}, std::optional<T>{T(3.25)}}) {
        SCOPED_TRACE(absl::StrCat(OpName(op), " exclusive=", exclusive,
                                  " carry=", first_carry.has_value()));
        T whole_carry{};
        const std::vector<T> whole = EmulatedScan<T>(in, op, exclusive, first_carry, &whole_carry);
        // It is not the left fold (else this test would prove nothing).
        if (!first_carry) {
          EXPECT_GT(CountDifferent(whole, Scan<T>(in, op, exclusive)), n / 10);
        }

        auto chunked = [&](const std::vector<size_t>& sizes, T* carry_out) {
          std::vector<T> out(n);
          std::optional<T> carry = first_carry;
          size_t at = 0;
          for (size_t k = 0; at < n; ++k) {
            const size_t size = std::min(k < sizes.size() ? sizes[k] : sizes.back(), n - at);
            T next{};
            GpuOrderScan<T>(absl::MakeConstSpan(in).subspan(at, size),
                            absl::MakeSpan(out).subspan(at, size), op, exclusive, carry, &next);
            carry = next;
            at += size;
          }
          *carry_out = *carry;
          return out;
        };
        T carry{};
        EXPECT_TRUE(BitsEq(chunked({tile}, &carry), whole));
        EXPECT_TRUE(SameBits(carry, whole_carry));
        EXPECT_TRUE(BitsEq(chunked({2 * tile, tile, 3 * tile}, &carry), whole));
        EXPECT_TRUE(SameBits(carry, whole_carry));
        // A chunk of length 0 in between passes the carry through.
        EXPECT_TRUE(BitsEq(chunked({tile, 0, 4 * tile}, &carry), whole));

        // Cut inside a tile: other bits (the data makes the order matter).
        const std::vector<T> ragged = chunked({tile + 1000}, &carry);
        EXPECT_GT(CountDifferent(ragged, whole), 0u);
        // ... but close: the carries went through.
        double scale = first_carry ? std::fabs(static_cast<double>(*first_carry)) : 0.0;
        for (size_t i = 0; i < n; ++i) {
          const double x = static_cast<double>(in[i]);
          scale = op == Op::kSum ? scale + std::fabs(x) : std::fabs(static_cast<double>(whole[i]));
          ASSERT_NEAR(static_cast<double>(ragged[i]), static_cast<double>(whole[i]), 1e-3 * scale)
              << i;
        }
      }
    }
  }
}

// ------------------------------------------- reduce vs scan

// On its scan path (two or more segments, n > 4096 per segment)
// SegmentedReduce runs the segmented scan with the same geometry (16 float /
// 8 double items per thread in both kernels), so each segment's result is
// the segmented scan's inclusive value at the segment's last element, bit for
// bit; an empty segment's is Identity. (With zero or one segment it is
// gpu::Reduce: see the Reduce tests.)
TYPED_TEST(GpuOrderFloat, SegmentedReduceIsTheSegmentedScanAtEachSegmentEnd) {
  using T = TypeParam;
  static_assert(kGpuSegmentedReduceItemsPerThread<T> == kGpuScanItemsPerThread<T, true>);
  std::mt19937_64 rng(31);
  for (const Op op : {Op::kSum, Op::kProd}) {
    for (const auto& [n, segments] : std::vector<std::pair<size_t, size_t>>{
             {10000, 2}, {50000, 5}, {50000, 12}}) {
      const std::vector<T> in = MixedInput<T>(n, op, rng);
      {
        const std::vector<uint64_t> starts =
            segments == 0 ? std::vector<uint64_t>{} : RandomStarts(n, segments, rng);
        const size_t count = starts.empty() ? 1 : starts.size();
        ASSERT_FALSE(GpuReduceTakesWarpPath(n, count));
        SCOPED_TRACE(absl::StrCat(OpName(op), " n=", n, " segments=", count));
        const std::vector<uint64_t> scan_starts = starts.empty() ? std::vector<uint64_t>{0} : starts;
        const std::vector<T> scan = EmulatedSegmentedScan<T>(in, scan_starts, op, false);
        const std::vector<T> reduced = EmulatedReduce<T>(in, starts, op);
        for (size_t s = 0; s < count; ++s) {
          const uint64_t begin = scan_starts[s];
          const uint64_t end = s + 1 < count ? scan_starts[s + 1] : n;
          EXPECT_TRUE(SameBits(reduced[s], begin == end ? Identity<T>(op) : scan[end - 1]))
              << "segment " << s << " [" << begin << ", " << end << ")";
        }
      }
    }
  }
}

// On the warp path it is not (the lanes fold strided elements): no relation
// to the scan's bits, only to the value.
TYPED_TEST(GpuOrderFloat, WarpPathReduceIsNotTheScan) {
  using T = TypeParam;
  std::mt19937_64 rng(32);
  const size_t n = 4000;
  const std::vector<T> in = MixedInput<T>(n, Op::kSum, rng);
  ASSERT_TRUE(GpuReduceTakesWarpPath(n, 2));
  const T reduced = EmulatedReduce<T>(in, {0, n}, Op::kSum)[0];
  const T scanned = EmulatedSegmentedScan<T>(in, {0, n}, Op::kSum, false).back();
  EXPECT_FALSE(GpuOrderSameBits(reduced, scanned));
  EXPECT_NEAR(static_cast<double>(reduced), static_cast<double>(scanned),
              1e-3 * std::fabs(static_cast<double>(scanned)) + 1e-3);
}

// ------------------------------------------- hand-worked cases

// big = 2^24 (float) or 2^53 (double): big + 1 rounds back to big (a tie,
// to even), big + 2 is exact. So 1 + 1 added one at a time after big is
// lost, and added together first (the tree) is not.
template <typename T>
T Big() {
  return std::ldexp(T(1), std::numeric_limits<T>::digits);
}

// Segmented float scan, n = 40, one segment: 16 (float) or 8 (double) items
// per thread. x[0] = big, the first two items of thread 1 are 1, the rest 0.
// Thread 1 runs big + 1 + 1 = big; thread 2 starts from the Kogge-Stone
// value of lanes 0..1 = big + (1 + 1) = big + 2. The left fold gives big.
TYPED_TEST(GpuOrderFloat, HandWorkedSegmentedScanN40) {
  using T = TypeParam;
  constexpr int k = kGpuScanItemsPerThread<T, true>;
  const T big = Big<T>();
  std::vector<T> in(40, T(0));
  in[0] = big;
  in[k] = 1;
  in[k + 1] = 1;
  std::vector<T> inclusive(40), exclusive(40);
  for (int i = 0; i < 40; ++i) {
    inclusive[i] = i < 2 * k ? big : big + 2;
    exclusive[i] = i == 0 ? T(0) : i < 2 * k ? big : big + 2;
  }
  EXPECT_TRUE(BitsEq(EmulatedSegmentedScan<T>(in, {0}, Op::kSum, false), inclusive));
  EXPECT_TRUE(BitsEq(EmulatedSegmentedScan<T>(in, {0}, Op::kSum, true), exclusive));
  EXPECT_TRUE(SameBits(Scan<T>(in, Op::kSum, false).back(), big));  // the left fold
  // A second segment starting at 2k resets: thread 2's prefix is its head.
  std::vector<T> reset = inclusive;
  for (int i = 2 * k; i < 40; ++i) reset[i] = T(0);
  EXPECT_TRUE(BitsEq(EmulatedSegmentedScan<T>(in, {0, static_cast<uint64_t>(2 * k)}, Op::kSum,
                                              false),
                     reset));
}

// Plain scan: 32 (float) or 16 (double) items per thread, n = 100 (float) /
// 50 (double): the same with threads of the plain kernel.
TYPED_TEST(GpuOrderFloat, HandWorkedPlainScan) {
  using T = TypeParam;
  constexpr int k = kGpuScanItemsPerThread<T, false>;
  const size_t n = 3 * k + 4;
  const T big = Big<T>();
  std::vector<T> in(n, T(0));
  in[0] = big;
  in[k] = 1;
  in[k + 1] = 1;
  std::vector<T> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = i < 2 * k ? big : big + 2;
  T carry_out{};
  EXPECT_TRUE(BitsEq(EmulatedScan<T>(in, Op::kSum, false, std::nullopt, &carry_out), want));
  EXPECT_TRUE(SameBits(carry_out, big + 2));  // L(0): the tile aggregate
  EXPECT_TRUE(SameBits(Scan<T>(in, Op::kSum, false).back(), big));
}

// Across tiles: tile 1's thread 0 holds 1, 1 and runs L(0) + 1 + 1 = big;
// its thread 1 starts from L(0) op (1 + 1) = big + 2, and so does everything
// after, tile 2 from L(1) = big + A_1 = big + 2, and carry_out = L(2).
TYPED_TEST(GpuOrderFloat, HandWorkedAcrossTiles) {
  using T = TypeParam;
  const size_t tile = GpuScanTileItems(DTypeOf<T>(), false);
  constexpr size_t k = kGpuScanItemsPerThread<T, false>;
  const size_t n = 2 * tile + 3;
  const T big = Big<T>();
  std::vector<T> in(n, T(0));
  in[0] = big;
  in[tile] = 1;
  in[tile + 1] = 1;
  T carry_out{};
  const std::vector<T> out = EmulatedScan<T>(in, Op::kSum, false, std::nullopt, &carry_out);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(SameBits(out[i], i < tile + k ? big : big + 2)) << i;
  }
  EXPECT_TRUE(SameBits(carry_out, big + 2));
  // With a carry of -big in front: tile 0's aggregate is -big + big = 0,
  // tile 1 runs 0 + 1 + 1 = 2 and its aggregate is 2.
  const std::vector<T> carried = EmulatedScan<T>(in, Op::kSum, false, -big, &carry_out);
  EXPECT_TRUE(SameBits(carried[0], T(0)));
  EXPECT_TRUE(SameBits(carried[tile + 1], T(2)));
  EXPECT_TRUE(SameBits(carried.back(), T(2)));
  EXPECT_TRUE(SameBits(carry_out, T(2)));
}

// Warp-per-segment reduce (two segments, [0, 40) and an empty one at 40):
// lane 0 folds x0, x32; lane 1 x1, x33. x0 = big, x1 = x33 = 1: lane 1
// holds 2, the suffix reduction adds it to lane 0 at delta 1: big + 2. The
// left fold gives big.
TYPED_TEST(GpuOrderFloat, HandWorkedWarpReduceN40) {
  using T = TypeParam;
  const T big = Big<T>();
  std::vector<T> in(40, T(0));
  in[0] = big;
  in[1] = 1;
  in[33] = 1;
  const std::vector<T> with_empty = EmulatedReduce<T>(in, {0, 40}, Op::kSum);
  EXPECT_TRUE(SameBits(with_empty[0], big + 2));
  EXPECT_TRUE(SameBits(with_empty[1], T(0)));
  EXPECT_TRUE(SameBits(Reduce<T>(in, Op::kSum).values[0], big));
  // Two segments [0, 20) and [20, 40): lane 1 of the first holds only x1.
  const std::vector<T> two = EmulatedReduce<T>(in, {0, 20}, Op::kSum);
  EXPECT_TRUE(SameBits(two[0], big));
  EXPECT_TRUE(SameBits(two[1], T(1)));
}

// Scan-path reduce, segments [0, 9999) and [9999, 10000) (tiles of 4096
// float / 2048 double): tile 0's aggregate is big + (1 + 1) (lanes 0 and 1),
// so the first result is big + 2; the second is its one element.
TYPED_TEST(GpuOrderFloat, HandWorkedScanPathReduce) {
  using T = TypeParam;
  constexpr int k = kGpuSegmentedReduceItemsPerThread<T>;
  const size_t n = 10000;  // past the warp path's 2 x 4096, several tiles
  const T big = Big<T>();
  std::vector<T> in(n, T(0));
  in[0] = big;
  in[k] = 1;
  in[k + 1] = 1;
  in[n - 1] = T(-3);
  ASSERT_FALSE(GpuReduceTakesWarpPath(n, 2));
  const std::vector<T> got = EmulatedReduce<T>(in, {0, n - 1}, Op::kSum);
  EXPECT_TRUE(SameBits(got[0], big + 2));
  EXPECT_TRUE(SameBits(got[1], T(-3)));
  EXPECT_TRUE(SameBits(Reduce<T>(in, Op::kSum, {0, n - 1}).values[0], big));
}

// gpu::Reduce, one block (n = 300): thread t folds x_t, x_{t+256}; x0 = big,
// x1 = x257 = 1: thread 1 holds 2, the warp's suffix reduction adds it to
// lane 0 at delta 1: big + 2 (the left fold: big). Several blocks (n =
// 20000: 5 blocks of float tiles, 10 of double): block b folds tile b, the
// last block's threads 0.. hold the partials p0.., and the suffix tree adds
// (p0 + p1) + (p2 + p3): 1s at the starts of tiles 2 and 3 give big + 2.
TYPED_TEST(GpuOrderFloat, HandWorkedReduce) {
  using T = TypeParam;
  const T big = Big<T>();
  std::vector<T> small(300, T(0));
  small[0] = big;
  small[1] = 1;
  small[257] = 1;
  ASSERT_EQ(GpuReduceGrid(DTypeOf<T>(), small.size()), 1u);
  EXPECT_TRUE(SameBits(GpuOrderReduce<T>(small, Op::kSum), big + 2));
  EXPECT_TRUE(SameBits(EmulatedReduce<T>(small, {}, Op::kSum)[0], big + 2));
  EXPECT_TRUE(SameBits(EmulatedReduce<T>(small, {0}, Op::kSum)[0], big + 2));
  EXPECT_TRUE(SameBits(Reduce<T>(small, Op::kSum).values[0], big));

  const size_t tile = kGpuReduceThreads * kGpuReduceItemsPerThread<T>;
  std::vector<T> large(20000, T(0));
  large[0] = big;
  large[2 * tile] = 1;
  large[3 * tile] = 1;
  ASSERT_EQ(GpuReduceGrid(DTypeOf<T>(), large.size()), (20000 + tile - 1) / tile);
  EXPECT_TRUE(SameBits(GpuOrderReduce<T>(large, Op::kSum), big + 2));
  EXPECT_TRUE(SameBits(Reduce<T>(large, Op::kSum).values[0], big));
  // 1s at the starts of tiles 1 and 2 instead: (p0 + p1) = big + 1 = big
  // first, then + (p2 + p3) = big + 1 = big.
  large[3 * tile] = 0;
  large[tile] = 1;
  EXPECT_TRUE(SameBits(GpuOrderReduce<T>(large, Op::kSum), big));
}

// The full grid (528 blocks) with blocks striding over several tiles and
// the partial tile, and the last block's threads folding up to three
// partials: exact data equal to the left fold.
TYPED_TEST(GpuOrderTyped, ReduceOnTheFullGridOnExactData) {
  using T = TypeParam;
  std::mt19937_64 rng(16);
  const size_t tile = kGpuReduceThreads * kGpuReduceItemsPerThread<T>;
  const size_t n = 2 * kGpuReduceFixedGrid * tile + 3 * tile + 1234;
  ASSERT_EQ(GpuReduceGrid(DTypeOf<T>(), n), static_cast<uint64_t>(kGpuReduceFixedGrid));
  for (const Op op : {Op::kSum, Op::kMin, Op::kMax}) {
    const std::vector<T> in = ExactInput<T>(n, op, rng);
    EXPECT_TRUE(SameBits(GpuOrderReduce<T>(in, op), Reduce<T>(in, op).values[0])) << OpName(op);
  }
}

// Zeros and padding: the neutral -0.0 never shows. A SUM of -0.0 alone is
// -0.0 (as the reference), +0.0 with -0.0 is +0.0; PROD pads with 1.
TYPED_TEST(GpuOrderFloat, SignedZeros) {
  using T = TypeParam;
  const std::vector<T> minus_zeros(37, -T(0));
  const std::vector<T> scanned = EmulatedScan<T>(minus_zeros, Op::kSum, false);
  for (const T x : scanned) EXPECT_TRUE(SameBits(x, -T(0)));
  EXPECT_TRUE(SameBits(EmulatedReduce<T>(minus_zeros, {}, Op::kSum)[0], -T(0)));
  EXPECT_TRUE(SameBits(EmulatedScan<T>(minus_zeros, Op::kSum, true)[0], T(0)));  // Identity
  std::vector<T> mixed = minus_zeros;
  mixed[20] = T(0);
  EXPECT_TRUE(SameBits(EmulatedScan<T>(mixed, Op::kSum, false).back(), T(0)));
  EXPECT_TRUE(SameBits(EmulatedReduce<T>(mixed, {}, Op::kSum)[0], T(0)));
  // Empty input: carry_out is the carry, or Identity.
  T carry_out{};
  EmulatedScan<T>({}, Op::kProd, false, std::nullopt, &carry_out);
  EXPECT_TRUE(SameBits(carry_out, T(1)));
  EmulatedScan<T>({}, Op::kProd, false, T(-2.5), &carry_out);
  EXPECT_TRUE(SameBits(carry_out, T(-2.5)));
  EXPECT_TRUE(SameBits(EmulatedReduce<T>({}, {}, Op::kSum)[0], T(0)));
}

TYPED_TEST(GpuOrderFloat, NanPositionsFollowTheReference) {
  using T = TypeParam;
  std::mt19937_64 rng(41);
  const size_t n = 3 * 4096 + 11;
  std::vector<T> in = MixedInput<T>(n, Op::kSum, rng);
  in[5000] = std::numeric_limits<T>::quiet_NaN();
  const std::vector<uint64_t> starts = {0, 4000, 6000, 9000};
  const std::vector<T> got = EmulatedSegmentedScan<T>(in, starts, Op::kSum, false);
  const std::vector<T> want = Scan<T>(in, Op::kSum, false, starts);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(std::isnan(got[i]), std::isnan(want[i])) << i;
  EXPECT_TRUE(std::isnan(got[5999]));
  EXPECT_FALSE(std::isnan(got[6000]));
}

TEST(GpuOrderSameBits, NansMatchZerosDoNot) {
  EXPECT_TRUE(GpuOrderSameBits(std::nanf("1"), -std::numeric_limits<float>::quiet_NaN()));
  EXPECT_FALSE(GpuOrderSameBits(0.0, -0.0));
  EXPECT_FALSE(GpuOrderSameBits(1.0f, std::nanf("")));
  EXPECT_TRUE(GpuOrderSameBits(int64_t{-3}, int64_t{-3}));
}

}  // namespace
}  // namespace primserve::reference
