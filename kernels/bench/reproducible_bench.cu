// What reproducible float sums cost (issue 18): the in-order look-back (the
// library's float SUM scans and segmented reduces) next to the same kernels
// with the timing-dependent tree look-back (the fastest non-reproducible
// version, built here with LookbackPolicy's kFixedOrder = false), CUB's
// fastest call (int and int64 counts, the faster kept), and memcpy; and the
// in-order AggregateByKey next to the atomic one. CUDA events, warm-up,
// medians. Every reproducible row is also run twice more and its output
// compared bit for bit with its first run ("same bits").
//   ./reproducible_bench [log2n ...]     (default: 20 24 28)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/aggregate.h"
#include "kernels/detail/scan_kernel.cuh"
#include "kernels/reduce.h"
#include "kernels/runs.h"
#include "kernels/select.h"
#include "kernels/testing/cub_baseline.h"
#include "kernels/bench/timing.h"
#include "kernels/testing/device_helpers.h"

namespace {

using namespace primserve;
using namespace primserve::gpu;
using namespace primserve::gpu::detail;

using Call = std::function<int(cudaStream_t)>;

using bench::MedianUs;

// x[i] in [-1, 1) times 10^[-3, 3): sums whose bits depend on the association.
template <typename T>
__global__ void FillKernel(T* x, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
    const double v = static_cast<double>((h * 0x94d049bb133111ebull) >> 11) * 0x1.0p-53;
    x[i] = static_cast<T>((2 * u - 1) * exp10(6 * v - 3));
  }
}

__global__ void FillKeysKernel(int32_t* k, uint64_t n, uint32_t num_keys) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint64_t h = (i + 7) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    k[i] = static_cast<int32_t>(h % num_keys);
  }
}

using TreePolicy = ScanPolicy<DefaultScanPolicy::kThreads, DefaultScanPolicy::kBytesPerThread,
                              DefaultScanPolicy::kValueBytesPerThread,
                              DefaultScanPolicy::kMinBlocksPerSm,
                              LookbackPolicy<1, DefaultScanPolicy::Lookback::kFirstSleepNs,
                                             DefaultScanPolicy::Lookback::kMaxSleepNs,
                                             DefaultScanPolicy::Lookback::kWaitAll, false,
                                             DefaultScanPolicy::Lookback::kInitialDelayNs,
                                             DefaultScanPolicy::Lookback::kRelaxed,
                                             DefaultScanPolicy::Lookback::kPollNs>>;

// Times call with temp storage from its size query; returns the median.
double TimeTwoPhase(const std::function<int(void*, size_t*, cudaStream_t)>& f, int reps,
                    cudaStream_t stream) {
  size_t bytes = 0;
  BENCH_CHECK(f(nullptr, &bytes, stream));
  void* temp;
  BENCH_CHECK(cudaMalloc(&temp, std::max<size_t>(bytes, 16)));
  const double us = MedianUs([&](cudaStream_t st) { size_t b = bytes; return f(temp, &b, st); },
                             reps, stream);
  BENCH_CHECK(cudaFree(temp));
  return us;
}

