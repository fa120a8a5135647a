// GPU tests of the compaction family (kernels/select.h, kernels/aggregate.h):
// every primitive x 6 dtypes against the CPU reference (reference/reference.h)
// and, where CUB has the primitive, against CUB. Fresh random data each run
// (the seed is printed; PRIMSERVE_SEED=<n> repeats a run). Also Gather and
// the device-count (*Counted) entry points. Outputs are
// poisoned before each run. Needs a CUDA GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"
#include "kernels/aggregate.h"
#include "kernels/detail/range_keep.cuh"
#include "kernels/gather.h"
#include "core/primitives.h"
#include "reference/reference.h"
#include "kernels/runs.h"
#include "kernels/select.h"
#include "kernels/testing/cub_baseline.h"
#include "kernels/testing/device_helpers.h"

namespace primserve::gpu {
namespace {

namespace ref = ::primserve::reference;
using testing_util_unused = int;

uint64_t g_seed = 0;
std::mt19937_64& Rng() {
  static std::mt19937_64 rng(g_seed);
  return rng;
}

#define CUDA_OK(expr)                                                  \
  do {                                                                 \
    const int e_ = static_cast<int>(expr);                             \
    ASSERT_EQ(e_, 0) << #expr << ": " << cudaGetErrorString(           \
                                             static_cast<cudaError_t>(e_)); \
  } while (0)

// A device buffer of n T's (at least 16 bytes), poisoned with 0xA5 bytes.
template <typename T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) {
    const size_t bytes = std::max<size_t>(16, count * sizeof(T));
    if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
    if (p) cudaMemset(p, 0xA5, bytes);
  }
  explicit DevBuf(const std::vector<T>& v) : DevBuf(v.size()) {
    if (p && !v.empty())
      cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  std::vector<T> Get(size_t count) const {
    std::vector<T> v(count);
    if (count) cudaMemcpy(v.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  void Poison() { cudaMemset(p, 0xA5, std::max<size_t>(16, n * sizeof(T))); }
};

uint64_t GetCount(const DevBuf<uint64_t>& d) { return d.Get(1)[0]; }

// Temp storage through the two-phase protocol.
struct Temp {
  void* p = nullptr;
  size_t bytes = 0;
  ~Temp() { cudaFree(p); }
  int Alloc() {
    return static_cast<int>(cudaMalloc(&p, bytes < 16 ? 16 : bytes));
  }
};

template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  if constexpr (std::is_same_v<T, uint32_t>) return DType::kUint32;
  if constexpr (std::is_same_v<T, uint64_t>) return DType::kUint64;
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  return DType::kFloat64;
}

// Values in a small range so that predicates split and runs repeat; floats
// are multiples of 0.5 (sums are exact in any order) with ~1% NaN and some
// signed zeros.
template <typename T>
T RandValue() {
  const uint64_t u = Rng()();
  if constexpr (std::is_floating_point_v<T>) {
    const int c = static_cast<int>(u % 200);
    if (c < 2) return std::numeric_limits<T>::quiet_NaN();
    if (c < 5) return T(-0.0);
    if (c < 8) return T(0.0);
    return T(static_cast<int64_t>((u >> 8) % 17) - 8) / T(2);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(static_cast<int64_t>((u >> 8) % 17) - 8);
  } else {
    return static_cast<T>((u >> 8) % 17);
  }
}

template <typename T>
std::vector<T> RandVector(size_t n) {
  std::vector<T> v(n);
  for (auto& x : v) x = RandValue<T>();
  return v;
}

// Runs: repeats the previous value with probability `repeat`.
template <typename T>
std::vector<T> RandRuns(size_t n, double repeat) {
  std::vector<T> v(n);
  std::uniform_real_distribution<double> u(0, 1);
  for (size_t i = 0; i < n; ++i) {
    v[i] = (i > 0 && u(Rng()) < repeat) ? v[i - 1] : RandValue<T>();
  }
  return v;
}

std::vector<uint8_t> RandFlags(size_t n, double density) {
  std::vector<uint8_t> f(n);
  std::uniform_real_distribution<double> u(0, 1);
  for (auto& x : f) x = u(Rng()) < density ? static_cast<uint8_t>(1 + Rng()() % 255) : 0;
  return f;
}

template <typename T>
bool BitsEqual(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <typename T>
size_t FirstBitDiff(const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return i;
  return std::min(a.size(), b.size());
}

// Sizes around the tiles (Select, Unique, RLE: 8192 items of 4 bytes, 4096
// of 8 bytes; ReduceByKey: 4096 with 4-byte keys and values, else 2048;
// segmented: 2048) and many tiles.
std::vector<uint64_t> SmallSizes() {
  return {0, 1, 31, 32, 33, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8193,
          3 * 8192 + 5, 100003};
}
constexpr uint64_t kBig = (1ull << 24) + 7;

std::vector<PredicateKind> AllKinds() {
  return {PredicateKind::kNonzero, PredicateKind::kEq, PredicateKind::kNe,
          PredicateKind::kLt,      PredicateKind::kLe, PredicateKind::kGt,
          PredicateKind::kGe,      PredicateKind::kInRange};
}

template <typename T>
SelectKeep KeepFor(PredicateKind kind) {
  return MakeKeep<T>(kind, T(1), T(3));  // IN_RANGE: 1 <= x < 3
}

template <typename T>
Predicate<T> PredFor(PredicateKind kind) {
  Predicate<T> p;
  p.kind = kind;
  p.operand = T(1);
  p.upper = T(3);
  return p;
}

// --------------------------------------------------------------------------
// Select / Partition

struct SelectOut {
  template <typename T>
  static void Run(const std::vector<T>& in, const SelectKeep& keep, bool partition,
                  const std::vector<bool>& expect_keep, bool check_cub,
                  const char* what, uint64_t n, size_t in_offset = 0) {
    SCOPED_TRACE(std::string(what) + " dtype=" + DTypeName(DTypeOf<T>()) +
                 " n=" + std::to_string(n) + " partition=" + std::to_string(partition) +
                 " offset=" + std::to_string(in_offset));
    std::vector<T> host(in.size() + in_offset);
    std::copy(in.begin(), in.end(), host.begin() + in_offset);
    DevBuf<T> d_in(host);
    const size_t out_n = partition ? n : n;
    DevBuf<T> d_out(out_n + 1);
    DevBuf<int64_t> d_idx(out_n + 1);
    DevBuf<uint64_t> d_num(1);
    Temp temp;
    const DType dt = DTypeOf<T>();
    CUDA_OK(Select(nullptr, &temp.bytes, d_in.p + in_offset, dt, n, keep, partition,
                   d_out.p, d_idx.p, d_num.p, nullptr));
    CUDA_OK(temp.Alloc());
    CUDA_OK(Select(temp.p, &temp.bytes, d_in.p + in_offset, dt, n, keep, partition,
                   d_out.p, d_idx.p, d_num.p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto expect = ref::Select<T>(absl::MakeConstSpan(in), expect_keep, partition);
    const uint64_t count = GetCount(d_num);
    ASSERT_EQ(count, expect.count);
    const size_t m = expect.values.size();
    const auto got_v = d_out.Get(m + 1);
    const auto got_i = d_idx.Get(m + 1);
    std::vector<T> gv(got_v.begin(), got_v.begin() + m);
    std::vector<int64_t> gi(got_i.begin(), got_i.begin() + m);
    ASSERT_TRUE(BitsEqual(gv, expect.values)) << "first diff at " << FirstBitDiff(gv, expect.values);
    ASSERT_EQ(gi, expect.indices);
    // Nothing written past the end.
    const T poison_v = got_v[m];
    uint32_t pbits;
    std::memcpy(&pbits, &poison_v, 4);
    ASSERT_EQ(pbits, 0xA5A5A5A5u) << "wrote past the end";
    ASSERT_EQ(static_cast<uint64_t>(got_i[m]), 0xA5A5A5A5A5A5A5A5ull);

    if (check_cub && keep.d_flags == nullptr && !partition) {
      DevBuf<T> c_out(n + 1);
      DevBuf<uint64_t> c_num(1);
      CUDA_OK(testing::RunTwoPhase([&](void* t, size_t* b) {
        return testing::CubSelectIf(t, b, d_in.p + in_offset, dt, n, keep, c_out.p, c_num.p,
                                    testing::CountFor(n), nullptr);
      }));
      ASSERT_EQ(GetCount(c_num), count);
      ASSERT_TRUE(BitsEqual(c_out.Get(count), std::vector<T>(gv.begin(), gv.begin() + count)));
    }
    if (check_cub && keep.d_flags != nullptr) {
      DevBuf<T> c_out(n + 1);
      DevBuf<uint64_t> c_num(1);
      if (!partition) {
        CUDA_OK(testing::RunTwoPhase([&](void* t, size_t* b) {
          return testing::CubSelectFlagged(t, b, d_in.p + in_offset, dt, keep.d_flags, n, c_out.p,
                                           c_num.p, testing::CountFor(n), nullptr);
        }));
        ASSERT_EQ(GetCount(c_num), count);
        ASSERT_TRUE(BitsEqual(c_out.Get(count), gv));
      } else {
        CUDA_OK(testing::RunTwoPhase([&](void* t, size_t* b) {
          return testing::CubPartitionFlagged(t, b, d_in.p + in_offset, dt, keep.d_flags, n,
                                              c_out.p, c_num.p, testing::CountFor(n), nullptr);
        }));
        ASSERT_EQ(GetCount(c_num), count);
        auto cub = c_out.Get(n);
        std::reverse(cub.begin() + count, cub.end());  // CUB: rejected reversed
        ASSERT_TRUE(BitsEqual(cub, gv));
      }
    }
  }
};

template <typename T>
void SelectIfAllKinds() {
  for (uint64_t n : SmallSizes()) {
    const auto in = RandVector<T>(n);
    for (PredicateKind kind : AllKinds()) {
      const auto keep = ref::EvaluatePredicate<T>(absl::MakeConstSpan(in), PredFor<T>(kind));
      SelectOut::Run<T>(in, KeepFor<T>(kind), false, keep, true,
                        PredicateKindName(kind), n);
      if (::testing::Test::HasFatalFailure()) return;
      if (kind == PredicateKind::kLt || kind == PredicateKind::kNe ||
          kind == PredicateKind::kInRange) {
        SelectOut::Run<T>(in, KeepFor<T>(kind), true, keep, false,
                          PredicateKindName(kind), n);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  // Big, and unaligned input (scalar-load path).
  const auto big = RandVector<T>(kBig);
  const auto keep = ref::EvaluatePredicate<T>(absl::MakeConstSpan(big), PredFor<T>(PredicateKind::kLt));
  SelectOut::Run<T>(big, KeepFor<T>(PredicateKind::kLt), false, keep, true, "LT", kBig);
  if (::testing::Test::HasFatalFailure()) return;
  SelectOut::Run<T>(big, KeepFor<T>(PredicateKind::kLt), true, keep, false, "LT", kBig);
  if (::testing::Test::HasFatalFailure()) return;
  const auto mid = RandVector<T>(100003);
  const auto keep_mid = ref::EvaluatePredicate<T>(absl::MakeConstSpan(mid), PredFor<T>(PredicateKind::kGe));
  SelectOut::Run<T>(mid, KeepFor<T>(PredicateKind::kGe), false, keep_mid, true, "GE", 100003, 1);
  if (::testing::Test::HasFatalFailure()) return;
  SelectOut::Run<T>(mid, KeepFor<T>(PredicateKind::kGe), true, keep_mid, false, "GE", 100003, 1);
}

template <typename T>
void SelectFlaggedAll() {
  std::vector<uint64_t> sizes = SmallSizes();
  sizes.push_back(kBig);
  for (uint64_t n : sizes) {
    const auto in = RandVector<T>(n);
    for (double density : {0.0, 0.5, 1.0, 0.03}) {
      const auto flags = RandFlags(n, density);
      DevBuf<uint8_t> d_flags(flags);
      const auto keep = ref::EvaluateFlags<uint8_t>(absl::MakeConstSpan(flags));
      for (bool partition : {false, true}) {
        SelectOut::Run<T>(in, MakeFlagsKeep(d_flags.p), partition, keep, true,
                          ("flags density " + std::to_string(density)).c_str(), n);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}


// The kernels evaluate every predicate kind as one range test on an ordered
// key (kernels/detail/range_keep.cuh); it must agree with Predicate<T> on
// every pair of operands and element drawn from the edge values (NaNs of
// both signs, infinities, signed zeros, denormals, integer limits). Host
// only.
template <typename T>
std::vector<T> EdgeValues() {
  std::vector<T> v = {T(0), T(1), T(2), T(3), T(100)};
  if constexpr (std::is_floating_point_v<T>) {
    using L = std::numeric_limits<T>;
    for (T x : {-T(0), T(-1), T(2.5), T(-7), L::infinity(), -L::infinity(), L::quiet_NaN(),
                -L::quiet_NaN(), L::min(), -L::min(), L::denorm_min(), -L::denorm_min(), L::max(),
                L::lowest()}) {
      v.push_back(x);
    }
    T all_ones;
    std::memset(&all_ones, 0xff, sizeof(T));  // a negative NaN with every bit set
    v.push_back(all_ones);
  } else {
    using L = std::numeric_limits<T>;
    for (T x : {static_cast<T>(-1), L::min(), L::max(), static_cast<T>(L::min() + 1),
                static_cast<T>(L::max() - 1)}) {
      v.push_back(x);
    }
  }
  return v;
}

template <typename T>
void RangeKeepAgrees() {
  const auto values = EdgeValues<T>();
  for (PredicateKind kind : AllKinds()) {
    for (T a : values) {
      for (T b : values) {
        Predicate<T> pred;
        pred.kind = kind;
        pred.operand = a;
        pred.upper = b;
        const auto range = detail::RangeKeep<T>::From(pred);
        for (T x : values) {
          ASSERT_EQ(range(x), pred(x))
              << DTypeName(DTypeOf<T>()) << " " << PredicateKindName(kind) << " operand "
              << static_cast<double>(a) << " upper " << static_cast<double>(b) << " x "
              << static_cast<double>(x);
        }
      }
    }
  }
}

#define FOR_EACH_DTYPE(fn) \
  fn<int32_t>();           \
  if (HasFatalFailure()) return; \
  fn<int64_t>();           \
  if (HasFatalFailure()) return; \
  fn<uint32_t>();          \
  if (HasFatalFailure()) return; \
  fn<uint64_t>();          \
  if (HasFatalFailure()) return; \
  fn<float>();             \
  if (HasFatalFailure()) return; \
  fn<double>();

TEST(CompactionGpu, RangeKeepMatchesPredicate) { FOR_EACH_DTYPE(RangeKeepAgrees); }
TEST(CompactionGpu, SelectIfEveryPredicate) { FOR_EACH_DTYPE(SelectIfAllKinds); }
TEST(CompactionGpu, SelectAndPartitionFlagged) { FOR_EACH_DTYPE(SelectFlaggedAll); }

// All kept / none kept through predicates.
TEST(CompactionGpu, SelectAllAndNone) {
  const uint64_t n = 3 * 4096 + 5;
  std::vector<int32_t> in(n);
  for (auto& x : in) x = static_cast<int32_t>(Rng()() % 1000);
  for (auto [kind, all] : {std::pair{PredicateKind::kGe, true}, std::pair{PredicateKind::kLt, false}}) {
    SelectKeep keep = MakeKeep<int32_t>(kind, -1);
    SelectOut::Run<int32_t>(in, keep, false, std::vector<bool>(n, all), true, "all/none", n);
    if (HasFatalFailure()) return;
    SelectOut::Run<int32_t>(in, keep, true, std::vector<bool>(n, all), false, "all/none", n);
    if (HasFatalFailure()) return;
  }
}

// Outputs are optional: count only, indices only (flags, no input values).
TEST(CompactionGpu, SelectOptionalOutputs) {
  const uint64_t n = 100003;
  const auto flags = RandFlags(n, 0.4);
  DevBuf<uint8_t> d_flags(flags);
  const auto keep = ref::EvaluateFlags<uint8_t>(absl::MakeConstSpan(flags));
  const auto in = RandVector<float>(n);
  const auto expect = ref::Select<float>(absl::MakeConstSpan(in), keep, false);
  DevBuf<int64_t> d_idx(n);
  DevBuf<uint64_t> d_num(1);
  Temp temp;
  CUDA_OK(Select(nullptr, &temp.bytes, nullptr, DType::kFloat32, n, MakeFlagsKeep(d_flags.p),
                 false, nullptr, d_idx.p, d_num.p, nullptr));
  CUDA_OK(temp.Alloc());
  CUDA_OK(Select(temp.p, &temp.bytes, nullptr, DType::kFloat32, n, MakeFlagsKeep(d_flags.p),
                 false, nullptr, d_idx.p, d_num.p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  ASSERT_EQ(GetCount(d_num), expect.count);
  ASSERT_EQ(d_idx.Get(expect.count), expect.indices);
  // Count only, by predicate.
  DevBuf<float> d_in(in);
  d_num.Poison();
  CUDA_OK(Select(temp.p, &temp.bytes, d_in.p, DType::kFloat32, n,
                 KeepFor<float>(PredicateKind::kGt), false, nullptr, nullptr, d_num.p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto keep_gt = ref::EvaluatePredicate<float>(absl::MakeConstSpan(in), PredFor<float>(PredicateKind::kGt));
  ASSERT_EQ(GetCount(d_num), static_cast<uint64_t>(std::count(keep_gt.begin(), keep_gt.end(), true)));
}

TEST(CompactionGpu, SelectInPlace) {
  for (uint64_t n : {uint64_t{4097}, uint64_t{100003}, kBig}) {
    const auto in = RandVector<double>(n);
    const auto keep = ref::EvaluatePredicate<double>(absl::MakeConstSpan(in), PredFor<double>(PredicateKind::kNe));
    const auto expect = ref::Select<double>(absl::MakeConstSpan(in), keep, false);
    DevBuf<double> d(in);
    DevBuf<uint64_t> d_num(1);
    Temp temp;
    const SelectKeep k = KeepFor<double>(PredicateKind::kNe);
    CUDA_OK(Select(nullptr, &temp.bytes, d.p, DType::kFloat64, n, k, false, d.p, nullptr, d_num.p, nullptr));
    CUDA_OK(temp.Alloc());
    CUDA_OK(Select(temp.p, &temp.bytes, d.p, DType::kFloat64, n, k, false, d.p, nullptr, d_num.p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    ASSERT_EQ(GetCount(d_num), expect.count);
    ASSERT_TRUE(BitsEqual(d.Get(expect.count), expect.values)) << n;
    // In-place partition is refused.
    ASSERT_EQ(Select(temp.p, &temp.bytes, d.p, DType::kFloat64, n, k, true, d.p, nullptr,
                     d_num.p, nullptr),
              1);
  }
}

TEST(CompactionGpu, BadArguments) {
  size_t bytes = 0;
  ASSERT_EQ(Select(nullptr, nullptr, nullptr, DType::kInt32, 5, SelectKeep{}, false,
                   nullptr, nullptr, nullptr, nullptr), 1);
  ASSERT_EQ(Select(nullptr, &bytes, nullptr, static_cast<DType>(99), 5, SelectKeep{}, false,
                   nullptr, nullptr, nullptr, nullptr), 1);
  SelectKeep bad;
  bad.kind = static_cast<PredicateKind>(42);
  ASSERT_EQ(Select(nullptr, &bytes, nullptr, DType::kInt32, 5, bad, false, nullptr,
                   nullptr, nullptr, nullptr), 1);
  ASSERT_EQ(ReduceByKey(nullptr, &bytes, nullptr, DType::kInt32, nullptr, DType::kInt32, 5,
                        Op::kArgMin, nullptr, nullptr, nullptr, nullptr), 1);
  ASSERT_EQ(AggregateByKey(nullptr, &bytes, nullptr, DType::kFloat32, nullptr, DType::kInt32, 5,
                           Op::kSum, 4, nullptr, nullptr, nullptr), 0);  // size query
  int64_t* bogus = reinterpret_cast<int64_t*>(16);
  ASSERT_EQ(AggregateByKey(bogus, &bytes, bogus, DType::kFloat32, bogus, DType::kInt32, 5,
                           Op::kSum, 4, bogus, bogus, nullptr), 1);  // float keys
  ASSERT_EQ(AggregateByKey(bogus, &bytes, bogus, DType::kInt32, bogus, DType::kInt32, 5,
                           Op::kProd, 4, bogus, bogus, nullptr), 1);
}

// n > 2^31: flagged select on int32 values, checked on the device.
TEST(CompactionGpu, SelectOver2To31) {
  size_t free_b = 0, total_b = 0;
  CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  const uint64_t n = (1ull << 31) + 4097;
  if (free_b < 30ull << 30) GTEST_SKIP() << "needs 30 GiB of device memory";
  int32_t* d_in = nullptr;
  uint8_t* d_flags = nullptr;
  int32_t* d_out = nullptr;
  int64_t* d_idx = nullptr;
  uint64_t* d_num = nullptr;
  CUDA_OK(cudaMalloc(&d_in, n * 4));
  CUDA_OK(cudaMalloc(&d_flags, n));
  CUDA_OK(cudaMalloc(&d_out, n * 4 / 2 + (64 << 20)));
  CUDA_OK(cudaMalloc(&d_idx, n * 8 / 2 + (128 << 20)));
  CUDA_OK(cudaMalloc(&d_num, 8));
  CUDA_OK(testing::FillHashed(d_in, d_flags, n, static_cast<uint32_t>(g_seed)));
  uint64_t expect = 0;
  CUDA_OK(testing::CountFlags(d_flags, n, &expect));
  ASSERT_LT(expect, n / 2 + (16 << 20));  // fits the output buffers
  Temp temp;
  CUDA_OK(Select(nullptr, &temp.bytes, d_in, DType::kInt32, n, MakeFlagsKeep(d_flags), false,
                 d_out, d_idx, d_num, nullptr));
  CUDA_OK(temp.Alloc());
  CUDA_OK(Select(temp.p, &temp.bytes, d_in, DType::kInt32, n, MakeFlagsKeep(d_flags), false,
                 d_out, d_idx, d_num, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  uint64_t count = 0;
  CUDA_OK(cudaMemcpy(&count, d_num, 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(count, expect);
  uint64_t bad = 1;
  CUDA_OK(testing::CheckHashedSelect(d_out, d_idx, count, d_flags, &bad));
  EXPECT_EQ(bad, 0u);
  int64_t last = -1;
  CUDA_OK(cudaMemcpy(&last, d_idx + count - 1, 8, cudaMemcpyDeviceToHost));
  EXPECT_GT(last, int64_t{1} << 31);  // the tail past 2^31 was reached
  cudaFree(d_in);
  cudaFree(d_flags);
  cudaFree(d_out);
  cudaFree(d_idx);
  cudaFree(d_num);
}

// --------------------------------------------------------------------------
// Segmented select

template <typename T>
void SegmentedAll() {
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{33}, uint64_t{2049}, uint64_t{100003}}) {
    for (int variant = 0; variant < 3; ++variant) {
      // Segment starts: random lengths 0..(variant 0: 40, 1: 3000, 2: one segment).
      std::vector<uint64_t> starts{0};
      const uint64_t max_len = variant == 0 ? 40 : 3000;
      if (variant < 2) {
        uint64_t pos = 0;
        while (true) {
          const uint64_t len = Rng()() % (max_len + 1);
          if (pos + len > n) break;
          pos += len;
          starts.push_back(pos);  // includes empty segments (len 0)
          if (Rng()() % 7 == 0) starts.push_back(pos);  // extra empty one
        }
      }
      const auto in = RandVector<T>(n);
      const auto flags = RandFlags(n, 0.5);
      for (bool by_flags : {false, true}) {
        SCOPED_TRACE("segmented dtype=" + std::string(DTypeName(DTypeOf<T>())) +
                     " n=" + std::to_string(n) + " variant=" + std::to_string(variant) +
                     " flags=" + std::to_string(by_flags) +
                     " segments=" + std::to_string(starts.size()));
        DevBuf<T> d_in(in);
        DevBuf<uint8_t> d_flags(flags);
        DevBuf<uint64_t> d_starts(starts);
        DevBuf<T> d_out(n);
        DevBuf<int64_t> d_idx(n);
        DevBuf<uint64_t> d_counts(starts.size());
        const SelectKeep keep = by_flags ? MakeFlagsKeep(d_flags.p) : KeepFor<T>(PredicateKind::kLe);
        Temp temp;
        CUDA_OK(SegmentedSelect(nullptr, &temp.bytes, d_in.p, DTypeOf<T>(), n, d_starts.p,
                                starts.size(), keep, d_out.p, d_idx.p, d_counts.p, nullptr));
        CUDA_OK(temp.Alloc());
        CUDA_OK(SegmentedSelect(temp.p, &temp.bytes, d_in.p, DTypeOf<T>(), n, d_starts.p,
                                starts.size(), keep, d_out.p, d_idx.p, d_counts.p, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        const auto got_v = d_out.Get(n);
        const auto got_i = d_idx.Get(n);
        const auto got_c = d_counts.Get(starts.size());
        for (size_t s = 0; s < starts.size(); ++s) {
          const uint64_t b = starts[s], e = s + 1 < starts.size() ? starts[s + 1] : n;
          auto seg = absl::MakeConstSpan(in).subspan(b, e - b);
          const auto k = by_flags
              ? ref::EvaluateFlags<uint8_t>(absl::MakeConstSpan(flags).subspan(b, e - b))
              : ref::EvaluatePredicate<T>(seg, PredFor<T>(PredicateKind::kLe));
          const auto expect = ref::Select<T>(seg, k, false);
          ASSERT_EQ(got_c[s], expect.count) << "segment " << s;
          std::vector<T> gv(got_v.begin() + b, got_v.begin() + b + expect.count);
          std::vector<int64_t> gi(got_i.begin() + b, got_i.begin() + b + expect.count);
          ASSERT_TRUE(BitsEqual(gv, expect.values)) << "segment " << s;
          ASSERT_EQ(gi, expect.indices) << "segment " << s;
        }
      }
    }
  }
}

TEST(CompactionGpu, SegmentedSelect) { FOR_EACH_DTYPE(SegmentedAll); }

// --------------------------------------------------------------------------
// Unique and RLE

template <typename T>
void UniqueAndRle() {
  std::vector<uint64_t> sizes = SmallSizes();
  sizes.push_back(kBig);
  for (uint64_t n : sizes) {
    for (double repeat : {0.0, 0.6, 0.999}) {
      if (n == kBig && repeat == 0.0) continue;
      SCOPED_TRACE("dtype=" + std::string(DTypeName(DTypeOf<T>())) + " n=" +
                   std::to_string(n) + " repeat=" + std::to_string(repeat));
      const auto in = RandRuns<T>(n, repeat);
      DevBuf<T> d_in(in);
      DevBuf<T> d_out(n + 1);
      DevBuf<int64_t> d_len(n + 1);
      DevBuf<uint64_t> d_num(1);
      Temp temp;
      const DType dt = DTypeOf<T>();
      // Unique.
      CUDA_OK(Unique(nullptr, &temp.bytes, d_in.p, dt, n, d_out.p, d_num.p, nullptr));
      CUDA_OK(temp.Alloc());
      CUDA_OK(Unique(temp.p, &temp.bytes, d_in.p, dt, n, d_out.p, d_num.p, nullptr));
      CUDA_OK(cudaDeviceSynchronize());
      const auto expect_u = ref::Unique<T>(absl::MakeConstSpan(in));
      ASSERT_EQ(GetCount(d_num), expect_u.size());
      ASSERT_TRUE(BitsEqual(d_out.Get(expect_u.size()), expect_u));
      {
        DevBuf<T> c_out(n + 1);
        DevBuf<uint64_t> c_num(1);
        CUDA_OK(testing::RunTwoPhase([&](void* t, size_t* b) {
          return testing::CubUnique(t, b, d_in.p, dt, n, c_out.p, c_num.p, testing::CountFor(n),
                                    nullptr);
        }));
        ASSERT_EQ(GetCount(c_num), expect_u.size());
        ASSERT_TRUE(BitsEqual(c_out.Get(expect_u.size()), expect_u));
      }
      // RLE.
      d_out.Poison();
      d_num.Poison();
      Temp temp2;
      CUDA_OK(RunLengthEncode(nullptr, &temp2.bytes, d_in.p, dt, n, d_out.p, d_len.p, d_num.p, nullptr));
      CUDA_OK(temp2.Alloc());
      CUDA_OK(RunLengthEncode(temp2.p, &temp2.bytes, d_in.p, dt, n, d_out.p, d_len.p, d_num.p, nullptr));
      CUDA_OK(cudaDeviceSynchronize());
      const auto expect_r = ref::RunLengthEncode<T>(absl::MakeConstSpan(in));
      const uint64_t runs = GetCount(d_num);
      ASSERT_EQ(runs, expect_r.values.size());
      ASSERT_TRUE(BitsEqual(d_out.Get(runs), expect_r.values));
      ASSERT_EQ(d_len.Get(runs), expect_r.lengths);
      ASSERT_EQ(static_cast<uint64_t>(d_len.Get(runs + 1)[runs]), 0xA5A5A5A5A5A5A5A5ull);
      {
        DevBuf<T> c_out(n + 1);
        DevBuf<int64_t> c_len(n + 1);
        DevBuf<uint64_t> c_num(1);
        CUDA_OK(testing::RunTwoPhase([&](void* t, size_t* b) {
          return testing::CubRunLengthEncode(t, b, d_in.p, dt, n, c_out.p, c_len.p, c_num.p,
                                             testing::CountFor(n), nullptr);
        }));
        ASSERT_EQ(GetCount(c_num), runs);
        ASSERT_EQ(c_len.Get(runs), expect_r.lengths);
      }
    }
  }
  // Unique in place.
  const auto in = RandRuns<T>(100003, 0.5);
  DevBuf<T> d(in);
  DevBuf<uint64_t> d_num(1);
  Temp temp;
  CUDA_OK(Unique(nullptr, &temp.bytes, d.p, DTypeOf<T>(), in.size(), d.p, d_num.p, nullptr));
  CUDA_OK(temp.Alloc());
  CUDA_OK(Unique(temp.p, &temp.bytes, d.p, DTypeOf<T>(), in.size(), d.p, d_num.p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto expect_u = ref::Unique<T>(absl::MakeConstSpan(in));
  ASSERT_EQ(GetCount(d_num), expect_u.size());
  ASSERT_TRUE(BitsEqual(d.Get(expect_u.size()), expect_u));
}

TEST(CompactionGpu, UniqueAndRunLengthEncode) { FOR_EACH_DTYPE(UniqueAndRle); }

// --------------------------------------------------------------------------
// ReduceByKey

template <typename V>
bool CloseEnough(V got, V want) {
  if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(want)) return std::isnan(got);
    if (got == want) return true;  // also +0.0 vs -0.0
    return std::fabs(got - want) <= 1e-5 * std::fabs(want) + 1e-6;
  } else {
    return got == want;
  }
}

template <typename K, typename V>
void ReduceByKeyCase(uint64_t n, double repeat, Op op) {
  SCOPED_TRACE("rbk keys=" + std::string(DTypeName(DTypeOf<K>())) + " values=" +
               DTypeName(DTypeOf<V>()) + " op=" + OpName(op) + " n=" + std::to_string(n) +
               " repeat=" + std::to_string(repeat));
  const auto keys = RandRuns<K>(n, repeat);
  std::vector<V> values(n);
  for (auto& v : values) {
    v = RandValue<V>();
    if (op == Op::kProd) {
      // Powers of two (exact products) for floats; small for integers.
      const int64_t c = static_cast<int64_t>(Rng()() % 5);
      if constexpr (std::is_floating_point_v<V>) {
        const V choices[5] = {V(0.5), V(1), V(2), V(-1), V(-2)};
        if (!std::isnan(v)) v = choices[c];
      } else {
        v = static_cast<V>(c + 1);
      }
    }
  }
  DevBuf<K> d_keys(keys);
  DevBuf<V> d_vals(values);
  DevBuf<K> d_kout(n + 1);
  DevBuf<V> d_vout(n + 1);
  DevBuf<uint64_t> d_num(1);
  Temp temp;
  CUDA_OK(ReduceByKey(nullptr, &temp.bytes, d_keys.p, DTypeOf<K>(), d_vals.p, DTypeOf<V>(), n,
                      op, d_kout.p, d_vout.p, d_num.p, nullptr));
  CUDA_OK(temp.Alloc());
  CUDA_OK(ReduceByKey(temp.p, &temp.bytes, d_keys.p, DTypeOf<K>(), d_vals.p, DTypeOf<V>(), n,
                      op, d_kout.p, d_vout.p, d_num.p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto expect = ref::ReduceByKey<K, V>(absl::MakeConstSpan(keys),
                                             absl::MakeConstSpan(values), op);
  const uint64_t runs = GetCount(d_num);
  ASSERT_EQ(runs, expect.keys.size());
  ASSERT_TRUE(BitsEqual(d_kout.Get(runs), expect.keys));
  const auto got = d_vout.Get(runs);
  for (size_t r = 0; r < runs; ++r) {
    ASSERT_TRUE(CloseEnough(got[r], expect.values[r]))
        << "run " << r << ": got " << got[r] << " want " << expect.values[r];
  }
  if (n < (1u << 22)) {
    DevBuf<K> c_k(n + 1);
    DevBuf<V> c_v(n + 1);
    DevBuf<uint64_t> c_num(1);
    CUDA_OK(testing::RunTwoPhase([&](void* t, size_t* b) {
      return testing::CubReduceByKey(t, b, d_keys.p, DTypeOf<K>(), d_vals.p, DTypeOf<V>(), n, op,
                                     c_k.p, c_v.p, c_num.p, testing::CountFor(n), nullptr);
    }));
    ASSERT_EQ(GetCount(c_num), runs);
    ASSERT_TRUE(BitsEqual(c_k.Get(runs), expect.keys));
    const auto cub = c_v.Get(runs);
    for (size_t r = 0; r < runs; ++r) ASSERT_TRUE(CloseEnough(cub[r], got[r])) << "cub run " << r;
  }
}

template <typename V>
void ReduceByKeyValues() {
  for (Op op : {Op::kSum, Op::kProd, Op::kMin, Op::kMax}) {
    for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{33}, uint64_t{2047}, uint64_t{2048},
                       uint64_t{2049}, uint64_t{100003}}) {
      ReduceByKeyCase<int32_t, V>(n, 0.7, op);
      if (::testing::Test::HasFatalFailure()) return;
      ReduceByKeyCase<double, V>(n, 0.5, op);
      if (::testing::Test::HasFatalFailure()) return;
    }
    ReduceByKeyCase<uint64_t, V>(100003, 0.0, op);
    if (::testing::Test::HasFatalFailure()) return;
    ReduceByKeyCase<float, V>(100003, 0.99, op);
    if (::testing::Test::HasFatalFailure()) return;
  }
  ReduceByKeyCase<int64_t, V>(kBig, 0.8, Op::kSum);
  if (::testing::Test::HasFatalFailure()) return;
  ReduceByKeyCase<uint32_t, V>(kBig, 0.3, Op::kMax);
}

TEST(CompactionGpu, ReduceByKey) { FOR_EACH_DTYPE(ReduceByKeyValues); }

// Long runs spanning many tiles (exact integer SUM).
TEST(CompactionGpu, ReduceByKeyLongRuns) {
  const uint64_t n = 1000003;
  std::vector<int32_t> keys(n);
  std::vector<int64_t> values(n);
  for (uint64_t i = 0; i < n; ++i) {
    keys[i] = static_cast<int32_t>(i / 300001);
    values[i] = static_cast<int64_t>(Rng()() % 1000);
  }
  DevBuf<int32_t> d_keys(keys);
  DevBuf<int64_t> d_vals(values);
  DevBuf<int32_t> d_kout(n);
  DevBuf<int64_t> d_vout(n);
  DevBuf<uint64_t> d_num(1);
  Temp temp;
  CUDA_OK(ReduceByKey(nullptr, &temp.bytes, d_keys.p, DType::kInt32, d_vals.p, DType::kInt64, n,
                      Op::kSum, d_kout.p, d_vout.p, d_num.p, nullptr));
  CUDA_OK(temp.Alloc());
  CUDA_OK(ReduceByKey(temp.p, &temp.bytes, d_keys.p, DType::kInt32, d_vals.p, DType::kInt64, n,
                      Op::kSum, d_kout.p, d_vout.p, d_num.p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto expect = ref::ReduceByKey<int32_t, int64_t>(absl::MakeConstSpan(keys),
                                                         absl::MakeConstSpan(values), Op::kSum);
  ASSERT_EQ(GetCount(d_num), expect.keys.size());
  ASSERT_EQ(d_kout.Get(expect.keys.size()), expect.keys);
  ASSERT_EQ(d_vout.Get(expect.keys.size()), expect.values);
}

// RLE with runs longer than several tiles, offset from the tile edges: the
// tiles between two heads carry the last head's position through the
// look-back. Also from a misaligned start (the kernel's scalar loads).
TEST(CompactionGpu, RunLengthEncodeLongRuns) {
  const uint64_t n = 1000003;
  std::vector<uint32_t> keys(n + 1);
  for (uint64_t i = 0; i < n + 1; ++i) keys[i] = static_cast<uint32_t>((i + 777) / 30011);
  DevBuf<uint32_t> d_keys(keys);
  for (const uint64_t offset : {0, 1}) {
    SCOPED_TRACE("offset=" + std::to_string(offset));
    const std::vector<uint32_t> in(keys.begin() + offset, keys.begin() + offset + n);
    DevBuf<uint32_t> d_out(n);
    DevBuf<int64_t> d_len(n + 1);
    DevBuf<uint64_t> d_num(1);
    d_len.Poison();
    Temp temp;
    CUDA_OK(RunLengthEncode(nullptr, &temp.bytes, d_keys.p + offset, DType::kUint32, n, d_out.p,
                            d_len.p, d_num.p, nullptr));
    CUDA_OK(temp.Alloc());
    CUDA_OK(RunLengthEncode(temp.p, &temp.bytes, d_keys.p + offset, DType::kUint32, n, d_out.p,
                            d_len.p, d_num.p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto expect = ref::RunLengthEncode<uint32_t>(absl::MakeConstSpan(in));
    const uint64_t runs = GetCount(d_num);
    ASSERT_EQ(runs, expect.values.size());
    ASSERT_EQ(d_out.Get(runs), expect.values);
    ASSERT_EQ(d_len.Get(runs), expect.lengths);
    ASSERT_EQ(static_cast<uint64_t>(d_len.Get(runs + 1)[runs]), 0xA5A5A5A5A5A5A5A5ull);
  }
}

// --------------------------------------------------------------------------
// AggregateByKey

template <typename K, typename V>
void AggregateCase(uint64_t n, uint64_t num_keys, Op op, AggregatePath path) {
  SCOPED_TRACE("agg keys=" + std::string(DTypeName(DTypeOf<K>())) + " values=" +
               DTypeName(DTypeOf<V>()) + " op=" + OpName(op) + " n=" + std::to_string(n) +
               " num_keys=" + std::to_string(num_keys) + " path=" +
               std::to_string(static_cast<int>(path)));
  std::vector<K> keys(n);
  // Skewed: half the elements on a few hot keys (contention), rest uniform.
  for (auto& k : keys) {
    const uint64_t u = Rng()();
    k = static_cast<K>((u & 1) ? (u >> 8) % num_keys : (u >> 8) % std::min<uint64_t>(num_keys, 3));
  }
  const auto values = RandVector<V>(n);
  DevBuf<K> d_keys(keys);
  DevBuf<V> d_vals(values);
  DevBuf<V> d_out(num_keys);
  DevBuf<int64_t> d_bad(1);
  Temp temp;
  CUDA_OK(AggregateByKeyWithPath(nullptr, &temp.bytes, d_keys.p, DTypeOf<K>(), d_vals.p,
                                 DTypeOf<V>(), n, op, num_keys, d_out.p, d_bad.p, path, nullptr));
  CUDA_OK(temp.Alloc());
  CUDA_OK(AggregateByKeyWithPath(temp.p, &temp.bytes, d_keys.p, DTypeOf<K>(), d_vals.p,
                                 DTypeOf<V>(), n, op, num_keys, d_out.p, d_bad.p, path, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  ASSERT_EQ(d_bad.Get(1)[0], -1);
  const auto expect = ref::AggregateByKey<K, V>(absl::MakeConstSpan(keys),
                                                absl::MakeConstSpan(values), op, num_keys);
  ASSERT_TRUE(expect.ok());
  const auto got = d_out.Get(num_keys);
  for (uint64_t k = 0; k < num_keys; ++k) {
    ASSERT_TRUE(CloseEnough(got[k], (*expect)[k]))
        << "key " << k << ": got " << got[k] << " want " << (*expect)[k];
  }
}

template <typename V>
void AggregateValues() {
  for (Op op : {Op::kSum, Op::kMin, Op::kMax}) {
    for (AggregatePath path : {AggregatePath::kAuto, AggregatePath::kGlobalWarpAggregated,
                               AggregatePath::kGlobalPlain}) {
      for (uint64_t num_keys : {uint64_t{1}, uint64_t{37}, uint64_t{5000}, uint64_t{100000}}) {
        AggregateCase<int32_t, V>(100003, num_keys, op, path);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
    AggregateCase<int64_t, V>(33, 7, op, AggregatePath::kSharedPrivatized);
    if (::testing::Test::HasFatalFailure()) return;
    AggregateCase<uint32_t, V>(kBig, 4096, op, AggregatePath::kSharedPrivatized);
    if (::testing::Test::HasFatalFailure()) return;
    AggregateCase<uint64_t, V>(kBig, 1 << 20, op, AggregatePath::kAuto);
    if (::testing::Test::HasFatalFailure()) return;
    AggregateCase<int32_t, V>(0, 5, op, AggregatePath::kAuto);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CompactionGpu, AggregateByKey) { FOR_EACH_DTYPE(AggregateValues); }

TEST(CompactionGpu, AggregateByKeyOutOfRange) {
  const uint64_t n = 100003, num_keys = 50;
  for (AggregatePath path : {AggregatePath::kSharedPrivatized, AggregatePath::kGlobalWarpAggregated}) {
    std::vector<int32_t> keys(n);
    for (auto& k : keys) k = static_cast<int32_t>(Rng()() % num_keys);
    keys[70001] = -3;
    keys[90000] = 50;
    keys[99999] = 1 << 30;
    std::vector<float> values(n, 1.0f);
    DevBuf<int32_t> d_keys(keys);
    DevBuf<float> d_vals(values);
    DevBuf<float> d_out(num_keys + 4);  // guard after the real outputs
    DevBuf<int64_t> d_bad(1);
    Temp temp;
    CUDA_OK(AggregateByKeyWithPath(nullptr, &temp.bytes, d_keys.p, DType::kInt32, d_vals.p,
                                   DType::kFloat32, n, Op::kSum, num_keys, d_out.p, d_bad.p,
                                   path, nullptr));
    CUDA_OK(temp.Alloc());
    CUDA_OK(AggregateByKeyWithPath(temp.p, &temp.bytes, d_keys.p, DType::kInt32, d_vals.p,
                                   DType::kFloat32, n, Op::kSum, num_keys, d_out.p, d_bad.p,
                                   path, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    ASSERT_EQ(d_bad.Get(1)[0], 70001);
    const auto out = d_out.Get(num_keys + 4);
    for (int g = 0; g < 4; ++g) {
      uint32_t bits;
      std::memcpy(&bits, &out[num_keys + g], 4);
      ASSERT_EQ(bits, 0xA5A5A5A5u) << "wrote out of bounds";
    }
    const auto expect = ref::AggregateByKey<int32_t, float>(
        absl::MakeConstSpan(keys), absl::MakeConstSpan(values), Op::kSum, num_keys);
    ASSERT_FALSE(expect.ok());
    ASSERT_NE(std::string(expect.status().message()).find("keys[70001]"), std::string::npos);
  }
}

// SUM of ones = histogram: cross-check against CUB.
TEST(CompactionGpu, AggregateSumOfOnesMatchesCubHistogram) {
  const uint64_t n = kBig;
  for (int num_keys : {16, 3000, 50000}) {
    std::vector<int32_t> keys(n);
    for (auto& k : keys) k = static_cast<int32_t>(Rng()() % num_keys);
    DevBuf<int32_t> d_keys(keys);
    DevBuf<int32_t> d_ones(std::vector<int32_t>(n, 1));
    DevBuf<int32_t> d_out(num_keys), c_out(num_keys);
    DevBuf<int64_t> d_bad(1);
    Temp temp;
    CUDA_OK(AggregateByKey(nullptr, &temp.bytes, d_keys.p, DType::kInt32, d_ones.p, DType::kInt32,
                           n, Op::kSum, num_keys, d_out.p, d_bad.p, nullptr));
    CUDA_OK(temp.Alloc());
    CUDA_OK(AggregateByKey(temp.p, &temp.bytes, d_keys.p, DType::kInt32, d_ones.p, DType::kInt32,
                           n, Op::kSum, num_keys, d_out.p, d_bad.p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(testing::RunTwoPhase([&](void* t, size_t* b) {
      return testing::CubHistogram(t, b, d_keys.p, n, num_keys, c_out.p, testing::CountFor(n),
                                   nullptr);
    }));
    ASSERT_EQ(d_out.Get(num_keys), c_out.Get(num_keys)) << num_keys;
  }
}

// --------------------------------------------------------------------------
// Device counts (issue 29): GatherCounted, AggregateByKeyCounted,
// AggregateByKeyInOrderCounted against the host-count calls over the first
// count elements.

// The counts each case runs with for max_n: none, one, a few, one ending
// mid-tile (tiles of 8192), max_n - 1, max_n, and past max_n (clamped).
std::vector<uint64_t> CountsFor(uint64_t max_n) {
  const uint64_t mid_tile = max_n > 8192 ? 8192 + 4096 + 1 : max_n / 2 + 1;
  return {0, 1, std::min<uint64_t>(37, max_n), mid_tile, max_n - 1, max_n, max_n + 1000,
          ~uint64_t{0}};
}

void SetCount(const DevBuf<uint64_t>& d_count, uint64_t count) {
  ASSERT_EQ(cudaMemcpy(d_count.p, &count, sizeof(count), cudaMemcpyHostToDevice), cudaSuccess);
}

// Whether every element of got past `valid` still holds the 0xA5 poison.
template <typename T>
bool PoisonedFrom(const std::vector<T>& got, size_t valid) {
  for (size_t i = valid; i < got.size(); ++i) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(&got[i]);
    for (size_t b = 0; b < sizeof(T); ++b) {
      if (bytes[b] != 0xA5) return false;
    }
  }
  return true;
}

template <typename T>
void GatherCountedCase(uint64_t max_n, uint64_t num_values) {
  SCOPED_TRACE("GatherCounted element_size=" + std::to_string(sizeof(T)) +
               " max_n=" + std::to_string(max_n) + " num_values=" + std::to_string(num_values));
  std::vector<T> values(num_values);
  for (auto& v : values) v = static_cast<T>(Rng()() | 1);
  std::vector<int64_t> indices(max_n);
  for (auto& i : indices) i = static_cast<int64_t>(Rng()() % num_values);
  DevBuf<T> d_values(values), d_out(max_n), d_want(max_n);
  DevBuf<int64_t> d_indices(indices), d_bad(1), d_want_bad(1);
  DevBuf<uint64_t> d_count(1);
  for (const uint64_t count : CountsFor(max_n)) {
    SCOPED_TRACE("count=" + std::to_string(count));
    const uint64_t n = std::min(count, max_n);
    d_out.Poison();
    d_bad.Poison();
    SetCount(d_count, count);
    CUDA_OK(GatherCounted(d_values.p, sizeof(T), num_values, d_indices.p, max_n, d_count.p,
                          d_out.p, d_bad.p, nullptr));
    CUDA_OK(Gather(d_values.p, sizeof(T), num_values, d_indices.p, n, d_want.p, d_want_bad.p,
                   nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    ASSERT_EQ(d_bad.Get(1)[0], -1);
    ASSERT_EQ(d_want_bad.Get(1)[0], -1);
    const auto got = d_out.Get(max_n);
    const std::vector<T> head(got.begin(), got.begin() + n);
    ASSERT_TRUE(BitsEqual(head, d_want.Get(n)));
    ASSERT_TRUE(PoisonedFrom(got, n)) << "wrote past the count";
  }
}

// A bad index past the count is never read nor reported; one before it is.
TEST(CompactionGpu, GatherCountedBadIndex) {
  const uint64_t max_n = (3u << 20) + 123, count = 8192 + 4096 + 1, num_values = 1000;
  std::vector<int64_t> indices(max_n);
  for (auto& i : indices) i = static_cast<int64_t>(Rng()() % num_values);
  indices[count] = -1;
  indices[count + 7] = num_values;
  DevBuf<int32_t> d_values(RandVector<int32_t>(num_values)), d_out(max_n);
  DevBuf<int64_t> d_indices(indices), d_bad(1);
  DevBuf<uint64_t> d_count(1);
  SetCount(d_count, count);
  CUDA_OK(GatherCounted(d_values.p, 4, num_values, d_indices.p, max_n, d_count.p, d_out.p,
                        d_bad.p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  ASSERT_EQ(d_bad.Get(1)[0], -1);
  SetCount(d_count, count + 1);
  CUDA_OK(GatherCounted(d_values.p, 4, num_values, d_indices.p, max_n, d_count.p, d_out.p,
                        d_bad.p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  ASSERT_EQ(d_bad.Get(1)[0], static_cast<int64_t>(count));
}

TEST(CompactionGpu, GatherCounted) {
  for (const uint64_t max_n : {uint64_t{1000}, uint64_t{(3u << 20) + 123}}) {
    GatherCountedCase<uint32_t>(max_n, 5000);
    if (HasFatalFailure()) return;
    GatherCountedCase<uint64_t>(max_n, 1u << 20);
    if (HasFatalFailure()) return;
  }
}

// Runs the counted call (AggregateByKeyCounted, or the InOrder one) with the
// count on the device and the host-count call with n = min(count, max_n);
// leaves their outputs in d_out and d_want, their bad positions in d_bad and
// d_want_bad.
template <typename K, typename V>
void RunAggregateCounted(bool in_order, const DevBuf<K>& d_keys, const DevBuf<V>& d_vals,
                         uint64_t max_n, uint64_t count, Op op, uint64_t num_keys,
                         DevBuf<V>& d_out, DevBuf<V>& d_want, DevBuf<int64_t>& d_bad,
                         DevBuf<int64_t>& d_want_bad) {
  DevBuf<uint64_t> d_count(1);
  SetCount(d_count, count);
  d_out.Poison();
  d_want.Poison();
  d_bad.Poison();
  d_want_bad.Poison();
  const auto counted = in_order ? AggregateByKeyInOrderCounted : AggregateByKeyCounted;
  const auto host = in_order ? AggregateByKeyInOrder : AggregateByKey;
  Temp temp;
  // The size query needs no count.
  CUDA_OK(counted(nullptr, &temp.bytes, d_keys.p, DTypeOf<K>(), d_vals.p, DTypeOf<V>(), max_n,
                  nullptr, op, num_keys, d_out.p, d_bad.p, nullptr));
  CUDA_OK(temp.Alloc());
  CUDA_OK(cudaMemset(temp.p, 0xA5, temp.bytes));  // the kernels initialize what they use
  CUDA_OK(counted(temp.p, &temp.bytes, d_keys.p, DTypeOf<K>(), d_vals.p, DTypeOf<V>(), max_n,
                  d_count.p, op, num_keys, d_out.p, d_bad.p, nullptr));
  const uint64_t n = std::min(count, max_n);
  Temp want_temp;
  CUDA_OK(host(nullptr, &want_temp.bytes, d_keys.p, DTypeOf<K>(), d_vals.p, DTypeOf<V>(), n, op,
               num_keys, d_want.p, d_want_bad.p, nullptr));
  CUDA_OK(want_temp.Alloc());
  CUDA_OK(host(want_temp.p, &want_temp.bytes, d_keys.p, DTypeOf<K>(), d_vals.p, DTypeOf<V>(), n,
               op, num_keys, d_want.p, d_want_bad.p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
}

// Values are RandValue's (floats: halves, so SUM is exact in any order; NaN
// and signed zeros): the atomics' results match the host call's up to the
// sign of a zero extreme; the in-order path's, bit for bit.
template <typename K, typename V>
void AggregateCountedCase(bool in_order, uint64_t max_n, uint64_t num_keys, Op op) {
  SCOPED_TRACE(std::string(in_order ? "AggregateByKeyInOrderCounted" : "AggregateByKeyCounted") +
               " keys=" + DTypeName(DTypeOf<K>()) + " values=" + DTypeName(DTypeOf<V>()) +
               " op=" + OpName(op) + " max_n=" + std::to_string(max_n) +
               " num_keys=" + std::to_string(num_keys));
  std::vector<K> keys(max_n);
  for (auto& k : keys) k = static_cast<K>(Rng()() % num_keys);
  DevBuf<K> d_keys(keys);
  DevBuf<V> d_vals(RandVector<V>(max_n));
  DevBuf<V> d_out(num_keys + 4), d_want(num_keys + 4);  // guards after the outputs
  DevBuf<int64_t> d_bad(1), d_want_bad(1);
  for (const uint64_t count : CountsFor(max_n)) {
    SCOPED_TRACE("count=" + std::to_string(count));
    RunAggregateCounted<K, V>(in_order, d_keys, d_vals, max_n, count, op, num_keys, d_out,
                              d_want, d_bad, d_want_bad);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_EQ(d_bad.Get(1)[0], -1);
    ASSERT_EQ(d_want_bad.Get(1)[0], -1);
    const auto got = d_out.Get(num_keys + 4);
    const auto want = d_want.Get(num_keys + 4);
    ASSERT_TRUE(PoisonedFrom(got, num_keys)) << "wrote out of bounds";
    if (in_order) {
      ASSERT_TRUE(BitsEqual(got, want)) << "first difference at key " << FirstBitDiff(got, want);
    } else {
      for (uint64_t k = 0; k < num_keys; ++k) {
        ASSERT_TRUE(CloseEnough(got[k], want[k]))
            << "key " << k << ": got " << got[k] << " want " << want[k];
      }
    }
    if (count == 0) {
      for (uint64_t k = 0; k < num_keys; ++k) {
        ASSERT_TRUE(BitsEqual(std::vector<V>{got[k]}, std::vector<V>{Identity<V>(op)})) << k;
      }
    }
  }
}

template <typename V>
void AggregateCountedValues() {
  for (const bool in_order : {false, true}) {
    for (Op op : {Op::kSum, Op::kMin, Op::kMax}) {
      // One key (the in-order path's plain Reduce), a power of two (the
      // padding key's sorted bits are a valid key's), shared and global
      // atomics; max_n of one tile and of several.
      for (uint64_t num_keys : {uint64_t{1}, uint64_t{64}, uint64_t{37}, uint64_t{100000}}) {
        for (uint64_t max_n : {uint64_t{5000}, uint64_t{(3u << 20) + 123}}) {
          AggregateCountedCase<int32_t, V>(in_order, max_n, num_keys, op);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
      AggregateCountedCase<int64_t, V>(in_order, 100003, 5000, op);
      if (::testing::Test::HasFatalFailure()) return;
      AggregateCountedCase<uint32_t, V>(in_order, 100003, 256, op);
      if (::testing::Test::HasFatalFailure()) return;
      AggregateCountedCase<uint64_t, V>(in_order, 100003, 1000, op);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(CompactionGpu, AggregateByKeyCounted) { FOR_EACH_DTYPE(AggregateCountedValues); }

// Only keys before the count are checked: a bad key at or past it is never
// reported, one before it is (both paths).
TEST(CompactionGpu, AggregateByKeyCountedOutOfRange) {
  const uint64_t max_n = (3u << 20) + 123, count = 8192 + 4096 + 1;
  for (const bool in_order : {false, true}) {
    for (const uint64_t num_keys : {uint64_t{64}, uint64_t{50}}) {
      SCOPED_TRACE(std::string(in_order ? "in order" : "atomics") +
                   " num_keys=" + std::to_string(num_keys));
      std::vector<int32_t> keys(max_n);
      for (auto& k : keys) k = static_cast<int32_t>(Rng()() % num_keys);
      keys[count] = -3;
      keys[count + 5] = static_cast<int32_t>(num_keys);
      keys[max_n - 1] = 1 << 30;
      DevBuf<int32_t> d_keys(keys);
      DevBuf<float> d_vals(RandVector<float>(max_n));
      DevBuf<float> d_out(num_keys + 4), d_want(num_keys + 4);
      DevBuf<int64_t> d_bad(1), d_want_bad(1);
      RunAggregateCounted<int32_t, float>(in_order, d_keys, d_vals, max_n, count, Op::kMax,
                                          num_keys, d_out, d_want, d_bad, d_want_bad);
      if (HasFatalFailure()) return;
      ASSERT_EQ(d_bad.Get(1)[0], -1);
      ASSERT_EQ(d_want_bad.Get(1)[0], -1);
      const auto got = d_out.Get(num_keys + 4);
      ASSERT_TRUE(PoisonedFrom(got, num_keys)) << "wrote out of bounds";
      if (in_order) {
        ASSERT_TRUE(BitsEqual(got, d_want.Get(num_keys + 4)));
      }
      RunAggregateCounted<int32_t, float>(in_order, d_keys, d_vals, max_n, count + 1, Op::kMax,
                                          num_keys, d_out, d_want, d_bad, d_want_bad);
      if (HasFatalFailure()) return;
      ASSERT_EQ(d_bad.Get(1)[0], static_cast<int64_t>(count));
      ASSERT_EQ(d_want_bad.Get(1)[0], static_cast<int64_t>(count));
      ASSERT_TRUE(PoisonedFrom(d_out.Get(num_keys + 4), num_keys)) << "wrote out of bounds";
    }
  }
}

}  // namespace
}  // namespace primserve::gpu

int main(int argc, char** argv) {
  const char* env = std::getenv("PRIMSERVE_SEED");
  primserve::gpu::g_seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::printf("compaction_gpu_test seed: %llu (PRIMSERVE_SEED=%llu repeats it)\n",
              static_cast<unsigned long long>(primserve::gpu::g_seed),
              static_cast<unsigned long long>(primserve::gpu::g_seed));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
