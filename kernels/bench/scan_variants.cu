// Tuning experiment: times the scan kernel (detail/scan_kernel.cuh) under
// several ScanPolicy variants against CUB and a device-to-device memcpy, and
// checks each variant's output against CUB (int32 exactly). Not part of the
// library: //kernels/bench:scan_variants, packed by tools/pack_gpu.sh.
//   ./scan_variants [log2n ...]      (default: 16 20 24 28)
// Findings so far: kernels/NOTES.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/detail/scan_kernel.cuh"
#include "kernels/testing/cub_baseline.h"
#include "kernels/bench/timing.h"
#include "kernels/testing/device_helpers.h"

namespace {

using namespace primserve;
using namespace primserve::gpu;
using namespace primserve::gpu::detail;

using bench::MedianUs;

struct Variant {
  std::string name;
  bool diagnostic;  // results are wrong by design
  std::function<int(void*, size_t*, const void*, void*, uint64_t, DType, cudaStream_t)> run;
};

template <typename Policy, bool kSkip = false>
Variant Make(const char* name) {
  return Variant{name, kSkip,
                 [](void* t, size_t* s, const void* in, void* out, uint64_t n, DType dtype,
                    cudaStream_t st) -> int {
                   if (dtype == DType::kInt32) {
                     return LaunchScan<int32_t, Op::kSum, false, Policy, kSkip>(
                         t, s, static_cast<const int32_t*>(in), static_cast<int32_t*>(out), n,
                         nullptr, 0, false, nullptr, nullptr, st);
                   }
                   return LaunchScan<float, Op::kSum, false, Policy, kSkip>(
                       t, s, static_cast<const float*>(in), static_cast<float*>(out), n,
                       nullptr, 0, false, nullptr, nullptr, st);
                 }};
}

template <int kSlots, unsigned kFirst = kLookbackFirstSleepNs, unsigned kMax = kLookbackMaxSleepNs,
          bool kWaitAll = true>
using LB = LookbackPolicy<kSlots, kFirst, kMax, kWaitAll>;

std::vector<Variant> Variants() {
  return {
      Make<DefaultScanPolicy>("DEFAULT (tuning.cuh)"),
      Make<ScanPolicy<256, 64, 128, 1, LB<1>>>("t256_b64 (2026-11-21 old)"),
      Make<ScanPolicy<256, 128, 128, 1, LB<1>>>("t256_b128"),
      Make<ScanPolicy<256, 128, 128, 4, LB<1>>>("t256_b128 m4"),
      Make<ScanPolicy<256, 128, 128, 1, LB<1, 8, 64>>>("t256_b128 sleep8-64"),
      Make<ScanPolicy<256, 128, 128, 3, LB<1, 8, 64>>>("t256_b128 m3 sleep8-64"),
      Make<ScanPolicy<256, 128, 128, 4, LB<1, 8, 64, false>>>("t256_b128 m4 sleep8-64 nowaitall"),
      Make<ScanPolicy<256, 128, 128, 1, LB<1>>, true>("DIAG t256_b128 no-lookback"),
  };
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {16, 20, 24, 28};
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreate(&stream));
  const auto variants = Variants();
  std::printf("%-28s %-8s %5s %10s %10s %10s %8s %8s %s\n", "variant", "dtype", "log2n",
              "ours_us", "cub_us", "memcpy_us", "vs_cub", "vs_mcpy", "check");
  for (const DType dtype : {DType::kInt32, DType::kFloat32}) {
    for (const int log2n : sizes) {
      const uint64_t n = uint64_t{1} << log2n;
      const size_t bytes = n * 4;
      void *in, *out, *ref;
      BENCH_CHECK(cudaMalloc(&in, bytes));
      BENCH_CHECK(cudaMalloc(&out, bytes));
      BENCH_CHECK(cudaMalloc(&ref, bytes));
      BENCH_CHECK(testing::FillRandomInt32(static_cast<int32_t*>(in), n, 17,
                                     dtype == DType::kFloat32 ? 20 : 30, nullptr));
      const int reps = log2n <= 20 ? 200 : log2n <= 26 ? 50 : 20;
      const double memcpy_us = MedianUs(
          [&](cudaStream_t st) {
            return cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, st);
          },
          reps, stream);
      size_t cub_bytes = 0;
      BENCH_CHECK(testing::CubScan(nullptr, &cub_bytes, in, ref, n, dtype, Op::kSum, false,
                             testing::CountFor(n), nullptr));
      void* cub_temp;
      BENCH_CHECK(cudaMalloc(&cub_temp, std::max<size_t>(cub_bytes, 16)));
      const double cub_us = MedianUs(
          [&](cudaStream_t st) {
            size_t s = cub_bytes;
            return testing::CubScan(cub_temp, &s, in, ref, n, dtype, Op::kSum, false,
                                    testing::CountFor(n), st);
          },
          reps, stream);
      for (const Variant& v : variants) {
        size_t temp_bytes = 0;
        BENCH_CHECK(v.run(nullptr, &temp_bytes, in, out, n, dtype, stream));
        void* temp;
        BENCH_CHECK(cudaMalloc(&temp, temp_bytes));
        BENCH_CHECK(cudaMemsetAsync(out, 0xAB, bytes, stream));
        const double us = MedianUs(
            [&](cudaStream_t st) {
              size_t s = temp_bytes;
              return v.run(temp, &s, in, out, n, dtype, st);
            },
            reps, stream);
        std::string check = "-";
        if (!v.diagnostic && dtype == DType::kInt32) {
          BENCH_CHECK(cudaStreamSynchronize(stream));
          uint64_t bad = 0;
          BENCH_CHECK(testing::CountMismatchedWords(out, ref, n, &bad));
          check = bad == 0 ? "ok" : "MISMATCH " + std::to_string(bad);
        }
        BENCH_CHECK(cudaFree(temp));
        const double ours_gbs = 2.0 * bytes / us / 1e3, memcpy_gbs = 2.0 * bytes / memcpy_us / 1e3;
        std::printf("%-28s %-8s %5d %10.2f %10.2f %10.2f %8.3f %8.3f %s\n", v.name.c_str(),
                    dtype == DType::kInt32 ? "int32" : "float32", log2n, us, cub_us, memcpy_us,
                    cub_us / us, ours_gbs / memcpy_gbs, check.c_str());
        std::fflush(stdout);
      }
      BENCH_CHECK(cudaFree(cub_temp));
      BENCH_CHECK(cudaFree(in));
      BENCH_CHECK(cudaFree(out));
      BENCH_CHECK(cudaFree(ref));
    }
  }
  return 0;
}
