// Tuning experiment: times the scan kernel (detail/scan_kernel.cuh) under
// several ScanPolicy variants against CUB's fastest calls (InclusiveSum,
// ExclusiveSum, InclusiveScan(cuda::maximum<>)) and a device-to-device
// memcpy, for int32, float32, int64 and float64, and checks every variant's
// output (inclusive and exclusive, poisoned before each checked run) against
// a host reference on fresh random data:
//   - integers: exactly (SUM wraps; MAX on data whose running max keeps
//     changing);
//   - float32/float64 SUM: inputs in {0, 1}, so every prefix is an integer:
//     exact wherever the prefix fits the mantissa (float64 always, float32 up
//     to 2^24), else within 1e-3 relative; and float SUM variants with the
//     default tile shape must give the first (OLD) variant's bits (the in-order
//     look-back makes the bits a function of the input and the tile shape).
// Not part of the library: //kernels/bench:scan_variants.
//   ./scan_variants [--ab] [log2n ...]      (default: 16 20 24 28)
// --ab: only the OLD policy (before issue 13), the DEFAULT (tuning.cuh) and
// the no-look-back diagnostic.
// Findings: perf/NOTES.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/detail/scan_kernel.cuh"
#include "kernels/testing/cub_baseline.h"
#include "kernels/bench/timing.h"

namespace {

using namespace primserve;
using namespace primserve::gpu;
using namespace primserve::gpu::detail;

using bench::MedianUs;

using RunFn = std::function<int(void*, size_t*, const void*, void*, uint64_t, bool, cudaStream_t)>;

struct Variant {
  std::string name;
  bool diagnostic;  // results are wrong by design
  int tile_items;
  bool default_shape;  // same tile shape as DefaultScanPolicy
  RunFn run;
  cudaFuncAttributes attr;
  int blocks_per_sm;
};

template <typename T, Op kOp, typename Policy, bool kSkip = false>
Variant Make(const char* name) {
  Variant v;
  v.name = name;
  v.diagnostic = kSkip;
  using Config = ScanConfig<T, kOp, false, Policy>;
  using DefaultConfig = ScanConfig<T, kOp, false, DefaultScanPolicy>;
  v.tile_items = Config::kTileItems;
  v.default_shape = Config::kTileItems == DefaultConfig::kTileItems &&
                    Config::kThreads == DefaultConfig::kThreads;
  v.run = [](void* t, size_t* s, const void* in, void* out, uint64_t n, bool exclusive,
             cudaStream_t st) -> int {
    return LaunchScan<T, kOp, false, Policy, kSkip, T>(t, s, static_cast<const T*>(in),
                                                    static_cast<T*>(out), n, nullptr, 0,
                                                    exclusive, nullptr, nullptr, st);
  };
  const auto kernel = ScanKernel<T, kOp, false, Policy, kSkip>;
  BENCH_CHECK(cudaFuncGetAttributes(&v.attr, kernel));
  BENCH_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v.blocks_per_sm, kernel,
                                                            Policy::kThreads, 0));
  return v;
}

// Look-back policies. Lb: the current scan's (8..64 ns doubling polling).
// LbD<init, poll, nearest_first>: in large launches (>= 512 tiles) sleep
// `init` ns after publishing A, then poll every `poll` ns (CUB's
// fixed_delay_constructor: its sm_90 int32 sum tuning is 1245 ns then 648,
// float 1140/688, int64 1290/632); smaller launches keep the doubling.
// Sweep 1 (2026-11-25, H100, perf/runs/2026-11-25-h100-kernels-issue13-sweep/sweep1.log)
// also had 128x24 and 224x24 tiles (CUB's shapes: slower here), an
// initial delay with the doubling poll, and relaxed.gpu status accesses.
using Lb = LookbackPolicy<1, 8, 64>;
template <unsigned kInit, unsigned kPoll, bool kNearestFirst = false>
using LbD = LookbackPolicy<1, 8, 64, true, true, kInit, false, kPoll, kNearestFirst>;

// ScanPolicy<threads, input bytes per thread, value bytes, min blocks/SM,
// look-back, tile = blockIdx.x>. 256 x 128 bytes: 8192 4-byte items or
// 4096 8-byte items per tile (the default shape).
template <typename L, bool kBid, int kMinBlocks = 1>
using P = ScanPolicy<256, 128, 128, kMinBlocks, L, kBid>;
// The scan's policy before issue 13's look-back change (for the A/B).
using OldScanPolicy = ScanPolicy<256, 128, 128, 1, LookbackPolicy<1, 8, 64>>;

