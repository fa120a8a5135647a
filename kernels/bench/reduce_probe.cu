// Reduce experiment (perf/NOTES.md, "Reduce"):
// 1. state: our Reduce SUM and MIN and CUB's Sum over the same 2^28 input,
//    timed in a settled state (nothing freed for a while) in turn, then each
//    of them timed right after 2 GiB (4 GiB for 8-byte types) of device
//    memory was written and freed, as primitives_bench's scan rows leave it
//    before the first reduce row; with and without a wait after the free,
//    and after a write without a free. Per-call times after the free show
//    how long a slow phase lasts.
// 2. variants: the grid-stride reduce kernel (a copy of reduce.cu's for
//    SUM/MIN, no ARG ops) with several tiles' loads issued before they are
//    combined (same fold order, so the same bits), non-coherent loads, and 8
//    blocks per SM, against CUB's Sum and our library call, in the settled
//    state, three rounds, medians. Every variant's result is checked against
//    the library's (bit for bit where the grid is the library's).
// Not part of the library: //kernels/bench:reduce_probe.
//   ./reduce_probe [state] [variants]   (default: both)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/bench/timing.h"
#include "kernels/detail/block.cuh"
#include "kernels/detail/lookback.cuh"
#include "kernels/detail/operators.cuh"
#include "kernels/detail/tuning.cuh"
#include "kernels/reduce.h"
#include "kernels/testing/cub_baseline.h"
#include "kernels/testing/device_helpers.h"

namespace {

using namespace primserve;
using namespace primserve::gpu;
using namespace primserve::gpu::detail;

constexpr int kLogN = 28;

// How the variant kernel loads its 16-byte vectors.
enum class Load { kPlain, kNc, kNcNoAllocate };

__device__ __forceinline__ uint4 LoadVector(const uint4* p, Load load) {
  if (load == Load::kNc) return __ldg(p);
  if (load == Load::kNcNoAllocate) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
  }
  return *p;
}

// reduce.cu's ReduceKernel for SUM/MIN/MAX/PROD, with kTiles tiles loaded
// before any is folded; the fold order per thread is the library's (tile by
// tile, item by item), so the bits are the library's on the same grid.
template <typename T, Op kOp, int kTiles, Load kLoad>
__global__ void __launch_bounds__(kBlockThreads)
    VariantKernel(const T* in, uint64_t n, T* partials, unsigned* ticket, T* out) {
  constexpr int kItems = kBytesPerThread / sizeof(T);
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kTileItems = kBlockThreads * kItems;
  const CombineOp<T, kOp> op{};
  __shared__ BlockScanStorage<T> storage;
  __shared__ bool is_last_block;

  T acc = Neutral<T, kOp>();
  const uint64_t full_tiles = n / kTileItems;
  uint64_t tile = blockIdx.x;
  for (; tile + (kTiles - 1) * uint64_t{gridDim.x} < full_tiles; tile += kTiles * gridDim.x) {
    uint4 v[kTiles][kItems / kVec];
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const uint4* vectors =
          reinterpret_cast<const uint4*>(in + (tile + t * uint64_t{gridDim.x}) * kTileItems);
#pragma unroll
      for (int k = 0; k < kItems / kVec; ++k) {
        v[t][k] = LoadVector(vectors + k * kBlockThreads + threadIdx.x, kLoad);
      }
    }
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
#pragma unroll
      for (int k = 0; k < kItems / kVec; ++k) {
        T x[kVec];
        memcpy(x, &v[t][k], 16);
#pragma unroll
        for (int j = 0; j < kVec; ++j) acc = op(acc, x[j]);
      }
    }
  }
  for (; tile < full_tiles; tile += gridDim.x) {
    const uint4* vectors = reinterpret_cast<const uint4*>(in + tile * kTileItems);
    uint4 v[kItems / kVec];
#pragma unroll
    for (int k = 0; k < kItems / kVec; ++k) {
      v[k] = LoadVector(vectors + k * kBlockThreads + threadIdx.x, kLoad);
    }
#pragma unroll
    for (int k = 0; k < kItems / kVec; ++k) {
      T x[kVec];
      memcpy(x, &v[k], 16);
#pragma unroll
      for (int j = 0; j < kVec; ++j) acc = op(acc, x[j]);
    }
  }
  for (uint64_t i = full_tiles * kTileItems + uint64_t{blockIdx.x} * kBlockThreads + threadIdx.x;
       i < n; i += uint64_t{gridDim.x} * kBlockThreads) {
    acc = op(acc, in[i]);
  }
  acc = BlockReduce(acc, op, storage);
  if (threadIdx.x == 0) {
    StoreCg(partials + blockIdx.x, acc);
    __threadfence();
    is_last_block = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last_block) return;
  __threadfence();
  T total = Neutral<T, kOp>();
  for (unsigned b = threadIdx.x; b < gridDim.x; b += kBlockThreads) {
    total = op(total, LoadCg(partials + b));
  }
  __syncthreads();
  total = BlockReduce(total, op, storage);
  if (threadIdx.x == 0) *out = total;
}

