#include "server/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/messages.h"
#include "reference/gpu_order.h"
#include "reference/reference.h"
#include "server/cpu/cpu_kernels.h"
#include "server/cpu/cpu_select.h"
#include "server/cpu/cpu_sort.h"
#include "server/engine/pipeline_run.h"

namespace primserve {
namespace {

template <typename T>
HostArray ToHost(DType dtype, const std::vector<T>& values) {
  return HostArray::Of<T>(dtype, absl::MakeConstSpan(values));
}

HostArray ToHostIndices(const std::vector<int64_t>& indices) {
  return ToHost(DType::kInt64, indices);
}

// Answers at least this large go into a buffer from the task's answer
// allocator when it has one, and are sent from there without a copy.
constexpr size_t kMinHeldAnswerBytes = 16 * 1024;

// Room for an answer of `n` elements of T.
template <typename T>
HostArray NewAnswer(DType dtype, size_t n, const AnswerAllocator* answers) {
  const size_t bytes = n * sizeof(T);
  HostArray array{dtype};
  if (answers != nullptr && *answers && bytes >= kMinHeldAnswerBytes) {
    array.held = (*answers)(bytes);
    if (array.held != nullptr) array.held_bytes = bytes;
  }
  if (array.held == nullptr) array.bytes.resize(bytes);
  return array;
}

// The elements of an answer, to write (before it moves: a short answer's
// bytes live inside the string).
template <typename T>
absl::Span<T> Elements(HostArray& array) {
  absl::Span<char> bytes = array.mutable_data();
  return absl::MakeSpan(reinterpret_cast<T*>(bytes.data()), bytes.size() / sizeof(T));
}

// A stream's piece that continues the running prefix `carry` (the identity
// if none) and gives the prefix through its last element: the sequential
// scan, so any cut gives the bits of the whole.
template <typename T>
ScanResult ScanWithCarry(const ScanOperation& o) {
  T acc = Identity<T>(o.op);
  if (o.carry_in) std::memcpy(&acc, &*o.carry_in, sizeof(T));
  const absl::Span<const T> input = o.input.as<T>();
  std::vector<T> out(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    if (o.exclusive) out[i] = acc;
    acc = Combine(o.op, acc, input[i]);
    if (!o.exclusive) out[i] = acc;
  }
  uint64_t carry = 0;
  std::memcpy(&carry, &acc, sizeof(T));
  return ScanResult{ToHost(o.input.dtype, out), carry};
}

// A reproducible float SUM/PROD scan (RunsReproducibly): the bits the CUDA
// backend gives the operation run alone (reference/gpu_order.h): gpu::Scan,
// gpu::ScanWithCarry for a stream's operation with a carry, or
// gpu::SegmentedScan over its own segment starts.
template <typename T>
ScanResult ScanInGpuOrder(const ScanOperation& o) {
  const absl::Span<const T> input = o.input.as<T>();
  std::vector<T> out(input.size());
  if (!o.segment_offsets.empty()) {
    reference::GpuOrderSegmentedScan<T>(input, absl::MakeSpan(out), o.segment_offsets, o.op,
                                        o.exclusive);
    return ScanResult{ToHost(o.input.dtype, out)};
  }
  std::optional<T> carry_in;
  if (o.carry_in) {
    T carry;
    std::memcpy(&carry, &*o.carry_in, sizeof(T));
    carry_in = carry;
  }
  T carry_out{};
  reference::GpuOrderScan<T>(input, absl::MakeSpan(out), o.op, o.exclusive, carry_in, &carry_out);
  ScanResult result{ToHost(o.input.dtype, out)};
  if (o.wants_carry) {
    uint64_t bits = 0;
    std::memcpy(&bits, &carry_out, sizeof(T));
    result.carry_out = bits;
  }
  return result;
}

// The wider accumulator of T (int32 -> int64, uint32 -> uint64, float ->
// double), where it has one.
template <typename T>
using Wide = std::conditional_t<std::is_same_v<T, int32_t>, int64_t,
                                std::conditional_t<std::is_same_v<T, uint32_t>, uint64_t, double>>;
template <typename T>
constexpr bool kWidens =
    std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t> || std::is_same_v<T, float>;

template <typename Operation>
absl::Status NotWidened(const Operation& o, absl::string_view rpc) {
  return absl::InternalError(absl::StrCat("a ", rpc, " of ", DTypeName(o.input.dtype), " into ",
                                          DTypeName(ValuesDType(o)), " reached the CPU backend"));
}

// A SUM or PROD scan accumulated in a wider dtype than the input's T.
template <typename T>
absl::StatusOr<Result> ScanWidened(const ScanOperation& o, const CpuContext& context) {
  if constexpr (kWidens<T>) {
    if (DTypeOf<Wide<T>>() == ValuesDType(o)) {
      HostArray out = NewAnswer<Wide<T>>(ValuesDType(o), o.input.size(), context.answers);
      cpu::Scan<T, Wide<T>>(o.input.as<T>(), o.op, o.exclusive, o.segment_offsets,
                            Elements<Wide<T>>(out), context.parallelism);
      return ScanResult{std::move(out)};
    }
  }
  return NotWidened(o, "Scan");
}

// A SUM or PROD accumulated in a wider dtype than the input's T.
template <typename T>
absl::StatusOr<Result> ReduceWidened(const ReduceOperation& o, const CpuContext& context) {
  if constexpr (kWidens<T>) {
    using W = Wide<T>;
    if (DTypeOf<W>() == ValuesDType(o)) {
      HostArray values = NewAnswer<W>(
          ValuesDType(o), std::max<size_t>(1, o.segment_offsets.size()), context.answers);
      cpu::Reduce<T, W>(o.input.as<T>(), o.op, o.segment_offsets, Elements<W>(values),
                        context.parallelism);
      return ReduceResult{std::move(values), std::nullopt};
    }
  }
  return NotWidened(o, "Reduce");
}

absl::StatusOr<Result> Run(const ScanOperation& o, const CpuContext& context) {
  if ((o.carry_in || o.wants_carry) && !o.segment_offsets.empty()) {
    return absl::InternalError("a scan with a carry reached the backend with segments");
  }
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    // Streams (carries) never widen; a widened scan is one sequential fold
    // per segment where floats are concerned, so reproducible as it is.
    if (o.accumulator) return ScanWidened<T>(o, context);
    if (RunsReproducibly(o)) return ScanInGpuOrder<T>(o);
    if (o.carry_in || o.wants_carry) return ScanWithCarry<T>(o);
    HostArray out = NewAnswer<T>(o.input.dtype, o.input.size(), context.answers);
    cpu::Scan<T>(o.input.as<T>(), o.op, o.exclusive, o.segment_offsets, Elements<T>(out),
                 context.parallelism);
    return ScanResult{std::move(out)};
  });
}