template <typename T, Op kOp>
std::vector<Variant> Variants() {
  if constexpr (sizeof(T) == 4 && kOp == Op::kSum) {
    return {
        Make<T, kOp, OldScanPolicy>("OLD 256x32"),
        Make<T, kOp, DefaultScanPolicy>("DEFAULT (tuning.cuh)"),
        Make<T, kOp, P<LbD<1000, 600>, true>>("bid d1000/600"),
        Make<T, kOp, P<LbD<1500, 800>, true>>("bid d1500/800"),
        Make<T, kOp, P<LbD<2000, 1000>, true>>("bid d2000/1000"),
        Make<T, kOp, P<LbD<1000, 1000>, true>>("bid d1000/1000"),
        Make<T, kOp, P<LbD<1500, 500>, true>>("bid d1500/500"),
        Make<T, kOp, P<LbD<1000, 300, true>, true>>("bid d1000/300 nf"),
        Make<T, kOp, P<LbD<1000, 600, true>, true>>("bid d1000/600 nf"),
        Make<T, kOp, P<LbD<1000, 600>, false>>("atomic d1000/600"),
        Make<T, kOp, P<LbD<1500, 800>, false>>("atomic d1500/800"),
        Make<T, kOp, P<LbD<1000, 600, true>, false>>("atomic d1000/600 nf"),
        Make<T, kOp, P<Lb, true>, true>("DIAG bid no-lookback"),
    };
  } else if constexpr (sizeof(T) == 4) {  // MAX
    return {
        Make<T, kOp, OldScanPolicy>("OLD 256x32"),
        Make<T, kOp, DefaultScanPolicy>("DEFAULT (tuning.cuh)"),
        Make<T, kOp, P<LbD<1000, 600>, true>>("bid d1000/600"),
        Make<T, kOp, P<LbD<1500, 800>, true>>("bid d1500/800"),
        Make<T, kOp, P<LbD<1000, 600>, false>>("atomic d1000/600"),
    };
  } else if constexpr (kOp == Op::kSum) {
    return {
        Make<T, kOp, OldScanPolicy>("OLD 256x16"),
        Make<T, kOp, DefaultScanPolicy>("DEFAULT (tuning.cuh)"),
        Make<T, kOp, P<Lb, false, 4>>("mb4"),
        Make<T, kOp, P<LbD<1000, 600>, true, 4>>("bid d1000/600 mb4"),
        Make<T, kOp, P<LbD<1500, 800>, true, 4>>("bid d1500/800 mb4"),
        Make<T, kOp, P<LbD<2000, 1000>, true, 4>>("bid d2000/1000 mb4"),
        Make<T, kOp, P<LbD<1000, 1000>, true, 4>>("bid d1000/1000 mb4"),
        Make<T, kOp, P<LbD<1000, 600, true>, true, 4>>("bid d1000/600 nf mb4"),
        Make<T, kOp, P<LbD<1000, 600>, false, 4>>("atomic d1000/600 mb4"),
        Make<T, kOp, P<LbD<1500, 800>, false, 4>>("atomic d1500/800 mb4"),
        Make<T, kOp, P<Lb, true, 4>, true>("DIAG bid no-lookback mb4"),
    };
  } else {  // 8-byte MAX
    return {
        Make<T, kOp, OldScanPolicy>("OLD 256x16"),
        Make<T, kOp, DefaultScanPolicy>("DEFAULT (tuning.cuh)"),
        Make<T, kOp, P<LbD<1000, 600>, false, 3>>("atomic d1000/600 mb3"),
        Make<T, kOp, P<LbD<1000, 600>, false, 4>>("atomic d1000/600 mb4"),
        Make<T, kOp, P<LbD<1000, 600>, true, 4>>("bid d1000/600 mb4"),
        Make<T, kOp, ScanPolicy<256, 96, 96, 4, LbD<1000, 600>, false>>("256x12 atomic d1000/600 mb4"),
    };
  }
}

__host__ __device__ inline uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// SUM: integers of random bits (the sums wrap), floats 0 or 1. MAX: a random
// value in [0, i], so the running maximum keeps changing.
template <typename T>
__global__ void FillKernel(T* out, uint64_t n, uint64_t seed, bool for_max) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t r = Mix(i ^ (seed << 40) ^ seed);
    if (for_max) {
      out[i] = static_cast<T>(r % (i + 1));
    } else if constexpr (std::is_floating_point_v<T>) {
      out[i] = static_cast<T>(r & 1);
    } else {
      using U = std::make_unsigned_t<T>;
      const U u = static_cast<U>(r);
      T t;
      std::memcpy(&t, &u, sizeof(T));
      out[i] = t;
    }
  }
}

template <typename T>
const char* DTypeName() {
  if constexpr (std::is_same_v<T, int32_t>) return "int32";
  if constexpr (std::is_same_v<T, float>) return "float32";
  if constexpr (std::is_same_v<T, int64_t>) return "int64";
  return "float64";
}
template <typename T>
DType DTypeOf() {
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  return DType::kFloat64;
}