// Runs f twice more into out (poisoned first) and compares with `first`.
const char* SameBits(const Call& f, void* out, size_t bytes, cudaStream_t stream) {
  std::vector<char> first(bytes), again(bytes);
  BENCH_CHECK(cudaStreamSynchronize(stream));
  BENCH_CHECK(cudaMemcpy(first.data(), out, bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 2; ++i) {
    BENCH_CHECK(cudaMemsetAsync(out, 0xAB, bytes, stream));
    BENCH_CHECK(f(stream));
    BENCH_CHECK(cudaStreamSynchronize(stream));
    BENCH_CHECK(cudaMemcpy(again.data(), out, bytes, cudaMemcpyDeviceToHost));
    if (first != again) return "DIFFER";
  }
  return "same";
}

void Row(const char* what, const char* dtype, int log2n, double ours_us, double base_us,
         const char* base, double cub_us, const char* cub_call, double memcpy_us,
         const char* bits) {
  std::printf("%-26s %-8s %5d %10.2f %10.2f %-22s %7.3f %10.2f %-30s %7.3f %8.3f %s\n", what, dtype,
              log2n, ours_us, base_us, base, base_us / ours_us, cub_us, cub_call,
              cub_us / ours_us, memcpy_us / ours_us, bits);
  std::fflush(stdout);
}

template <typename T>
void Bench(int log2n, cudaStream_t stream) {
  const uint64_t n = uint64_t{1} << log2n;
  const size_t bytes = n * sizeof(T);
  const DType dtype = std::is_same_v<T, float> ? DType::kFloat32 : DType::kFloat64;
  const char* name = std::is_same_v<T, float> ? "float32" : "float64";
  T *in, *out;
  BENCH_CHECK(cudaMalloc(&in, bytes));
  BENCH_CHECK(cudaMalloc(&out, bytes));
  FillKernel<T><<<1024, 256, 0, stream>>>(in, n, 17 + log2n);
  BENCH_CHECK(cudaGetLastError());
  const int reps = log2n <= 20 ? 200 : log2n <= 24 ? 50 : 20;
  const double memcpy_us = MedianUs(
      [&](cudaStream_t st) { return cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, st); },
      reps, stream);
  auto cub_best = [&](auto&& f) {
    return std::min(TimeTwoPhase([&](void* t, size_t* b, cudaStream_t s) {
                                   return f(t, b, testing::CubCount::kInt64, s);
                                 }, reps, stream),
                    n < (uint64_t{1} << 31)
                        ? TimeTwoPhase([&](void* t, size_t* b, cudaStream_t s) {
                                         return f(t, b, testing::CubCount::kInt32, s);
                                       }, reps, stream)
                        : 1e30);
  };

  // Scan: in order (the library) vs tree vs CUB InclusiveSum.
  auto scan = [&](auto policy_tag) {
    using Policy = decltype(policy_tag);
    return [=](void* t, size_t* b, cudaStream_t s) {
      return LaunchScan<T, Op::kSum, false, Policy, false, T>(t, b, in, out, n, nullptr, 0, false, nullptr,
                                                    nullptr, s);
    };
  };
  const double tree_us = TimeTwoPhase(scan(TreePolicy{}), reps, stream);
  const double ordered_us = TimeTwoPhase(scan(DefaultScanPolicy{}), reps, stream);
  size_t scan_bytes = 0;
  BENCH_CHECK(scan(DefaultScanPolicy{})(nullptr, &scan_bytes, stream));
  void* scan_temp;
  BENCH_CHECK(cudaMalloc(&scan_temp, scan_bytes));
  const char* scan_bits = SameBits(
      [&](cudaStream_t s) { size_t b = scan_bytes; return scan(DefaultScanPolicy{})(scan_temp, &b, s); },
      out, bytes, stream);
  BENCH_CHECK(cudaFree(scan_temp));
  const double cub_scan_us = cub_best([&](void* t, size_t* b, testing::CubCount c, cudaStream_t s) {
    return testing::CubScan(t, b, in, out, n, dtype, Op::kSum, false, c, s);
  });
  Row("scan_inclusive_sum", name, log2n, ordered_us, tree_us, "tree look-back", cub_scan_us,
      "DeviceScan::InclusiveSum", memcpy_us, scan_bits);

  // Reduce: the server's path (SegmentedReduce, one segment, in order) vs
  // our plain Reduce kernel (fixed grid-stride tree) vs CUB Sum.
  uint64_t zero = 0;
  uint64_t* d_start;
  BENCH_CHECK(cudaMalloc(&d_start, sizeof(uint64_t)));
  BENCH_CHECK(cudaMemcpy(d_start, &zero, sizeof(uint64_t), cudaMemcpyHostToDevice));
  auto segreduce = [&](void* t, size_t* b, cudaStream_t s) {
    return SegmentedReduce(t, b, in, n, d_start, 1, dtype, Op::kSum, out, nullptr, s);
  };
  const double seg_us = TimeTwoPhase(segreduce, reps, stream);
  size_t seg_bytes = 0;
  BENCH_CHECK(segreduce(nullptr, &seg_bytes, stream));
  void* seg_temp;
  BENCH_CHECK(cudaMalloc(&seg_temp, seg_bytes));
  const char* seg_bits = SameBits(
      [&](cudaStream_t s) { size_t b = seg_bytes; return segreduce(seg_temp, &b, s); }, out,
      sizeof(T), stream);
  BENCH_CHECK(cudaFree(seg_temp));
  const double plain_us = TimeTwoPhase(
      [&](void* t, size_t* b, cudaStream_t s) {
        return Reduce(t, b, in, n, dtype, Op::kSum, out, nullptr, s);
      },
      reps, stream);
  const double cub_reduce_us = cub_best([&](void* t, size_t* b, testing::CubCount c, cudaStream_t s) {
    return testing::CubReduce(t, b, in, n, dtype, Op::kSum, out, nullptr, c, s);
  });
  Row("reduce_sum (segmented)", name, log2n, seg_us, plain_us, "plain Reduce kernel", cub_reduce_us,
      "DeviceReduce::Sum", memcpy_us / 2, seg_bits);

  // ReduceByKey SUM over int32 keys in runs of 16: in order vs the tree
  // look-back (ReduceByKeyUnordered) vs CUB.
  {
    int32_t* keys;
    uint64_t* runs;
    void* keys_out;
    BENCH_CHECK(cudaMalloc(&keys, n * sizeof(int32_t)));
    BENCH_CHECK(cudaMalloc(&runs, 2 * sizeof(uint64_t)));
    BENCH_CHECK(cudaMalloc(&keys_out, n * sizeof(int32_t)));
    BENCH_CHECK(testing::FillRuns(keys, DType::kInt32, n, 16, stream));
    auto rbk = [&](bool in_order) {
      return [=](void* t, size_t* b, cudaStream_t s) {
        return (in_order ? ReduceByKey : ReduceByKeyUnordered)(
            t, b, keys, DType::kInt32, in, dtype, n, Op::kSum, keys_out, out, runs, s);
      };
    };
    const double unordered = TimeTwoPhase(rbk(false), reps, stream);
    const double ordered = TimeTwoPhase(rbk(true), reps, stream);
    size_t rbk_bytes = 0;
    BENCH_CHECK(rbk(true)(nullptr, &rbk_bytes, stream));
    void* rbk_temp;
    BENCH_CHECK(cudaMalloc(&rbk_temp, rbk_bytes));
    const char* rbk_bits = SameBits(
        [&](cudaStream_t s) { size_t b = rbk_bytes; return rbk(true)(rbk_temp, &b, s); }, out,
        n / 16 * sizeof(T), stream);
    BENCH_CHECK(cudaFree(rbk_temp));
    const double cub_us = cub_best([&](void* t, size_t* b, testing::CubCount c, cudaStream_t s) {
      return testing::CubReduceByKey(t, b, keys, DType::kInt32, in, dtype, n, Op::kSum, keys_out,
                                     out, runs + 1, c, s);
    });
    Row("rbk_sum_runs16", name, log2n, ordered, unordered, "ReduceByKeyUnordered", cub_us,
        "DeviceReduce::ReduceByKey(plus)", memcpy_us, rbk_bits);
    BENCH_CHECK(cudaFree(keys));
    BENCH_CHECK(cudaFree(runs));
    BENCH_CHECK(cudaFree(keys_out));
  }

  // AggregateByKey SUM: in order (sort + SegmentedReduce) vs atomics.
  if (log2n <= 24) {
    int32_t* keys;
    int64_t* bad;
    BENCH_CHECK(cudaMalloc(&keys, n * sizeof(int32_t)));
    BENCH_CHECK(cudaMalloc(&bad, sizeof(int64_t)));
    for (uint32_t num_keys : {1000u, 1000000u}) {
      FillKeysKernel<<<1024, 256, 0, stream>>>(keys, n, num_keys);
      BENCH_CHECK(cudaGetLastError());
      auto in_order = [&](void* t, size_t* b, cudaStream_t s) {
        return AggregateByKeyInOrder(t, b, keys, DType::kInt32, in, dtype, n, Op::kSum, num_keys,
                                     out, bad, s);
      };
      const double ordered = TimeTwoPhase(in_order, reps, stream);
      const double atomic = TimeTwoPhase(
          [&](void* t, size_t* b, cudaStream_t s) {
            return AggregateByKey(t, b, keys, DType::kInt32, in, dtype, n, Op::kSum, num_keys, out,
                                  bad, s);
          },
          reps, stream);
      size_t agg_bytes = 0;
      BENCH_CHECK(in_order(nullptr, &agg_bytes, stream));
      void* agg_temp;
      BENCH_CHECK(cudaMalloc(&agg_temp, agg_bytes));
      const char* agg_bits = SameBits(
          [&](cudaStream_t s) { size_t b = agg_bytes; return in_order(agg_temp, &b, s); }, out,
          num_keys * sizeof(T), stream);
      BENCH_CHECK(cudaFree(agg_temp));
      const std::string what = "aggregate_sum k=" + std::to_string(num_keys);
      Row(what.c_str(), name, log2n, ordered, atomic, "atomics (kAuto)", 0, "-", memcpy_us / 2,
          agg_bits);
    }
    BENCH_CHECK(cudaFree(keys));
    BENCH_CHECK(cudaFree(bad));
  }
  BENCH_CHECK(cudaFree(d_start));
  BENCH_CHECK(cudaFree(in));
  BENCH_CHECK(cudaFree(out));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {20, 24, 28};
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  std::printf("ours = the reproducible (in-order) version; base = the fastest non-reproducible "
              "one; x = base_us / ours_us (>1: ours faster); memcpy: read+write copy of the "
              "input (reduce/aggregate rows: half of it, a read's time)\n");
  std::printf("%-26s %-8s %5s %10s %10s %-22s %7s %10s %-30s %7s %8s %s\n", "row", "dtype",
              "log2n", "ours_us", "base_us", "base", "x_base", "cub_us", "cub_call", "x_cub",
              "x_mcpy", "bits");
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreate(&stream));
  for (const int log2n : sizes) {
    Bench<float>(log2n, stream);
    Bench<double>(log2n, stream);
  }
  return 0;
}
