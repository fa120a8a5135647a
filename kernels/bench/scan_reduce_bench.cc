// Benchmark: primserve's kernels vs CUB on the same device buffers, plus a
// device-to-device memcpy of the same input, one row per (primitive, dtype, n).
//
//   median_us   median time of one call (CUDA events around each call, after
//               warm-up; several input buffers rotate while they fit ~4x in L2)
//   Gitems/s    n / ours
//   GB/s        fewest bytes the primitive must move / ours
//   vs_cub      CUB time / ours (> 1: ours faster)
//   vs_memcpy   ours GB/s / memcpy GB/s (memcpy moves 2 * n * size bytes)
//
// Flags: --primitives=scan,reduce,segreduce  --dtypes=int32,float32,...
//        --min_log2=10 --max_log2=28 --scan_max_log2=30 --reps=N
//
// Adding a primitive (for K2: select, unique, ...): append one Primitive to
// Primitives() below: a name, the bytes it must move, and a Setup that, given
// the Buffers, sizes its temp storage and returns the two calls to time
// (ours, CUB) as lambdas on a stream. Everything else (sizes, rotation,
// timing, the table) is shared.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/gpu_baseline.h"
#include "core/primitives.h"
#include "kernels/reduce.h"
#include "kernels/scan.h"
#include "kernels/aggregate.h"              // K2: compaction rows
#include "kernels/compaction_test_util.h"  // K2
#include "kernels/select.h"                // K2

