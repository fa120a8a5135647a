#include "server/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
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
#include "server/cpu/cpu_gather.h"
#include "server/cpu/cpu_kernels.h"
#include "server/cpu/cpu_select.h"
#include "server/cpu/cpu_sort.h"
#include "server/cpu/scratch.h"
#include "server/engine/pipeline_run.h"
#include "server/engine/pipeline_steps.h"

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

// Room for an answer of `n` elements of T, every byte of which the caller
// writes. A large one the task's allocator gives no buffer for gets one of
// the backend's own, uninitialised and on huge pages (cpu/scratch.h): a
// string would be zero-filled first, faulting in each of its 4 KiB pages
// (a 64 MiB answer took seconds so on a loaded virtual machine).
template <typename T>
HostArray NewAnswer(DType dtype, size_t n, const AnswerAllocator* answers) {
  const size_t bytes = n * sizeof(T);
  HostArray array{dtype};
  if (bytes < kMinHeldAnswerBytes) {
    array.bytes.resize(bytes);
    return array;
  }
  if (answers != nullptr && *answers) array.held = (*answers)(bytes);
  if (array.held == nullptr) {
    array.held = std::shared_ptr<char>(cpu::NewScratch<char>(bytes).release(), cpu::FreeScratch());
  }
  array.held_bytes = bytes;
  return array;
}

// Where an answer of n elements of T may be written in place: the caller's
// placed output (a shared-memory region or a kept buffer), when it has room,
// is aligned for T and lies apart from every input (a scan's may be its
// input exactly: the scan works in place); else null, and the answer goes
// through NewAnswer and the service copies it there. Writing in place saves
// that copy, and the zero-filled string it went through.
template <typename T>
T* PlaceFor(const OutputPlace& place, size_t n, std::initializer_list<absl::string_view> inputs,
            const char* may_be = nullptr) {
  const size_t bytes = n * sizeof(T);
  if (place.data == nullptr || bytes == 0 || place.room < bytes ||
      reinterpret_cast<uintptr_t>(place.data) % alignof(T) != 0) {
    return nullptr;
  }
  for (absl::string_view input : inputs) {
    const bool apart = place.data + bytes <= input.data() || input.data() + input.size() <= place.data;
    if (!apart && !(place.data == may_be && input.data() == may_be && input.size() == bytes)) {
      return nullptr;
    }
  }
  return reinterpret_cast<T*>(place.data);
}

// Whether every output the caller placed has room for its answer (`bytes`).
// Where one lacks it the service refuses the request and promises that
// nothing was written, so then no answer of the request may go in place:
// each goes through NewAnswer and the refusal comes before any write.
bool EveryPlaceHasRoom(std::initializer_list<std::pair<const OutputPlace*, uint64_t>> outputs) {
  for (const auto& [place, bytes] : outputs) {
    if (place != nullptr && place->data != nullptr && place->room < bytes) return false;
  }
  return true;
}

// An answer of n elements of T: written at `at` (PlaceFor's, non-null) or
// into NewAnswer's room.
template <typename T>
HostArray AnswerAt(T* at, DType dtype, size_t n, const AnswerAllocator* answers) {
  if (at == nullptr) return NewAnswer<T>(dtype, n, answers);
  HostArray array{dtype};
  array.bytes_in_place = n * sizeof(T);
  return array;
}

// The elements of an answer, to write (before it moves: a short answer's
// bytes live inside the string).
template <typename T>
absl::Span<T> Elements(HostArray& array) {
  absl::Span<char> bytes = array.mutable_data();
  return absl::MakeSpan(reinterpret_cast<T*>(bytes.data()), bytes.size() / sizeof(T));
}

