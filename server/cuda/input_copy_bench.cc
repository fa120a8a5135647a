// How fast wire::CopyPool copies a large request's payload out of gRPC-like
// receive slices into page-locked memory (cudaHostAlloc), the copy every
// large request makes in the server (wire::Payload::Contiguous) or, for a
// scan, chunk by chunk under its device pipeline (DeferredInputs). Picks
// --input_copy_threads: perf/runs/*-input-copy.
//
// The source: 268 MB (64M int32) in separately malloc'd slices of 16 KiB to
// 1 MiB. Each configuration: warm-up copies, then the median (and best) of
// timed copies, by wall clock, as GB/s and as a ratio to one thread (today's
// plain memcpy on the receiving thread) measured in the same process. Every
// configuration's result is compared byte for byte with the serial copy.
//
// Usage: input_copy_bench [repeats]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "wire/parallel_copy.h"

namespace primserve::wire {
namespace {

constexpr size_t kBytes = size_t{64} << 22;  // 64M int32
constexpr size_t kScanChunk = size_t{32} << 20;  // the scan pipeline's tile

#define CHECK_CUDA(call)                                                             \
  do {                                                                               \
    const cudaError_t e = (call);                                                    \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e));                \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

struct Stats {
  double median_gbps;
  double best_gbps;
};

// `copy` (which moves `bytes`) `warmup` times, then `repeats` times timed.
template <typename F>
Stats Measure(F copy, size_t bytes, int repeats, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) copy();
  std::vector<double> gbps;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    copy();
    gbps.push_back(bytes / Seconds(std::chrono::steady_clock::now() - start) / 1e9);
  }
  std::sort(gbps.begin(), gbps.end());
  return {gbps[gbps.size() / 2], gbps.back()};
}

int Main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 15;
  std::mt19937_64 random(7);
  std::vector<char*> owned;
  std::vector<absl::string_view> slices;
  for (size_t at = 0; at < kBytes;) {
    const size_t size = std::min(
        kBytes - at, std::uniform_int_distribution<size_t>(16 << 10, 1 << 20)(random));
    char* slice = static_cast<char*>(std::malloc(size));
    for (size_t i = 0; i < size; ++i) slice[i] = static_cast<char>(random() >> 56);
    owned.push_back(slice);
    slices.emplace_back(slice, size);
    at += size;
  }
  const Gather from(slices);
  char* pinned = nullptr;
  CHECK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&pinned), kBytes, cudaHostAllocDefault));
  std::vector<char> expected(kBytes);
  from.CopyTo(0, kBytes, expected.data());
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s; host threads: %u; source: %zu bytes in %zu slices of 16 KiB..1 MiB "
              "(malloc); destination: cudaHostAlloc; repeats: %d (median, best)\n",
              prop.name, std::thread::hardware_concurrency(), kBytes, slices.size(), repeats);
  auto verify = [&](const char* what, int threads) {
    if (std::memcmp(pinned, expected.data(), kBytes) != 0) {
      std::printf("MISMATCH: %s threads=%d\n", what, threads);
      std::exit(1);
    }
    std::memset(pinned, 0, kBytes);
  };

  const int thread_counts[] = {1, 2, 4, 6, 8, 12};
  std::printf("\n## Whole payload (Payload::Contiguous): 268 MB, chunks %zu MiB\n",
              CopyPool::kDefaultChunkBytes >> 20);
  std::printf("threads  median_GB/s  best_GB/s  median_ms  vs_1_thread\n");
  double serial = 0;
  for (int threads : thread_counts) {
    CopyPool pool(threads);
    const Stats s = Measure([&] { pool.Copy(from, 0, kBytes, pinned); }, kBytes, repeats);
    if (threads == 1) serial = s.median_gbps;
    std::printf("%7d  %11.2f  %9.2f  %9.2f  %10.2fx\n", threads, s.median_gbps, s.best_gbps,
                kBytes / s.median_gbps / 1e6, s.median_gbps / serial);
    verify("whole", threads);
  }

  std::printf("\n## Scan pipeline fills (DeferredInputs): 268 MB as 32 MiB ranges, one after "
              "another\n");
  std::printf("threads  median_GB/s  best_GB/s  median_ms_per_32MiB  vs_1_thread\n");
  for (int threads : thread_counts) {
    CopyPool pool(threads);
    const Stats s = Measure(
        [&] {
          for (size_t at = 0; at < kBytes; at += kScanChunk) {
            pool.Copy(from, at, std::min(kScanChunk, kBytes - at), pinned + at);
          }
        },
        kBytes, repeats);
    if (threads == 1) serial = s.median_gbps;
    std::printf("%7d  %11.2f  %9.2f  %19.2f  %10.2fx\n", threads, s.median_gbps, s.best_gbps,
                kScanChunk / s.median_gbps / 1e6, s.median_gbps / serial);
    verify("fills", threads);
  }

  std::printf("\n## Chunk size, whole payload\n");
  std::printf("threads  chunk_MiB  median_GB/s  best_GB/s\n");
  for (int threads : {4, 8}) {
    for (size_t chunk_mib : {1, 2, 4, 8}) {
      CopyPool pool(threads, chunk_mib << 20);
      const Stats s = Measure([&] { pool.Copy(from, 0, kBytes, pinned); }, kBytes, repeats);
      std::printf("%7d  %9zu  %11.2f  %9.2f\n", threads, chunk_mib, s.median_gbps, s.best_gbps);
      verify("chunk", threads);
    }
  }

  std::printf("\n## Two requests at once sharing one pool (each 268 MB, own destination)\n");
  std::printf("threads  aggregate_median_GB/s\n");
  char* second = nullptr;
  CHECK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&second), kBytes, cudaHostAllocDefault));
  for (int threads : thread_counts) {
    CopyPool pool(threads);
    const Stats s = Measure(
        [&] {
          std::thread other([&] { pool.Copy(from, 0, kBytes, second); });
          pool.Copy(from, 0, kBytes, pinned);
          other.join();
        },
        2 * kBytes, repeats);
    std::printf("%7d  %21.2f\n", threads, s.median_gbps);
    if (std::memcmp(second, expected.data(), kBytes) != 0) {
      std::printf("MISMATCH: two requests threads=%d\n", threads);
      return 1;
    }
    verify("two requests", threads);
  }
  CHECK_CUDA(cudaFreeHost(second));
  CHECK_CUDA(cudaFreeHost(pinned));
  for (char* slice : owned) std::free(slice);
  return 0;
}

}  // namespace
}  // namespace primserve::wire

int main(int argc, char** argv) { return primserve::wire::Main(argc, argv); }
