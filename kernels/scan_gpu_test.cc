// GPU tests of kernels/scan.h and kernels/reduce.h against the CPU reference
// (reference/reference.h, the oracle) and against CUB. Needs a CUDA device.
// Fresh random data every run: the seed is printed, and PRIMSERVE_TEST_SEED
// replays it. Integers must match exactly; float SUM/PROD are checked
// against a float64 reference on the upcast input:
//   SUM:  |got - ref| <= SumTolerance * (the same scan/reduce of |x|)
//   PROD: |got - ref| <= ProdTolerance * (number of factors) * |ref|
// MIN/MAX/ARG results must match exactly (NaN matches NaN).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/primitives.h"
#include "kernels/reduce.h"
#include "reference/reference.h"
#include "kernels/scan.h"
#include "kernels/testing/cub_baseline.h"
#include "kernels/testing/device_buffer.h"
#include "kernels/testing/device_helpers.h"

namespace primserve {
namespace {

using gpu::testing::CountFor;

uint64_t g_seed = 0;

template <typename T>
double SumTolerance() { return std::is_same_v<T, float> ? 1e-4 : 1e-12; }
// Per factor: a product of k rounded factors is within about k units of
// roundoff of the exact product, in any association order.
template <typename T>
double ProdTolerance() { return std::numeric_limits<T>::epsilon(); }


using gpu::testing::DeviceBuffer;
using gpu::testing::ToDevice;
using gpu::testing::ToHost;

template <typename T>
DType DTypeOf() {
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  if constexpr (std::is_same_v<T, uint32_t>) return DType::kUint32;
  if constexpr (std::is_same_v<T, uint64_t>) return DType::kUint64;
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  return DType::kFloat64;
}

std::mt19937_64 Rng(uint64_t salt) { return std::mt19937_64(g_seed * 0x9e3779b97f4a7c15ull + salt); }

// Random input suited to op: odd integers for PROD (products never collapse
// to 0), floats near 1 for float PROD, small ranges with ties for ARG ops,
// and (nan_count) NaNs sprinkled into float inputs.
template <typename T>
std::vector<T> RandomInput(size_t n, Op op, uint64_t salt, int nan_count = 0) {
  std::mt19937_64 rng = Rng(salt);
  std::vector<T> v(n);
  const bool ties = op == Op::kArgMin || op == Op::kArgMax;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bits = rng();
    if constexpr (std::is_floating_point_v<T>) {
      const double u = static_cast<double>(bits >> 11) * 0x1.0p-53;  // [0, 1)
      if (op == Op::kProd) v[i] = static_cast<T>(0.9999 + 0.0002 * u);
      else if (ties) v[i] = static_cast<T>(static_cast<int>(u * 16) - 8);
      else v[i] = static_cast<T>(2 * u - 1);
    } else {
      T x = static_cast<T>(bits);
      if (op == Op::kProd) x = static_cast<T>(x | 1);
      if (ties) x = static_cast<T>(bits % 16);
      v[i] = x;
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    for (int k = 0; k < nan_count && n > 0; ++k) v[rng() % n] = std::numeric_limits<T>::quiet_NaN();
  }
  return v;
}

// Random segment starts over n: first 0, non-decreasing, <= n; sizes drawn
// from [0, max_size] (0 gives empty segments), plus empty segments at n.
std::vector<uint64_t> RandomStarts(uint64_t n, uint64_t max_size, uint64_t salt) {
  std::mt19937_64 rng = Rng(salt);
  std::vector<uint64_t> starts{0};
  uint64_t pos = 0;
  while (true) {
    pos += rng() % (max_size + 1);
    if (pos >= n) break;
    starts.push_back(pos);
  }
  starts.push_back(n);
  starts.push_back(n);
  return starts;
}

std::vector<uint64_t> EvenStarts(uint64_t n, uint64_t size) {
  std::vector<uint64_t> starts;
  for (uint64_t s = 0; s < n || starts.empty(); s += size) starts.push_back(s);
  return starts;
}

template <typename T>
bool SameValue(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  }
  return a == b;
}

template <typename T>
std::vector<double> Upcast(const std::vector<T>& v, bool absolute) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = absolute ? std::fabs(double(v[i])) : double(v[i]);
  return d;
}