struct Device {
  int sms = 0;
  cudaStream_t stream = nullptr;
};

using Call = std::function<int(cudaStream_t)>;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Settle() {
  BENCH_CHECK(cudaDeviceSynchronize());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
}

// Writes and frees `bytes` of device memory (a benchmark row's outputs).
void WriteAndFree(size_t bytes, bool free_it, void** kept) {
  void* p = nullptr;
  BENCH_CHECK(cudaMalloc(&p, bytes));
  BENCH_CHECK(cudaMemset(p, 0x5a, bytes));
  BENCH_CHECK(cudaDeviceSynchronize());
  if (free_it) {
    BENCH_CHECK(cudaFree(p));
  } else {
    *kept = p;
  }
}

// Times `reps` back-to-back calls, each between events; returns every time.
std::vector<double> Series(const Call& call, int reps, cudaStream_t stream) {
  std::vector<cudaEvent_t> ev(reps + 1);
  for (auto& e : ev) BENCH_CHECK(cudaEventCreate(&e));
  BENCH_CHECK(cudaEventRecord(ev[0], stream));
  for (int i = 0; i < reps; ++i) {
    BENCH_CHECK(call(stream));
    BENCH_CHECK(cudaEventRecord(ev[i + 1], stream));
  }
  BENCH_CHECK(cudaEventSynchronize(ev[reps]));
  std::vector<double> us(reps);
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
    us[i] = ms * 1000;
  }
  for (auto& e : ev) BENCH_CHECK(cudaEventDestroy(e));
  return us;
}

struct Input {
  const char* name;
  DType dtype;
  size_t elem;
  void* in = nullptr;
  void* value = nullptr;
  void* temp = nullptr;
  size_t temp_bytes = 0;
};

Call Ours(Input& x, Op op) {
  return [&x, op](cudaStream_t s) {
    size_t b = x.temp_bytes;
    return Reduce(x.temp, &b, x.in, uint64_t{1} << kLogN, x.dtype, op, x.value, nullptr, s);
  };
}

Call Cub(Input& x) {
  return [&x](cudaStream_t s) {
    size_t b = x.temp_bytes;
    return testing::CubReduce(x.temp, &b, x.in, uint64_t{1} << kLogN, x.dtype, Op::kSum, x.value,
                              nullptr, testing::CubCount::kInt32, s);
  };
}

void PrintSeries(const char* what, const std::vector<double>& us) {
  std::printf("  %-34s median %7.1f us; calls:", what, Median(us));
  for (double u : us) std::printf(" %.0f", u);
  std::printf("\n");
}

