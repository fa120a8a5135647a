// The internal form of a request, below the transport: an Operation (views of
// the caller's arrays plus parameters, already validated), the Result it
// produces, and the Task that carries both through the scheduler to a backend.
#ifndef PRIMSERVE_SERVER_ENGINE_TASK_H_
#define PRIMSERVE_SERVER_ENGINE_TASK_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/primitives.h"
#include "core/rpc.h"
#include "server/engine/answer_sent.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "arrays travel little-endian and are used in place");

namespace primserve {

// An array's bytes not yet copied into the memory its ArrayView names: they
// are still where gRPC received them, in pieces, and Fill copies a range of
// them into place. A backend that takes such arrays
// (ExecutionBackend::MinPendingInputBytes) fills each range before it reads
// it, so that the one copy of a large array overlaps its work on the device.
class PendingBytes {
 public:
  virtual ~PendingBytes() = default;
  // Copies bytes [offset, offset + n) of the array into place.
  virtual void Fill(size_t offset, size_t n) const = 0;
};

// A typed view of packed array bytes owned elsewhere (the caller's request,
// which outlives its task, or a shared-memory region the task's call leases).
// The bytes are aligned to the element's size (see convert.cc).
struct ArrayView {
  DType dtype = DType::kInt32;
  absl::string_view bytes;
  // Non-null: `bytes` is memory of the array's size that holds the array
  // only where this has filled it (owned, like the bytes, by the request).
  const PendingBytes* pending = nullptr;

  uint64_t size() const { return bytes.size() / DTypeSize(dtype); }
  template <typename T>
  absl::Span<const T> as() const {
    return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
  }
};

// An array that owns its packed bytes; moves into a response without a copy.
struct HostArray {
  DType dtype = DType::kInt32;
  std::string bytes;
  // Non-zero: the backend wrote this many bytes of answer straight to the
  // operation's output place, and `bytes` is empty.
  uint64_t bytes_in_place = 0;
  // Non-null: the answer is the first `held_bytes` bytes of this buffer (one
  // of Task::answers, which the backend wrote it into), sent from there, and
  // `bytes` is empty. The buffer is the server's own until it is sent: the
  // server may edit the answer there (mutable_data).
  std::shared_ptr<char> held;
  size_t held_bytes = 0;
  // Bytes of the buffer just before `held` that are this answer's too, where
  // Prepend writes without moving the answer (a stream's answer buffers
  // leave some: server/rpc/stream_reactor.cc).
  size_t held_room = 0;

  // The answer's bytes, wherever they are held (empty if in place).
  absl::string_view data() const {
    return held != nullptr ? absl::string_view(held.get(), held_bytes) : absl::string_view(bytes);
  }
  // The same, to edit in place.
  absl::Span<char> mutable_data() {
    return held != nullptr ? absl::MakeSpan(held.get(), held_bytes) : absl::MakeSpan(bytes);
  }
  // Keeps the first `n` bytes of the answer.
  void Truncate(size_t n);
  // Drops the first `n` bytes of the answer: a held answer then starts
  // further into its buffer (no copy), the bytes dropped becoming its room.
  void RemovePrefix(size_t n);
  // Puts `front` before the answer: a held answer into its room when it has
  // enough (no copy of the answer), else the answer moves into `bytes`.
  void Prepend(absl::string_view front);

  template <typename T>
  static HostArray Of(DType dtype, absl::Span<const T> values) {
    HostArray array{dtype, std::string(values.size() * sizeof(T), '\0')};
    if (!values.empty()) std::memcpy(array.bytes.data(), values.data(), array.bytes.size());
    return array;
  }
};

// A predicate whose operands are already converted to the element type and
// stored as that type's bit pattern.
struct PredicateSpec {
  PredicateKind kind = PredicateKind::kNonzero;
  uint64_t operand_bits = 0;
  uint64_t upper_bits = 0;