absl::StatusOr<Result> Run(const ReduceOperation& o, const CpuContext& context) {
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    // Before the reproducible path: one fold per request, in a fixed order.
    if (o.accumulator) return ReduceWidened<T>(o, context);
    if (RunsReproducibly(o)) {
      // gpu::SegmentedReduce over the request's own segments (one without
      // any), as the CUDA backend launches it alone.
      std::vector<T> values(o.segment_offsets.empty() ? 1 : o.segment_offsets.size());
      reference::GpuOrderSegmentedReduce<T>(o.input.as<T>(), o.segment_offsets, o.op,
                                            absl::MakeSpan(values));
      return ReduceResult{ToHost(o.input.dtype, values), std::nullopt};
    }
    if (o.op != Op::kArgMin && o.op != Op::kArgMax) {
      HostArray values = NewAnswer<T>(
          o.input.dtype, o.segment_offsets.empty() ? 1 : o.segment_offsets.size(), context.answers);
      cpu::Reduce<T>(o.input.as<T>(), o.op, o.segment_offsets, Elements<T>(values),
                     context.parallelism);
      return ReduceResult{std::move(values), std::nullopt};
    }
    reference::ReduceResult<T> r = reference::Reduce<T>(o.input.as<T>(), o.op, o.segment_offsets);
    ReduceResult result{ToHost(o.input.dtype, r.values), std::nullopt};
    if (o.op == Op::kArgMin || o.op == Op::kArgMax) result.indices = ToHostIndices(r.indices);
    return result;
  });
}

