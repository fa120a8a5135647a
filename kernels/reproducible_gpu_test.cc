// GPU tests of reproducible float SUM/PROD (issue 18): every kernel whose
// float result depends on the association (scan, segmented scan, segmented
// reduce, reduce-by-key, the in-order AggregateByKey) gives the same bits
// for the same input on every run, with its output poisoned before each run;
// a scan in whole-tile chunks with the carry has exactly the bits of one
// scan. Answers equal, bit for bit, the CPU's emulation of the kernels'
// association (reference/gpu_order.h), and the plain reference within the
// tolerances of scan_gpu_test. Fresh random data: the seed is printed and
// PRIMSERVE_TEST_SEED replays it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"
#include "core/primitives.h"
#include "kernels/aggregate.h"
#include "kernels/reduce.h"
#include "kernels/scan.h"
#include "kernels/runs.h"
#include "kernels/select.h"
#include "kernels/testing/device_buffer.h"
#include "reference/gpu_order.h"
#include "reference/reference.h"

namespace primserve {
namespace {

uint64_t g_seed = 0;
constexpr int kRuns = 8;

using gpu::testing::DeviceBuffer;
using gpu::testing::ToDevice;
using gpu::testing::ToHost;

std::mt19937_64 Rng(uint64_t salt) {
  return std::mt19937_64(g_seed * 0x9e3779b97f4a7c15ull + salt);
}

// Float data whose sums depend on the association: signs and magnitudes
// spread over six decades (SUM), or factors near 1 (PROD).
template <typename T>
std::vector<T> RandomFloats(size_t n, Op op, uint64_t salt) {
  std::mt19937_64 rng = Rng(salt);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<T> v(n);
  for (T& x : v) {
    if (op == Op::kProd) {
      x = static_cast<T>(0.999 + 0.002 * u(rng));
    } else {
      x = static_cast<T>((2 * u(rng) - 1) * std::pow(10.0, 6 * u(rng) - 3));
    }
  }
  return v;
}

std::vector<uint64_t> RandomStarts(uint64_t n, uint64_t max_size, uint64_t salt) {
  std::mt19937_64 rng = Rng(salt);
  std::vector<uint64_t> starts{0};
  for (uint64_t pos = 0;;) {
    pos += rng() % (max_size + 1);
    if (pos >= n) break;
    starts.push_back(pos);
  }
  starts.push_back(n);  // an empty last segment
  return starts;
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <typename T>
size_t DifferingElements(const std::vector<T>& a, const std::vector<T>& b) {
  size_t count = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    count += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  }
  return count;
}

// |got - want| within a bound that any association meets (scan_gpu_test's).
template <typename T>
void ExpectClose(const std::vector<T>& got, const std::vector<T>& want,
                 const std::vector<T>& magnitude, Op op, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = op == Op::kProd
                             ? std::numeric_limits<T>::epsilon() * 4 * (i + 1) *
                                   std::fabs(static_cast<double>(want[i]))
                             : tol * (std::fabs(static_cast<double>(magnitude[i])) + 1e-30);
    if (!(std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])) <= bound)) {
      if (++bad <= 3) {
        ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i];
      }
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

template <typename T>
std::vector<T> Abs(const std::vector<T>& v) {
  std::vector<T> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(v[i]);
  return a;
}

template <typename T>
class ReproducibleTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ReproducibleTest, FloatTypes);

const uint64_t kSizes[] = {1000, 3 * 8192 + 5, 1 << 20, 5000000, (1 << 24) + 7};

