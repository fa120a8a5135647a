// Benchmark: primserve's kernels against CUB's fastest public call for the
// same work (kernels/testing/cub_baseline.h), on the same device buffers in
// one process, plus a device-to-device memcpy of the input's bytes. Prints one
// table, one row per (primitive, dtype, n):
//
//   cub_call    the CUB call timed, with the count type that was faster
//               (int and int64 are both timed where n fits an int)
//   ours_us     median of one call (CUDA events around each call, after
//               warm-up); inputs rotate over several copies while they fit
//               in L2
//   cub_us      the same for CUB
//   ours/cub    speed ratio, cub_us / ours_us (> 1: ours faster)
//   ours/memcpy scans only: memcpy_us / ours_us, where the memcpy copies the
//               n elements (reads and writes what the scan must)
//   check       before timing, every output of ours and of CUB is poisoned,
//               one call of each runs, and the outputs are compared (exact,
//               or within rounding for float sums): "ok" or "MISMATCH"
//
// Flags: --primitives=scan,reduce,segreduce,select,partition,unique,rle,rbk,agg
//        (prefixes of the row names), --dtypes=int32,float32,...,
//        --log2n=16,20,24,28 (scan/reduce/segreduce sizes),
//        --compaction_log2n=20,28 and --compaction_dtypes=int32,float32,
//        int64,float64 (the compaction family's sizes and dtypes),
//        --reps=N (default by size),
//        --settle_ms=N: before each timing (memcpy, each row), wait for the
//        device, then N more ms (default 0: no wait).
// Exit status 1 if any check failed.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/primitives.h"
#include "kernels/aggregate.h"
#include "kernels/reduce.h"
#include "kernels/scan.h"
#include "kernels/runs.h"
#include "kernels/select.h"
#include "kernels/testing/cub_baseline.h"
#include "kernels/bench/timing.h"
#include "kernels/testing/device_helpers.h"

