// Tuning experiment: ReduceByKey's kernel (detail/runs_kernel.cuh) under
// RunsPolicy variants against CUB's fastest call (DeviceReduce::ReduceByKey
// with plus, int counts) in the same process, over int32 keys in runs of
// random length (geometric, mean 1.5, 4, 64 and 4096) and int32, float32,
// int64 and float64 values (float: ordered, the library's ReduceByKey, and
// unordered, "/u"). Variants and CUB alternate in rounds (default 3); each
// figure is the median over rounds of the median of `reps` timed calls
// (CUDA events, after warm-up). Before timing, every variant's poisoned
// outputs are compared with CUB's: keys and counts exactly, integer sums
// exactly, float sums within 1e-3 (float32) or 1e-9 (float64) relative.
// Not part of the library: //kernels/bench:runs_variants.
//   ./runs_variants [--log2n=28] [--means=1.5,4,64,4096] [--rounds=3] [--reps=N]
// Findings: perf/NOTES.md (fifth round: the variants measured there,
// cp.async-staged loads and CUB's polling among them, lost and are gone).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/primitives.h"
#include "kernels/bench/timing.h"
#include "kernels/detail/runs_kernel.cuh"
#include "kernels/testing/cub_baseline.h"
#include "kernels/testing/device_helpers.h"

namespace {

using namespace primserve;
using namespace primserve::gpu;
using namespace primserve::gpu::detail;

// Before the fifth round: 3 blocks per SM whatever the key and value sizes.
using Before = RunsPolicy<16, 8, 3, 3, RunsLookback>;
// The default with each tile's runs found before its look-back (kLocalFirst).
using LocalFirst = RunsPolicy<16, 8, 3, 4, RunsLookback, true>;

struct DeviceMemory {
  void* ptr = nullptr;
  explicit DeviceMemory(size_t bytes) {
    BENCH_CHECK(cudaMalloc(&ptr, std::max<size_t>(bytes, 16)));
  }
  ~DeviceMemory() { cudaFree(ptr); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

using Call = std::function<int(void* temp, size_t* bytes, cudaStream_t)>;

struct Variant {
  std::string name;
  Call call;
  std::string resources;  // registers, local bytes, blocks per SM of the many-tile kernel
};

template <typename Kernel>
std::string Resources(Kernel kernel) {
  cudaFuncAttributes attr{};
  BENCH_CHECK(cudaFuncGetAttributes(&attr, kernel));
  int blocks = 0;
  BENCH_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kCompactBlock, 0));
  char text[96];
  std::snprintf(text, sizeof(text), "%d regs, %zu B local, %d blocks/SM", attr.numRegs,
                attr.localSizeBytes, blocks);
  return text;
}

// One ReduceByKey variant: uint32 keys, values V, SUM.
template <typename Policy, typename V>
Variant RbkVariant(const char* name, const void* keys, const void* values, uint64_t n,
                   void* keys_out, void* values_out, uint64_t* num, bool in_order) {
  using P = RunPair<uint32_t, V>;
  using L = typename Policy::Lookback;
  Variant v;
  v.name = name;
  v.call = [=](void* temp, size_t* bytes, cudaStream_t s) -> int {
    const size_t need = RunsTempBytes<Policy, uint32_t, uint32_t, V>(n);
    if (temp == nullptr) {
      *bytes = need;
      return 0;
    }
    return RunRuns<Policy, uint32_t, V, uint32_t, Op::kSum>(temp, keys, values, n, keys_out,
                                                            values_out, num, in_order, s);
  };
  if (in_order || !AssociationMatters<RunPairOp<P, Op::kSum>>::value) {
    v.resources = Resources(RunsKernel<Policy, uint32_t, V, uint32_t, Op::kSum, L, false>);
  } else {
    v.resources =
        Resources(RunsKernel<Policy, uint32_t, V, uint32_t, Op::kSum, TreeLookbackOf<L>, false>);
  }
  return v;
}

struct Options {
  std::vector<uint64_t> log2n = {28};
  std::vector<double> means = {1.5, 4, 64, 4096};
  int rounds = 3;
  int reps = 0;
};

uint64_t ReadCount(const uint64_t* d) {
  uint64_t c = 0;
  BENCH_CHECK(cudaMemcpy(&c, d, 8, cudaMemcpyDeviceToHost));
  return c;
}

// Times the variants and CUB alternately; prints one line per variant.
void TimeRow(const Options& o, const char* primitive, const char* dtype, uint64_t log2n,
             double mean, const std::vector<Variant>& variants, const Call& cub,
             const std::function<bool()>& check_against_cub, cudaStream_t stream) {
  size_t temp_bytes = 0;
  for (const Variant& v : variants) {
    size_t b = 0;
    BENCH_CHECK(v.call(nullptr, &b, stream));
    temp_bytes = std::max(temp_bytes, b);
  }
  size_t cub_bytes = 0;
  BENCH_CHECK(cub(nullptr, &cub_bytes, stream));
  DeviceMemory temp(temp_bytes), cub_temp(cub_bytes);

  BENCH_CHECK(cub(cub_temp.ptr, &cub_bytes, stream));
  BENCH_CHECK(cudaStreamSynchronize(stream));
  std::vector<bool> ok;
  for (const Variant& v : variants) {
    size_t b = temp_bytes;
    BENCH_CHECK(v.call(temp.ptr, &b, stream));
    BENCH_CHECK(cudaStreamSynchronize(stream));
    ok.push_back(check_against_cub());
  }

  const int reps = o.reps > 0 ? o.reps : log2n >= 26 ? 15 : log2n >= 22 ? 40 : 200;
  std::vector<std::vector<double>> times(variants.size() + 1);
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t i = 0; i < variants.size(); ++i) {
      times[i].push_back(bench::MedianUs(
          [&](cudaStream_t s) {
            size_t b = temp_bytes;
            return variants[i].call(temp.ptr, &b, s);
          },
          reps, stream));
    }
    times.back().push_back(bench::MedianUs(
        [&](cudaStream_t s) {
          size_t b = cub_bytes;
          return cub(cub_temp.ptr, &b, s);
        },
        reps, stream));
  }
  auto median = [](std::vector<double> t) {
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const double cub_us = median(times.back());
  for (size_t i = 0; i < variants.size(); ++i) {
    const double us = median(times[i]);
    std::printf("| %-4s | %-7s | 2^%-2llu | %6.1f | %-12s | %9.1f | %9.1f | %6.3f | %-8s | %s |\n",
                primitive, dtype, static_cast<unsigned long long>(log2n), mean,
                variants[i].name.c_str(), us, cub_us, cub_us / us, ok[i] ? "ok" : "MISMATCH",
                variants[i].resources.c_str());
  }
  std::fflush(stdout);
}