  template <typename T>
  Predicate<T> As() const {
    Predicate<T> p;
    p.kind = kind;
    std::memcpy(&p.operand, &operand_bits, sizeof(T));
    std::memcpy(&p.upper, &upper_bits, sizeof(T));
    return p;
  }
};

// Where the caller placed one output (OutputLocation: a shared-memory
// region), with `room` bytes there; null if the output goes inline. A backend
// may write the answer there itself (HostArray::bytes_in_place), never past
// `room`; else the service writes it there.
struct OutputPlace {
  char* data = nullptr;
  uint64_t room = 0;
  // Memory nobody sees unless the request succeeds (a pipeline's kept
  // output): a request that fails may leave part of an answer there.
  bool unseen_on_failure = false;
};

// A request's placed outputs, by OutputLocation field (a Scan's output is
// ScanOperation::output_place instead).
struct OutputPlaces {
  OutputPlace values;
  OutputPlace indices;
  OutputPlace lengths;
  OutputPlace keys;
};

enum class SelectOutput { kValues = 1, kIndices = 2, kValuesAndIndices = 3, kCount = 4 };

// The ops whose bits depend on the order of combination: float (FLOAT32,
// FLOAT64) SUM and PROD. Integers wrap exactly, and MIN/MAX/ARGMIN/ARGMAX
// pick an element whatever the order.
inline bool OrderSensitive(Op op, DType dtype) {
  return (op == Op::kSum || op == Op::kProd) &&
         (dtype == DType::kFloat32 || dtype == DType::kFloat64);
}

struct ScanOperation {
  ArrayView input;
  Op op = Op::kSum;
  bool exclusive = false;
  absl::Span<const uint64_t> segment_offsets;
  // Where the caller placed the output (a shared-memory region), with room
  // for the whole answer; null if inline. A backend may write the answer
  // there itself (HostArray::bytes_in_place).
  char* output_place = nullptr;
  // The request asks (or the server's --reproducible_floats makes it ask)
  // for the same bits every time, alone, batched or streamed. It matters
  // only where OrderSensitive(op, dtype): a backend then runs the operation
  // exactly as it would run it alone (its own launch, tiles aligned to its
  // first element), never fused with others.
  bool reproducible = false;
  // A reproducible ScanStream cut into operations at multiples of the
  // backend's ReproducibleScanGranule (unsegmented only): the running prefix
  // of the stream's elements before this operation's, as the bits of one
  // element (gpu::ScanWithCarry's d_carry_in), which the scan continues.
  // nullopt: nothing before (the identity).
  std::optional<uint64_t> carry_in;
  // With carry_in: also give ScanResult::carry_out, the running prefix
  // through this operation's last element (gpu::ScanWithCarry's
  // d_carry_out), for the stream's next operation.
  bool wants_carry = false;
  // As ReduceOperation::accumulator (ScanRequest.accumulator_dtype).
  std::optional<DType> accumulator;
};

// The dtype of a Scan's output.
inline DType ValuesDType(const ScanOperation& o) { return o.accumulator.value_or(o.input.dtype); }

// The bytes of a Scan's output: its input's, twice them with a wider
// accumulator.
inline uint64_t OutputBytes(const ScanOperation& o) {
  return o.input.size() * DTypeSize(ValuesDType(o));
}

// Whether a scan must run exactly as it would alone (see
// ScanOperation::reproducible).
inline bool RunsReproducibly(const ScanOperation& o) {
  return o.reproducible && OrderSensitive(o.op, ValuesDType(o));
}

struct ReduceOperation {
  ArrayView input;
  Op op = Op::kSum;
  absl::Span<const uint64_t> segment_offsets;
  // As ScanOperation::reproducible.
  bool reproducible = false;
  // SUM/PROD only: a wider dtype the values are accumulated and answered in
  // (ReduceRequest.accumulator_dtype: INT32 into INT64, UINT32 into UINT64,
  // FLOAT32 into FLOAT64); none: the input's.
  std::optional<DType> accumulator;
  // Where the caller placed the outputs (see OutputPlace).
  OutputPlaces places;
};

// The dtype of a Reduce's values.
inline DType ValuesDType(const ReduceOperation& o) { return o.accumulator.value_or(o.input.dtype); }

inline bool RunsReproducibly(const ReduceOperation& o) {
  return o.reproducible && OrderSensitive(o.op, ValuesDType(o));
}

struct SelectOperation {
  ArrayView input;
  std::optional<PredicateSpec> predicate;  // exactly one of predicate, flags
  std::optional<ArrayView> flags;
  SelectOutput output = SelectOutput::kValues;
  bool partition = false;
  // Where the caller placed the outputs (see OutputPlace).
  OutputPlaces places;
};

struct UniqueOperation {
  ArrayView input;
  // Where the caller placed the outputs (see OutputPlace).
  OutputPlaces places;
};

struct RunLengthEncodeOperation {
  ArrayView input;
  // Where the caller placed the outputs (see OutputPlace).
  OutputPlaces places;
};

struct ReduceByKeyOperation {
  ArrayView keys;
  ArrayView values;
  Op op = Op::kSum;
  // As ScanOperation::reproducible (ReduceByKey runs one request per launch
  // already).
  bool reproducible = false;
  // Where the caller placed the outputs (see OutputPlace).
  OutputPlaces places;
};

struct AggregateByKeyOperation {
  ArrayView keys;
  ArrayView values;
  Op op = Op::kSum;
  uint64_t num_keys = 1;
  // As ScanOperation::reproducible: float SUM needs an order-fixed path
  // (atomics combine in timing order).
  bool reproducible = false;
  // Where the caller placed the outputs (see OutputPlace).
  OutputPlaces places;
};

struct SortOperation {
  ArrayView keys;
  std::optional<ArrayView> values;  // moved with the keys; same length
  bool descending = false;
  bool return_indices = false;
  absl::Span<const uint64_t> segment_offsets;
  // Where the caller placed the outputs (see OutputPlace).
  OutputPlaces places;
};

struct GatherOperation {
  ArrayView values;
  ArrayView indices;  // INT64
  // Where the caller placed the output (see OutputPlace).
  OutputPlaces places;
};

// Which output of a pipeline step another step reads (v1::StepOutput.Which).
enum class StepOutputKind { kValues = 0, kIndices = 1, kLengths = 2, kKeys = 3 };
inline constexpr int kNumStepOutputKinds = 4;

// An input of a pipeline step that an earlier step makes: the request's
// field it fills ("input", "flags", "keys", "values" or "indices") and the
// output it is.
struct StepBinding {
  std::string field;
  uint32_t step = 0;
  StepOutputKind output = StepOutputKind::kValues;
};

struct PipelineStep;  // below: it holds an Operation

// Steps run in order as one unit (server/engine/pipeline_run.h).
struct PipelineOperation {
  std::vector<PipelineStep> steps;
};

// One alternative per RPC, in the order of core/rpc.h (task.cc checks it).
using Operation =
    std::variant<ScanOperation, ReduceOperation, SelectOperation, UniqueOperation,
                 RunLengthEncodeOperation, ReduceByKeyOperation, AggregateByKeyOperation,
                 SortOperation, GatherOperation, PipelineOperation>;

struct PipelineStep {
  // The step's request; its bound inputs (below) view nothing until they
  // are bound: each has its producer's dtype and largest size.
  Operation operation;
  std::vector<StepBinding> bindings;
  // The outputs of this step later steps read, by StepOutputKind.
  std::array<bool, kNumStepOutputKinds> read_later{};
  // The step's answer comes back in the response.
  bool returned = false;
};

// The RPC an operation came from.
inline Rpc RpcOf(const Operation& operation) { return static_cast<Rpc>(operation.index()); }

struct ScanResult {
  HostArray output;
  // ScanOperation::wants_carry: the running prefix through the operation's
  // last element, as bits of one element.
  std::optional<uint64_t> carry_out;
};
struct ReduceResult {
  HostArray values;
  std::optional<HostArray> indices;  // ARGMIN/ARGMAX
};
struct SelectResult {
  std::optional<HostArray> values;
  std::optional<HostArray> indices;
  uint64_t count = 0;
};
struct UniqueResult {
  HostArray values;
};
struct RunLengthEncodeResult {
  HostArray values;
  HostArray lengths;
};
struct ReduceByKeyResult {
  HostArray keys;
  HostArray values;
};
struct AggregateByKeyResult {
  HostArray values;
};
struct SortResult {
  HostArray keys;
  std::optional<HostArray> values;   // when the request had values
  std::optional<HostArray> indices;  // return_indices: INT64
};
struct GatherResult {
  HostArray output;
};
struct StepResult;  // below: it holds a Result
struct PipelineResult {
  std::vector<StepResult> steps;  // the returned steps', in step order
};

using Result = std::variant<ScanResult, ReduceResult, SelectResult, UniqueResult,
                            RunLengthEncodeResult, ReduceByKeyResult, AggregateByKeyResult,
                            SortResult, GatherResult, PipelineResult>;

struct StepResult {
  uint32_t step = 0;
  Result result;
};

// Operations with equal keys can run fused in one segmented launch (except
// reproducible ones: batched together, each in its own launch).
struct BatchKey {
  Rpc rpc = Rpc::kScan;
  int op = 0;
  int dtype = 0;
  int second_dtype = 0;  // flags or values dtype, where the RPC has one
  int detail = 0;        // predicate kind, exclusive, output mode...
  // Select's predicate operands: a fused launch applies one predicate.
  uint64_t operand_bits = 0;
  uint64_t upper_bits = 0;
  // A reproducible order-sensitive operation (RunsReproducibly): batched
  // only with others like it, which a backend runs each in its own launch.
  bool reproducible = false;