namespace primserve::gpu {
namespace {

using testing::CubCount;


struct DeviceMemory {
  void* ptr = nullptr;
  explicit DeviceMemory(size_t bytes) { BENCH_CHECK(cudaMalloc(&ptr, std::max<size_t>(bytes, 16))); }
  ~DeviceMemory() { cudaFree(ptr); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

// Device memory of one row, freed when the row is done.
class Arena {
 public:
  void* Alloc(size_t bytes) {
    blocks_.push_back(std::make_unique<DeviceMemory>(bytes));
    return blocks_.back()->ptr;
  }
  template <typename T>
  T* Alloc(uint64_t count) {
    return static_cast<T*>(Alloc(count * sizeof(T)));
  }

 private:
  std::vector<std::unique_ptr<DeviceMemory>> blocks_;
};

enum class Compare { kExact, kFloat32Sum, kFloat64Sum };

// One output compared between ours and CUB: `elements` elements of
// `elem_bytes`, or as many as the device uint64 count says when counted.
struct Output {
  std::string name;
  const void* ours;
  const void* cub;
  size_t elem_bytes;
  uint64_t elements;
  const uint64_t* ours_count = nullptr;
  const uint64_t* cub_count = nullptr;
  Compare compare = Compare::kExact;
  uint64_t capacity = 0;  // counted outputs: elements the buffers hold
};

// The two calls of a row, on input copy `copy`, in two phases (temp == null:
// size query). CUB's takes the count type.
using OursCall = std::function<int(void* temp, size_t* bytes, int copy, cudaStream_t)>;
using CubCall = std::function<int(void* temp, size_t* bytes, int copy, CubCount, cudaStream_t)>;

struct Row {
  std::string primitive;
  std::string cub_call;
  bool is_scan = false;
  OursCall ours;
  CubCall cub;
  std::vector<Output> outputs;
};

// What a row's setup gets: sizes and the inputs shared by the rows of one
// (dtype, n): `copies` copies of random data.
struct Inputs {
  DType dtype;
  uint64_t n;
  size_t elem;
  int copies;
  std::vector<const void*> random;
};

const char* kNames[] = {"int32", "int64", "uint32", "uint64", "float32", "float64"};
const DType kDTypes[] = {DType::kInt32,  DType::kInt64,   DType::kUint32,
                         DType::kUint64, DType::kFloat32, DType::kFloat64};

Compare SumCompare(DType dtype) {
  return dtype == DType::kFloat32   ? Compare::kFloat32Sum
         : dtype == DType::kFloat64 ? Compare::kFloat64Sum
                                    : Compare::kExact;
}

// ------------------------------------------------------------------ rows

Row ScanRow(const Inputs& in, Arena& arena, Op op, bool exclusive) {
  void* ours_out = arena.Alloc(in.n * in.elem);
  void* cub_out = arena.Alloc(in.n * in.elem);
  Row row;
  row.primitive = std::string("scan_") + (exclusive ? "exclusive_" : "inclusive_") + OpName(op);
  std::transform(row.primitive.begin(), row.primitive.end(), row.primitive.begin(), ::tolower);
  row.cub_call = testing::CubScanCall(op, exclusive);
  row.is_scan = true;
  row.ours = [=, &in](void* t, size_t* b, int c, cudaStream_t s) {
    return Scan(t, b, in.random[c], ours_out, in.n, in.dtype, op, exclusive, s);
  };
  row.cub = [=, &in](void* t, size_t* b, int c, CubCount count, cudaStream_t s) {
    return testing::CubScan(t, b, in.random[c], cub_out, in.n, in.dtype, op, exclusive, count, s);
  };
  row.outputs.push_back({"out", ours_out, cub_out, in.elem, in.n, nullptr, nullptr,
                         op == Op::kSum ? SumCompare(in.dtype) : Compare::kExact});
  return row;
}

Row ReduceRow(const Inputs& in, Arena& arena, Op op) {
  void* ours_value = arena.Alloc(8);
  void* cub_value = arena.Alloc(8);
  int64_t* ours_index = arena.Alloc<int64_t>(1);
  int64_t* cub_index = arena.Alloc<int64_t>(1);
  Row row;
  row.primitive = std::string("reduce_") + OpName(op);
  std::transform(row.primitive.begin(), row.primitive.end(), row.primitive.begin(), ::tolower);
  row.cub_call = testing::CubReduceCall(op);
  row.ours = [=, &in](void* t, size_t* b, int c, cudaStream_t s) {
    return Reduce(t, b, in.random[c], in.n, in.dtype, op, ours_value, ours_index, s);
  };
  row.cub = [=, &in](void* t, size_t* b, int c, CubCount count, cudaStream_t s) {
    return testing::CubReduce(t, b, in.random[c], in.n, in.dtype, op, cub_value, cub_index, count,
                              s);
  };
  row.outputs.push_back({"value", ours_value, cub_value, in.elem, 1, nullptr, nullptr,
                         op == Op::kSum ? SumCompare(in.dtype) : Compare::kExact});
  if (op == Op::kArgMin || op == Op::kArgMax) {
    row.outputs.push_back({"index", ours_index, cub_index, 8, 1});
  }
  return row;
}

// Segments of 1024 elements.
Row SegmentedReduceRow(const Inputs& in, Arena& arena) {
  const uint64_t segments = (in.n + 1023) / 1024;
  std::vector<uint64_t> starts(segments);
  for (uint64_t s = 0; s < segments; ++s) starts[s] = s * 1024;
  uint64_t* d_starts = arena.Alloc<uint64_t>(segments);
  BENCH_CHECK(cudaMemcpy(d_starts, starts.data(), segments * 8, cudaMemcpyHostToDevice));
  void* ours_out = arena.Alloc(segments * in.elem);
  void* cub_out = arena.Alloc(segments * in.elem);
  Row row;
  row.primitive = "segreduce_sum_1k";
  row.cub_call = testing::CubSegmentedReduceCall(Op::kSum);
  row.ours = [=, &in](void* t, size_t* b, int c, cudaStream_t s) {
    return SegmentedReduce(t, b, in.random[c], in.n, d_starts, segments, in.dtype, Op::kSum,
                           ours_out, nullptr, s);
  };
  row.cub = [=, &in](void* t, size_t* b, int c, CubCount, cudaStream_t s) {
    return testing::CubSegmentedReduce(t, b, in.random[c], in.n, d_starts, segments, in.dtype,
                                       Op::kSum, cub_out, s);
  };
  row.outputs.push_back(
      {"values", ours_out, cub_out, in.elem, segments, nullptr, nullptr, SumCompare(in.dtype)});
  return row;
}

// x < the value whose bits are the middle of the random input's range: keeps
// about half.
SelectKeep HalfKeep(const Inputs& in) {
  SelectKeep keep;
  keep.kind = PredicateKind::kLt;
  if (in.elem == 4) {
    const uint32_t bits = 1u << 29;
    std::memcpy(keep.operand, &bits, 4);
  } else {
    const uint64_t bits = uint64_t{1} << 61;  // high word 2^29
    std::memcpy(keep.operand, &bits, 8);
  }
  return keep;
}

// Counted outputs: values (and their count) of ours and CUB.
struct CountedOutputs {
  void* ours;
  void* cub;
  uint64_t* ours_count;
  uint64_t* cub_count;
};

CountedOutputs AllocCounted(Arena& arena, uint64_t n, size_t elem) {
  return {arena.Alloc(n * elem), arena.Alloc(n * elem), arena.Alloc<uint64_t>(1),
          arena.Alloc<uint64_t>(1)};
}

Row SelectIfRow(const Inputs& in, Arena& arena, bool partition) {
  const SelectKeep keep = HalfKeep(in);
  const CountedOutputs out = AllocCounted(arena, in.n, in.elem);
  Row row;
  row.primitive = partition ? "partition_lt_half" : "select_lt_half";
  row.cub_call = partition ? "DevicePartition::If(x < c)" : "DeviceSelect::If(x < c)";
  row.ours = [=, &in](void* t, size_t* b, int c, cudaStream_t s) {
    return Select(t, b, in.random[c], in.dtype, in.n, keep, partition, out.ours, nullptr,
                  out.ours_count, s);
  };
  row.cub = [=, &in](void* t, size_t* b, int c, CubCount count, cudaStream_t s) {
    return partition ? testing::CubPartitionIf(t, b, in.random[c], in.dtype, in.n, keep, out.cub,
                                               out.cub_count, count, s)
                     : testing::CubSelectIf(t, b, in.random[c], in.dtype, in.n, keep, out.cub,
                                            out.cub_count, count, s);
  };
  // Partition: the kept part only (CUB writes the rejected part reversed).
  row.outputs.push_back({"kept", out.ours, out.cub, in.elem, 0, out.ours_count, out.cub_count,
                         Compare::kExact, in.n});
  return row;
}

Row SelectFlaggedRow(const Inputs& in, Arena& arena) {
  // Random flags, about half set (FillHashed also fills int32 values, unused).
  uint8_t* flags = arena.Alloc<uint8_t>(in.n);
  {
    DeviceMemory scratch(in.n * 4);
    BENCH_CHECK(testing::FillHashed(static_cast<int32_t*>(scratch.ptr), flags, in.n, 7));
    BENCH_CHECK(cudaDeviceSynchronize());
  }
  const CountedOutputs out = AllocCounted(arena, in.n, in.elem);
  Row row;
  row.primitive = "select_flagged_half";
  row.cub_call = "DeviceSelect::Flagged";
  const SelectKeep keep = MakeFlagsKeep(flags);
  row.ours = [=, &in](void* t, size_t* b, int c, cudaStream_t s) {
    return Select(t, b, in.random[c], in.dtype, in.n, keep, false, out.ours, nullptr,
                  out.ours_count, s);
  };
  row.cub = [=, &in](void* t, size_t* b, int c, CubCount count, cudaStream_t s) {
    return testing::CubSelectFlagged(t, b, in.random[c], in.dtype, flags, in.n, out.cub,
                                     out.cub_count, count, s);
  };
  row.outputs.push_back({"kept", out.ours, out.cub, in.elem, 0, out.ours_count, out.cub_count,
                         Compare::kExact, in.n});
  return row;
}

// Copies of data with runs of run_len equal elements.
std::vector<const void*> RunsInput(const Inputs& in, Arena& arena, DType dtype, int run_len) {
  std::vector<const void*> copies;
  for (int c = 0; c < in.copies; ++c) {
    void* p = arena.Alloc(in.n * DTypeSize(dtype));
    BENCH_CHECK(testing::FillRuns(p, dtype, in.n, run_len, nullptr));
    copies.push_back(p);
  }
  return copies;
}

Row UniqueRow(const Inputs& in, Arena& arena) {
  const std::vector<const void*> runs = RunsInput(in, arena, in.dtype, 4);
  const CountedOutputs out = AllocCounted(arena, in.n, in.elem);
  Row row;
  row.primitive = "unique_runs4";
  row.cub_call = "DeviceSelect::Unique";
  row.ours = [=, &in](void* t, size_t* b, int c, cudaStream_t s) {
    return Unique(t, b, runs[c], in.dtype, in.n, out.ours, out.ours_count, s);
  };
  row.cub = [=, &in](void* t, size_t* b, int c, CubCount count, cudaStream_t s) {
    return testing::CubUnique(t, b, runs[c], in.dtype, in.n, out.cub, out.cub_count, count, s);
  };
  row.outputs.push_back({"values", out.ours, out.cub, in.elem, 0, out.ours_count, out.cub_count,
                         Compare::kExact, in.n});
  return row;
}

Row RunLengthEncodeRow(const Inputs& in, Arena& arena) {
  const std::vector<const void*> runs = RunsInput(in, arena, in.dtype, 4);
  const CountedOutputs out = AllocCounted(arena, in.n, in.elem);
  int64_t* ours_lengths = arena.Alloc<int64_t>(in.n);
  int64_t* cub_lengths = arena.Alloc<int64_t>(in.n);
  Row row;
  row.primitive = "rle_runs4";
  row.cub_call = "DeviceRunLengthEncode::Encode";
  row.ours = [=, &in](void* t, size_t* b, int c, cudaStream_t s) {
    return RunLengthEncode(t, b, runs[c], in.dtype, in.n, out.ours, ours_lengths, out.ours_count,
                           s);
  };
  row.cub = [=, &in](void* t, size_t* b, int c, CubCount count, cudaStream_t s) {
    return testing::CubRunLengthEncode(t, b, runs[c], in.dtype, in.n, out.cub, cub_lengths,
                                       out.cub_count, count, s);
  };
  row.outputs.push_back({"values", out.ours, out.cub, in.elem, 0, out.ours_count, out.cub_count,
                         Compare::kExact, in.n});
  row.outputs.push_back({"lengths", ours_lengths, cub_lengths, 8, 0, out.ours_count, out.cub_count,
                         Compare::kExact, in.n});
  return row;
}

// int32 keys in runs of 16, the random input as values, SUM.
Row ReduceByKeyRow(const Inputs& in, Arena& arena) {
  const std::vector<const void*> keys = RunsInput(in, arena, DType::kInt32, 16);
  const CountedOutputs out_keys = AllocCounted(arena, in.n, 4);
  void* ours_values = arena.Alloc(in.n * in.elem);
  void* cub_values = arena.Alloc(in.n * in.elem);
  Row row;
  row.primitive = "rbk_sum_runs16";
  row.cub_call = "DeviceReduce::ReduceByKey(plus)";
  row.ours = [=, &in](void* t, size_t* b, int c, cudaStream_t s) {
    return ReduceByKey(t, b, keys[c], DType::kInt32, in.random[c], in.dtype, in.n, Op::kSum,
                       out_keys.ours, ours_values, out_keys.ours_count, s);
  };
  row.cub = [=, &in](void* t, size_t* b, int c, CubCount count, cudaStream_t s) {
    return testing::CubReduceByKey(t, b, keys[c], DType::kInt32, in.random[c], in.dtype, in.n,
                                   Op::kSum, out_keys.cub, cub_values, out_keys.cub_count, count,
                                   s);
  };
  row.outputs.push_back({"keys", out_keys.ours, out_keys.cub, 4, 0, out_keys.ours_count,
                         out_keys.cub_count, Compare::kExact, in.n});
  row.outputs.push_back({"values", ours_values, cub_values, in.elem, 0, out_keys.ours_count,
                         out_keys.cub_count, SumCompare(in.dtype), in.n});
  return row;
}

// AggregateByKey SUM of int32 ones over int32 keys uniform in [0, 1024)
// against CUB's histogram of the keys (int32 rows only).
Row AggregateHistogramRow(const Inputs& in, Arena& arena) {
  constexpr int kKeys = 1024;
  std::vector<const void*> keys;
  for (int c = 0; c < in.copies; ++c) {
    int32_t* p = arena.Alloc<int32_t>(in.n);
    BENCH_CHECK(testing::FillRandomInt32(p, in.n, 99 + c, 10, nullptr));
    keys.push_back(p);
  }
  int32_t* ones = arena.Alloc<int32_t>(in.n);
  {
    std::vector<int32_t> host(in.n, 1);
    BENCH_CHECK(cudaMemcpy(ones, host.data(), in.n * 4, cudaMemcpyHostToDevice));
  }
  int32_t* ours_out = arena.Alloc<int32_t>(kKeys);
  int32_t* cub_out = arena.Alloc<int32_t>(kKeys);
  int64_t* bad = arena.Alloc<int64_t>(1);
  Row row;
  row.primitive = "agg_count_keys1k";
  row.cub_call = "DeviceHistogram::HistogramEven";
  row.ours = [=, &in](void* t, size_t* b, int c, cudaStream_t s) {
    return AggregateByKey(t, b, keys[c], DType::kInt32, ones, DType::kInt32, in.n, Op::kSum, kKeys,
                          ours_out, bad, s);
  };
  row.cub = [=, &in](void* t, size_t* b, int c, CubCount count, cudaStream_t s) {
    return testing::CubHistogram(t, b, static_cast<const int32_t*>(keys[c]), in.n, kKeys, cub_out,
                                 count, s);
  };
  row.outputs.push_back({"counts", ours_out, cub_out, 4, kKeys});
  return row;
}

// ------------------------------------------------------------- harness

// Median microseconds of `reps` timed calls, input copies in turn.
double MedianUs(const std::function<int(int copy, cudaStream_t)>& call, int copies, int reps,
                cudaStream_t stream) {
  return bench::MedianUs([&](int rep, cudaStream_t s) { return call(rep % copies, s); }, reps,
                         stream);
}

uint64_t ReadCount(const uint64_t* d_count) {
  uint64_t count = 0;
  BENCH_CHECK(cudaMemcpy(&count, d_count, 8, cudaMemcpyDeviceToHost));
  return count;
}

template <typename F>
bool WithinRounding(const void* a, const void* b, uint64_t n, double tolerance) {
  std::vector<F> x(n), y(n);
  BENCH_CHECK(cudaMemcpy(x.data(), a, n * sizeof(F), cudaMemcpyDeviceToHost));
  BENCH_CHECK(cudaMemcpy(y.data(), b, n * sizeof(F), cudaMemcpyDeviceToHost));
  for (uint64_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(x[i]) - double(y[i]));
    if (!(d <= tolerance * std::fabs(double(y[i])) + 1e-300)) {
      std::fprintf(stderr, "  element %llu: ours %.9g, cub %.9g\n",
                   static_cast<unsigned long long>(i), double(x[i]), double(y[i]));
      return false;
    }
  }
  return true;
}

// Compares one output of ours and CUB; prints why on stderr if they differ.
bool Same(const Row& row, const Output& out) {
  uint64_t elements = out.elements;
  if (out.ours_count != nullptr) {
    elements = ReadCount(out.ours_count);
    const uint64_t cub = ReadCount(out.cub_count);
    if (elements != cub) {
      std::fprintf(stderr, "%s %s: count ours %llu, cub %llu\n", row.primitive.c_str(),
                   out.name.c_str(), static_cast<unsigned long long>(elements),
                   static_cast<unsigned long long>(cub));
      return false;
    }
  }
  bool same = true;
  switch (out.compare) {
    case Compare::kExact: {
      uint64_t mismatches = 0;
      BENCH_CHECK(testing::CountMismatchedWords(out.ours, out.cub, elements * out.elem_bytes / 4,
                                          &mismatches));
      same = mismatches == 0;
      break;
    }
    // Random positive inputs: the two association orders agree far inside
    // these bounds; garbage does not.
    case Compare::kFloat32Sum:
      same = WithinRounding<float>(out.ours, out.cub, elements, 1e-3);
      break;
    case Compare::kFloat64Sum:
      same = WithinRounding<double>(out.ours, out.cub, elements, 1e-9);
      break;
  }
  if (!same) {
    std::fprintf(stderr, "%s %s: outputs differ\n", row.primitive.c_str(), out.name.c_str());
  }
  return same;
}

// Poisons every output of the row (and its counts) with 0xA5 bytes.
void Poison(const Row& row) {
  for (const Output& out : row.outputs) {
    const size_t bytes = (out.ours_count ? out.capacity : out.elements) * out.elem_bytes;
    if (out.ours_count) {
      BENCH_CHECK(cudaMemset(const_cast<uint64_t*>(out.ours_count), 0xA5, 8));
      BENCH_CHECK(cudaMemset(const_cast<uint64_t*>(out.cub_count), 0xA5, 8));
    }
    BENCH_CHECK(cudaMemset(const_cast<void*>(out.ours), 0xA5, bytes));
    BENCH_CHECK(cudaMemset(const_cast<void*>(out.cub), 0xA5, bytes));
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

bool Selected(const std::vector<std::string>& wanted, const std::string& name) {
  for (const auto& w : wanted) {
    if (name.rfind(w, 0) == 0) return true;
  }
  return false;
}

struct Options {
  std::vector<std::string> primitives;
  std::vector<uint64_t> log2n, compaction_log2n;
  std::vector<std::string> compaction_dtypes;
  int reps = 0;
  int settle_ms = 0;
};

// --settle_ms: a wait before each timing, to check whether what the device
// still does after the previous row (its frees) slows the next row's first
// timing (kernels/NOTES.md, "Fourth round").
void Settle(const Options& options) {
  if (options.settle_ms <= 0) return;
  BENCH_CHECK(cudaDeviceSynchronize());
  std::this_thread::sleep_for(std::chrono::milliseconds(options.settle_ms));
}

int Reps(const Options& options, uint64_t log2n) {
  if (options.reps > 0) return options.reps;
  return log2n <= 20 ? 200 : log2n <= 24 ? 50 : 20;
}

// Runs every selected row of one (dtype, n); returns false if a check failed.
bool RunSize(const Options& options, DType dtype, const char* dtype_name, uint64_t log2n,
             bool scan_sizes, const cudaDeviceProp& prop, cudaStream_t stream) {
  const uint64_t n = uint64_t{1} << log2n;
  Inputs in{dtype, n, DTypeSize(dtype), 1, {}};
  const size_t bytes = n * in.elem;
  // Rotate inputs while 4 copies would fit in L2; at most 8.
  in.copies = static_cast<int>(
      std::clamp<uint64_t>(4 * static_cast<uint64_t>(prop.l2CacheSize) / bytes + 1, 1, 8));
  Arena shared;
  for (int c = 0; c < in.copies; ++c) {
    void* p = shared.Alloc(bytes);
    // Random bits, high bits clear: float inputs are positive and finite.
    BENCH_CHECK(testing::FillRandomInt32(static_cast<int32_t*>(p), bytes / 4, 17 + c, 30, nullptr));
    in.random.push_back(p);
  }
  void* copy_out = shared.Alloc(bytes);
  BENCH_CHECK(cudaDeviceSynchronize());
  const int reps = Reps(options, log2n);
  Settle(options);
  const double memcpy_us = MedianUs(
      [&](int c, cudaStream_t s) {
        return cudaMemcpyAsync(copy_out, in.random[c], bytes, cudaMemcpyDeviceToDevice, s);
      },
      in.copies, reps, stream);

  using Make = std::function<Row(Arena&)>;
  std::vector<std::pair<std::string, Make>> makes;
  if (scan_sizes) {
    // Reduce rows first: timed straight after a scan row, which frees two
    // n-element outputs, our SUM reduce (the first row timed there) ran 13%
    // slower at 2^28 on an H200 than with the reduce rows alone, while CUB,
    // timed next, did not (kernels/NOTES.md, "Fourth round").
    for (const Op op : {Op::kSum, Op::kMin, Op::kArgMin}) {
      makes.push_back({"reduce", [&, op](Arena& a) { return ReduceRow(in, a, op); }});
    }
    makes.push_back({"segreduce", [&](Arena& a) { return SegmentedReduceRow(in, a); }});
    for (const auto& [op, exclusive] : std::vector<std::pair<Op, bool>>{
             {Op::kSum, false}, {Op::kSum, true}, {Op::kMin, false}, {Op::kMax, false}}) {
      makes.push_back({"scan", [&, op = op, exclusive = exclusive](Arena& a) {
                         return ScanRow(in, a, op, exclusive);
                       }});
    }
  } else {
    makes.push_back({"select", [&](Arena& a) { return SelectIfRow(in, a, false); }});
    makes.push_back({"select", [&](Arena& a) { return SelectFlaggedRow(in, a); }});
    makes.push_back({"partition", [&](Arena& a) { return SelectIfRow(in, a, true); }});
    makes.push_back({"unique", [&](Arena& a) { return UniqueRow(in, a); }});
    makes.push_back({"rle", [&](Arena& a) { return RunLengthEncodeRow(in, a); }});
    makes.push_back({"rbk", [&](Arena& a) { return ReduceByKeyRow(in, a); }});
    if (dtype == DType::kInt32) {
      makes.push_back({"agg", [&](Arena& a) { return AggregateHistogramRow(in, a); }});
    }
  }

  bool all_ok = true;
  for (const auto& [family, make] : makes) {
    if (!Selected(options.primitives, family)) continue;
    Arena arena;
    const Row row = make(arena);
    // Temp storage: ours, and CUB with each count type it can take.
    std::vector<CubCount> counts = {CubCount::kInt64};
    if (n <= 0x7fffffffu) counts.insert(counts.begin(), CubCount::kInt32);
    size_t ours_bytes = 0, cub_bytes = 0;
    BENCH_CHECK(row.ours(nullptr, &ours_bytes, 0, stream));
    for (const CubCount count : counts) {
      size_t b = 0;
      BENCH_CHECK(row.cub(nullptr, &b, 0, count, stream));
      cub_bytes = std::max(cub_bytes, b);
    }
    void* ours_temp = arena.Alloc(ours_bytes);
    void* cub_temp = arena.Alloc(cub_bytes);

    // Check: poisoned outputs, one call each, compared.
    Poison(row);
    BENCH_CHECK(row.ours(ours_temp, &ours_bytes, 0, stream));
    BENCH_CHECK(row.cub(cub_temp, &cub_bytes, 0, testing::CountFor(n), stream));
    BENCH_CHECK(cudaStreamSynchronize(stream));
    bool ok = true;
    for (const Output& out : row.outputs) ok = Same(row, out) && ok;
    all_ok = all_ok && ok;

    Settle(options);
    const double ours_us = MedianUs(
        [&](int c, cudaStream_t s) {
          size_t b = ours_bytes;
          return row.ours(ours_temp, &b, c, s);
        },
        in.copies, reps, stream);
    double cub_us = 0;
    CubCount fastest = counts.front();
    for (const CubCount count : counts) {
      const double us = MedianUs(
          [&](int c, cudaStream_t s) {
            size_t b = cub_bytes;
            return row.cub(cub_temp, &b, c, count, s);
          },
          in.copies, reps, stream);
      if (cub_us == 0 || us < cub_us) {
        cub_us = us;
        fastest = count;
      }
    }
    char memcpy_ratio[16] = "";
    if (row.is_scan) std::snprintf(memcpy_ratio, sizeof(memcpy_ratio), "%.3f", memcpy_us / ours_us);
    const std::string call = row.cub_call + " [" + testing::CubCountName(fastest) + "]";
    std::printf("| %-20s | %-7s | 2^%-2llu | %-52s | %10.1f | %10.1f | %6.3f | %6s | %-8s |\n",
                row.primitive.c_str(), dtype_name, static_cast<unsigned long long>(log2n),
                call.c_str(), ours_us, cub_us, cub_us / ours_us, memcpy_ratio,
                ok ? "ok" : "MISMATCH");
    std::fflush(stdout);
  }
  return all_ok;
}

std::vector<uint64_t> ParseSizes(const std::string& s) {
  std::vector<uint64_t> out;
  for (const std::string& v : Split(s)) out.push_back(std::strtoull(v.c_str(), nullptr, 10));
  return out;
}

int Main(int argc, char** argv) {
  Options options;
  options.primitives = Split("scan,reduce,segreduce,select,partition,unique,rle,rbk,agg");
  options.log2n = {16, 20, 24, 28};
  options.compaction_log2n = {20, 28};
  options.compaction_dtypes = Split("int32,float32,int64,float64");
  std::vector<std::string> dtypes = Split("int32,uint32,float32,int64,float64");
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t len = std::strlen(flag);
      return arg.compare(0, len, flag) == 0 ? argv[i] + len : nullptr;
    };
    if (const char* v = value("--primitives="))
      options.primitives = Split(v);
    else if (const char* v = value("--dtypes="))
      dtypes = Split(v);
    else if (const char* v = value("--log2n="))
      options.log2n = ParseSizes(v);
    else if (const char* v = value("--compaction_log2n="))
      options.compaction_log2n = ParseSizes(v);
    else if (const char* v = value("--compaction_dtypes="))
      options.compaction_dtypes = Split(v);
    else if (const char* v = value("--reps="))
      options.reps = std::atoi(v);
    else if (const char* v = value("--settle_ms="))
      options.settle_ms = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0, driver = 0;
  BENCH_CHECK(cudaRuntimeGetVersion(&runtime));
  BENCH_CHECK(cudaDriverGetVersion(&driver));
  std::printf("device: %s, %d SMs, L2 %d MB; CUDA runtime %d, driver %d\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, runtime, driver);
  std::printf(
      "medians of CUDA-event timings after 3 warm-up calls; ours/cub = cub_us / ours_us;"
      " ours/memcpy = memcpy of the n elements / ours (scans)\n\n");
  std::printf("| %-20s | %-7s | %-4s | %-52s | %10s | %10s | %6s | %6s | %-8s |\n", "primitive",
              "dtype", "n", "CUB call [count type]", "ours us", "CUB us", "ours/CUB", "ours/memcpy",
              "check");
  std::printf("|---|---|---|---|---:|---:|---:|---:|---|\n");
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreate(&stream));
  bool ok = true;
  for (const std::string& name : dtypes) {
    int index = -1;
    for (int d = 0; d < 6; ++d) {
      if (name == kNames[d]) index = d;
    }
    if (index < 0) {
      std::fprintf(stderr, "unknown dtype %s\n", name.c_str());
      return 2;
    }
    for (const uint64_t log2n : options.log2n) {
      ok = RunSize(options, kDTypes[index], kNames[index], log2n, true, prop, stream) && ok;
    }
    const auto& compaction = options.compaction_dtypes;
    if (std::find(compaction.begin(), compaction.end(), name) == compaction.end()) continue;
    for (const uint64_t log2n : options.compaction_log2n) {
      ok = RunSize(options, kDTypes[index], kNames[index], log2n, false, prop, stream) && ok;
    }
  }
  BENCH_CHECK(cudaStreamDestroy(stream));
  std::printf("\n%s\n", ok ? "all outputs match CUB" : "SOME OUTPUTS DIFFER FROM CUB");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace primserve::gpu

int main(int argc, char** argv) { return primserve::gpu::Main(argc, argv); }