TYPED_TEST(ReproducibleTest, ScanGivesTheSameBitsEveryRun) {
  using T = TypeParam;
  for (Op op : {Op::kSum, Op::kProd}) {
    for (bool exclusive : {false, true}) {
      for (uint64_t n : kSizes) {
        const std::string what = std::string(OpName(op)) + (exclusive ? " exclusive" : "") +
                                 " n=" + std::to_string(n);
        const std::vector<T> input = RandomFloats<T>(n, op, n * 7 + exclusive);
        DeviceBuffer d_in(n * sizeof(T)), d_out(n * sizeof(T)), temp(0);
        CUDA_ASSERT(ToDevice(d_in.get(), input));
        size_t temp_bytes = 0;
        CUDA_ASSERT(gpu::Scan(nullptr, &temp_bytes, nullptr, nullptr, n, DTypeOf<T>(), op,
                              exclusive, nullptr));
        DeviceBuffer d_temp(temp_bytes);
        std::vector<T> first;
        for (int run = 0; run < kRuns; ++run) {
          CUDA_ASSERT(d_out.Poison());
          CUDA_ASSERT(gpu::Scan(d_temp.get(), &temp_bytes, d_in.get(), d_out.get(), n,
                                DTypeOf<T>(), op, exclusive, nullptr));
          CUDA_ASSERT(cudaDeviceSynchronize());
          std::vector<T> got = ToHost<T>(d_out.get(), n);
          if (run == 0) {
            first = std::move(got);
          } else {
            ASSERT_TRUE(SameBits(first, got))
                << what << " run " << run << ": " << DifferingElements(first, got)
                << " elements differ from run 0";
          }
        }
        std::vector<T> emulated(n);
        reference::GpuOrderScan<T>(input, absl::MakeSpan(emulated), op, exclusive);
        EXPECT_TRUE(SameBits(first, emulated))
            << what << ": " << DifferingElements(first, emulated)
            << " elements differ from the CPU's emulation";
        const std::vector<T> want = reference::Scan<T>(input, op, exclusive, {});
        const std::vector<T> magnitude =
            reference::Scan<T>(Abs(input), Op::kSum, exclusive, {});
        ExpectClose(first, want, magnitude, op, what);
      }
    }
  }
}

TYPED_TEST(ReproducibleTest, WholeTileChunksWithTheCarryGiveOneScansBits) {
  using T = TypeParam;
  const uint64_t tile = gpu::ScanTileItems(DTypeOf<T>(), false);
  ASSERT_GT(tile, 0u);
  std::mt19937_64 rng = Rng(11);
  for (Op op : {Op::kSum, Op::kProd}) {
    for (bool exclusive : {false, true}) {
      const uint64_t n = 200 * tile + rng() % tile;
      const std::vector<T> input = RandomFloats<T>(n, op, n);
      DeviceBuffer d_in(n * sizeof(T)), d_whole(n * sizeof(T)), d_chunked(n * sizeof(T));
      DeviceBuffer d_carry(sizeof(T)), d_total(sizeof(T));
      CUDA_ASSERT(ToDevice(d_in.get(), input));
      CUDA_ASSERT(d_whole.Poison());
      CUDA_ASSERT(d_chunked.Poison());
      size_t temp_bytes = 0;
      CUDA_ASSERT(gpu::ScanWithCarry(nullptr, &temp_bytes, nullptr, nullptr, n, DTypeOf<T>(), op,
                                     exclusive, nullptr, nullptr, nullptr));
      DeviceBuffer d_temp(temp_bytes);
      CUDA_ASSERT(gpu::ScanWithCarry(d_temp.get(), &temp_bytes, d_in.get(), d_whole.get(), n,
                                     DTypeOf<T>(), op, exclusive, nullptr, d_total.get(),
                                     nullptr));
      // Chunks of 1 to 40 whole tiles, the carry in one slot (in and out).
      for (uint64_t at = 0; at < n;) {
        const uint64_t len = std::min(n - at, (1 + rng() % 40) * tile);
        CUDA_ASSERT(gpu::ScanWithCarry(d_temp.get(), &temp_bytes, d_in.get<T>() + at,
                                       d_chunked.get<T>() + at, len, DTypeOf<T>(), op, exclusive,
                                       at == 0 ? nullptr : d_carry.get(), d_carry.get(),
                                       nullptr));
        at += len;
      }
      CUDA_ASSERT(cudaDeviceSynchronize());
      const std::vector<T> whole = ToHost<T>(d_whole.get(), n);
      const std::vector<T> chunked = ToHost<T>(d_chunked.get(), n);
      EXPECT_TRUE(SameBits(whole, chunked))
          << OpName(op) << (exclusive ? " exclusive" : "") << ": "
          << DifferingElements(whole, chunked) << " of " << n << " elements differ";
      EXPECT_TRUE(SameBits(ToHost<T>(d_total.get(), 1), ToHost<T>(d_carry.get(), 1)))
          << "the chunks' final carry differs from one scan's";
      std::vector<T> emulated(n);
      T emulated_total{};
      reference::GpuOrderScan<T>(input, absl::MakeSpan(emulated), op, exclusive, std::nullopt,
                                 &emulated_total);
      EXPECT_TRUE(SameBits(whole, emulated)) << DifferingElements(whole, emulated)
                                             << " elements differ from the CPU's emulation";
      EXPECT_TRUE(SameBits(ToHost<T>(d_total.get(), 1), std::vector<T>{emulated_total}))
          << "the carry differs from the CPU's emulation";
    }
  }
}

