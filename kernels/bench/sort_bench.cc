// Benchmark: primserve's radix sort (kernels/sort.h) beside CUB's fastest
// calls for the same work, on the same device buffers in one process:
// DeviceRadixSort::SortKeys / SortPairs (full bit range, int count) and
// DeviceSegmentedSort::StableSortPairs. One table, one row per
// (sort, dtype, n):
//
//   ours_us / cub_us  median of one call (CUDA events around each, after
//                     warm-up), temp storage allocated once outside
//   ours/cub          cub_us / ours_us (> 1: ours faster)
//   GB/s              ours: the bytes of keys (and values) read and written
//                     once, over ours_us (what a single pass would move)
//   check             before timing, both outputs are poisoned, one call of
//                     each runs and the outputs are compared word for word
//
// Flags: --log2n=16,20,24,28  --reps=N (default by size)  --segmented=0/1
// Exit status 1 if any check failed.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/primitives.h"
#include "kernels/bench/timing.h"
#include "kernels/sort.h"
#include "kernels/testing/cub_sort.h"
#include "kernels/testing/device_helpers.h"

namespace primserve::gpu {
namespace {

struct DeviceMemory {
  explicit DeviceMemory(size_t bytes) { BENCH_CHECK(cudaMalloc(&ptr, bytes < 16 ? 16 : bytes)); }
  ~DeviceMemory() { cudaFree(ptr); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr); }
  void* ptr = nullptr;
};

size_t KeyBytes(DType dtype) {
  return dtype == DType::kInt32 || dtype == DType::kUint32 || dtype == DType::kFloat32 ? 4 : 8;
}

int Reps(uint64_t n) { return n >= (uint64_t{1} << 26) ? 15 : n >= (uint64_t{1} << 22) ? 41 : 101; }

bool g_ok = true;

void PrintRow(const char* sort, const char* dtype, int log2n, const char* cub_call, double ours,
              double cub, double bytes, bool same) {
  std::printf("| %-16s | %-7s | 2^%-2d | %-44s | %10.1f | %10.1f | %6.3f | %7.1f | %-8s |\n",
              sort, dtype, log2n, cub_call, ours, cub, cub / ours, bytes / ours / 1e3,
              same ? "ok" : "MISMATCH");
  std::fflush(stdout);
  g_ok = g_ok && same;
}

bool SameWords(const void* a, const void* b, uint64_t bytes) {
  uint64_t mismatches = 0;
  BENCH_CHECK(testing::CountMismatchedWords(a, b, bytes / 4, &mismatches));
  return mismatches == 0;
}

// Keys (and 4-byte values when pairs) sorted by ours and by CUB.
void RadixRow(DType dtype, const char* dtype_name, int log2n, bool pairs, int reps) {
  const uint64_t n = uint64_t{1} << log2n;
  const size_t key_bytes = KeyBytes(dtype) * n;
  DeviceMemory keys(key_bytes), ours(key_bytes), cubs(key_bytes);
  DeviceMemory values(pairs ? n * 4 : 0), ours_values(pairs ? n * 4 : 0),
      cub_values(pairs ? n * 4 : 0);
  BENCH_CHECK(testing::FillRandomInt32(keys.get<int32_t>(), key_bytes / 4, 42 + log2n,
                                       dtype == DType::kFloat32 ? 30 : 32, nullptr));
  if (pairs) BENCH_CHECK(testing::FillRandomInt32(values.get<int32_t>(), n, 7, 32, nullptr));
  SortPayload payload;
  if (pairs) {
    payload.has_values = true;
    payload.d_values_in = values.get();
    payload.d_values_out = ours_values.get();
    payload.value_dtype = DType::kUint32;
  }
  size_t ours_bytes = 0, cub_bytes = 0;
  BENCH_CHECK(RadixSort(nullptr, &ours_bytes, keys.get(), ours.get(), n, dtype, payload, false,
                        nullptr));
  BENCH_CHECK(testing::CubRadixSort(nullptr, &cub_bytes, keys.get(), cubs.get(),
                                    pairs ? values.get() : nullptr, cub_values.get(), n, dtype,
                                    false, /*int64_count=*/false, nullptr));
  DeviceMemory ours_temp(ours_bytes), cub_temp(cub_bytes);
  auto run_ours = [&](cudaStream_t s) {
    return RadixSort(ours_temp.get(), &ours_bytes, keys.get(), ours.get(), n, dtype, payload,
                     false, s);
  };
  auto run_cub = [&](cudaStream_t s) {
    return testing::CubRadixSort(cub_temp.get(), &cub_bytes, keys.get(), cubs.get(),
                                 pairs ? values.get() : nullptr, cub_values.get(), n, dtype,
                                 false, /*int64_count=*/false, s);
  };
  BENCH_CHECK(cudaMemset(ours.get(), 0xAB, key_bytes));
  BENCH_CHECK(cudaMemset(cubs.get(), 0xCD, key_bytes));
  BENCH_CHECK(run_ours(nullptr));
  BENCH_CHECK(run_cub(nullptr));
  BENCH_CHECK(cudaDeviceSynchronize());
  bool same = SameWords(ours.get(), cubs.get(), key_bytes);
  if (pairs) same = same && SameWords(ours_values.get(), cub_values.get(), n * 4);
  const double ours_us = bench::MedianUs(run_ours, reps, nullptr);
  const double cub_us = bench::MedianUs(run_cub, reps, nullptr);
  const double moved = 2.0 * (key_bytes + (pairs ? n * 4 : 0));
  PrintRow(pairs ? "sort_pairs(v4)" : "sort_keys", dtype_name, log2n,
           pairs ? "DeviceRadixSort::SortPairs(int)" : "DeviceRadixSort::SortKeys(int)", ours_us,
           cub_us, moved, same);
}

// Float keys with 4-byte values in segments of about avg_len keys (lengths
// 0 .. 2 * avg_len, hashed).
void SegmentedRow(int log2n, uint64_t avg_len, int reps) {
  const uint64_t n = uint64_t{1} << log2n;
  std::vector<uint64_t> starts;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (uint64_t at = 0; at < n;) {
    starts.push_back(at);
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    at += (state >> 33) % (2 * avg_len + 1);
  }
  std::vector<uint64_t> ends(starts.begin() + 1, starts.end());
  ends.push_back(n);
  DeviceMemory keys(n * 4), values(n * 4), ours(n * 4), ours_values(n * 4), cubs(n * 4),
      cub_values(n * 4), begins(starts.size() * 8), d_ends(ends.size() * 8);
  BENCH_CHECK(testing::FillRandomInt32(keys.get<int32_t>(), n, 5, 30, nullptr));
  BENCH_CHECK(testing::FillRandomInt32(values.get<int32_t>(), n, 6, 32, nullptr));
  BENCH_CHECK(cudaMemcpy(begins.get(), starts.data(), starts.size() * 8, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(d_ends.get(), ends.data(), ends.size() * 8, cudaMemcpyHostToDevice));
  SortPayload payload{true, DType::kUint32, values.get(), ours_values.get()};
  size_t ours_bytes = 0, cub_bytes = 0;
  BENCH_CHECK(SegmentedRadixSort(nullptr, &ours_bytes, keys.get(), ours.get(), n,
                                 DType::kFloat32, starts.data(), starts.size(), payload, false,
                                 nullptr));
  BENCH_CHECK(testing::CubSegmentedSort(nullptr, &cub_bytes, keys.get<float>(), cubs.get<float>(),
                                        values.get<uint32_t>(), cub_values.get<uint32_t>(), n,
                                        begins.get<uint64_t>(), d_ends.get<uint64_t>(),
                                        starts.size(), false, nullptr));
  DeviceMemory ours_temp(ours_bytes), cub_temp(cub_bytes);
  auto run_ours = [&](cudaStream_t s) {
    return SegmentedRadixSort(ours_temp.get(), &ours_bytes, keys.get(), ours.get(), n,
                              DType::kFloat32, starts.data(), starts.size(), payload, false, s);
  };
  auto run_cub = [&](cudaStream_t s) {
    return testing::CubSegmentedSort(cub_temp.get(), &cub_bytes, keys.get<float>(),
                                     cubs.get<float>(), values.get<uint32_t>(),
                                     cub_values.get<uint32_t>(), n, begins.get<uint64_t>(),
                                     d_ends.get<uint64_t>(), starts.size(), false, s);
  };
  BENCH_CHECK(cudaMemset(ours.get(), 0xAB, n * 4));
  BENCH_CHECK(cudaMemset(cubs.get(), 0xCD, n * 4));
  BENCH_CHECK(run_ours(nullptr));
  BENCH_CHECK(run_cub(nullptr));
  BENCH_CHECK(cudaDeviceSynchronize());
  const bool same = SameWords(ours.get(), cubs.get(), n * 4) &&
                    SameWords(ours_values.get(), cub_values.get(), n * 4);
  const double ours_us = bench::MedianUs(run_ours, reps, nullptr);
  const double cub_us = bench::MedianUs(run_cub, reps, nullptr);
  char name[64];
  std::snprintf(name, sizeof(name), "seg_pairs(~%llu)", static_cast<unsigned long long>(avg_len));
  PrintRow(name, "float32", log2n, "DeviceSegmentedSort::StableSortPairs", ours_us, cub_us,
           2.0 * n * 8, same);
}

std::vector<int> ParseInts(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

}  // namespace
}  // namespace primserve::gpu

int main(int argc, char** argv) {
  using namespace primserve;
  using namespace primserve::gpu;
  std::vector<int> log2ns = {16, 20, 24, 28};
  int reps = 0;
  bool segmented = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--log2n=", 0) == 0) {
      log2ns = ParseInts(argv[i] + 8);
    } else if (arg.rfind("--reps=", 0) == 0) {
      reps = std::atoi(argv[i] + 7);
    } else if (arg.rfind("--segmented=", 0) == 0) {
      segmented = std::atoi(argv[i] + 12) != 0;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  std::printf("| %-16s | %-7s | %-4s | %-44s | %10s | %10s | %6s | %7s | %-8s |\n", "sort",
              "dtype", "n", "cub_call", "ours_us", "cub_us", "ours/cub", "GB/s", "check");
  std::printf("|---|---|---|---|---:|---:|---:|---:|---|\n");
  struct KeyType {
    DType dtype;
    const char* name;
  };
  for (const KeyType& key : {KeyType{DType::kUint32, "uint32"}, KeyType{DType::kFloat32, "float32"},
                             KeyType{DType::kUint64, "uint64"}}) {
    for (bool pairs : {false, true}) {
      for (int log2n : log2ns) {
        RadixRow(key.dtype, key.name, log2n, pairs, reps ? reps : Reps(uint64_t{1} << log2n));
      }
    }
  }
  if (segmented) {
    for (uint64_t avg : {uint64_t{100}, uint64_t{2000}, uint64_t{300000}}) {
      SegmentedRow(24, avg, reps ? reps : 21);
    }
  }
  std::printf("\n%s\n", g_ok ? "all outputs match CUB" : "SOME OUTPUTS DIFFER FROM CUB");
  return g_ok ? 0 : 1;
}