absl::StatusOr<Result> Run(const SelectOperation& o, const CpuContext& context) {
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    const absl::Span<const T> input = o.input.as<T>();
    const bool values = o.output == SelectOutput::kValues || o.output == SelectOutput::kValuesAndIndices;
    const bool indices =
        o.output == SelectOutput::kIndices || o.output == SelectOutput::kValuesAndIndices;
    // A count needs no mask.
    std::vector<uint8_t> keep(values || indices ? input.size() : 0);
    SelectResult result;
    result.count = o.predicate ? cpu::Keep<T>(input, o.predicate->As<T>(), absl::MakeSpan(keep),
                                              context.parallelism)
                               : VisitDType(o.flags->dtype, [&](auto flag_zero) {
                                   using F = decltype(flag_zero);
                                   return cpu::KeepFlags<F>(o.flags->as<F>(), absl::MakeSpan(keep),
                                                            context.parallelism);
                                 });
    const uint64_t size = o.partition ? input.size() : result.count;
    if (values) result.values = NewAnswer<T>(o.input.dtype, size, context.answers);
    if (indices) result.indices = NewAnswer<int64_t>(DType::kInt64, size, context.answers);
    if (values || indices) {
      cpu::Compact<T>(input, keep, result.count, o.partition,
                      values ? Elements<T>(*result.values) : absl::Span<T>(),
                      indices ? Elements<int64_t>(*result.indices) : absl::Span<int64_t>(),
                      context.parallelism);
    }
    return result;
  });
}

absl::StatusOr<Result> Run(const UniqueOperation& o, const CpuContext&) {
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    return UniqueResult{ToHost(o.input.dtype, reference::Unique<T>(o.input.as<T>()))};
  });
}

absl::StatusOr<Result> Run(const RunLengthEncodeOperation& o, const CpuContext&) {
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    reference::Runs<T> runs = reference::RunLengthEncode<T>(o.input.as<T>());
    return RunLengthEncodeResult{ToHost(o.input.dtype, runs.values), ToHostIndices(runs.lengths)};
  });
}

absl::StatusOr<Result> Run(const ReduceByKeyOperation& o, const CpuContext&) {
  return VisitDType(o.keys.dtype, [&](auto key_zero) {
    using K = decltype(key_zero);
    return VisitDType(o.values.dtype, [&](auto value_zero) -> absl::StatusOr<Result> {
      using V = decltype(value_zero);
      reference::KeyedValues<K, V> r =
          reference::ReduceByKey<K, V>(o.keys.as<K>(), o.values.as<V>(), o.op);
      return ReduceByKeyResult{ToHost(o.keys.dtype, r.keys), ToHost(o.values.dtype, r.values)};
    });
  });
}

absl::StatusOr<Result> Run(const AggregateByKeyOperation& o, const CpuContext&) {
  return VisitDType(o.keys.dtype, [&](auto key_zero) {
    using K = decltype(key_zero);
    return VisitDType(o.values.dtype, [&](auto value_zero) -> absl::StatusOr<Result> {
      using V = decltype(value_zero);
      if constexpr (!std::is_integral_v<K>) {
        return absl::InternalError("AggregateByKey reached the backend with float keys");
      } else {
        absl::StatusOr<std::vector<V>> aggregates = reference::AggregateByKey<K, V>(
            o.keys.as<K>(), o.values.as<V>(), o.op, o.num_keys);
        if (!aggregates.ok()) return aggregates.status();
        return AggregateByKeyResult{ToHost(o.values.dtype, *aggregates)};
      }
    });
  });
}

// Elements of `array` (any dtype, as bytes) in the order of `permutation`.
HostArray Permuted(const ArrayView& array, const std::vector<int64_t>& permutation) {
  const size_t size = DTypeSize(array.dtype);
  std::string bytes(permutation.size() * size, '\0');
  for (size_t i = 0; i < permutation.size(); ++i) {
    std::memcpy(&bytes[i * size], array.bytes.data() + permutation[i] * size, size);
  }
  HostArray out;
  out.dtype = array.dtype;
  out.bytes = std::move(bytes);
  return out;
}