// Host reference, inclusive, in T's own arithmetic (wrapping for integers,
// IEEE max) or, for float SUM, exactly in double.
template <typename T, Op kOp>
std::vector<double> FloatRef(const T* in, uint64_t n) {
  std::vector<double> ref(n);
  double acc = 0;
  for (uint64_t i = 0; i < n; ++i) ref[i] = acc += static_cast<double>(in[i]);
  return ref;
}

// Number of wrong outputs (first few printed).
template <typename T, Op kOp>
uint64_t Check(const T* in, const T* out, uint64_t n, bool exclusive,
               const std::vector<double>& float_ref, const char* what) {
  uint64_t bad = 0;
  T acc = Identity<T>(kOp);
  for (uint64_t i = 0; i < n; ++i) {
    bool ok;
    if constexpr (std::is_floating_point_v<T> && kOp == Op::kSum) {
      const double want = exclusive ? (i == 0 ? 0.0 : float_ref[i - 1]) : float_ref[i];
      const double got = static_cast<double>(out[i]);
      const bool exact = std::is_same_v<T, double> || want <= 16777216.0;
      ok = exact ? got == want : std::fabs(got - want) <= 1e-3 * want;
      if (exclusive && i == 0) ok = out[i] == T(0);  // +0 or -0
    } else {
      T want;
      if (exclusive) {
        want = acc;
        acc = Combine(kOp, acc, in[i]);
      } else {
        acc = Combine(kOp, acc, in[i]);
        want = acc;
      }
      ok = std::memcmp(&want, &out[i], sizeof(T)) == 0;
      if (!ok && bad < 3) {
        std::fprintf(stderr, "  %s: out[%llu] = %lld, want %lld\n", what,
                     static_cast<unsigned long long>(i), static_cast<long long>(out[i]),
                     static_cast<long long>(want));
      }
    }
    if (!ok) ++bad;
  }
  return bad;
}

// --ab: only OLD, DEFAULT and DIAG variants (the A/B of a change to tuning.cuh).
bool g_ab_only = false;