void StateProbe(Input& x, const Device& dev) {
  const size_t freed = size_t{2} << 30 << (x.elem == 8 ? 1 : 0);
  std::printf("\n[state] %s 2^%d, freed block %zu MiB\n", x.name, kLogN, freed >> 20);
  const std::vector<std::pair<std::string, Call>> calls = {
      {"ours SUM", Ours(x, Op::kSum)}, {"ours MIN", Ours(x, Op::kMin)}, {"CUB Sum", Cub(x)}};
  // Settled: each call, three rounds, median of 20.
  for (int round = 1; round <= 3; ++round) {
    Settle();
    for (const auto& [name, call] : calls) {
      std::printf("  settled r%d %-10s %7.1f us\n", round, name.c_str(),
                  bench::MedianUs(call, 20, dev.stream));
    }
  }
  // Right after a free; after a free and a 200 ms wait; after a write, no free.
  for (const auto& [name, call] : calls) {
    Settle();
    WriteAndFree(freed, true, nullptr);
    PrintSeries(("after free: " + name).c_str(), Series(call, 60, dev.stream));
  }
  for (const auto& [name, call] : calls) {
    Settle();
    WriteAndFree(freed, true, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    PrintSeries(("free, 200 ms wait: " + name).c_str(), Series(call, 30, dev.stream));
  }
  {
    Settle();
    void* kept = nullptr;
    WriteAndFree(freed, false, &kept);
    PrintSeries("write, no free: ours SUM", Series(calls[0].second, 30, dev.stream));
    BENCH_CHECK(cudaFree(kept));
  }
}

struct Variant {
  std::string name;
  int blocks_per_sm;
  bool same_bits;  // same grid and fold order as the library
  std::function<void(const Input&, int grid, void* partials, unsigned* ticket, cudaStream_t)>
      launch;
};

template <typename T, int kTiles, Load kLoad>
Variant MakeVariant(const char* name, int blocks_per_sm) {
  Variant v;
  v.name = name;
  v.blocks_per_sm = blocks_per_sm;
  v.same_bits = blocks_per_sm == kReduceBlocksPerSm;
  v.launch = [](const Input& x, int grid, void* partials, unsigned* ticket, cudaStream_t s) {
    BENCH_CHECK(cudaMemsetAsync(ticket, 0, sizeof(unsigned), s));
    VariantKernel<T, Op::kSum, kTiles, kLoad><<<grid, kBlockThreads, 0, s>>>(
        static_cast<const T*>(x.in), uint64_t{1} << kLogN, static_cast<T*>(partials), ticket,
        static_cast<T*>(x.value));
    BENCH_CHECK(cudaGetLastError());
  };
  return v;
}

template <typename T>
std::vector<Variant> Variants() {
  return {
      MakeVariant<T, 1, Load::kPlain>("copy of ReduceKernel", 4),
      MakeVariant<T, 2, Load::kPlain>("2 tiles per iteration", 4),
      MakeVariant<T, 4, Load::kPlain>("4 tiles per iteration", 4),
      MakeVariant<T, 1, Load::kNc>("ld.global.nc", 4),
      MakeVariant<T, 2, Load::kNc>("2 tiles, ld.global.nc", 4),
      MakeVariant<T, 1, Load::kNcNoAllocate>("nc.L1::no_allocate", 4),
      MakeVariant<T, 2, Load::kNcNoAllocate>("2 tiles, nc.L1::no_allocate", 4),
      MakeVariant<T, 1, Load::kPlain>("8 blocks/SM", 8),
      MakeVariant<T, 2, Load::kPlain>("8 blocks/SM, 2 tiles", 8),
  };
}

template <typename T>
void VariantProbe(Input& x, const Device& dev) {
  std::printf("\n[variants] %s SUM 2^%d (medians of 3 rounds of median-of-20)\n", x.name, kLogN);
  const std::vector<Variant> variants = Variants<T>();
  void* partials = nullptr;
  unsigned* ticket = nullptr;
  BENCH_CHECK(cudaMalloc(&partials, size_t{8} * dev.sms * 8));
  BENCH_CHECK(cudaMalloc(&ticket, 16));
  // Reference value: the library's.
  T expected{};
  BENCH_CHECK(Ours(x, Op::kSum)(dev.stream));
  BENCH_CHECK(cudaMemcpy(&expected, x.value, sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<bool> ok(variants.size());
  for (size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = variants[i];
    v.launch(x, v.blocks_per_sm * dev.sms, partials, ticket, dev.stream);
    T got{};
    BENCH_CHECK(cudaMemcpy(&got, x.value, sizeof(T), cudaMemcpyDeviceToHost));
    const double rel = std::abs(double(got) - double(expected)) / (std::abs(double(expected)) + 1e-300);
    ok[i] = v.same_bits || std::is_integral_v<T> ? std::memcmp(&got, &expected, sizeof(T)) == 0
                                                 : rel < 1e-5;
  }
  std::vector<std::vector<double>> us(variants.size() + 2);
  for (int round = 0; round < 3; ++round) {
    Settle();
    us[0].push_back(bench::MedianUs(Cub(x), 20, dev.stream));
    us[1].push_back(bench::MedianUs(Ours(x, Op::kSum), 20, dev.stream));
    for (size_t i = 0; i < variants.size(); ++i) {
      const Variant& v = variants[i];
      us[i + 2].push_back(bench::MedianUs(
          [&](cudaStream_t s) {
            v.launch(x, v.blocks_per_sm * dev.sms, partials, ticket, s);
            return 0;
          },
          20, dev.stream));
    }
  }
  const double cub = Median(us[0]);
  auto row = [&](const std::string& name, const std::vector<double>& t, const char* check) {
    std::printf("  %-30s %7.1f us  ours/CUB %.3f  rounds %.1f %.1f %.1f  %s\n", name.c_str(),
                Median(t), cub / Median(t), t[0], t[1], t[2], check);
  };
  row("CUB DeviceReduce::Sum [int]", us[0], "");
  row("library Reduce SUM", us[1], "");
  for (size_t i = 0; i < variants.size(); ++i) {
    row(variants[i].name, us[i + 2],
        ok[i] ? (variants[i].same_bits ? "bits = library" : "value ok") : "MISMATCH");
  }
  BENCH_CHECK(cudaFree(partials));
  BENCH_CHECK(cudaFree(ticket));
}

}  // namespace

int main(int argc, char** argv) {
  bool state = argc < 2, variants = argc < 2;
  for (int i = 1; i < argc; ++i) {
    state |= std::strcmp(argv[i], "state") == 0;
    variants |= std::strcmp(argv[i], "variants") == 0;
  }
  Device dev;
  int device = 0;
  BENCH_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop;
  BENCH_CHECK(cudaGetDeviceProperties(&prop, device));
  dev.sms = prop.multiProcessorCount;
  BENCH_CHECK(cudaStreamCreate(&dev.stream));
  std::printf("device: %s, %d SMs\n", prop.name, dev.sms);

  Input inputs[] = {{"int32", DType::kInt32, 4},
                    {"float32", DType::kFloat32, 4},
                    {"int64", DType::kInt64, 8},
                    {"float64", DType::kFloat64, 8}};
  for (Input& x : inputs) {
    const size_t bytes = x.elem << kLogN;
    BENCH_CHECK(cudaMalloc(&x.in, bytes));
    // Random bits, high bits clear (floats positive and finite), as
    // primitives_bench.
    BENCH_CHECK(testing::FillRandomInt32(static_cast<int32_t*>(x.in), bytes / 4, 17, 30, nullptr));
    BENCH_CHECK(cudaMalloc(&x.value, 16));
    size_t ours = 0, cub = 0;
    BENCH_CHECK(Reduce(nullptr, &ours, x.in, uint64_t{1} << kLogN, x.dtype, Op::kSum, x.value,
                       nullptr, dev.stream));
    BENCH_CHECK(testing::CubReduce(nullptr, &cub, x.in, uint64_t{1} << kLogN, x.dtype, Op::kSum,
                                   x.value, nullptr, testing::CubCount::kInt32, dev.stream));
    x.temp_bytes = std::max(ours, cub);
    BENCH_CHECK(cudaMalloc(&x.temp, x.temp_bytes));
  }
  if (state) {
    StateProbe(inputs[0], dev);
    StateProbe(inputs[3], dev);
  }
  if (variants) {
    VariantProbe<int32_t>(inputs[0], dev);
    VariantProbe<float>(inputs[1], dev);
    VariantProbe<int64_t>(inputs[2], dev);
    VariantProbe<double>(inputs[3], dev);
  }
  return 0;
}