absl::StatusOr<Result> Run(const SortOperation& o, const CpuContext& context) {
  return VisitDType(o.keys.dtype, [&](auto key_zero) -> absl::StatusOr<Result> {
    using K = decltype(key_zero);
    const std::vector<int64_t> permutation = cpu::SortPermutation<K>(
        o.keys.as<K>(), o.descending, o.segment_offsets, context.parallelism);
    SortResult r{Permuted(o.keys, permutation)};
    if (o.values) r.values = Permuted(*o.values, permutation);
    if (o.return_indices) r.indices = ToHostIndices(permutation);
    return r;
  });
}

absl::StatusOr<Result> Run(const GatherOperation& o, const CpuContext& context) {
  const uint64_t n = o.values.size();
  const absl::Span<const int64_t> indices = o.indices.as<int64_t>();
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || static_cast<uint64_t>(indices[i]) >= n) {
      return absl::InvalidArgumentError(IndexOutOfRangeMessage(i, indices[i], n));
    }
  }
  return VisitDType(o.values.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    HostArray out = NewAnswer<T>(o.values.dtype, indices.size(), context.answers);
    const absl::Span<const T> values = o.values.as<T>();
    const absl::Span<T> at = Elements<T>(out);
    for (size_t i = 0; i < indices.size(); ++i) at[i] = values[indices[i]];
    return GatherResult{std::move(out)};
  });
}

// The CPU backend's steps: every output stays in its step's result, in host
// memory, where later steps read it.
class CpuSteps final : public StepRunner {
 public:
  CpuSteps(const CpuContext& context, Metrics* metrics) : context_(context), metrics_(metrics) {}
  absl::StatusOr<Result> RunStep(const Operation& operation, bool returned) override {
    // Only answers that are sent go into answer buffers.
    return RunOnCpu(operation, CpuContext{context_.parallelism,
                                          returned ? context_.answers : nullptr});
  }
  void StepTimed(Rpc step, absl::Duration time) override {
    if (metrics_ != nullptr) metrics_->ObservePipelineStep(step, time);
  }

 private:
  const CpuContext context_;
  Metrics* const metrics_;
};

absl::StatusOr<Result> Run(const PipelineOperation& o, const CpuContext& context) {
  if (context.metrics != nullptr) context.metrics->PipelineRan(o.steps.size());
  CpuSteps steps(context, context.metrics);
  return RunPipeline(o, steps);
}

}  // namespace

absl::StatusOr<Result> RunOnCpu(const Operation& operation, const CpuContext& context) {
  // Every allocation here is sized by the request: one the memory left cannot
  // hold fails that request alone, not the server.
  try {
    return std::visit([&context](const auto& o) { return Run(o, context); }, operation);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "the server has no memory left for this request's answer now; retry later or ask for "
        "less");
  }
}

CpuBackend::CpuBackend(Metrics* metrics, int threads)
    : metrics_(metrics),
      parallelism_{threads > 0 ? threads
                               : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))} {}

uint64_t CpuBackend::ReproducibleScanGranule(DType dtype) const {
  // gpu::ScanTileItems(dtype, false) for the float dtypes (8192 float32,
  // 4096 float64: DefaultScanPolicy's 256 threads x 128 bytes), without
  // linking the kernels: reproducible scans follow the GPU's tiles here too
  // (ScanInGpuOrder), so only whole-tile cuts keep the unary bits.
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64) return 0;
  return reference::GpuScanTileItems(dtype, false);
}

void CpuBackend::Execute(std::vector<std::unique_ptr<Task>> batch) {
  for (std::unique_ptr<Task>& task : batch) {
    const absl::Time start = absl::Now();
    absl::StatusOr<Result> result =
        RunOnCpu(task->operation, CpuContext{parallelism_, &task->answers, metrics_});
    if (metrics_ != nullptr) {
      metrics_->ObserveStage(RpcOf(task->operation), Stage::kCompute, absl::Now() - start);
    }
    task->done(std::move(result));
  }
}

}  // namespace primserve