  friend bool operator==(const BatchKey& a, const BatchKey& b) {
    return std::tie(a.rpc, a.op, a.dtype, a.second_dtype, a.detail, a.operand_bits,
                    a.upper_bits, a.reproducible) ==
           std::tie(b.rpc, b.op, b.dtype, b.second_dtype, b.detail, b.operand_bits,
                    b.upper_bits, b.reproducible);
  }
  template <typename H>
  friend H AbslHashValue(H h, const BatchKey& k) {
    return H::combine(std::move(h), k.rpc, k.op, k.dtype, k.second_dtype, k.detail,
                      k.operand_bits, k.upper_bits, k.reproducible);
  }
};

// std::visit over several lambdas.
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

BatchKey BatchKeyOf(const Operation& operation);

// a + b, or UINT64_MAX past it (sizes a request names may be near 2^64).
inline uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

// Elements of the operation's main input (what batch limits count).
uint64_t ItemCount(const Operation& operation);

// Bytes of array data in the largest answer the operation can produce,
// known from the request alone (e.g. every element kept, every key a run).
uint64_t MaxAnswerBytes(const Operation& operation);

// Host memory a backend may write a large inline answer into (pinned and
// reused: server/engine/pinned_payloads.h), so that the answer is sent from there
// with no copy: a buffer of at least `bytes`, given back when the last
// reference goes, or null (too small to be worth it, or none free), and the
// answer takes a string as usual. A backend holds each answer in a buffer of
// its own, from the buffer's first byte or further in (HostArray::held).
using AnswerAllocator = std::function<std::shared_ptr<char>(size_t bytes)>;

// Calls `f` with every array of `result` (the ones present).
template <typename F>
void ForEachArray(Result& result, F f) {
  std::visit(Overloaded{
                 [&](ScanResult& r) { f(r.output); },
                 [&](ReduceResult& r) {
                   f(r.values);
                   if (r.indices) f(*r.indices);
                 },
                 [&](SelectResult& r) {
                   if (r.values) f(*r.values);
                   if (r.indices) f(*r.indices);
                 },
                 [&](UniqueResult& r) { f(r.values); },
                 [&](RunLengthEncodeResult& r) {
                   f(r.values);
                   f(r.lengths);
                 },
                 [&](ReduceByKeyResult& r) {
                   f(r.keys);
                   f(r.values);
                 },
                 [&](AggregateByKeyResult& r) { f(r.values); },
                 [&](SortResult& r) {
                   f(r.keys);
                   if (r.values) f(*r.values);
                   if (r.indices) f(*r.indices);
                 },
                 [&](GatherResult& r) { f(r.output); },
                 [&](PipelineResult& r) {
                   for (StepResult& step : r.steps) ForEachArray(step.result, f);
                 },
             },
             result);
}

// One request on its way through the scheduler to a backend.
struct Task {
  Operation operation;
  absl::Time deadline = absl::InfiniteFuture();
  // True once the caller has gone away; may be empty.
  std::function<bool()> is_cancelled;
  // Called exactly once, with the result or the reason there is none.
  absl::AnyInvocable<void(absl::StatusOr<Result>)> done;
  absl::Time enqueued_at;
  // Who sent it (see PeerKey in admission.h); admission keeps callers apart
  // by it.
  std::string peer;
  // Empty, or where the backend may put this task's large answers
  // (HostArray::held): set by callers that send answers with FrameResponse
  // (server/rpc/request_validation.h).
  AnswerAllocator answers;
  // Empty, or signalled by the transport once the answer `done` handed it
  // has been sent (or dropped): set by callers that signal it, so that the
  // answer's memory stays counted (admission) while a slow reader holds it.
  std::shared_ptr<AnswerSent> sent;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_TASK_H_