// Compares got with the expected values of a scan or a per-segment reduce
// (as the reference computes them), reporting the first mismatches.
// `reference(input, op)` must produce the reference results for any input type.
template <typename T, typename Reference>
void ExpectMatchesReference(const std::vector<T>& input, const std::vector<T>& got, Op op,
                            Reference reference, const std::string& what) {
  size_t bad = 0;
  auto report = [&](size_t i, const std::string& detail) {
    if (++bad <= 5) ADD_FAILURE() << what << ": element " << i << ": " << detail;
  };
  const bool approximate = std::is_floating_point_v<T> && (op == Op::kSum || op == Op::kProd);
  if (!approximate) {
    const std::vector<T> expected = reference(absl::MakeConstSpan(input), op);
    ASSERT_EQ(expected.size(), got.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      if (!SameValue(expected[i], got[i])) {
        report(i, "got " + std::to_string(got[i]) + ", want " + std::to_string(expected[i]));
      }
    }
  } else {
    const std::vector<double> up = Upcast(input, false);
    const std::vector<double> expected = reference(absl::MakeConstSpan(up), op);
    // SUM: the same sums of |x|; PROD: the number of factors (sums of ones).
    std::vector<double> scale_input = Upcast(input, true);
    if (op == Op::kProd) std::fill(scale_input.begin(), scale_input.end(), 1.0);
    const std::vector<double> scale = reference(absl::MakeConstSpan(scale_input), Op::kSum);
    ASSERT_EQ(expected.size(), got.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      const double tolerance = op == Op::kSum ? SumTolerance<T>() * scale[i] + 1e-30
                                              : ProdTolerance<T>() * scale[i] * std::fabs(expected[i]);
      if (!(std::fabs(double(got[i]) - expected[i]) <= tolerance)) {
        report(i, "got " + std::to_string(got[i]) + ", want " + std::to_string(expected[i]));
      }
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " mismatches of " << got.size();
}

template <typename T>
void ExpectSameAsCub(const std::vector<T>& ours, const std::vector<T>& cub, Op op,
                     const std::vector<T>& input, const std::string& what) {
  // Integers and MIN/MAX: bit-exact (modulo NaN payloads / zero signs);
  // float SUM/PROD: CUB's association differs, so both must be within the
  // reference tolerance (checked separately); here just the same NaN-ness.
  const bool approximate = std::is_floating_point_v<T> && (op == Op::kSum || op == Op::kProd);
  size_t bad = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const bool same = approximate ? std::isnan(double(ours[i])) == std::isnan(double(cub[i]))
                                  : SameValue(ours[i], cub[i]);
    if (!same && ++bad <= 5) {
      ADD_FAILURE() << what << " vs CUB: element " << i << ": ours " << ours[i] << ", cub " << cub[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what << " vs CUB";
  (void)input;
}

std::string Describe(const char* kind, DType dtype, Op op, bool exclusive, uint64_t n) {
  return std::string(kind) + " " + DTypeName(dtype) + " " + OpName(op) +
         (exclusive ? " exclusive" : " inclusive") + " n=" + std::to_string(n);
}

// ------------------------------------------------------------------- Scan

// Runs ours and CUB on the same input; offset (elements) shifts the input
// and output off 16-byte alignment; in_place scans into the input buffer.
template <typename T>
void CheckScan(uint64_t n, Op op, bool exclusive, const std::vector<uint64_t>& starts,
               uint64_t salt, int offset = 0, bool in_place = false, int nan_count = 0) {
  const DType dtype = DTypeOf<T>();
  const std::string what = Describe(starts.empty() ? "Scan" : "SegmentedScan", dtype, op,
                                    exclusive, n) +
                           " segments=" + std::to_string(starts.size()) +
                           " offset=" + std::to_string(offset) + (in_place ? " in-place" : "");
  SCOPED_TRACE(what);
  const std::vector<T> input = RandomInput<T>(n, op, salt, nan_count);
  DeviceBuffer d_in((n + offset) * sizeof(T)), d_out((n + offset) * sizeof(T));
  DeviceBuffer d_starts(starts.size() * sizeof(uint64_t));
  ASSERT_TRUE(d_in.ok() && d_out.ok() && d_starts.ok());
  T* in = d_in.get<T>() + offset;
  T* out = in_place ? in : d_out.get<T>() + offset;
  CUDA_ASSERT(d_out.Poison());
  CUDA_ASSERT(ToDevice(in, input));
  CUDA_ASSERT(ToDevice(d_starts.get(), starts));

  size_t temp_bytes = 0;
  CUDA_ASSERT(gpu::SegmentedScan(nullptr, &temp_bytes, in, out, n, d_starts.get<uint64_t>(),
                                 starts.size(), dtype, op, exclusive, nullptr));
  DeviceBuffer temp(temp_bytes);
  CUDA_ASSERT(temp.Poison());  // the kernels must initialize what they use
  CUDA_ASSERT(gpu::SegmentedScan(temp.get(), &temp_bytes, in, out, n, d_starts.get<uint64_t>(),
                                 starts.size(), dtype, op, exclusive, nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  const std::vector<T> got = ToHost<T>(out, n);
  ExpectMatchesReference(input, got, op,
                         [&](auto span, Op o) {
                           return reference::Scan(span, o, exclusive,
                                                  absl::MakeConstSpan(starts));
                         },
                         what);

  // CUB's MIN/MAX (cuda::minimum/maximum) do not propagate NaN.
  if (starts.empty() && !in_place && nan_count == 0) {
    CUDA_ASSERT(d_out.Poison());
    size_t cub_bytes = 0;
    CUDA_ASSERT(gpu::testing::CubScan(nullptr, &cub_bytes, in, out, n, dtype, op, exclusive,
                                      CountFor(n), nullptr));
    DeviceBuffer cub_temp(cub_bytes);
    CUDA_ASSERT(gpu::testing::CubScan(cub_temp.get(), &cub_bytes, in, out, n, dtype, op, exclusive,
                                      CountFor(n), nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
    ExpectSameAsCub(got, ToHost<T>(out, n), op, input, what);
  }
}

const std::vector<uint64_t> kSizes = {0,    1,    31,   32,   33,    2047,  2048,
                                      2049, 4095, 4096, 4097, 65537, 300001};

template <typename T>
void ScanAllCases() {
  uint64_t salt = 1;
  for (const Op op : {Op::kSum, Op::kProd, Op::kMin, Op::kMax}) {
    for (const bool exclusive : {false, true}) {
      for (const uint64_t n : kSizes) CheckScan<T>(n, op, exclusive, {}, salt++);
      if (std::is_floating_point_v<T> && (op == Op::kMin || op == Op::kMax)) {
        CheckScan<T>(300001, op, exclusive, {}, salt++, 0, false, /*nan_count=*/3);
      }
    }
  }
  // Large: many tiles, every look-back path.
  for (const bool exclusive : {false, true}) {
    CheckScan<T>((1u << 24) + 7, Op::kSum, exclusive, {}, salt++);
  }
  CheckScan<T>((1u << 24) + 7, Op::kMax, false, {}, salt++);
  // Misaligned and in place.
  CheckScan<T>(100003, Op::kSum, false, {}, salt++, /*offset=*/1);
  CheckScan<T>(100003, Op::kSum, true, {}, salt++, /*offset=*/1, /*in_place=*/true);
  CheckScan<T>(100000, Op::kMin, false, {}, salt++, 0, /*in_place=*/true);
}

// ---------------------------------------------------------- ScanWithCarry

// Scans the input in chunks (sizes `chunks`, the last one taking the rest)
// with ScanWithCarry, carrying the running prefix on the device (one slot
// read and written by every chunk if `aliased`, else two slots in turn),
// and checks: the chunked output equals the reference and (bit-exact where
// the op is) one whole Scan; the final carry is the op over all n inputs.
template <typename T>
void CheckChunkedScan(uint64_t n, Op op, bool exclusive, const std::vector<uint64_t>& chunks,
                      uint64_t salt, bool aliased) {
  const DType dtype = DTypeOf<T>();
  const std::string what = Describe("ScanWithCarry", dtype, op, exclusive, n) +
                           " chunks=" + std::to_string(chunks.size() + 1) +
                           (aliased ? " aliased" : " two-slots");
  SCOPED_TRACE(what);
  const std::vector<T> input = RandomInput<T>(n, op, salt, std::is_floating_point_v<T> &&
                                                                   op != Op::kSum && op != Op::kProd
                                                               ? 1
                                                               : 0);
  DeviceBuffer d_in(n * sizeof(T)), d_out(n * sizeof(T)), d_whole(n * sizeof(T)),
      d_carry(2 * sizeof(T));
  ASSERT_TRUE(d_in.ok() && d_out.ok() && d_whole.ok() && d_carry.ok());
  CUDA_ASSERT(ToDevice(d_in.get(), input));
  CUDA_ASSERT(d_out.Poison());
  CUDA_ASSERT(d_carry.Poison());
  std::vector<uint64_t> sizes;
  uint64_t covered = 0;
  for (const uint64_t c : chunks) {
    const uint64_t size = std::min(c, n - covered);
    sizes.push_back(size);
    covered += size;
  }
  sizes.push_back(n - covered);
  size_t temp_bytes = 0;
  for (const uint64_t size : sizes) {
    size_t bytes = 0;
    CUDA_ASSERT(gpu::ScanWithCarry(nullptr, &bytes, nullptr, nullptr, size, dtype, op, exclusive,
                                   nullptr, nullptr, nullptr));
    temp_bytes = std::max(temp_bytes, bytes);
  }
  DeviceBuffer temp(temp_bytes);
  CUDA_ASSERT(temp.Poison());
  uint64_t offset = 0;
  int slot = 0;  // the slot holding the running prefix
  for (size_t k = 0; k < sizes.size(); ++k) {
    const T* carry_in = k == 0 ? nullptr : d_carry.get<T>() + slot;
    const int next = aliased ? slot : 1 - slot;
    size_t bytes = temp_bytes;
    CUDA_ASSERT(gpu::ScanWithCarry(temp.get(), &bytes, d_in.get<T>() + offset,
                                   d_out.get<T>() + offset, sizes[k], dtype, op, exclusive,
                                   carry_in, d_carry.get<T>() + next, nullptr));
    slot = next;
    offset += sizes[k];
  }
  CUDA_ASSERT(cudaDeviceSynchronize());
  // Output plus the final carry vs the reference over input ++ [Identity]:
  // its element n is the op over all n inputs, for inclusive and exclusive.
  std::vector<T> got = ToHost<T>(d_out.get(), n);
  got.push_back(ToHost<T>(d_carry.get<T>() + slot, 1)[0]);
  std::vector<T> input_ext = input;
  input_ext.push_back(Identity<T>(op));
  ExpectMatchesReference(input_ext, got, op,
                         [&](auto span, Op o) {
                           return reference::Scan(span, o, exclusive,
                                                  absl::Span<const uint64_t>());
                         },
                         what);
  size_t whole_bytes = 0;
  CUDA_ASSERT(gpu::Scan(nullptr, &whole_bytes, d_in.get(), d_whole.get(), n, dtype, op, exclusive,
                        nullptr));
  DeviceBuffer whole_temp(whole_bytes);
  CUDA_ASSERT(gpu::Scan(whole_temp.get(), &whole_bytes, d_in.get(), d_whole.get(), n, dtype, op,
                        exclusive, nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  got.pop_back();
  ExpectSameAsCub(got, ToHost<T>(d_whole.get(), n), op, input, what + " chunked vs whole Scan");
}

template <typename T>
void ChunkedScanAllCases() {
  uint64_t salt = 5000;
  for (const Op op : {Op::kSum, Op::kProd, Op::kMin, Op::kMax}) {
    for (const bool exclusive : {false, true}) {
      // Empty, tiny, single-tile and multi-tile chunks.
      CheckChunkedScan<T>(300001, op, exclusive, {0, 1, 31, 4096, 0, 4097, 100000}, salt++,
                          /*aliased=*/true);
      CheckChunkedScan<T>(300001, op, exclusive, {65536, 65536, 65536}, salt++,
                          /*aliased=*/false);
    }
  }
  CheckChunkedScan<T>((1u << 22) + 3, Op::kSum, false, {1u << 20, 1u << 20, 1u << 20}, salt++,
                      true);
  CheckChunkedScan<T>((1u << 22) + 3, Op::kSum, true, {(1u << 21) + 5}, salt++, false);
  CheckChunkedScan<T>(0, Op::kSum, true, {}, salt++, true);
  CheckChunkedScan<T>(1, Op::kMax, false, {0}, salt++, true);
}

TEST(ScanWithCarryGpuTest, Int32) { ChunkedScanAllCases<int32_t>(); }
TEST(ScanWithCarryGpuTest, Int64) { ChunkedScanAllCases<int64_t>(); }
TEST(ScanWithCarryGpuTest, Uint32) { ChunkedScanAllCases<uint32_t>(); }
TEST(ScanWithCarryGpuTest, Uint64) { ChunkedScanAllCases<uint64_t>(); }
TEST(ScanWithCarryGpuTest, Float32) { ChunkedScanAllCases<float>(); }
TEST(ScanWithCarryGpuTest, Float64) { ChunkedScanAllCases<double>(); }

// Float MIN/MAX scans bit for bit against the reference (the checks above
// treat the two zeros and any two NaNs as equal): -0.0 orders before +0.0,
// and the first NaN's payload and sign propagate. With zeros: before `turn`
// only the zero that loses and a non-extreme value occur, so the winning zero
// first shows up mid-tile; without: no zeros at all (the kernel's path for
// zero-free items). With NaNs, two payloads land later (the first negative).
template <typename T>
void CheckMinMaxScanBits(uint64_t n, Op op, bool exclusive, bool with_zeros, bool with_nans,
                         uint64_t salt) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const std::string what = Describe("Scan bits", DTypeOf<T>(), op, exclusive, n) +
                           (with_zeros ? " with zeros" : "") + (with_nans ? " with NaNs" : "");
  SCOPED_TRACE(what);
  const bool is_min = op == Op::kMin;
  const T loser_zero = is_min ? T(0.0) : T(-0.0), winner_zero = is_min ? T(-0.0) : T(0.0);
  const T other = is_min ? T(1.5) : T(-1.5);
  std::mt19937_64 rng = Rng(salt);
  const uint64_t turn = n / 3 + 5;
  std::vector<T> input(n);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t r = rng() % 3;
    input[i] = r == 0 ? loser_zero : r == 1 || i < turn ? other : winner_zero;
    if (!with_zeros) input[i] = other * T(1 + rng() % 7);
  }
  if (with_nans) {
    const Bits first_nan = static_cast<Bits>(sizeof(T) == 4 ? 0xffc00123ull : 0xfff8000000000123ull);
    const Bits second_nan = static_cast<Bits>(sizeof(T) == 4 ? 0x7fc00456ull : 0x7ff8000000000456ull);
    std::memcpy(&input[2 * n / 3 + 3], &first_nan, sizeof(T));
    std::memcpy(&input[2 * n / 3 + 5], &second_nan, sizeof(T));
  }
  DeviceBuffer d_in(n * sizeof(T)), d_out(n * sizeof(T));
  ASSERT_TRUE(d_in.ok() && d_out.ok());
  CUDA_ASSERT(ToDevice(d_in.get(), input));
  CUDA_ASSERT(d_out.Poison());
  size_t temp_bytes = 0;
  CUDA_ASSERT(gpu::Scan(nullptr, &temp_bytes, d_in.get(), d_out.get(), n, DTypeOf<T>(), op,
                        exclusive, nullptr));
  DeviceBuffer temp(temp_bytes);
  CUDA_ASSERT(temp.Poison());
  CUDA_ASSERT(gpu::Scan(temp.get(), &temp_bytes, d_in.get(), d_out.get(), n, DTypeOf<T>(), op,
                        exclusive, nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  const std::vector<T> got = ToHost<T>(d_out.get(), n);
  const std::vector<T> expected =
      reference::Scan(absl::MakeConstSpan(input), op, exclusive, absl::Span<const uint64_t>());
  ASSERT_EQ(expected.size(), got.size());
  size_t bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[i], &expected[i], sizeof(T)) != 0 && ++bad <= 5) {
      Bits g, e;
      std::memcpy(&g, &got[i], sizeof(T));
      std::memcpy(&e, &expected[i], sizeof(T));
      ADD_FAILURE() << what << ": element " << i << ": bits " << std::hex << g << ", want " << e;
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

TEST(ScanGpuTest, FloatMinMaxZerosAndNanPayloadsBitExact) {
  uint64_t salt = 7000;
  for (const Op op : {Op::kMin, Op::kMax}) {
    for (const bool exclusive : {false, true}) {
      for (const uint64_t n : {uint64_t{1000}, uint64_t{300001}}) {
        for (const bool with_zeros : {true, false}) {
          for (const bool with_nans : {false, true}) {
            CheckMinMaxScanBits<float>(n, op, exclusive, with_zeros, with_nans, salt++);
            CheckMinMaxScanBits<double>(n, op, exclusive, with_zeros, with_nans, salt++);
          }
        }
      }
    }
  }
}

// ARGMIN/ARGMAX over signed zeros and ties: +0.0 and -0.0 compare equal, so
// the first of them wins (values compared as numbers, not bits).
TEST(ReduceGpuTest, ArgSignedZerosAndTies) {
  for (const Op op : {Op::kArgMin, Op::kArgMax}) {
    for (const uint64_t n : {uint64_t{5000}, uint64_t{1} << 20}) {
      std::mt19937_64 rng = Rng(6000 + n);
      std::vector<float> input(n);
      for (auto& x : input) {
        const uint64_t r = rng() % 4;
        x = r == 0 ? 0.0f : r == 1 ? -0.0f : (op == Op::kArgMin ? 1.0f : -1.0f);
      }
      DeviceBuffer d_in(n * sizeof(float)), d_value(sizeof(float)), d_index(sizeof(int64_t));
      ASSERT_TRUE(d_in.ok() && d_value.ok() && d_index.ok());
      CUDA_ASSERT(ToDevice(d_in.get(), input));
      size_t bytes = 0;
      CUDA_ASSERT(gpu::Reduce(nullptr, &bytes, d_in.get(), n, DType::kFloat32, op,
                              d_value.get(), d_index.get<int64_t>(), nullptr));
      DeviceBuffer temp(bytes);
      CUDA_ASSERT(gpu::Reduce(temp.get(), &bytes, d_in.get(), n, DType::kFloat32, op,
                              d_value.get(), d_index.get<int64_t>(), nullptr));
      CUDA_ASSERT(cudaDeviceSynchronize());
      const reference::ReduceResult<float> expected =
          reference::Reduce(absl::MakeConstSpan(input), op, absl::Span<const uint64_t>());
      const int64_t got_index = ToHost<int64_t>(d_index.get(), 1)[0];
      const float got_value = ToHost<float>(d_value.get(), 1)[0];
      EXPECT_EQ(got_index, expected.indices[0]) << OpName(op) << " n=" << n;
      EXPECT_EQ(std::signbit(got_value), std::signbit(expected.values[0])) << OpName(op);
    }
  }
}

TEST(ScanGpuTest, Int32) { ScanAllCases<int32_t>(); }
TEST(ScanGpuTest, Int64) { ScanAllCases<int64_t>(); }
TEST(ScanGpuTest, Uint32) { ScanAllCases<uint32_t>(); }
TEST(ScanGpuTest, Uint64) { ScanAllCases<uint64_t>(); }
TEST(ScanGpuTest, Float32) { ScanAllCases<float>(); }
TEST(ScanGpuTest, Float64) { ScanAllCases<double>(); }

template <typename T>
void SegmentedScanAllCases() {
  uint64_t salt = 1000;
  for (const Op op : {Op::kSum, Op::kProd, Op::kMin, Op::kMax}) {
    for (const bool exclusive : {false, true}) {
      CheckScan<T>(200003, op, exclusive, RandomStarts(200003, 40, salt), salt);  // many small
      ++salt;
      CheckScan<T>(1 << 20, op, exclusive, EvenStarts(1 << 20, 1000), salt++);   // batched 1K
      CheckScan<T>(5000, op, exclusive, RandomStarts(5000, 3, salt), salt);       // tiny + empty
      ++salt;
      CheckScan<T>(3000001, op, exclusive, {0, 0, 5, 1500000, 3000001}, salt++);  // few huge
      CheckScan<T>(33, op, exclusive, {0, 1, 1, 2, 31}, salt++);                  // one tile
    }
  }
}

TEST(SegmentedScanGpuTest, Int32) { SegmentedScanAllCases<int32_t>(); }
TEST(SegmentedScanGpuTest, Int64) { SegmentedScanAllCases<int64_t>(); }
TEST(SegmentedScanGpuTest, Uint32) { SegmentedScanAllCases<uint32_t>(); }
TEST(SegmentedScanGpuTest, Uint64) { SegmentedScanAllCases<uint64_t>(); }
TEST(SegmentedScanGpuTest, Float32) { SegmentedScanAllCases<float>(); }
TEST(SegmentedScanGpuTest, Float64) { SegmentedScanAllCases<double>(); }

// ----------------------------------------------------------------- Reduce

// Reduce (starts empty) or SegmentedReduce, ours vs reference and vs CUB.
template <typename T>
void CheckReduce(uint64_t n, Op op, const std::vector<uint64_t>& starts, uint64_t salt,
                 int offset = 0, int nan_count = 0) {
  const DType dtype = DTypeOf<T>();
  const bool is_arg = op == Op::kArgMin || op == Op::kArgMax;
  const std::string what = Describe(starts.empty() ? "Reduce" : "SegmentedReduce", dtype, op,
                                    false, n) +
                           " segments=" + std::to_string(starts.size()) +
                           " offset=" + std::to_string(offset) +
                           " nans=" + std::to_string(nan_count);
  SCOPED_TRACE(what);
  const std::vector<T> input = RandomInput<T>(n, op, salt, nan_count);
  const size_t results = starts.empty() ? 1 : starts.size();
  DeviceBuffer d_in((n + offset) * sizeof(T)), d_values(results * sizeof(T)),
      d_indices(results * sizeof(int64_t)), d_starts(starts.size() * sizeof(uint64_t));
  ASSERT_TRUE(d_in.ok() && d_values.ok() && d_indices.ok() && d_starts.ok());
  T* in = d_in.get<T>() + offset;
  CUDA_ASSERT(ToDevice(in, input));
  CUDA_ASSERT(ToDevice(d_starts.get(), starts));
  CUDA_ASSERT(d_values.Poison());
  CUDA_ASSERT(d_indices.Poison());

  size_t temp_bytes = 0;
  CUDA_ASSERT(gpu::SegmentedReduce(nullptr, &temp_bytes, in, n, d_starts.get<uint64_t>(),
                                   starts.size(), dtype, op, d_values.get(),
                                   d_indices.get<int64_t>(), nullptr));
  DeviceBuffer temp(temp_bytes);
  CUDA_ASSERT(temp.Poison());
  CUDA_ASSERT(gpu::SegmentedReduce(temp.get(), &temp_bytes, in, n, d_starts.get<uint64_t>(),
                                   starts.size(), dtype, op, d_values.get(),
                                   d_indices.get<int64_t>(), nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  const std::vector<T> got = ToHost<T>(d_values.get(), results);
  const auto span_starts = absl::MakeConstSpan(starts);
  if (is_arg) {
    const reference::ReduceResult<T> expected =
        reference::Reduce(absl::MakeConstSpan(input), op, span_starts);
    const std::vector<int64_t> got_indices = ToHost<int64_t>(d_indices.get(), results);
    size_t bad = 0;
    for (size_t s = 0; s < results; ++s) {
      if ((got_indices[s] != expected.indices[s] || !SameValue(got[s], expected.values[s])) &&
          ++bad <= 5) {
        ADD_FAILURE() << what << ": segment " << s << ": got (" << got[s] << ", "
                      << got_indices[s] << "), want (" << expected.values[s] << ", "
                      << expected.indices[s] << ")";
      }
    }
    EXPECT_EQ(bad, 0u) << what;
    return;
  }
  ExpectMatchesReference(input, got, op,
                         [&](auto span, Op o) { return reference::Reduce(span, o, span_starts).values; },
                         what);

  if (nan_count > 0) return;  // CUB's MIN/MAX (cuda::minimum/maximum) do not propagate NaN
  CUDA_ASSERT(d_values.Poison());
  size_t cub_bytes = 0;
  if (starts.empty()) {
    CUDA_ASSERT(gpu::testing::CubReduce(nullptr, &cub_bytes, in, n, dtype, op, d_values.get(),
                                        nullptr, CountFor(n), nullptr));
    DeviceBuffer cub_temp(cub_bytes);
    CUDA_ASSERT(gpu::testing::CubReduce(cub_temp.get(), &cub_bytes, in, n, dtype, op,
                                        d_values.get(), nullptr, CountFor(n), nullptr));
  } else {
    CUDA_ASSERT(gpu::testing::CubSegmentedReduce(nullptr, &cub_bytes, in, n,
                                             d_starts.get<uint64_t>(), starts.size(), dtype,
                                             op, d_values.get(), nullptr));
    DeviceBuffer cub_temp(cub_bytes);
    CUDA_ASSERT(gpu::testing::CubSegmentedReduce(cub_temp.get(), &cub_bytes, in, n,
                                             d_starts.get<uint64_t>(), starts.size(), dtype,
                                             op, d_values.get(), nullptr));
  }
  CUDA_ASSERT(cudaDeviceSynchronize());
  ExpectSameAsCub(got, ToHost<T>(d_values.get(), results), op, input, what);
}

constexpr Op kAllOps[] = {Op::kSum, Op::kProd, Op::kMin, Op::kMax, Op::kArgMin, Op::kArgMax};

template <typename T>
void ReduceAllCases() {
  uint64_t salt = 2000;
  for (const Op op : kAllOps) {
    for (const uint64_t n : kSizes) CheckReduce<T>(n, op, {}, salt++);
    CheckReduce<T>((1u << 24) + 7, op, {}, salt++);
    CheckReduce<T>(100003, op, {}, salt++, /*offset=*/1);
    if (std::is_floating_point_v<T> && op != Op::kSum && op != Op::kProd) {
      CheckReduce<T>(1000003, op, {}, salt++, 0, /*nan_count=*/2);
      CheckReduce<T>(1000003, op, {}, salt++, 0, /*nan_count=*/1);
    }
  }
}

TEST(ReduceGpuTest, Int32) { ReduceAllCases<int32_t>(); }
TEST(ReduceGpuTest, Int64) { ReduceAllCases<int64_t>(); }
TEST(ReduceGpuTest, Uint32) { ReduceAllCases<uint32_t>(); }
TEST(ReduceGpuTest, Uint64) { ReduceAllCases<uint64_t>(); }
TEST(ReduceGpuTest, Float32) { ReduceAllCases<float>(); }
TEST(ReduceGpuTest, Float64) { ReduceAllCases<double>(); }

template <typename T>
void SegmentedReduceAllCases() {
  uint64_t salt = 3000;
  for (const Op op : kAllOps) {
    const int nans = std::is_floating_point_v<T> && op != Op::kSum && op != Op::kProd ? 5 : 0;
    CheckReduce<T>(200003, op, RandomStarts(200003, 40, salt), salt, 0, nans);  // many small
    ++salt;
    CheckReduce<T>(1 << 20, op, EvenStarts(1 << 20, 1024), salt++);       // batched 1K requests
    CheckReduce<T>(5000, op, RandomStarts(5000, 3, salt), salt);          // tiny + empty
    ++salt;
    CheckReduce<T>(1 << 20, op, EvenStarts(1 << 20, 1), salt++);          // all single elements
    CheckReduce<T>(3000001, op, {0, 0, 5, 1500000, 3000001}, salt++, 1);  // few huge, misaligned
    CheckReduce<T>(0, op, {0, 0, 0}, salt++);                             // all empty, n = 0
    CheckReduce<T>(33, op, {0, 1, 1, 2, 31, 33}, salt++);                 // one tile
  }
}

TEST(SegmentedReduceGpuTest, Int32) { SegmentedReduceAllCases<int32_t>(); }
TEST(SegmentedReduceGpuTest, Int64) { SegmentedReduceAllCases<int64_t>(); }
TEST(SegmentedReduceGpuTest, Uint32) { SegmentedReduceAllCases<uint32_t>(); }
TEST(SegmentedReduceGpuTest, Uint64) { SegmentedReduceAllCases<uint64_t>(); }
TEST(SegmentedReduceGpuTest, Float32) { SegmentedReduceAllCases<float>(); }
TEST(SegmentedReduceGpuTest, Float64) { SegmentedReduceAllCases<double>(); }

// ------------------------------------------- Wider accumulators (dtype=)

// The narrow input as the wide type: numpy's cumsum(dtype=) and
// sum(dtype=) convert each element, then accumulate; so does the reference
// given the converted input. Integers must match exactly (random int32 and
// uint32 values overflow 32-bit partial sums at once, so a narrow
// accumulation fails); float64 SUM within 1e-12 of the sums of |x|, PROD
// within 2^-52 per factor (a float32 accumulation, 6e-8 off, fails).
template <typename T, typename A>
std::vector<A> Widen(const std::vector<T>& narrow) {
  return std::vector<A>(narrow.begin(), narrow.end());
}

template <typename T, typename A>
void CheckWidenedScan(uint64_t n, Op op, bool exclusive, const std::vector<uint64_t>& starts,
                      uint64_t salt, int offset = 0) {
  const std::string what = Describe(starts.empty() ? "WidenedScan" : "WidenedSegmentedScan",
                                    DTypeOf<T>(), op, exclusive, n) +
                           " into " + DTypeName(DTypeOf<A>()) +
                           " segments=" + std::to_string(starts.size()) +
                           " offset=" + std::to_string(offset);
  SCOPED_TRACE(what);
  const std::vector<T> input = RandomInput<T>(n, op, salt);
  DeviceBuffer d_in((n + offset) * sizeof(T)), d_out((n + offset) * sizeof(A));
  DeviceBuffer d_starts(starts.size() * sizeof(uint64_t));
  ASSERT_TRUE(d_in.ok() && d_out.ok() && d_starts.ok());
  T* in = d_in.get<T>() + offset;
  A* out = d_out.get<A>() + offset;
  CUDA_ASSERT(d_out.Poison());
  CUDA_ASSERT(ToDevice(in, input));
  CUDA_ASSERT(ToDevice(d_starts.get(), starts));
  size_t temp_bytes = 0;
  CUDA_ASSERT(gpu::WidenedScan(nullptr, &temp_bytes, in, out, n, d_starts.get<uint64_t>(),
                               starts.size(), DTypeOf<T>(), DTypeOf<A>(), op, exclusive, nullptr));
  DeviceBuffer temp(temp_bytes);
  CUDA_ASSERT(temp.Poison());
  CUDA_ASSERT(gpu::WidenedScan(temp.get(), &temp_bytes, in, out, n, d_starts.get<uint64_t>(),
                               starts.size(), DTypeOf<T>(), DTypeOf<A>(), op, exclusive, nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  ExpectMatchesReference(Widen<T, A>(input), ToHost<A>(out, n), op,
                         [&](auto span, Op o) {
                           return reference::Scan(span, o, exclusive, absl::MakeConstSpan(starts));
                         },
                         what);
}

template <typename T, typename A>
void CheckWidenedReduce(uint64_t n, Op op, const std::vector<uint64_t>& starts, uint64_t salt,
                        int offset = 0) {
  const std::string what = Describe(starts.empty() ? "WidenedReduce" : "WidenedSegmentedReduce",
                                    DTypeOf<T>(), op, false, n) +
                           " into " + DTypeName(DTypeOf<A>()) +
                           " segments=" + std::to_string(starts.size()) +
                           " offset=" + std::to_string(offset);
  SCOPED_TRACE(what);
  const std::vector<T> input = RandomInput<T>(n, op, salt);
  const size_t results = starts.empty() ? 1 : starts.size();
  DeviceBuffer d_in((n + offset) * sizeof(T)), d_values(results * sizeof(A)),
      d_starts(starts.size() * sizeof(uint64_t));
  ASSERT_TRUE(d_in.ok() && d_values.ok() && d_starts.ok());
  T* in = d_in.get<T>() + offset;
  CUDA_ASSERT(ToDevice(in, input));
  CUDA_ASSERT(ToDevice(d_starts.get(), starts));
  CUDA_ASSERT(d_values.Poison());
  size_t temp_bytes = 0;
  CUDA_ASSERT(gpu::WidenedReduce(nullptr, &temp_bytes, in, n, d_starts.get<uint64_t>(),
                                 starts.size(), DTypeOf<T>(), DTypeOf<A>(), op, d_values.get(),
                                 nullptr));
  DeviceBuffer temp(temp_bytes);
  CUDA_ASSERT(temp.Poison());
  CUDA_ASSERT(gpu::WidenedReduce(temp.get(), &temp_bytes, in, n, d_starts.get<uint64_t>(),
                                 starts.size(), DTypeOf<T>(), DTypeOf<A>(), op, d_values.get(),
                                 nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  const auto span_starts = absl::MakeConstSpan(starts);
  ExpectMatchesReference(Widen<T, A>(input), ToHost<A>(d_values.get(), results), op,
                         [&](auto span, Op o) { return reference::Reduce(span, o, span_starts).values; },
                         what);
}

const std::vector<uint64_t> kWidenedSizes = {0, 1, (1u << 10) + 3, (1u << 20) + 7, 1u << 24};

template <typename T, typename A>
void WidenedAllCases() {
  uint64_t salt = 5000;
  for (const Op op : {Op::kSum, Op::kProd}) {
    for (const uint64_t n : kWidenedSizes) {
      for (const bool exclusive : {false, true}) CheckWidenedScan<T, A>(n, op, exclusive, {}, salt++);
      CheckWidenedReduce<T, A>(n, op, {}, salt++);
    }
    // Off 16-byte alignment: the loads without vectors.
    CheckWidenedScan<T, A>(100003, op, true, {}, salt++, /*offset=*/1);
    CheckWidenedReduce<T, A>(100003, op, {}, salt++, /*offset=*/1);
    // Segmented: many small segments (a warp each, for the reduce), a few
    // long ones (the look-back pass), empty ones.
    const uint64_t n = (1u << 20) + 7;
    for (const std::vector<uint64_t>& starts :
         {RandomStarts(n, 40, salt), EvenStarts(n, 100000), std::vector<uint64_t>{0, 0, 5, n}}) {
      for (const bool exclusive : {false, true}) {
        CheckWidenedScan<T, A>(n, op, exclusive, starts, salt++);
      }
      CheckWidenedReduce<T, A>(n, op, starts, salt++);
    }
  }
}

TEST(WidenedGpuTest, Int32IntoInt64) { WidenedAllCases<int32_t, int64_t>(); }
TEST(WidenedGpuTest, Uint32IntoUint64) { WidenedAllCases<uint32_t, uint64_t>(); }
TEST(WidenedGpuTest, Float32IntoFloat64) { WidenedAllCases<float, double>(); }

// 2^24 + 1 is not a float32: 2^24 followed by ones sums to 2^24 in float32
// however many ones follow, and exactly in float64.
TEST(WidenedGpuTest, OnesAfterTwoPow24AreKeptInFloat64) {
  const uint64_t n = (1u << 20) + 7;
  std::vector<float> input(n, 1.0f);
  input[0] = 16777216.0f;
  DeviceBuffer d_in(n * sizeof(float)), d_out(n * sizeof(double));
  ASSERT_TRUE(d_in.ok() && d_out.ok());
  CUDA_ASSERT(ToDevice(d_in.get(), input));
  size_t scan_bytes = 0, reduce_bytes = 0;
  CUDA_ASSERT(gpu::WidenedScan(nullptr, &scan_bytes, d_in.get(), d_out.get(), n, nullptr, 0,
                               DType::kFloat32, DType::kFloat64, Op::kSum, false, nullptr));
  CUDA_ASSERT(gpu::WidenedReduce(nullptr, &reduce_bytes, d_in.get(), n, nullptr, 0,
                                 DType::kFloat32, DType::kFloat64, Op::kSum, d_out.get(), nullptr));
  DeviceBuffer temp(std::max(scan_bytes, reduce_bytes));
  CUDA_ASSERT(gpu::WidenedScan(temp.get(), &scan_bytes, d_in.get(), d_out.get(), n, nullptr, 0,
                               DType::kFloat32, DType::kFloat64, Op::kSum, false, nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  const std::vector<double> scanned = ToHost<double>(d_out.get(), n);
  size_t bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (scanned[i] != 16777216.0 + static_cast<double>(i) && ++bad <= 5) {
      ADD_FAILURE() << "element " << i << ": got " << scanned[i];
    }
  }
  EXPECT_EQ(bad, 0u);
  CUDA_ASSERT(gpu::WidenedReduce(temp.get(), &reduce_bytes, d_in.get(), n, nullptr, 0,
                                 DType::kFloat32, DType::kFloat64, Op::kSum, d_out.get(), nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_EQ(ToHost<double>(d_out.get(), 1)[0], 16777216.0 + static_cast<double>(n - 1));
}

TEST(WidenedGpuTest, OnlyNumpysWideningsOfSumAndProd) {
  size_t bytes = 0;
  EXPECT_EQ(gpu::WidenedScan(nullptr, &bytes, nullptr, nullptr, 10, nullptr, 0, DType::kInt32,
                             DType::kInt64, Op::kSum, false, nullptr), 0);
  EXPECT_EQ(gpu::WidenedScan(nullptr, &bytes, nullptr, nullptr, 10, nullptr, 0, DType::kInt32,
                             DType::kInt64, Op::kMax, false, nullptr), 1);
  EXPECT_EQ(gpu::WidenedScan(nullptr, &bytes, nullptr, nullptr, 10, nullptr, 0, DType::kInt32,
                             DType::kFloat64, Op::kSum, false, nullptr), 1);
  EXPECT_EQ(gpu::WidenedScan(nullptr, &bytes, nullptr, nullptr, 10, nullptr, 0, DType::kInt64,
                             DType::kInt64, Op::kSum, false, nullptr), 1);
  EXPECT_EQ(gpu::WidenedReduce(nullptr, &bytes, nullptr, 10, nullptr, 0, DType::kFloat32,
                               DType::kFloat64, Op::kProd, nullptr, nullptr), 0);
  EXPECT_EQ(gpu::WidenedReduce(nullptr, &bytes, nullptr, 10, nullptr, 0, DType::kFloat32,
                               DType::kFloat64, Op::kArgMin, nullptr, nullptr), 1);
  EXPECT_EQ(gpu::WidenedReduce(nullptr, &bytes, nullptr, 10, nullptr, 0, DType::kUint32,
                               DType::kInt64, Op::kSum, nullptr, nullptr), 1);
}

// ---------------------------------------------------------- Argument checks

TEST(ApiGpuTest, TwoPhaseAndBadArguments) {
  size_t bytes = 0;
  EXPECT_EQ(gpu::Scan(nullptr, &bytes, nullptr, nullptr, 1000, DType::kInt32, Op::kSum, false,
                      nullptr), 0);
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(gpu::Scan(nullptr, &bytes, nullptr, nullptr, 10, DType::kInt32, Op::kArgMin, false,
                      nullptr), 1);
  EXPECT_EQ(gpu::Scan(nullptr, &bytes, nullptr, nullptr, 10, static_cast<DType>(99), Op::kSum,
                      false, nullptr), 1);
  EXPECT_EQ(gpu::Scan(nullptr, nullptr, nullptr, nullptr, 10, DType::kInt32, Op::kSum, false,
                      nullptr), 1);
  EXPECT_EQ(gpu::Reduce(nullptr, &bytes, nullptr, 10, DType::kFloat32, static_cast<Op>(0),
                        nullptr, nullptr, nullptr), 1);
  DeviceBuffer temp(1 << 20), data(1 << 20);
  bytes = 16;
  EXPECT_EQ(gpu::Scan(temp.get(), &bytes, data.get(), data.get(), 1 << 16, DType::kInt32,
                      Op::kSum, false, nullptr), 1);  // temp too small
  bytes = 1 << 20;
  EXPECT_EQ(gpu::Reduce(temp.get(), &bytes, data.get(), 100, DType::kInt32, Op::kArgMax,
                        data.get(), nullptr, nullptr), 1);  // ARG needs an index output
}

// ---------------------------------------------------------- 64-bit counts

// An int32 SUM scan (and reduce) over more than 2^31 elements, compared
// with CUB on the device: 3 x 8.6 GB of device memory.
TEST(HugeGpuTest, Int32SumOver2Pow31) {
  const uint64_t n = (uint64_t{1} << 31) + 4099;
  DeviceBuffer in(n * 4), ours(n * 4), cub(n * 4);
  ASSERT_TRUE(in.ok() && ours.ok() && cub.ok()) << "needs ~26 GB of device memory";
  CUDA_ASSERT(gpu::testing::FillRandomInt32(in.get<int32_t>(), n, g_seed, 32, nullptr));
  CUDA_ASSERT(ours.Poison());
  CUDA_ASSERT(cub.Poison());
  size_t ours_bytes = 0, cub_bytes = 0;
  CUDA_ASSERT(gpu::Scan(nullptr, &ours_bytes, in.get(), ours.get(), n, DType::kInt32, Op::kSum,
                        false, nullptr));
  CUDA_ASSERT(gpu::testing::CubScan(nullptr, &cub_bytes, in.get(), cub.get(), n, DType::kInt32,
                                    Op::kSum, false, CountFor(n), nullptr));
  {
    DeviceBuffer temp(std::max(ours_bytes, cub_bytes));
    CUDA_ASSERT(gpu::Scan(temp.get(), &ours_bytes, in.get(), ours.get(), n, DType::kInt32,
                          Op::kSum, false, nullptr));
    CUDA_ASSERT(gpu::testing::CubScan(temp.get(), &cub_bytes, in.get(), cub.get(), n,
                                      DType::kInt32, Op::kSum, false, CountFor(n), nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
  }
  uint64_t mismatches = 1;
  CUDA_ASSERT(gpu::testing::CountMismatchedWords(ours.get(), cub.get(), n, &mismatches));
  EXPECT_EQ(mismatches, 0u);

  // Reduce over the same input: must equal the scan's last element.
  size_t reduce_bytes = 0;
  CUDA_ASSERT(gpu::Reduce(nullptr, &reduce_bytes, in.get(), n, DType::kInt32, Op::kSum,
                          ours.get(), nullptr, nullptr));
  int32_t last = 0;
  CUDA_ASSERT(cudaMemcpy(&last, cub.get<int32_t>() + n - 1, 4, cudaMemcpyDeviceToHost));
  DeviceBuffer temp(reduce_bytes);
  CUDA_ASSERT(gpu::Reduce(temp.get(), &reduce_bytes, in.get(), n, DType::kInt32, Op::kSum,
                          ours.get(), nullptr, nullptr));
  int32_t total = 0;
  CUDA_ASSERT(cudaMemcpy(&total, ours.get(), 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(total, last);
}

// ------------------------------------------------- device counts (issue 29)

// The counts each *Counted case runs with for max_n (one tile of `tile`
// elements or several): none, one, a few, one ending mid-tile, max_n - 1,
// max_n, and past max_n (clamped to it).
std::vector<uint64_t> CountsFor(uint64_t max_n, uint64_t tile) {
  const uint64_t mid_tile = max_n > tile ? tile + tile / 2 + 1 : max_n / 2 + 1;
  return {0, 1, std::min<uint64_t>(37, max_n), mid_tile, max_n - 1, max_n, max_n + 1000,
          ~uint64_t{0}};
}

// The first byte of `got` (device, `bytes` long) that differs from `want`
// (its first want.size() bytes) or from the 0xAB poison (the rest); -1 when
// none.
int64_t FirstMismatch(const void* got, size_t bytes, const std::vector<uint8_t>& want) {
  const std::vector<uint8_t> host = ToHost<uint8_t>(got, bytes);
  for (size_t i = 0; i < bytes; ++i) {
    if (host[i] != (i < want.size() ? want[i] : 0xAB)) return static_cast<int64_t>(i);
  }
  return -1;
}

// ScanCounted against Scan of the first count elements, bit for bit (Scan's
// bits depend on the input, n and the tile alone), and d_out past the count
// untouched.
template <typename T>
void CheckScanCounted(uint64_t max_n, Op op, bool exclusive, uint64_t salt) {
  const DType dtype = DTypeOf<T>();
  const bool float_min_max = std::is_floating_point_v<T> && (op == Op::kMin || op == Op::kMax);
  const std::vector<T> input = RandomInput<T>(max_n, op, salt, float_min_max ? 1 : 0);
  DeviceBuffer d_in(max_n * sizeof(T)), d_out(max_n * sizeof(T)), d_want(max_n * sizeof(T)),
      d_count(sizeof(uint64_t));
  ASSERT_TRUE(d_in.ok() && d_out.ok() && d_want.ok() && d_count.ok());
  CUDA_ASSERT(ToDevice(d_in.get(), input));
  size_t temp_bytes = 0;
  CUDA_ASSERT(gpu::ScanCounted(nullptr, &temp_bytes, d_in.get(), d_out.get(), max_n,
                               d_count.get<uint64_t>(), dtype, op, exclusive, nullptr));
  DeviceBuffer temp(temp_bytes);
  ASSERT_TRUE(temp.ok());
  for (const uint64_t count : CountsFor(max_n, gpu::ScanTileItems(dtype, false))) {
    const uint64_t n = std::min(count, max_n);
    SCOPED_TRACE(Describe("ScanCounted", dtype, op, exclusive, max_n) +
                 " count=" + std::to_string(count));
    CUDA_ASSERT(d_out.Poison());
    CUDA_ASSERT(temp.Poison());
    CUDA_ASSERT(cudaMemcpy(d_count.get(), &count, sizeof(count), cudaMemcpyHostToDevice));
    size_t bytes = temp_bytes;
    CUDA_ASSERT(gpu::ScanCounted(temp.get(), &bytes, d_in.get(), d_out.get(), max_n,
                                 d_count.get<uint64_t>(), dtype, op, exclusive, nullptr));
    size_t want_bytes = 0;
    CUDA_ASSERT(gpu::Scan(nullptr, &want_bytes, d_in.get(), d_want.get(), n, dtype, op,
                          exclusive, nullptr));
    DeviceBuffer want_temp(want_bytes);
    CUDA_ASSERT(gpu::Scan(want_temp.get(), &want_bytes, d_in.get(), d_want.get(), n, dtype, op,
                          exclusive, nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
    const std::vector<uint8_t> want = ToHost<uint8_t>(d_want.get(), n * sizeof(T));
    EXPECT_EQ(FirstMismatch(d_out.get(), max_n * sizeof(T), want), -1)
        << "first differing byte (past " << n * sizeof(T) << ": the poison)";
  }
}

template <typename T>
void ScanCountedAllCases() {
  uint64_t salt = 9000;
  const uint64_t tile = gpu::ScanTileItems(DTypeOf<T>(), false);
  for (const Op op : {Op::kSum, Op::kProd, Op::kMin, Op::kMax}) {
    for (const bool exclusive : {false, true}) {
      for (const uint64_t max_n : {tile - 5, (uint64_t{3} << 20) + 123}) {
        CheckScanCounted<T>(max_n, op, exclusive, salt++);
      }
    }
  }
}

TEST(ScanGpuTest, CountedInt32) { ScanCountedAllCases<int32_t>(); }
TEST(ScanGpuTest, CountedInt64) { ScanCountedAllCases<int64_t>(); }
TEST(ScanGpuTest, CountedUint32) { ScanCountedAllCases<uint32_t>(); }
TEST(ScanGpuTest, CountedUint64) { ScanCountedAllCases<uint64_t>(); }
TEST(ScanGpuTest, CountedFloat32) { ScanCountedAllCases<float>(); }
TEST(ScanGpuTest, CountedFloat64) { ScanCountedAllCases<double>(); }

// ReduceCounted against Reduce of the first count elements, bit for bit for
// every op (float SUM/PROD included: the same grid does the work), value and
// index.
template <typename T>
void CheckReduceCounted(uint64_t max_n, Op op, uint64_t salt) {
  const DType dtype = DTypeOf<T>();
  const bool float_min_max = std::is_floating_point_v<T> && op != Op::kSum && op != Op::kProd;
  const std::vector<T> input = RandomInput<T>(max_n, op, salt, float_min_max ? 1 : 0);
  DeviceBuffer d_in(max_n * sizeof(T)), d_value(sizeof(T)), d_index(sizeof(int64_t)),
      d_want_value(sizeof(T)), d_want_index(sizeof(int64_t)), d_count(sizeof(uint64_t));
  ASSERT_TRUE(d_in.ok() && d_value.ok() && d_index.ok() && d_want_value.ok() &&
              d_want_index.ok() && d_count.ok());
  CUDA_ASSERT(ToDevice(d_in.get(), input));
  size_t temp_bytes = 0;
  CUDA_ASSERT(gpu::ReduceCounted(nullptr, &temp_bytes, d_in.get(), max_n,
                                 d_count.get<uint64_t>(), dtype, op, d_value.get(),
                                 d_index.get<int64_t>(), nullptr));
  DeviceBuffer temp(temp_bytes);
  ASSERT_TRUE(temp.ok());
  for (const uint64_t count : CountsFor(max_n, gpu::ScanTileItems(dtype, false))) {
    const uint64_t n = std::min(count, max_n);
    SCOPED_TRACE(Describe("ReduceCounted", dtype, op, false, max_n) +
                 " count=" + std::to_string(count));
    CUDA_ASSERT(d_value.Poison());
    CUDA_ASSERT(d_index.Poison());
    CUDA_ASSERT(d_want_value.Poison());
    CUDA_ASSERT(d_want_index.Poison());
    CUDA_ASSERT(temp.Poison());
    CUDA_ASSERT(cudaMemcpy(d_count.get(), &count, sizeof(count), cudaMemcpyHostToDevice));
    size_t bytes = temp_bytes;
    CUDA_ASSERT(gpu::ReduceCounted(temp.get(), &bytes, d_in.get(), max_n,
                                   d_count.get<uint64_t>(), dtype, op, d_value.get(),
                                   d_index.get<int64_t>(), nullptr));
    size_t want_bytes = 0;
    CUDA_ASSERT(gpu::Reduce(nullptr, &want_bytes, d_in.get(), n, dtype, op,
                            d_want_value.get(), d_want_index.get<int64_t>(), nullptr));
    DeviceBuffer want_temp(want_bytes);
    CUDA_ASSERT(gpu::Reduce(want_temp.get(), &want_bytes, d_in.get(), n, dtype, op,
                            d_want_value.get(), d_want_index.get<int64_t>(), nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
    EXPECT_EQ(FirstMismatch(d_value.get(), sizeof(T), ToHost<uint8_t>(d_want_value.get(),
                                                                      sizeof(T))),
              -1)
        << "value: got " << ToHost<T>(d_value.get(), 1)[0] << ", want "
        << ToHost<T>(d_want_value.get(), 1)[0];
    // The index: written by ARG ops only (else both keep the poison).
    EXPECT_EQ(ToHost<int64_t>(d_index.get(), 1)[0], ToHost<int64_t>(d_want_index.get(), 1)[0]);
    if (n == 0) {
      EXPECT_TRUE(SameValue(ToHost<T>(d_value.get(), 1)[0], Identity<T>(op)));
    }
  }
}

template <typename T>
void ReduceCountedAllCases() {
  uint64_t salt = 9500;
  for (const Op op : kAllOps) {
    // One block, a few blocks (one tile of the scan), a full grid.
    for (const uint64_t max_n : {uint64_t{1000}, gpu::ScanTileItems(DTypeOf<T>(), false) - 5,
                                 uint64_t{300001}, (uint64_t{3} << 20) + 123}) {
      CheckReduceCounted<T>(max_n, op, salt++);
    }
  }
}

// SegmentedReduceCounted (AggregateByKeyInOrderCounted's reduce) against
// SegmentedReduce over the first count elements, bit for bit, with starts
// <= the count: short segments (the warp-per-segment kernel) and long ones
// (the look-back kernel, chosen on the device when max_n is past the bound),
// and empty segments at the count.
template <typename T>
void CheckSegmentedReduceCounted(uint64_t max_n, Op op, uint64_t max_size, uint64_t salt) {
  const DType dtype = DTypeOf<T>();
  const std::vector<T> input = RandomInput<T>(max_n, op, salt);
  DeviceBuffer d_in(max_n * sizeof(T)), d_count(sizeof(uint64_t));
  ASSERT_TRUE(d_in.ok() && d_count.ok());
  CUDA_ASSERT(ToDevice(d_in.get(), input));
  std::vector<uint64_t> counts = CountsFor(max_n, gpu::ScanTileItems(dtype, true));
  counts.push_back(uint64_t{1} << 20);  // a whole number of tiles
  for (const uint64_t count : counts) {
    const uint64_t n = std::min(count, max_n);
    const std::vector<uint64_t> starts = RandomStarts(n, max_size, salt + count);
    SCOPED_TRACE(Describe("SegmentedReduceCounted", dtype, op, false, max_n) +
                 " count=" + std::to_string(count) + " segments=" +
                 std::to_string(starts.size()));
    const size_t results = starts.size();
    DeviceBuffer d_starts(results * sizeof(uint64_t)), d_values(results * sizeof(T)),
        d_indices(results * sizeof(int64_t)), d_want_values(results * sizeof(T)),
        d_want_indices(results * sizeof(int64_t));
    ASSERT_TRUE(d_starts.ok() && d_values.ok() && d_indices.ok() && d_want_values.ok() &&
                d_want_indices.ok());
    CUDA_ASSERT(ToDevice(d_starts.get(), starts));
    CUDA_ASSERT(d_values.Poison());
    CUDA_ASSERT(d_indices.Poison());
    CUDA_ASSERT(d_want_values.Poison());
    CUDA_ASSERT(d_want_indices.Poison());
    CUDA_ASSERT(cudaMemcpy(d_count.get(), &count, sizeof(count), cudaMemcpyHostToDevice));
    size_t bytes = 0;
    CUDA_ASSERT(gpu::SegmentedReduceCounted(nullptr, &bytes, d_in.get(), max_n, nullptr,
                                            d_starts.get<uint64_t>(), results, dtype, op,
                                            d_values.get(), d_indices.get<int64_t>(), nullptr));
    DeviceBuffer temp(bytes);
    CUDA_ASSERT(temp.Poison());
    CUDA_ASSERT(gpu::SegmentedReduceCounted(temp.get(), &bytes, d_in.get(), max_n,
                                            d_count.get<uint64_t>(), d_starts.get<uint64_t>(),
                                            results, dtype, op, d_values.get(),
                                            d_indices.get<int64_t>(), nullptr));
    size_t want_bytes = 0;
    CUDA_ASSERT(gpu::SegmentedReduce(nullptr, &want_bytes, d_in.get(), n,
                                     d_starts.get<uint64_t>(), results, dtype, op,
                                     d_want_values.get(), d_want_indices.get<int64_t>(),
                                     nullptr));
    DeviceBuffer want_temp(want_bytes);
    CUDA_ASSERT(gpu::SegmentedReduce(want_temp.get(), &want_bytes, d_in.get(), n,
                                     d_starts.get<uint64_t>(), results, dtype, op,
                                     d_want_values.get(), d_want_indices.get<int64_t>(),
                                     nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
    EXPECT_EQ(FirstMismatch(d_values.get(), results * sizeof(T),
                            ToHost<uint8_t>(d_want_values.get(), results * sizeof(T))),
              -1);
    EXPECT_EQ(FirstMismatch(d_indices.get(), results * sizeof(int64_t),
                            ToHost<uint8_t>(d_want_indices.get(), results * sizeof(int64_t))),
              -1);
  }
}

template <typename T>
void SegmentedReduceCountedAllCases() {
  uint64_t salt = 9800;
  for (const Op op : kAllOps) {
    for (const uint64_t max_size : {uint64_t{100}, uint64_t{300000}}) {
      CheckSegmentedReduceCounted<T>((uint64_t{3} << 20) + 123, op, max_size, salt++);
    }
  }
}

TEST(SegmentedReduceGpuTest, CountedInt32) { SegmentedReduceCountedAllCases<int32_t>(); }
TEST(SegmentedReduceGpuTest, CountedUint64) { SegmentedReduceCountedAllCases<uint64_t>(); }
TEST(SegmentedReduceGpuTest, CountedFloat32) { SegmentedReduceCountedAllCases<float>(); }
TEST(SegmentedReduceGpuTest, CountedFloat64) { SegmentedReduceCountedAllCases<double>(); }

TEST(ReduceGpuTest, CountedInt32) { ReduceCountedAllCases<int32_t>(); }
TEST(ReduceGpuTest, CountedInt64) { ReduceCountedAllCases<int64_t>(); }
TEST(ReduceGpuTest, CountedUint32) { ReduceCountedAllCases<uint32_t>(); }
TEST(ReduceGpuTest, CountedUint64) { ReduceCountedAllCases<uint64_t>(); }
TEST(ReduceGpuTest, CountedFloat32) { ReduceCountedAllCases<float>(); }
TEST(ReduceGpuTest, CountedFloat64) { ReduceCountedAllCases<double>(); }

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* env = std::getenv("PRIMSERVE_TEST_SEED");
  primserve::g_seed = env ? std::strtoull(env, nullptr, 10)
                         : static_cast<uint64_t>(
                               std::chrono::steady_clock::now().time_since_epoch().count());
  std::printf("PRIMSERVE_TEST_SEED=%llu\n", static_cast<unsigned long long>(primserve::g_seed));
  return RUN_ALL_TESTS();
}