bool g_all_ok = true;

bool Report(bool ok, const char* what) {
  if (!ok) std::fprintf(stderr, "mismatch: %s\n", what);
  g_all_ok = g_all_ok && ok;
  return ok;
}

bool SameWords(const void* a, const void* b, uint64_t bytes) {
  uint64_t mismatches = 0;
  BENCH_CHECK(testing::CountMismatchedWords(a, b, bytes / 4, &mismatches));
  return mismatches == 0;
}

template <typename V>
void RbkRows(const Options& o, const char* dtype_name, DType dtype, uint64_t log2n, double mean,
             const void* keys, cudaStream_t stream) {
  const uint64_t n = uint64_t{1} << log2n;
  DeviceMemory values(n * sizeof(V));
  BENCH_CHECK(testing::FillRandomInt32(static_cast<int32_t*>(values.ptr), n * sizeof(V) / 4, 5,
                                       30, nullptr));
  DeviceMemory keys_out(n * 4), values_out(n * sizeof(V)), cub_keys(n * 4),
      cub_values(n * sizeof(V)), num(8), cub_num(8);
  auto* d_num = static_cast<uint64_t*>(num.ptr);
  auto* d_cub_num = static_cast<uint64_t*>(cub_num.ptr);
  const Call cub = [&](void* t, size_t* b, cudaStream_t s) {
    return testing::CubReduceByKey(t, b, keys, DType::kUint32, values.ptr, dtype, n, Op::kSum,
                                   cub_keys.ptr, cub_values.ptr, d_cub_num, testing::CubCount::kInt32,
                                   s);
  };
  auto check = [&]() {
    const uint64_t runs = ReadCount(d_num);
    if (!Report(runs == ReadCount(d_cub_num), "rbk count")) return false;
    if (!Report(SameWords(keys_out.ptr, cub_keys.ptr, runs * 4), "rbk keys")) return false;
    if constexpr (std::is_floating_point_v<V>) {
      uint64_t far = 0;
      BENCH_CHECK(testing::CountFarApart(values_out.ptr, cub_values.ptr, dtype, runs,
                                         sizeof(V) == 4 ? 1e-3 : 1e-9, &far));
      return Report(far == 0, "rbk float values");
    } else {
      return Report(SameWords(values_out.ptr, cub_values.ptr, runs * sizeof(V)), "rbk values");
    }
  };
  auto poisoned_check = [&]() {
    const bool ok = check();
    BENCH_CHECK(cudaMemset(keys_out.ptr, 0xA5, n * 4));
    BENCH_CHECK(cudaMemset(values_out.ptr, 0xA5, n * sizeof(V)));
    BENCH_CHECK(cudaMemset(num.ptr, 0xA5, 8));
    return ok;
  };
  BENCH_CHECK(cudaMemset(keys_out.ptr, 0xA5, n * 4));
  BENCH_CHECK(cudaMemset(values_out.ptr, 0xA5, n * sizeof(V)));
  auto variants_for = [&](bool in_order) {
    void* ko = keys_out.ptr;
    void* vo = values_out.ptr;
    const void* vi = values.ptr;
    std::vector<Variant> v;
    v.push_back(RbkVariant<Before, V>("before", keys, vi, n, ko, vo, d_num, in_order));
    v.push_back(RbkVariant<DefaultRunsPolicy, V>("default", keys, vi, n, ko, vo, d_num, in_order));
    v.push_back(RbkVariant<LocalFirst, V>("local_first", keys, vi, n, ko, vo, d_num, in_order));
    return v;
  };
  TimeRow(o, "rbk", dtype_name, log2n, mean, variants_for(true), cub, poisoned_check, stream);
  if constexpr (std::is_floating_point_v<V>) {
    const std::string name = std::string(dtype_name) + "/u";
    TimeRow(o, "rbk", name.c_str(), log2n, mean, variants_for(false), cub, poisoned_check,
            stream);
  }
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    if (comma > pos) out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t len = std::strlen(flag);
      return arg.compare(0, len, flag) == 0 ? argv[i] + len : nullptr;
    };
    if (const char* v = value("--log2n=")) {
      o.log2n.clear();
      for (const auto& s : Split(v)) o.log2n.push_back(std::strtoull(s.c_str(), nullptr, 10));
    } else if (const char* v = value("--means=")) {
      o.means.clear();
      for (const auto& s : Split(v)) o.means.push_back(std::strtod(s.c_str(), nullptr));
    } else if (const char* v = value("--rounds=")) {
      o.rounds = std::max(1, std::atoi(v));
    } else if (const char* v = value("--reps=")) {
      o.reps = std::atoi(v);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs; medians over %d rounds of medians of CUDA-event timings\n\n",
              prop.name, prop.multiProcessorCount, o.rounds);
  std::printf("| prim | dtype   | n    | mean   | variant      |   ours us |    CUB us | CUB/ours |"
              " check    | kernel |\n");
  std::printf("|---|---|---|---:|---|---:|---:|---:|---|---|\n");
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreate(&stream));
  for (const uint64_t log2n : o.log2n) {
    const uint64_t n = uint64_t{1} << log2n;
    for (const double mean : o.means) {
      DeviceMemory keys(n * 4);
      BENCH_CHECK(testing::FillRandomRuns(keys.ptr, DType::kUint32, n, mean, 3));
      RbkRows<int32_t>(o, "int32", DType::kInt32, log2n, mean, keys.ptr, stream);
      RbkRows<float>(o, "float32", DType::kFloat32, log2n, mean, keys.ptr, stream);
      RbkRows<int64_t>(o, "int64", DType::kInt64, log2n, mean, keys.ptr, stream);
      RbkRows<double>(o, "float64", DType::kFloat64, log2n, mean, keys.ptr, stream);
    }
  }
  BENCH_CHECK(cudaStreamDestroy(stream));
  std::printf("\n%s\n", g_all_ok ? "all outputs match CUB" : "SOME OUTPUTS DIFFER FROM CUB");
  return g_all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