TYPED_TEST(ReproducibleTest, SegmentedScanAndReduceGiveTheSameBitsEveryRun) {
  using T = TypeParam;
  for (uint64_t max_segment : {uint64_t{100}, uint64_t{50000}, uint64_t{3000000}}) {
    for (Op op : {Op::kSum, Op::kProd}) {
      const uint64_t n = 6000000;
      const std::string what = std::string(OpName(op)) + " segments up to " +
                               std::to_string(max_segment);
      const std::vector<T> input = RandomFloats<T>(n, op, max_segment + 3);
      const std::vector<uint64_t> starts = RandomStarts(n, max_segment, max_segment);
      const uint64_t segments = starts.size();
      DeviceBuffer d_in(n * sizeof(T)), d_out(n * sizeof(T)), d_starts(segments * 8);
      DeviceBuffer d_values(segments * sizeof(T));
      CUDA_ASSERT(ToDevice(d_in.get(), input));
      CUDA_ASSERT(ToDevice(d_starts.get(), starts));
      size_t scan_bytes = 0, reduce_bytes = 0;
      CUDA_ASSERT(gpu::SegmentedScan(nullptr, &scan_bytes, nullptr, nullptr, n, nullptr,
                                     segments, DTypeOf<T>(), op, false, nullptr));
      CUDA_ASSERT(gpu::SegmentedReduce(nullptr, &reduce_bytes, nullptr, n, nullptr, segments,
                                       DTypeOf<T>(), op, nullptr, nullptr, nullptr));
      DeviceBuffer d_scan_temp(scan_bytes), d_reduce_temp(reduce_bytes);
      std::vector<T> first_scan, first_reduce;
      for (int run = 0; run < kRuns; ++run) {
        CUDA_ASSERT(d_out.Poison());
        CUDA_ASSERT(d_values.Poison());
        CUDA_ASSERT(gpu::SegmentedScan(d_scan_temp.get(), &scan_bytes, d_in.get(), d_out.get(), n,
                                       d_starts.get<uint64_t>(), segments, DTypeOf<T>(), op,
                                       false, nullptr));
        CUDA_ASSERT(gpu::SegmentedReduce(d_reduce_temp.get(), &reduce_bytes, d_in.get(), n,
                                         d_starts.get<uint64_t>(), segments, DTypeOf<T>(), op,
                                         d_values.get(), nullptr, nullptr));
        CUDA_ASSERT(cudaDeviceSynchronize());
        std::vector<T> scan = ToHost<T>(d_out.get(), n);
        std::vector<T> reduce = ToHost<T>(d_values.get(), segments);
        if (run == 0) {
          first_scan = std::move(scan);
          first_reduce = std::move(reduce);
          continue;
        }
        ASSERT_TRUE(SameBits(first_scan, scan))
            << what << " scan run " << run << ": " << DifferingElements(first_scan, scan)
            << " elements differ";
        ASSERT_TRUE(SameBits(first_reduce, reduce))
            << what << " reduce run " << run << ": " << DifferingElements(first_reduce, reduce)
            << " segments differ";
      }
      std::vector<T> emulated_scan(n), emulated_reduce(segments);
      reference::GpuOrderSegmentedScan<T>(input, absl::MakeSpan(emulated_scan), starts, op, false);
      reference::GpuOrderSegmentedReduce<T>(input, starts, op, absl::MakeSpan(emulated_reduce));
      EXPECT_TRUE(SameBits(first_scan, emulated_scan))
          << what << ": " << DifferingElements(first_scan, emulated_scan)
          << " scan elements differ from the CPU's emulation";
      EXPECT_TRUE(SameBits(first_reduce, emulated_reduce))
          << what << ": " << DifferingElements(first_reduce, emulated_reduce)
          << " segment results differ from the CPU's emulation";
      const std::vector<T> want = reference::Scan<T>(input, op, false, starts);
      const std::vector<T> magnitude = reference::Scan<T>(Abs(input), Op::kSum, false, starts);
      ExpectClose(first_scan, want, magnitude, op, what + " scan");
    }
  }
}