namespace primserve {
namespace {

void Check(int err, const char* what) {
  if (err != 0) {
    std::fprintf(stderr, "FAILED %s: %s\n", what, cudaGetErrorString(static_cast<cudaError_t>(err)));
    std::exit(1);
  }
}
#define CHECK(expr) Check(static_cast<int>(expr), #expr)

struct DeviceMemory {
  void* ptr = nullptr;
  explicit DeviceMemory(size_t bytes) { CHECK(cudaMalloc(&ptr, std::max<size_t>(bytes, 16))); }
  ~DeviceMemory() { cudaFree(ptr); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

// What a primitive's calls may use. inputs rotate; all hold random data.
struct Buffers {
  DType dtype;
  uint64_t n;
  size_t elem;
  std::vector<void*> inputs;
  void* output;              // n elements
  int64_t* indices;          // n int64
  const uint64_t* segment_starts;  // starts every 1024 elements
  uint64_t num_segments;
};

using Call = std::function<int(const void* input, cudaStream_t)>;
struct Calls {
  Call ours, cub;
};

struct Primitive {
  std::string name;
  uint64_t max_log2;
  size_t (*bytes_moved)(const Buffers&);
  // Allocates temp storage into `keep` and returns the calls to time.
  std::function<Calls(const Buffers&, std::vector<std::unique_ptr<DeviceMemory>>& keep)> setup;
};

// Two-phase temp sizing: runs f(nullptr, &bytes) then allocates.
void* Temp(std::vector<std::unique_ptr<DeviceMemory>>& keep,
           const std::function<int(void*, size_t*)>& size_query) {
  size_t bytes = 0;
  CHECK(size_query(nullptr, &bytes));
  keep.push_back(std::make_unique<DeviceMemory>(bytes));
  return keep.back()->ptr;
}

#include "kernels/bench/compaction_rows.inc"  // K2: compaction rows

std::vector<Primitive> Primitives(uint64_t scan_max_log2, uint64_t max_log2) {
  std::vector<Primitive> list;
  list.push_back({"scan_sum", scan_max_log2,
                  [](const Buffers& b) { return 2 * b.n * b.elem; },
                  [](const Buffers& b, auto& keep) {
                    auto ours = [&b](void* t, size_t* s, const void* in, cudaStream_t st) {
                      return gpu::Scan(t, s, in, b.output, b.n, b.dtype, Op::kSum, false, st);
                    };
                    auto cub = [&b](void* t, size_t* s, const void* in, cudaStream_t st) {
                      return baseline::CubScan(t, s, in, b.output, b.n, b.dtype, Op::kSum, false, st);
                    };
                    void* t1 = Temp(keep, [&](void* t, size_t* s) { return ours(t, s, b.inputs[0], nullptr); });
                    void* t2 = Temp(keep, [&](void* t, size_t* s) { return cub(t, s, b.inputs[0], nullptr); });
                    return Calls{[=](const void* in, cudaStream_t st) { size_t s = SIZE_MAX; return ours(t1, &s, in, st); },
                                 [=](const void* in, cudaStream_t st) { size_t s = SIZE_MAX; return cub(t2, &s, in, st); }};
                  }});
  for (const Op op : {Op::kSum, Op::kArgMin}) {
    list.push_back({std::string("reduce_") + (op == Op::kSum ? "sum" : "argmin"), max_log2,
                    [](const Buffers& b) { return b.n * b.elem; },
                    [op](const Buffers& b, auto& keep) {
                      auto ours = [&b, op](void* t, size_t* s, const void* in, cudaStream_t st) {
                        return gpu::Reduce(t, s, in, b.n, b.dtype, op, b.output, b.indices, st);
                      };
                      auto cub = [&b, op](void* t, size_t* s, const void* in, cudaStream_t st) {
                        return baseline::CubReduce(t, s, in, b.n, b.dtype, op, b.output, b.indices, st);
                      };
                      void* t1 = Temp(keep, [&](void* t, size_t* s) { return ours(t, s, b.inputs[0], nullptr); });
                      void* t2 = Temp(keep, [&](void* t, size_t* s) { return cub(t, s, b.inputs[0], nullptr); });
                      return Calls{[=](const void* in, cudaStream_t st) { size_t s = SIZE_MAX; return ours(t1, &s, in, st); },
                                   [=](const void* in, cudaStream_t st) { size_t s = SIZE_MAX; return cub(t2, &s, in, st); }};
                    }});
  }
  list.push_back({"segreduce_sum_1k", max_log2,
                  [](const Buffers& b) { return b.n * b.elem + b.num_segments * (8 + b.elem); },
                  [](const Buffers& b, auto& keep) {
                    auto ours = [&b](void* t, size_t* s, const void* in, cudaStream_t st) {
                      return gpu::SegmentedReduce(t, s, in, b.n, b.segment_starts, b.num_segments,
                                                  b.dtype, Op::kSum, b.output, b.indices, st);
                    };
                    auto cub = [&b](void* t, size_t* s, const void* in, cudaStream_t st) {
                      return baseline::CubSegmentedReduce(t, s, in, b.n, b.segment_starts,
                                                          b.num_segments, b.dtype, Op::kSum,
                                                          b.output, st);
                    };
                    void* t1 = Temp(keep, [&](void* t, size_t* s) { return ours(t, s, b.inputs[0], nullptr); });
                    void* t2 = Temp(keep, [&](void* t, size_t* s) { return cub(t, s, b.inputs[0], nullptr); });
                    return Calls{[=](const void* in, cudaStream_t st) { size_t s = SIZE_MAX; return ours(t1, &s, in, st); },
                                 [=](const void* in, cudaStream_t st) { size_t s = SIZE_MAX; return cub(t2, &s, in, st); }};
                  }});
  AppendCompactionPrimitives(list, max_log2);  // K2: select, partition, unique, rle, rbk, agg
  return list;
}

// Median microseconds of `reps` timed calls, each on the next input.
double MedianUs(const Call& call, const std::vector<void*>& inputs, int reps, cudaStream_t stream) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) CHECK(call(inputs[i % inputs.size()], stream));  // warm-up
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(start, stream));
    CHECK(call(inputs[i % inputs.size()], stream));
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms * 1000);
  }
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[reps / 2];
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

bool Selected(const std::vector<std::string>& wanted, const std::string& name) {
  for (const auto& w : wanted) {
    if (name.rfind(w, 0) == 0) return true;  // prefix: "reduce" picks reduce_sum, reduce_argmin
  }
  return false;
}