// The elements of an answer from AnswerAt, to write.
template <typename T>
absl::Span<T> Elements(HostArray& array, T* at) {
  return at != nullptr ? absl::MakeSpan(at, array.bytes_in_place / sizeof(T)) : Elements<T>(array);
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
      const size_t n = o.input.size();
      Wide<T>* at = PlaceFor<Wide<T>>({o.output_place, n * sizeof(Wide<T>)}, n, {o.input.bytes});
      HostArray out = AnswerAt<Wide<T>>(at, ValuesDType(o), n, context.answers);
      cpu::Scan<T, Wide<T>>(o.input.as<T>(), o.op, o.exclusive, o.segment_offsets,
                            Elements<Wide<T>>(out, at), context.parallelism);
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
    const size_t n = o.input.size();
    T* at = PlaceFor<T>({o.output_place, o.input.bytes.size()}, n, {o.input.bytes},
                        o.input.bytes.data());
    HostArray out = AnswerAt<T>(at, o.input.dtype, n, context.answers);
    cpu::Scan<T>(o.input.as<T>(), o.op, o.exclusive, o.segment_offsets, Elements<T>(out, at),
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
    // Flags are compacted through a mask; a predicate, and a count, need none.
    std::vector<uint8_t> keep(!o.predicate && (values || indices) ? input.size() : 0);
    const cpu::KeptCounts counts =
        o.predicate ? cpu::CountPassing<T>(input, o.predicate->As<T>(), context.parallelism)
                    : VisitDType(o.flags->dtype, [&](auto flag_zero) {
                        using F = decltype(flag_zero);
                        return cpu::CountFlagged<F>(o.flags->as<F>(), absl::MakeSpan(keep),
                                                    context.parallelism);
                      });
    SelectResult result;
    result.count = counts.total;
    const uint64_t size = o.partition ? input.size() : result.count;
    const std::initializer_list<absl::string_view> inputs = {
        o.input.bytes, o.flags ? o.flags->bytes : absl::string_view()};
    const bool in_place = EveryPlaceHasRoom({{values ? &o.places.values : nullptr, size * sizeof(T)},
                                             {indices ? &o.places.indices : nullptr, size * 8}});
    T* values_at = values && in_place ? PlaceFor<T>(o.places.values, size, inputs) : nullptr;
    int64_t* indices_at =
        indices && in_place ? PlaceFor<int64_t>(o.places.indices, size, inputs) : nullptr;
    if (values) result.values = AnswerAt<T>(values_at, o.input.dtype, size, context.answers);
    if (indices) {
      result.indices = AnswerAt<int64_t>(indices_at, DType::kInt64, size, context.answers);
    }
    const absl::Span<T> value_slots =
        values ? Elements<T>(*result.values, values_at) : absl::Span<T>();
    const absl::Span<int64_t> index_slots =
        indices ? Elements<int64_t>(*result.indices, indices_at) : absl::Span<int64_t>();
    if (o.predicate) {
      cpu::CompactPassing<T>(input, o.predicate->As<T>(), counts, o.partition, value_slots,
                             index_slots, context.parallelism);
    } else if (values || indices) {
      cpu::CompactMarked<T>(input, keep, counts, o.partition, value_slots, index_slots,
                            context.parallelism);
    }
    return result;
  });
}

absl::StatusOr<Result> Run(const UniqueOperation& o, const CpuContext& context) {
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    const absl::Span<const T> input = o.input.as<T>();
    const cpu::KeptCounts runs = cpu::CountRuns<T>(input, context.parallelism);
    T* at = PlaceFor<T>(o.places.values, runs.total, {o.input.bytes});
    UniqueResult result{AnswerAt<T>(at, o.input.dtype, runs.total, context.answers)};
    cpu::CompactRuns<T>(input, runs, Elements<T>(result.values, at), {}, context.parallelism);
    return result;
  });
}

absl::StatusOr<Result> Run(const RunLengthEncodeOperation& o, const CpuContext& context) {
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    const absl::Span<const T> input = o.input.as<T>();
    const cpu::KeptCounts runs = cpu::CountRuns<T>(input, context.parallelism);
    const bool in_place = EveryPlaceHasRoom(
        {{&o.places.values, runs.total * sizeof(T)}, {&o.places.lengths, runs.total * 8}});
    T* values_at = in_place ? PlaceFor<T>(o.places.values, runs.total, {o.input.bytes}) : nullptr;
    int64_t* lengths_at =
        in_place ? PlaceFor<int64_t>(o.places.lengths, runs.total, {o.input.bytes}) : nullptr;
    RunLengthEncodeResult result{
        AnswerAt<T>(values_at, o.input.dtype, runs.total, context.answers),
        AnswerAt<int64_t>(lengths_at, DType::kInt64, runs.total, context.answers)};
    cpu::CompactRuns<T>(input, runs, Elements<T>(result.values, values_at),
                        Elements<int64_t>(result.lengths, lengths_at), context.parallelism);
    return result;
  });
}