template <typename T, Op kOp>
void Sweep(const std::vector<int>& sizes, cudaStream_t stream, uint64_t* total_bad) {
  auto variants = Variants<T, kOp>();
  if (g_ab_only) {
    std::vector<Variant> kept;
    for (Variant& v : variants) {
      if (v.name.rfind("OLD", 0) == 0 || v.name.rfind("DEFAULT", 0) == 0 ||
          v.name.rfind("DIAG", 0) == 0) {
        kept.push_back(std::move(v));
      }
    }
    variants = std::move(kept);
  }
  const DType dtype = DTypeOf<T>();
  for (const Variant& v : variants) {
    std::printf("# %-30s %-8s %s tile %6d items, %3d regs, %4zu B local, %2d blocks/SM\n",
                v.name.c_str(), DTypeName<T>(), kOp == Op::kSum ? "SUM" : "MAX", v.tile_items,
                v.attr.numRegs, v.attr.localSizeBytes, v.blocks_per_sm);
  }
  for (const int log2n : sizes) {
    const uint64_t n = uint64_t{1} << log2n;
    const size_t bytes = n * sizeof(T);
    void *in, *out, *cub_out;
    BENCH_CHECK(cudaMalloc(&in, bytes));
    BENCH_CHECK(cudaMalloc(&out, bytes));
    BENCH_CHECK(cudaMalloc(&cub_out, bytes));
    static uint64_t seed = 12345;
    seed = Mix(seed + log2n);
    FillKernel<T><<<1024, 256, 0, stream>>>(static_cast<T*>(in), n, seed, kOp == Op::kMax);
    BENCH_CHECK(cudaGetLastError());
    T *h_in, *h_out, *h_default;
    BENCH_CHECK(cudaMallocHost(&h_in, bytes));
    BENCH_CHECK(cudaMallocHost(&h_out, bytes));
    BENCH_CHECK(cudaMallocHost(&h_default, bytes));
    BENCH_CHECK(cudaMemcpyAsync(h_in, in, bytes, cudaMemcpyDeviceToHost, stream));
    BENCH_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> float_ref;
    if constexpr (std::is_floating_point_v<T> && kOp == Op::kSum) {
      float_ref = FloatRef<T, kOp>(h_in, n);
    }
    const int reps = log2n <= 20 ? 200 : log2n <= 26 ? 50 : 20;
    const double memcpy_us = MedianUs(
        [&](cudaStream_t st) {
          return cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, st);
        },
        reps, stream);
    for (const bool exclusive : {false, true}) {
      if (kOp == Op::kMax && exclusive) continue;
      size_t cub_bytes = 0;
      const auto count = testing::CountFor(n);
      BENCH_CHECK(testing::CubScan(nullptr, &cub_bytes, in, cub_out, n, dtype, kOp, exclusive,
                                   count, nullptr));
      void* cub_temp;
      BENCH_CHECK(cudaMalloc(&cub_temp, std::max<size_t>(cub_bytes, 16)));
      const double cub_us = MedianUs(
          [&](cudaStream_t st) {
            size_t s = cub_bytes;
            return testing::CubScan(cub_temp, &s, in, cub_out, n, dtype, kOp, exclusive, count,
                                    st);
          },
          reps, stream);
      BENCH_CHECK(cudaFree(cub_temp));
      bool have_default = false;
      for (const Variant& v : variants) {
        size_t temp_bytes = 0;
        BENCH_CHECK(v.run(nullptr, &temp_bytes, in, out, n, exclusive, stream));
        void* temp;
        BENCH_CHECK(cudaMalloc(&temp, temp_bytes));
        std::string check = "-";
        // Checked run: output poisoned first.
        BENCH_CHECK(cudaMemsetAsync(out, 0xAB, bytes, stream));
        {
          size_t s = temp_bytes;
          BENCH_CHECK(v.run(temp, &s, in, out, n, exclusive, stream));
          BENCH_CHECK(cudaGetLastError());
        }
        BENCH_CHECK(cudaMemcpyAsync(h_out, out, bytes, cudaMemcpyDeviceToHost, stream));
        BENCH_CHECK(cudaStreamSynchronize(stream));
        if (!v.diagnostic) {
          const std::string what = v.name + " " + DTypeName<T>() + " 2^" + std::to_string(log2n) +
                                   (exclusive ? " excl" : " incl");
          uint64_t bad = Check<T, kOp>(h_in, h_out, n, exclusive, float_ref, what.c_str());
          uint64_t bits_differ = 0;
          if constexpr (std::is_floating_point_v<T> && kOp == Op::kSum) {
            if (!have_default) {
              std::memcpy(h_default, h_out, bytes);  // the first variant (OLD)
              have_default = true;
            } else if (v.default_shape) {
              for (uint64_t i = 0; i < n; ++i) {
                bits_differ += std::memcmp(&h_out[i], &h_default[i], sizeof(T)) != 0;
              }
            }
          }
          check = bad == 0 && bits_differ == 0 ? "ok"
                                               : "BAD " + std::to_string(bad) + " bits " +
                                                     std::to_string(bits_differ);
          *total_bad += bad + bits_differ;
        }
        const double us = MedianUs(
            [&](cudaStream_t st) {
              size_t s = temp_bytes;
              return v.run(temp, &s, in, out, n, exclusive, st);
            },
            reps, stream);
        BENCH_CHECK(cudaFree(temp));
        std::printf("%-30s %-8s %-4s %-4s %5d %10.2f %10.2f %10.2f %8.3f %8.3f  %s\n",
                    v.name.c_str(), DTypeName<T>(), kOp == Op::kSum ? "SUM" : "MAX",
                    exclusive ? "excl" : "incl", log2n, us, cub_us, memcpy_us, cub_us / us,
                    memcpy_us / us, check.c_str());
        std::fflush(stdout);
      }
    }
    BENCH_CHECK(cudaFreeHost(h_in));
    BENCH_CHECK(cudaFreeHost(h_out));
    BENCH_CHECK(cudaFreeHost(h_default));
    BENCH_CHECK(cudaFree(in));
    BENCH_CHECK(cudaFree(out));
    BENCH_CHECK(cudaFree(cub_out));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--ab") {
      g_ab_only = true;
    } else {
      sizes.push_back(std::atoi(argv[i]));
    }
  }
  if (sizes.empty()) sizes = {16, 20, 24, 28};
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreate(&stream));
  std::printf("%-30s %-8s %-4s %-4s %5s %10s %10s %10s %8s %8s  %s\n", "variant", "dtype", "op",
              "kind", "log2n", "ours_us", "cub_us", "memcpy_us", "vs_cub", "vs_mcpy", "check");
  uint64_t bad = 0;
  Sweep<int32_t, Op::kSum>(sizes, stream, &bad);
  Sweep<float, Op::kSum>(sizes, stream, &bad);
  Sweep<int32_t, Op::kMax>(sizes, stream, &bad);
  Sweep<int64_t, Op::kSum>(sizes, stream, &bad);
  Sweep<double, Op::kSum>(sizes, stream, &bad);
  Sweep<int64_t, Op::kMax>(sizes, stream, &bad);
  std::printf("wrong outputs in total: %llu\n", static_cast<unsigned long long>(bad));
  return bad == 0 ? 0 : 1;
}