int Main(int argc, char** argv) {
  std::string primitives = "scan,reduce,segreduce", dtypes = "int32,float32";
  uint64_t min_log2 = 10, max_log2 = 28, scan_max_log2 = 30;
  int reps_flag = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t len = std::strlen(flag);
      return arg.compare(0, len, flag) == 0 ? argv[i] + len : nullptr;
    };
    if (const char* v = value("--primitives=")) primitives = v;
    else if (const char* v = value("--dtypes=")) dtypes = v;
    else if (const char* v = value("--min_log2=")) min_log2 = std::strtoull(v, nullptr, 10);
    else if (const char* v = value("--max_log2=")) max_log2 = std::strtoull(v, nullptr, 10);
    else if (const char* v = value("--scan_max_log2=")) scan_max_log2 = std::strtoull(v, nullptr, 10);
    else if (const char* v = value("--reps=")) reps_flag = std::atoi(v);
    else { std::fprintf(stderr, "unknown flag %s\n", argv[i]); return 2; }
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  std::printf("%-18s %-8s %6s %11s %11s %11s %9s %8s %7s %9s\n", "primitive", "dtype", "log2n",
              "ours_us", "cub_us", "memcpy_us", "Gitems/s", "GB/s", "vs_cub", "vs_memcpy");

  const auto all = Primitives(scan_max_log2, max_log2);
  for (const std::string& dtype_name : Split(dtypes)) {
    DType dtype = DType::kInt32;
    static const std::pair<const char*, DType> kNames[] = {
        {"int32", DType::kInt32},     {"int64", DType::kInt64},   {"uint32", DType::kUint32},
        {"uint64", DType::kUint64},   {"float32", DType::kFloat32}, {"float64", DType::kFloat64}};
    bool known = false;
    for (const auto& [name, value] : kNames) {
      if (dtype_name == name) { dtype = value; known = true; }
    }
    if (!known) { std::fprintf(stderr, "unknown dtype %s\n", dtype_name.c_str()); return 2; }
    const size_t elem = DTypeSize(dtype);

    for (uint64_t log2n = min_log2; log2n <= std::max(max_log2, scan_max_log2); log2n += 2) {
      const uint64_t n = uint64_t{1} << log2n;
      const size_t bytes = n * elem;
      // Rotate inputs while 4 of them would fit in L2; at most 8.
      const int copies = static_cast<int>(
          std::clamp<uint64_t>(4 * static_cast<uint64_t>(prop.l2CacheSize) / bytes + 1, 1, 8));
      std::vector<std::unique_ptr<DeviceMemory>> memory;
      Buffers b{dtype, n, elem, {}, nullptr, nullptr, nullptr, 0};
      bool any = false;
      for (const Primitive& p : all) any |= Selected(Split(primitives), p.name) && log2n <= p.max_log2;
      if (!any) continue;
      for (int c = 0; c < copies; ++c) {
        memory.push_back(std::make_unique<DeviceMemory>(bytes));
        // Random bits; small values keep float sums finite and NaN-free.
        CHECK(baseline::FillRandomInt32(static_cast<int32_t*>(memory.back()->ptr),
                                        bytes / 4, 17 + c, dtype == DType::kFloat32 ? 20 : 30,
                                        nullptr));
        b.inputs.push_back(memory.back()->ptr);
      }
      memory.push_back(std::make_unique<DeviceMemory>(bytes));
      b.output = memory.back()->ptr;
      b.num_segments = (n + 1023) / 1024;
      memory.push_back(std::make_unique<DeviceMemory>(std::max<size_t>(n, b.num_segments) * 8));
      b.indices = static_cast<int64_t*>(memory.back()->ptr);
      {
        std::vector<uint64_t> starts(b.num_segments);
        for (uint64_t s = 0; s < b.num_segments; ++s) starts[s] = s * 1024;
        memory.push_back(std::make_unique<DeviceMemory>(starts.size() * 8));
        CHECK(cudaMemcpy(memory.back()->ptr, starts.data(), starts.size() * 8, cudaMemcpyHostToDevice));
        b.segment_starts = static_cast<const uint64_t*>(memory.back()->ptr);
      }
      CHECK(cudaDeviceSynchronize());
      const int reps = reps_flag > 0 ? reps_flag : (log2n <= 20 ? 200 : log2n <= 26 ? 50 : 15);
      const Call memcpy_call = [&](const void* in, cudaStream_t st) {
        return cudaMemcpyAsync(b.output, in, bytes, cudaMemcpyDeviceToDevice, st);
      };
      const double memcpy_us = MedianUs(memcpy_call, b.inputs, reps, stream);
      for (const Primitive& p : all) {
        if (!Selected(Split(primitives), p.name) || log2n > p.max_log2) continue;
        std::vector<std::unique_ptr<DeviceMemory>> temps;
        const Calls calls = p.setup(b, temps);
        const double ours_us = MedianUs(calls.ours, b.inputs, reps, stream);
        const double cub_us = MedianUs(calls.cub, b.inputs, reps, stream);
        const double gbs = p.bytes_moved(b) / ours_us / 1e3;
        const double memcpy_gbs = 2.0 * bytes / memcpy_us / 1e3;
        std::printf("%-18s %-8s %6llu %11.2f %11.2f %11.2f %9.2f %8.1f %7.3f %9.3f\n",
                    p.name.c_str(), dtype_name.c_str(), static_cast<unsigned long long>(log2n),
                    ours_us, cub_us, memcpy_us, n / ours_us / 1e3, gbs, cub_us / ours_us,
                    gbs / memcpy_gbs);
        std::fflush(stdout);
      }
    }
  }
  CHECK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) { return primserve::Main(argc, argv); }