// reference::ReduceByKey's bits (each run's left fold), the runs counted and
// folded over threads (cpu::ReduceRuns), the answers written in place where
// placed.
absl::StatusOr<Result> Run(const ReduceByKeyOperation& o, const CpuContext& context) {
  return VisitDType(o.keys.dtype, [&](auto key_zero) {
    using K = decltype(key_zero);
    return VisitDType(o.values.dtype, [&](auto value_zero) -> absl::StatusOr<Result> {
      using V = decltype(value_zero);
      const absl::Span<const K> keys = o.keys.as<K>();
      const cpu::KeptCounts runs = cpu::CountRuns<K>(keys, context.parallelism);
      const std::initializer_list<absl::string_view> inputs = {o.keys.bytes, o.values.bytes};
      const bool in_place = EveryPlaceHasRoom(
          {{&o.places.keys, runs.total * sizeof(K)}, {&o.places.values, runs.total * sizeof(V)}});
      K* keys_at = in_place ? PlaceFor<K>(o.places.keys, runs.total, inputs) : nullptr;
      V* values_at = in_place ? PlaceFor<V>(o.places.values, runs.total, inputs) : nullptr;
      ReduceByKeyResult result{AnswerAt<K>(keys_at, o.keys.dtype, runs.total, context.answers),
                               AnswerAt<V>(values_at, o.values.dtype, runs.total, context.answers)};
      cpu::ReduceRuns<K, V>(keys, o.values.as<V>(), o.op, runs, Elements<K>(result.keys, keys_at),
                            Elements<V>(result.values, values_at), context.parallelism);
      return result;
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
HostArray Permuted(const ArrayView& array, absl::Span<const int64_t> permutation) {
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
    const size_t n = o.keys.size();
    const std::initializer_list<absl::string_view> inputs = {
        o.keys.bytes, o.values ? o.values->bytes : absl::string_view()};
    const bool in_place = EveryPlaceHasRoom(
        {{&o.places.keys, n * sizeof(K)},
         {o.return_indices ? &o.places.indices : nullptr, n * 8},
         {o.values ? &o.places.values : nullptr, o.values ? o.values->bytes.size() : 0}});
    K* keys_at = in_place ? PlaceFor<K>(o.places.keys, n, inputs) : nullptr;
    int64_t* order_at =
        o.return_indices && in_place ? PlaceFor<int64_t>(o.places.indices, n, inputs) : nullptr;
    SortResult r{AnswerAt<K>(keys_at, o.keys.dtype, n, context.answers)};
    HostArray order = AnswerAt<int64_t>(order_at, DType::kInt64, n, context.answers);
    cpu::Sort<K>(o.keys.as<K>(), o.descending, o.segment_offsets, context.parallelism,
                 Elements<K>(r.keys, keys_at), Elements<int64_t>(order, order_at));
    if (o.values) r.values = Permuted(*o.values, Elements<int64_t>(order, order_at));
    if (o.return_indices) r.indices = std::move(order);
    return r;
  });
}

absl::StatusOr<Result> Run(const GatherOperation& o, const CpuContext& context) {
  const uint64_t n = o.values.size();
  const absl::Span<const int64_t> indices = o.indices.as<int64_t>();
  const int64_t bad = cpu::FirstIndexOutOfRange(indices, n, context.parallelism);
  if (bad >= 0) return absl::InvalidArgumentError(IndexOutOfRangeMessage(bad, indices[bad], n));
  return VisitDType(o.values.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    T* at = PlaceFor<T>(o.places.values, indices.size(), {o.values.bytes, o.indices.bytes});
    HostArray out = AnswerAt<T>(at, o.values.dtype, indices.size(), context.answers);
    cpu::Gather<T>(o.values.as<T>(), indices, Elements<T>(out, at), context.parallelism);
    return GatherResult{std::move(out)};
  });
}

// The CPU backend's steps: every output stays in its step's result, in host
// memory, where later steps read it.
class CpuSteps final : public StepRunner {
 public:
  CpuSteps(const CpuContext& context, Metrics* metrics) : context_(context), metrics_(metrics) {}
  absl::StatusOr<Result> RunStep(const Operation& operation, bool returned) override {
    // A step's answers come back in its result, never in place: RunPipeline
    // gives later steps views of a step's result (or of memory KeepOutput
    // gave, and this backend keeps none), so an answer written into the
    // caller's place (a buffer, a region) left them 0 elements to read; the
    // service writes a returned answer to its place.
    Operation unplaced = operation;
    for (int output = 0; output < kNumStepOutputKinds; ++output) {
      SetPlace(unplaced, static_cast<StepOutputKind>(output), OutputPlace{});
    }
    // Only answers that are sent go into answer buffers.
    return RunOnCpu(unplaced, CpuContext{context_.parallelism,
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
