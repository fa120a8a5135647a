// Tuning experiment: the radix sort's global passes (detail/radix_sort.cuh)
// under several onesweep policies (threads, keys per thread, blocks per SM
// asked of the compiler), for uint32 and uint64 keys alone and with 4- and
// 8-byte values, beside CUB's DeviceRadixSort::SortKeys / SortPairs; every
// variant's output is compared word for word with CUB's before it is timed.
// Not part of the library: //kernels/bench:sort_variants.
//   ./sort_variants [log2n ...]      (default: 28)
// Findings: perf/NOTES.md and tuning_sort.cuh.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/bench/timing.h"
#include "kernels/detail/radix_sort.cuh"
#include "kernels/testing/cub_sort.h"
#include "kernels/testing/device_helpers.h"

namespace {

using namespace primserve;
using namespace primserve::gpu;
using namespace primserve::gpu::detail;

struct Buffers {
  void* keys;
  void* values;
  void* keys_out;
  void* values_out;
  void* temp;
  size_t temp_bytes;
};

// value_bytes: 0 (keys only), 4 or 8.
using RunFn = std::function<int(const Buffers&, uint64_t, int value_bytes, size_t*, cudaStream_t)>;

template <typename U, typename Policy>
RunFn Variant() {
  return [](const Buffers& b, uint64_t n, int value_bytes, size_t* bytes,
            cudaStream_t stream) -> int {
    const RadixCodec<U> codec{KeyKind::kUnsigned, false};
    auto go = [&](auto payload_tag) -> int {
      using P = decltype(payload_tag);
      RadixSorter<U, P, Policy> sorter(static_cast<const U*>(b.keys), static_cast<U*>(b.keys_out),
                                       static_cast<const P*>(b.values),
                                       static_cast<P*>(b.values_out), false, n, codec, nullptr, 0);
      *bytes = sorter.Carve(nullptr);
      if (b.temp == nullptr) return 0;
      if (*bytes > b.temp_bytes) return cudaErrorInvalidValue;
      sorter.Carve(b.temp);
      return sorter.Run(stream);
    };
    return value_bytes == 8   ? go(uint64_t{})
           : value_bytes == 4 ? go(uint32_t{})
                              : go(NoPayload{});
  };
}

struct Named {
  std::string name;
  RunFn run;
};

// value_bytes 8: CUB's baseline sorts the keys alone (cub_sort.h moves 4-byte
// values only), so the row checks only the keys and its ratio compares
// pairs with keys: read it against the other 8-byte-value variants.
void Row(DType dtype, int log2n, int value_bytes, const std::vector<Named>& variants) {
  const uint64_t n = uint64_t{1} << log2n;
  const size_t key_bytes = (dtype == DType::kUint32 ? 4 : 8) * n;
  const bool cub_pairs = value_bytes == 4;
  Buffers b{};
  void *cub_keys, *cub_values, *cub_temp;
  BENCH_CHECK(cudaMalloc(&b.keys, key_bytes));
  BENCH_CHECK(cudaMalloc(&b.keys_out, key_bytes));
  BENCH_CHECK(cudaMalloc(&b.values, n * 8));
  BENCH_CHECK(cudaMalloc(&b.values_out, n * 8));
  BENCH_CHECK(cudaMalloc(&cub_keys, key_bytes));
  BENCH_CHECK(cudaMalloc(&cub_values, n * 4));
  BENCH_CHECK(testing::FillRandomInt32(static_cast<int32_t*>(b.keys), key_bytes / 4, 11 + log2n,
                                       32, nullptr));
  BENCH_CHECK(testing::FillRandomInt32(static_cast<int32_t*>(b.values), n * 2, 3, 32, nullptr));
  size_t cub_bytes = 0;
  auto run_cub = [&](cudaStream_t s) {
    return testing::CubRadixSort(cub_temp, &cub_bytes, b.keys, cub_keys,
                                 cub_pairs ? b.values : nullptr, cub_values, n, dtype, false,
                                 /*int64_count=*/false, s);
  };
  cub_temp = nullptr;
  BENCH_CHECK(run_cub(nullptr));
  BENCH_CHECK(cudaMalloc(&cub_temp, cub_bytes));
  BENCH_CHECK(run_cub(nullptr));
  BENCH_CHECK(cudaDeviceSynchronize());
  const double cub_us = bench::MedianUs(run_cub, 15, nullptr);
  for (const Named& v : variants) {
    b.temp = nullptr;
    BENCH_CHECK(v.run(b, n, value_bytes, &b.temp_bytes, nullptr));
    BENCH_CHECK(cudaMalloc(&b.temp, b.temp_bytes));
    BENCH_CHECK(cudaMemset(b.keys_out, 0xAB, key_bytes));
    BENCH_CHECK(cudaMemset(b.values_out, 0xAB, n * 8));
    size_t bytes = 0;
    BENCH_CHECK(v.run(b, n, value_bytes, &bytes, nullptr));
    BENCH_CHECK(cudaDeviceSynchronize());
    uint64_t bad = 0, bad_values = 0;
    BENCH_CHECK(testing::CountMismatchedWords(b.keys_out, cub_keys, key_bytes / 4, &bad));
    if (cub_pairs) {
      BENCH_CHECK(testing::CountMismatchedWords(b.values_out, cub_values, n, &bad_values));
    }
    const double us = bench::MedianUs(
        [&](cudaStream_t s) { return v.run(b, n, value_bytes, &bytes, s); }, 15, nullptr);
    std::printf("| %-6s | %-7s | 2^%d | %-22s | %9.1f | %9.1f | %6.3f | %s |\n",
                dtype == DType::kUint32 ? "uint32" : "uint64",
                value_bytes == 8 ? "pairs8" : value_bytes == 4 ? "pairs4" : "keys", log2n,
                v.name.c_str(), us, cub_us, cub_us / us, bad + bad_values ? "MISMATCH" : "ok");
    std::fflush(stdout);
    BENCH_CHECK(cudaFree(b.temp));
  }
  for (void* p : {b.keys, b.keys_out, b.values, b.values_out, cub_keys, cub_values, cub_temp}) {
    BENCH_CHECK(cudaFree(p));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {28};
  // The tuned policy first (tuning_sort.cuh), then its closest rivals.
  const std::vector<Named> keys4 = {
      {"256x16 min4 (tuned)", Variant<uint32_t, SortPolicy<4, 0>>()},
      {"256x16 min3", Variant<uint32_t, OnesweepPolicy<256, 16, 3>>()},
      {"384x20 min2", Variant<uint32_t, OnesweepPolicy<384, 20, 2>>()},
      {"256x20 min3", Variant<uint32_t, OnesweepPolicy<256, 20, 3>>()},
  };
  const std::vector<Named> pairs4_4 = {
      {"384x20 min2 (tuned)", Variant<uint32_t, SortPolicy<4, 4>>()},
      {"256x16 min4", Variant<uint32_t, OnesweepPolicy<256, 16, 4>>()},
      {"384x16 min2", Variant<uint32_t, OnesweepPolicy<384, 16, 2>>()},
  };
  const std::vector<Named> pairs4_8 = {
      {"256x16 min2 (tuned)", Variant<uint32_t, SortPolicy<4, 8>>()},
      {"256x16 min3", Variant<uint32_t, OnesweepPolicy<256, 16, 3>>()},
      {"256x12 min3", Variant<uint32_t, OnesweepPolicy<256, 12, 3>>()},
      {"384x12 min2", Variant<uint32_t, OnesweepPolicy<384, 12, 2>>()},
  };
  const std::vector<Named> keys8 = {
      {"384x12 min1 (tuned)", Variant<uint64_t, SortPolicy<8, 0>>()},
      {"256x12 min2", Variant<uint64_t, OnesweepPolicy<256, 12, 2>>()},
      {"384x16 min1", Variant<uint64_t, OnesweepPolicy<384, 16, 1>>()},
  };
  const std::vector<Named> pairs8 = {
      {"256x16 min2 (tuned)", Variant<uint64_t, SortPolicy<8, 8>>()},
      {"256x12 min2", Variant<uint64_t, OnesweepPolicy<256, 12, 2>>()},
      {"256x8 min3", Variant<uint64_t, OnesweepPolicy<256, 8, 3>>()},
  };
  std::printf("| key | moves | n | policy | ours_us | cub_us | ours/cub | check |\n");
  std::printf("|---|---|---|---|---:|---:|---:|---|\n");
  for (int log2n : sizes) {
    Row(DType::kUint32, log2n, 0, keys4);
    Row(DType::kUint32, log2n, 4, pairs4_4);
    Row(DType::kUint32, log2n, 8, pairs4_8);
    Row(DType::kUint64, log2n, 0, keys8);
    Row(DType::kUint64, log2n, 4, pairs8);
    Row(DType::kUint64, log2n, 8, pairs8);
  }
  return 0;
}