TYPED_TEST(ReproducibleTest, ReduceGivesTheSameBitsEveryRunAsTheCpuEmulation) {
  using T = TypeParam;
  for (Op op : {Op::kSum, Op::kProd}) {
    for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{1000}, uint64_t{16385},
                       uint64_t{1} << 20, uint64_t{5000000}, (uint64_t{1} << 26) + 3}) {
      const std::string what = std::string(OpName(op)) + " n=" + std::to_string(n);
      const std::vector<T> input = RandomFloats<T>(n, op, n + 99);
      DeviceBuffer d_in(n * sizeof(T)), d_value(sizeof(T));
      CUDA_ASSERT(ToDevice(d_in.get(), input));
      size_t temp_bytes = 0;
      CUDA_ASSERT(gpu::Reduce(nullptr, &temp_bytes, nullptr, n, DTypeOf<T>(), op, nullptr,
                              nullptr, nullptr));
      DeviceBuffer d_temp(temp_bytes);
      std::vector<T> first;
      for (int run = 0; run < kRuns; ++run) {
        CUDA_ASSERT(d_value.Poison());
        CUDA_ASSERT(gpu::Reduce(d_temp.get(), &temp_bytes, d_in.get(), n, DTypeOf<T>(), op,
                                d_value.get(), nullptr, nullptr));
        CUDA_ASSERT(cudaDeviceSynchronize());
        std::vector<T> got = ToHost<T>(d_value.get(), 1);
        if (run == 0) {
          first = std::move(got);
        } else {
          ASSERT_TRUE(SameBits(first, got)) << what << " run " << run;
        }
      }
      const T emulated = reference::GpuOrderReduce<T>(input, op);
      EXPECT_TRUE(SameBits(first, std::vector<T>{emulated}))
          << what << ": GPU " << first[0] << ", the CPU's emulation " << emulated;
    }
  }
}

TYPED_TEST(ReproducibleTest, ReduceByKeyGivesTheSameBitsEveryRun) {
  using T = TypeParam;
  const uint64_t n = 8000000;
  std::mt19937_64 rng = Rng(21);
  std::vector<int32_t> keys(n);
  int32_t key = 0;
  for (uint64_t i = 0; i < n;) {
    const uint64_t run = 1 + rng() % 20000;
    for (uint64_t j = 0; j < run && i < n; ++j, ++i) keys[i] = key;
    ++key;
  }
  const std::vector<T> values = RandomFloats<T>(n, Op::kSum, 22);
  DeviceBuffer d_keys(n * 4), d_values(n * sizeof(T)), d_keys_out(n * 4);
  DeviceBuffer d_values_out(n * sizeof(T)), d_runs(8);
  CUDA_ASSERT(ToDevice(d_keys.get(), keys));
  CUDA_ASSERT(ToDevice(d_values.get(), values));
  size_t temp_bytes = 0;
  CUDA_ASSERT(gpu::ReduceByKey(nullptr, &temp_bytes, nullptr, DType::kInt32, nullptr,
                               DTypeOf<T>(), n, Op::kSum, nullptr, nullptr, nullptr, nullptr));
  DeviceBuffer d_temp(temp_bytes);
  std::vector<T> first;
  for (int run = 0; run < kRuns; ++run) {
    CUDA_ASSERT(d_values_out.Poison());
    CUDA_ASSERT(gpu::ReduceByKey(d_temp.get(), &temp_bytes, d_keys.get(), DType::kInt32,
                                 d_values.get(), DTypeOf<T>(), n, Op::kSum, d_keys_out.get(),
                                 d_values_out.get(), d_runs.get<uint64_t>(), nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
    const uint64_t runs = ToHost<uint64_t>(d_runs.get(), 1)[0];
    ASSERT_EQ(runs, static_cast<uint64_t>(key));
    std::vector<T> got = ToHost<T>(d_values_out.get(), runs);
    if (run == 0) {
      first = std::move(got);
    } else {
      ASSERT_TRUE(SameBits(first, got))
          << "run " << run << ": " << DifferingElements(first, got) << " runs differ";
    }
  }
  // The unordered entry point: the same runs and keys, sums within rounding.
  CUDA_ASSERT(d_values_out.Poison());
  CUDA_ASSERT(d_keys_out.Poison());
  CUDA_ASSERT(gpu::ReduceByKeyUnordered(d_temp.get(), &temp_bytes, d_keys.get(), DType::kInt32,
                                        d_values.get(), DTypeOf<T>(), n, Op::kSum,
                                        d_keys_out.get(), d_values_out.get(),
                                        d_runs.get<uint64_t>(), nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  ASSERT_EQ(ToHost<uint64_t>(d_runs.get(), 1)[0], static_cast<uint64_t>(key));
  const std::vector<int32_t> keys_out = ToHost<int32_t>(d_keys_out.get(), key);
  const std::vector<T> unordered = ToHost<T>(d_values_out.get(), key);
  std::vector<T> magnitude(key, T(0));
  for (uint64_t i = 0; i < n; ++i) magnitude[keys[i]] += std::fabs(values[i]);
  for (int32_t k = 0; k < key; ++k) {
    ASSERT_EQ(keys_out[k], k);
    const double tol = (std::is_same_v<T, float> ? 1e-4 : 1e-12) * (magnitude[k] + 1e-30);
    ASSERT_LE(std::fabs(static_cast<double>(unordered[k]) - first[k]), tol) << "run " << k;
  }
}

// In-order AggregateByKey: the same bits every run, the reference's sums
// within tolerance, integers exact, and the first out-of-range key found.
template <typename T>
void CheckAggregateInOrder(uint64_t n, uint64_t num_keys, uint64_t salt) {
  const std::string what = "n=" + std::to_string(n) + " num_keys=" + std::to_string(num_keys);
  std::mt19937_64 rng = Rng(salt);
  std::vector<int32_t> keys(n);
  for (int32_t& k : keys) k = static_cast<int32_t>(rng() % num_keys);
  std::vector<T> values(n);
  if constexpr (std::is_floating_point_v<T>) {
    values = RandomFloats<T>(n, Op::kSum, salt + 1);
  } else {
    for (T& v : values) v = static_cast<T>(rng());
  }
  DeviceBuffer d_keys(n * 4), d_values(n * sizeof(T)), d_out(num_keys * sizeof(T)), d_bad(8);
  CUDA_ASSERT(ToDevice(d_keys.get(), keys));
  CUDA_ASSERT(ToDevice(d_values.get(), values));
  size_t temp_bytes = 0;
  CUDA_ASSERT(gpu::AggregateByKeyInOrder(nullptr, &temp_bytes, nullptr, DType::kInt32, nullptr,
                                         DTypeOf<T>(), n, Op::kSum, num_keys, nullptr, nullptr,
                                         nullptr));
  DeviceBuffer d_temp(temp_bytes);
  std::vector<T> first;
  for (int run = 0; run < kRuns; ++run) {
    CUDA_ASSERT(d_out.Poison());
    CUDA_ASSERT(gpu::AggregateByKeyInOrder(d_temp.get(), &temp_bytes, d_keys.get(),
                                           DType::kInt32, d_values.get(), DTypeOf<T>(), n,
                                           Op::kSum, num_keys, d_out.get(),
                                           d_bad.get<int64_t>(), nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
    ASSERT_EQ(ToHost<int64_t>(d_bad.get(), 1)[0], -1) << what;
    std::vector<T> got = ToHost<T>(d_out.get(), num_keys);
    if (run == 0) {
      first = std::move(got);
    } else {
      ASSERT_TRUE(SameBits(first, got))
          << what << " run " << run << ": " << DifferingElements(first, got) << " keys differ";
    }
  }
  absl::StatusOr<std::vector<T>> want =
      reference::AggregateByKey<int32_t, T>(keys, values, Op::kSum, num_keys);
  ASSERT_TRUE(want.ok()) << want.status();
  if constexpr (std::is_floating_point_v<T>) {
    std::vector<T> magnitude(num_keys, T(0));
    for (uint64_t i = 0; i < n; ++i) magnitude[keys[i]] += std::fabs(values[i]);
    for (uint64_t k = 0; k < num_keys; ++k) {
      const double tol = (std::is_same_v<T, float> ? 1e-4 : 1e-12) * (magnitude[k] + 1e-30);
      ASSERT_LE(std::fabs(static_cast<double>(first[k]) - (*want)[k]), tol) << what << " key " << k;
    }
  } else {
    EXPECT_TRUE(SameBits(first, *want)) << what;
  }
  if (n > 10) {  // out-of-range keys: the smallest position is reported
    keys[n / 2] = -5;
    keys[n / 3] = static_cast<int32_t>(num_keys);
    CUDA_ASSERT(ToDevice(d_keys.get(), keys));
    CUDA_ASSERT(gpu::AggregateByKeyInOrder(d_temp.get(), &temp_bytes, d_keys.get(),
                                           DType::kInt32, d_values.get(), DTypeOf<T>(), n,
                                           Op::kSum, num_keys, d_out.get(),
                                           d_bad.get<int64_t>(), nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
    EXPECT_EQ(ToHost<int64_t>(d_bad.get(), 1)[0], static_cast<int64_t>(n / 3)) << what;
  }
}

TYPED_TEST(ReproducibleTest, AggregateByKeyInOrderGivesTheSameBitsEveryRun) {
  using T = TypeParam;
  uint64_t salt = 30;
  for (uint64_t num_keys : {uint64_t{1}, uint64_t{7}, uint64_t{1000}, uint64_t{300000}}) {
    for (uint64_t n : {uint64_t{0}, uint64_t{1000}, uint64_t{1} << 22}) {
      CheckAggregateInOrder<T>(n, num_keys, ++salt);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(ReproducibleIntegerTest, AggregateByKeyInOrderIsExactForIntegers) {
  CheckAggregateInOrder<int64_t>(1 << 20, 5000, 40);
  CheckAggregateInOrder<uint32_t>(100000, 3, 41);
}

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* seed = std::getenv("PRIMSERVE_TEST_SEED");
  primserve::g_seed = seed != nullptr ? std::strtoull(seed, nullptr, 10)
                                      : std::random_device{}() * 0x100000000ull ^
                                            std::random_device{}();
  std::printf("PRIMSERVE_TEST_SEED=%llu\n", static_cast<unsigned long long>(primserve::g_seed));
  return RUN_ALL_TESTS();
}
