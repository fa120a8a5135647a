#include "server/rpc/request_validation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/engine/pipeline_steps.h"

namespace primserve {
namespace {

absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

absl::StatusOr<DType> ParseDType(v1::DType dtype, absl::string_view field) {
  if (dtype == v1::DTYPE_UNSPECIFIED) {
    return Invalid(absl::StrCat(field, ".dtype is missing (DTYPE_UNSPECIFIED)"));
  }
  if (dtype < v1::INT32 || dtype > v1::FLOAT64) {
    return Invalid(absl::StrCat(field, ".dtype ", static_cast<int>(dtype), " is not a known DType"));
  }
  return static_cast<DType>(dtype);
}

constexpr absl::string_view kInlineOnly =
    "the streaming RPCs carry inline bytes only: shared memory (Array.shm, output_location) and "
    "resident buffers (Array.buffer, output_buffers) are for the unary RPCs and Multiplex";

// The elements of `array` that name a resident buffer.
absl::StatusOr<ArrayView> ParseBufferArray(const v1::Array& array, absl::string_view field,
                                           const RequestLimits& limits,
                                           shm::RequestMemory* memory) {
  if (!array.data().empty() || array.has_shm()) {
    return Invalid(absl::StrCat(field, " has ", array.has_shm() ? "shm" : "data",
                                " and buffer; set one of data, shm and buffer"));
  }
  if (memory == nullptr) return Invalid(kInlineOnly);
  if (array.dtype() != v1::DTYPE_UNSPECIFIED) {
    if (absl::StatusOr<DType> dtype = ParseDType(array.dtype(), field); !dtype.ok()) {
      return dtype.status();
    }
  }
  absl::StatusOr<ArrayView> view = memory->BufferInput(array.buffer(), array.dtype(), field);
  if (!view.ok()) return view.status();
  if (view->size() > limits.max_elements) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s has %d elements, over the server's limit of %d (--max_request_elements)",
                        field, view->size(), limits.max_elements));
  }
  return view;
}

// The elements of `array` that an earlier step of a Pipeline makes.
absl::StatusOr<ArrayView> ParseStepArray(const v1::Array& array, absl::string_view field,
                                         shm::RequestMemory* memory) {
  if (!array.data().empty() || array.has_shm() || array.has_buffer()) {
    return Invalid(absl::StrCat(field, " has step and ",
                                array.has_buffer() ? "buffer" : array.has_shm() ? "shm" : "data",
                                "; set one of data, shm, buffer and step"));
  }
  if (memory == nullptr || memory->step_inputs() == nullptr) {
    return Invalid(absl::StrCat(field,
                                ".step names an output of an earlier step of a Pipeline; it is "
                                "valid only in a step of a PipelineRequest"));
  }
  return memory->step_inputs()->Input(array.step(), array.dtype(), field);
}

absl::StatusOr<ArrayView> ParseArray(const v1::Array& array, absl::string_view field,
                                     const RequestLimits& limits, shm::RequestMemory* memory,
                                     wire::ReceivedMessage* payloads,
                                     DeferredInputs* deferred = nullptr) {
  if (array.has_step()) return ParseStepArray(array, field, memory);
  if (array.has_buffer()) return ParseBufferArray(array, field, limits, memory);
  absl::StatusOr<DType> dtype = ParseDType(array.dtype(), field);
  if (!dtype.ok()) return dtype.status();
  const size_t element_size = DTypeSize(*dtype);
  absl::string_view data = array.data();
  // A payload left in gRPC's slices: checked by its size, then made
  // contiguous (at most one copy) only once it is valid.
  wire::Payload* payload = payloads != nullptr ? payloads->Find(data) : nullptr;
  if (payload == nullptr && payloads != nullptr && payloads->tokens() && !data.empty()) {
    return absl::InternalError(absl::StrCat(field, ".data is not a payload of its request"));
  }
  const size_t data_size = payload != nullptr ? payload->size() : data.size();
  if (array.has_shm()) {
    if (!data.empty()) {
      return Invalid(absl::StrCat(field, " has both data and shm; set one"));
    }
    if (memory == nullptr) return Invalid(kInlineOnly);
    absl::StatusOr<absl::string_view> shared = memory->Input(array.shm(), *dtype, field);
    if (!shared.ok()) return shared.status();
    data = *shared;
  }
  const size_t size = array.has_shm() ? data.size() : data_size;
  if (size % element_size != 0) {
    return Invalid(absl::StrFormat("%s.data has %d bytes, not a multiple of the %d-byte %s element",
                                   field, size, element_size, DTypeName(*dtype)));
  }
  const uint64_t elements = size / element_size;
  if (elements > limits.max_elements) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s has %d elements, over the server's limit of %d (--max_request_elements)",
                        field, elements, limits.max_elements));
  }
  if (payload != nullptr && deferred != nullptr) {
    if (std::optional<ArrayView> pending = deferred->Defer(*payload, *dtype)) return *pending;
  }
  if (payload != nullptr) data = payload->Contiguous();
  // Backends read the bytes in place as elements; protobuf's strings are heap
  // or in-object buffers, both 8-byte aligned with libstdc++, contiguous
  // payloads are 8-byte aligned (shared memory is checked element-aligned as
  // it resolves).
  if (reinterpret_cast<uintptr_t>(data.data()) % element_size != 0) {
    return absl::InternalError(absl::StrCat(field, " is not element-aligned in memory"));
  }
  return ArrayView{*dtype, data};
}

absl::Status CheckSameLength(const ArrayView& a, absl::string_view a_field, const ArrayView& b,
                             absl::string_view b_field) {
  // An earlier step's output has its length only once it has run (then
  // checked: CheckBoundInputs).
  if (a.size() == b.size() || IsUnbound(a) || IsUnbound(b)) return absl::OkStatus();
  return Invalid(absl::StrFormat("%s has %d elements but %s has %d; they must match", b_field,
                                 b.size(), a_field, a.size()));
}

absl::StatusOr<Op> ParseOp(v1::Op op, bool allow_arg, bool allow_prod, absl::string_view rpc) {
  if (op == v1::OP_UNSPECIFIED) return Invalid("op is missing (OP_UNSPECIFIED)");
  if (op < v1::SUM || op > v1::ARGMAX) {
    return Invalid(absl::StrCat("op ", static_cast<int>(op), " is not a known Op"));
  }
  const Op parsed = static_cast<Op>(op);
  if ((!allow_arg && (parsed == Op::kArgMin || parsed == Op::kArgMax)) ||
      (!allow_prod && parsed == Op::kProd)) {
    return Invalid(absl::StrCat("op ", OpName(parsed), " does not apply to ", rpc));
  }
  return parsed;
}

absl::StatusOr<absl::Span<const uint64_t>> ParseSegments(
    const google::protobuf::RepeatedField<uint64_t>& offsets, uint64_t n,
    const RequestLimits& limits) {
  // Repeated offsets (empty segments) are valid, so n does not bound their
  // number; Reduce answers 8 to 16 bytes per 1-byte offset on the wire.
  if (static_cast<uint64_t>(offsets.size()) > limits.max_elements) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "segment_offsets has %d entries, over the server's limit of %d (--max_request_elements)",
        offsets.size(), limits.max_elements));
  }
  for (int i = 0; i < offsets.size(); ++i) {
    if (i == 0 && offsets[0] != 0) {
      return Invalid(absl::StrFormat(
          "segment_offsets[0] = %d: the first segment must start at 0", offsets[0]));
    }
    if (i > 0 && offsets[i] < offsets[i - 1]) {
      return Invalid(absl::StrFormat(
          "segment_offsets[%d] = %d is less than segment_offsets[%d] = %d; offsets must be "
          "non-decreasing",
          i, offsets[i], i - 1, offsets[i - 1]));
    }
    if (offsets[i] > n) {
      return Invalid(absl::StrFormat(
          "segment_offsets[%d] = %d is past the end of the input (%d elements)", i, offsets[i], n));
    }
  }
  return absl::MakeConstSpan(offsets.data(), offsets.size());
}

template <typename T>
uint64_t BitsOf(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

// An integer dtype's operand as T's bit pattern, if it is an int_value or
// uint_value that fits T.
template <typename T>
absl::StatusOr<uint64_t> IntegerOperandBits(const v1::Scalar& scalar, absl::string_view field,
                                            DType dtype) {
  switch (scalar.value_case()) {
    case v1::Scalar::VALUE_NOT_SET:
      return Invalid(absl::StrCat(field, " has no value"));
    case v1::Scalar::kFloatValue:
      return Invalid(absl::StrCat(field, " is a float_value but the input is ", DTypeName(dtype),
                                  "; use int_value or uint_value"));
    case v1::Scalar::kIntValue: {
      const int64_t v = scalar.int_value();
      bool fits;
      if constexpr (std::is_signed_v<T>) {
        fits = v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
      } else {
        fits = v >= 0 && static_cast<uint64_t>(v) <= std::numeric_limits<T>::max();
      }
      if (!fits) {
        return Invalid(absl::StrCat(field, ".int_value ", v, " does not fit ", DTypeName(dtype)));
      }
      return BitsOf(static_cast<T>(v));
    }
    case v1::Scalar::kUintValue: {
      const uint64_t v = scalar.uint_value();
      if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        return Invalid(absl::StrCat(field, ".uint_value ", v, " does not fit ", DTypeName(dtype)));
      }
      return BitsOf(static_cast<T>(v));
    }
  }
  return Invalid(absl::StrCat(field, " has an unknown value kind"));
}

// A float dtype's operand, exactly as sent: long double holds every double,
// int64 and uint64 value exactly (64-bit significand or more).
absl::StatusOr<long double> FloatOperand(const v1::Scalar& scalar, absl::string_view field) {
  static_assert(std::numeric_limits<long double>::digits >= 64,
                "long double must hold every int64 and uint64 exactly");
  switch (scalar.value_case()) {
    case v1::Scalar::VALUE_NOT_SET:
      return Invalid(absl::StrCat(field, " has no value"));
    case v1::Scalar::kFloatValue:
      return static_cast<long double>(scalar.float_value());
    case v1::Scalar::kIntValue:
      return static_cast<long double>(scalar.int_value());
    case v1::Scalar::kUintValue:
      return static_cast<long double>(scalar.uint_value());
  }
  return Invalid(absl::StrCat(field, " has an unknown value kind"));
}

// The float T values just below and just above v (equal when T holds v
// exactly; infinities past T's range).
template <typename T>
std::pair<T, T> Bracket(long double v) {
  const T nearest = static_cast<T>(v);
  if (std::isnan(v) || static_cast<long double>(nearest) == v) return {nearest, nearest};
  if (static_cast<long double>(nearest) < v) {
    return {nearest, std::nextafter(nearest, std::numeric_limits<T>::infinity())};
  }
  return {std::nextafter(nearest, -std::numeric_limits<T>::infinity()), nearest};
}

// A predicate on float elements compares as mathematics says: an operand T
// cannot hold is replaced by its neighbour in T that gives the same answer
// for every element (no element lies strictly between the two neighbours).
template <typename T>
PredicateSpec ExactFloatPredicate(PredicateKind kind, long double operand, long double upper) {
  const auto [below, above] = Bracket<T>(operand);
  PredicateSpec spec;
  spec.kind = kind;
  spec.operand_bits = BitsOf(below);
  if (kind == PredicateKind::kInRange) {  // v <= x < u  <=>  above(v) <= x < above(u)
    spec.operand_bits = BitsOf(above);
    spec.upper_bits = BitsOf(Bracket<T>(upper).second);
    return spec;
  }
  if (below == above || std::isnan(below)) return spec;
  switch (kind) {
    case PredicateKind::kEq:  // no element equals it: x > +inf holds for none
      spec.kind = PredicateKind::kGt;
      spec.operand_bits = BitsOf(std::numeric_limits<T>::infinity());
      break;
    case PredicateKind::kNe:  // every element differs: x != NaN holds for all
      spec.operand_bits = BitsOf(std::numeric_limits<T>::quiet_NaN());
      break;
    case PredicateKind::kLt:  // x < v  <=>  x < above
    case PredicateKind::kGe:  // x >= v <=>  x >= above
      spec.operand_bits = BitsOf(above);
      break;
    case PredicateKind::kLe:  // x <= v <=> x <= below
    case PredicateKind::kGt:  // x > v  <=> x > below
    case PredicateKind::kNonzero:
    case PredicateKind::kInRange:
      break;
  }
  return spec;
}

absl::StatusOr<PredicateSpec> ParsePredicate(const v1::Predicate& predicate, DType dtype) {
  const auto kind = predicate.kind();
  if (kind == v1::Predicate::KIND_UNSPECIFIED) {
    return Invalid("predicate.kind is missing (KIND_UNSPECIFIED)");
  }
  if (kind < v1::Predicate::NONZERO || kind > v1::Predicate::IN_RANGE) {
    return Invalid(absl::StrCat("predicate.kind ", static_cast<int>(kind), " is not a known Kind"));
  }
  PredicateSpec spec;
  spec.kind = static_cast<PredicateKind>(kind);
  if (spec.kind == PredicateKind::kNonzero) return spec;
  if (!predicate.has_operand()) {
    return Invalid(absl::StrCat("predicate.operand is required for ", PredicateKindName(spec.kind)));
  }
  const bool ranged = spec.kind == PredicateKind::kInRange;
  if (ranged && !predicate.has_upper()) return Invalid("predicate.upper is required for IN_RANGE");
  return VisitDType(dtype, [&](auto zero) -> absl::StatusOr<PredicateSpec> {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      absl::StatusOr<long double> operand = FloatOperand(predicate.operand(), "predicate.operand");
      if (!operand.ok()) return operand.status();
      long double upper = 0;
      if (ranged) {
        absl::StatusOr<long double> u = FloatOperand(predicate.upper(), "predicate.upper");
        if (!u.ok()) return u.status();
        upper = *u;
      }
      return ExactFloatPredicate<T>(spec.kind, *operand, upper);
    } else {
      absl::StatusOr<uint64_t> operand =
          IntegerOperandBits<T>(predicate.operand(), "predicate.operand", dtype);
      if (!operand.ok()) return operand.status();
      spec.operand_bits = *operand;
      if (ranged) {
        absl::StatusOr<uint64_t> upper =
            IntegerOperandBits<T>(predicate.upper(), "predicate.upper", dtype);
        if (!upper.ok()) return upper.status();
        spec.upper_bits = *upper;
      }
      return spec;
    }
  });
}

// Refuses, before anything is allocated, an operation whose answer could be
// larger than the server sends (AggregateByKey's num_keys and Reduce's
// segment_offsets make answers far larger than their requests).
absl::StatusOr<Operation> WithinAnswerLimit(Operation operation, const RequestLimits& limits) {
  const uint64_t bytes = MaxAnswerBytes(operation);
  if (bytes > limits.max_response_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the answer to this %s could take %d bytes, over the server's limit of %d "
        "(--max_response_bytes)",
        RpcName(RpcOf(operation)), bytes, limits.max_response_bytes));
  }
  return operation;
}

// Resolves the request's output_location and output_buffers, where it has
// them, for the outputs it produces.
template <typename Request>
absl::Status PlaceOutputs(const Request& request, absl::Span<const shm::OutputSpec> produced,
                          shm::RequestMemory* memory, absl::string_view rpc) {
  if (!request.has_output_location() && !request.has_output_buffers()) return absl::OkStatus();
  if (memory == nullptr) return Invalid(kInlineOnly);
  if (request.has_output_location()) {
    if (absl::Status placed = memory->PlaceOutputs(request.output_location(), produced, rpc);
        !placed.ok()) {
      return placed;
    }
  }
  if (!request.has_output_buffers()) return absl::OkStatus();
  return memory->PlaceOutputs(request.output_buffers(), produced, rpc);
}

// The request's `reproducible`, or the server's default for every request.
bool Reproducible(bool requested, const RequestLimits& limits) {
  return requested || limits.reproducible_floats;
}

// Scan's and Reduce's accumulator_dtype: none where unset or the input's own.
absl::StatusOr<std::optional<DType>> ParseAccumulator(v1::DType asked, Op op, DType input,
                                                      const RequestLimits& limits) {
  if (asked == v1::DTYPE_UNSPECIFIED || static_cast<DType>(asked) == input) return std::nullopt;
  if (!v1::DType_IsValid(asked)) {
    return Invalid(absl::StrCat("accumulator_dtype ", static_cast<int>(asked), " is not a known DType"));
  }
  const DType wide = static_cast<DType>(asked);
  if (op != Op::kSum && op != Op::kProd) {
    return Invalid(absl::StrCat("accumulator_dtype ", DTypeName(wide), " applies to SUM and PROD, not ",
                                OpName(op)));
  }
  const bool widens = (input == DType::kInt32 && wide == DType::kInt64) ||
                      (input == DType::kUint32 && wide == DType::kUint64) ||
                      (input == DType::kFloat32 && wide == DType::kFloat64);
  if (!widens) {
    return Invalid(absl::StrCat("accumulator_dtype ", DTypeName(wide), " does not widen a ",
                                DTypeName(input),
                                " input (INT32 widens to INT64, UINT32 to UINT64, FLOAT32 to FLOAT64)"));
  }
  if (!limits.wide_accumulators) {
    return Invalid(absl::StrCat("accumulator_dtype ", DTypeName(wide),
                                ": this server's backend accumulates in the input's dtype only"));
  }
  return wide;
}

uint64_t Segments(absl::Span<const uint64_t> offsets) {
  return offsets.empty() ? 1 : offsets.size();
}

// `n`, the size of an answer as long as `input`, where it is known before
// the request runs (not where an earlier step of a Pipeline makes it).
std::optional<uint64_t> KnownSize(const ArrayView& input, uint64_t n) {
  if (IsUnbound(input)) return std::nullopt;
  return n;
}

}  // namespace

absl::StatusOr<Operation> ToOperation(const v1::ScanRequest& request, const RequestLimits& limits,
                                      shm::RequestMemory* memory,
                                      wire::ReceivedMessage* payloads,
                                      DeferredInputs* deferred) {
  ScanOperation o;
  absl::StatusOr<ArrayView> input =
      ParseArray(request.input(), "input", limits, memory, payloads, deferred);
  if (!input.ok()) return input.status();
  o.input = *input;
  absl::StatusOr<Op> op = ParseOp(request.op(), /*allow_arg=*/false, /*allow_prod=*/true, "Scan");
  if (!op.ok()) return op.status();
  o.op = *op;
  o.exclusive = request.exclusive();
  o.reproducible = Reproducible(request.reproducible(), limits);
  absl::StatusOr<std::optional<DType>> accumulator =
      ParseAccumulator(request.accumulator_dtype(), o.op, o.input.dtype, limits);
  if (!accumulator.ok()) return accumulator.status();
  o.accumulator = *accumulator;
  absl::StatusOr<absl::Span<const uint64_t>> segments =
      ParseSegments(request.segment_offsets(), o.input.size(), limits);
  if (!segments.ok()) return segments.status();
  o.segment_offsets = *segments;
  if (absl::Status s = PlaceOutputs(
          request,
          {{shm::Slot::kValues, ValuesDType(o), KnownSize(o.input, o.input.size()), o.input.size()}},
          memory, "Scan");
      !s.ok()) {
    return s;
  }
  if (memory != nullptr) o.output_place = memory->PlacedData(shm::Slot::kValues);
  return WithinAnswerLimit(o, limits);
}

absl::StatusOr<Operation> ToOperation(const v1::ReduceRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory,
                                      wire::ReceivedMessage* payloads) {
  ReduceOperation o;
  absl::StatusOr<ArrayView> input = ParseArray(request.input(), "input", limits, memory, payloads);
  if (!input.ok()) return input.status();
  o.input = *input;
  absl::StatusOr<Op> op = ParseOp(request.op(), /*allow_arg=*/true, /*allow_prod=*/true, "Reduce");
  if (!op.ok()) return op.status();
  o.op = *op;
  o.reproducible = Reproducible(request.reproducible(), limits);
  absl::StatusOr<std::optional<DType>> accumulator =
      ParseAccumulator(request.accumulator_dtype(), o.op, o.input.dtype, limits);
  if (!accumulator.ok()) return accumulator.status();
  o.accumulator = *accumulator;
  absl::StatusOr<absl::Span<const uint64_t>> segments =
      ParseSegments(request.segment_offsets(), o.input.size(), limits);
  if (!segments.ok()) return segments.status();
  o.segment_offsets = *segments;
  const uint64_t answers = Segments(o.segment_offsets);
  const shm::OutputSpec produced[] = {{shm::Slot::kValues, ValuesDType(o), answers},
                                      {shm::Slot::kIndices, DType::kInt64, answers}};
  const bool indices = o.op == Op::kArgMin || o.op == Op::kArgMax;
  if (absl::Status s = PlaceOutputs(request, absl::MakeConstSpan(produced, indices ? 2 : 1),
                                    memory, "Reduce");
      !s.ok()) {
    return s;
  }
  o.places = shm::PlacesOf(memory);
  return WithinAnswerLimit(o, limits);
}

absl::StatusOr<Operation> ToOperation(const v1::SelectRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory,
                                      wire::ReceivedMessage* payloads) {
  SelectOperation o;
  absl::StatusOr<ArrayView> input = ParseArray(request.input(), "input", limits, memory, payloads);
  if (!input.ok()) return input.status();
  o.input = *input;
  switch (request.criterion_case()) {
    case v1::SelectRequest::CRITERION_NOT_SET:
      return Invalid("a criterion is required: set predicate or flags");
    case v1::SelectRequest::kPredicate: {
      absl::StatusOr<PredicateSpec> predicate = ParsePredicate(request.predicate(), o.input.dtype);
      if (!predicate.ok()) return predicate.status();
      o.predicate = *predicate;
      break;
    }
    case v1::SelectRequest::kFlags: {
      absl::StatusOr<ArrayView> flags = ParseArray(request.flags(), "flags", limits, memory, payloads);
      if (!flags.ok()) return flags.status();
      if (!IsIntegerDType(flags->dtype)) {
        return Invalid(absl::StrCat("flags.dtype is ", DTypeName(flags->dtype),
                                    "; flags must be of an integer dtype"));
      }
      if (absl::Status s = CheckSameLength(o.input, "input", *flags, "flags"); !s.ok()) return s;
      o.flags = *flags;
      break;
    }
  }
  const int output = request.output();
  if (output < v1::SelectRequest::OUTPUT_UNSPECIFIED || output > v1::SelectRequest::COUNT) {
    return Invalid(absl::StrCat("output ", output, " is not a known Output"));
  }
  o.output = output == v1::SelectRequest::OUTPUT_UNSPECIFIED ? SelectOutput::kValues
                                                             : static_cast<SelectOutput>(output);
  o.partition = request.partition();
  shm::OutputSpec produced[2];
  size_t outputs = 0;
  if (o.output == SelectOutput::kValues || o.output == SelectOutput::kValuesAndIndices) {
    produced[outputs++] = {shm::Slot::kValues, o.input.dtype, std::nullopt, o.input.size()};
  }
  if (o.output == SelectOutput::kIndices || o.output == SelectOutput::kValuesAndIndices) {
    produced[outputs++] = {shm::Slot::kIndices, DType::kInt64, std::nullopt, o.input.size()};
  }
  if (absl::Status s =
          PlaceOutputs(request, absl::MakeConstSpan(produced, outputs), memory, "Select");
      !s.ok()) {
    return s;
  }
  o.places = shm::PlacesOf(memory);
  return WithinAnswerLimit(o, limits);
}

absl::StatusOr<Operation> ToOperation(const v1::UniqueRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory,
                                      wire::ReceivedMessage* payloads) {
  absl::StatusOr<ArrayView> input = ParseArray(request.input(), "input", limits, memory, payloads);
  if (!input.ok()) return input.status();
  if (absl::Status s = PlaceOutputs(
          request, {{shm::Slot::kValues, input->dtype, std::nullopt, input->size()}}, memory,
          "Unique");
      !s.ok()) {
    return s;
  }
  return WithinAnswerLimit(UniqueOperation{*input, shm::PlacesOf(memory)}, limits);
}

absl::StatusOr<Operation> ToOperation(const v1::RunLengthEncodeRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory,
                                      wire::ReceivedMessage* payloads) {
  absl::StatusOr<ArrayView> input = ParseArray(request.input(), "input", limits, memory, payloads);
  if (!input.ok()) return input.status();
  if (absl::Status s = PlaceOutputs(request,
                                    {{shm::Slot::kValues, input->dtype, std::nullopt, input->size()},
                                     {shm::Slot::kLengths, DType::kInt64, std::nullopt,
                                      input->size()}},
                                    memory, "RunLengthEncode");
      !s.ok()) {
    return s;
  }
  return WithinAnswerLimit(RunLengthEncodeOperation{*input, shm::PlacesOf(memory)}, limits);
}

absl::StatusOr<Operation> ToOperation(const v1::ReduceByKeyRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory,
                                      wire::ReceivedMessage* payloads) {
  ReduceByKeyOperation o;
  absl::StatusOr<ArrayView> keys = ParseArray(request.keys(), "keys", limits, memory, payloads);
  if (!keys.ok()) return keys.status();
  absl::StatusOr<ArrayView> values = ParseArray(request.values(), "values", limits, memory, payloads);
  if (!values.ok()) return values.status();
  if (absl::Status s = CheckSameLength(*keys, "keys", *values, "values"); !s.ok()) return s;
  absl::StatusOr<Op> op =
      ParseOp(request.op(), /*allow_arg=*/false, /*allow_prod=*/true, "ReduceByKey");
  if (!op.ok()) return op.status();
  o.keys = *keys;
  o.values = *values;
  o.op = *op;
  o.reproducible = Reproducible(request.reproducible(), limits);
  if (absl::Status s = PlaceOutputs(request,
                                    {{shm::Slot::kKeys, o.keys.dtype, std::nullopt, o.keys.size()},
                                     {shm::Slot::kValues, o.values.dtype, std::nullopt,
                                      o.keys.size()}},
                                    memory, "ReduceByKey");
      !s.ok()) {
    return s;
  }
  o.places = shm::PlacesOf(memory);
  return WithinAnswerLimit(o, limits);
}

absl::StatusOr<Operation> ToOperation(const v1::AggregateByKeyRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory,
                                      wire::ReceivedMessage* payloads) {
  AggregateByKeyOperation o;
  absl::StatusOr<ArrayView> keys = ParseArray(request.keys(), "keys", limits, memory, payloads);
  if (!keys.ok()) return keys.status();
  if (!IsIntegerDType(keys->dtype)) {
    return Invalid(absl::StrCat("keys.dtype is ", DTypeName(keys->dtype),
                                "; AggregateByKey keys must be of an integer dtype"));
  }
  absl::StatusOr<ArrayView> values = ParseArray(request.values(), "values", limits, memory, payloads);
  if (!values.ok()) return values.status();
  if (absl::Status s = CheckSameLength(*keys, "keys", *values, "values"); !s.ok()) return s;
  absl::StatusOr<Op> op =
      ParseOp(request.op(), /*allow_arg=*/false, /*allow_prod=*/false, "AggregateByKey");
  if (!op.ok()) return op.status();
  if (request.num_keys() == 0) return Invalid("num_keys must be at least 1");
  if (request.num_keys() > limits.max_elements) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "num_keys = %d is over the server's limit of %d (--max_request_elements)",
        request.num_keys(), limits.max_elements));
  }
  o.keys = *keys;
  o.values = *values;
  o.op = *op;
  o.num_keys = request.num_keys();
  o.reproducible = Reproducible(request.reproducible(), limits);
  if (absl::Status s = PlaceOutputs(request, {{shm::Slot::kValues, o.values.dtype, o.num_keys}},
                                    memory, "AggregateByKey");
      !s.ok()) {
    return s;
  }
  o.places = shm::PlacesOf(memory);
  return WithinAnswerLimit(o, limits);
}

absl::StatusOr<Operation> ToOperation(const v1::SortRequest& request, const RequestLimits& limits,
                                      shm::RequestMemory* memory,
                                      wire::ReceivedMessage* payloads) {
  SortOperation o;
  absl::StatusOr<ArrayView> keys = ParseArray(request.keys(), "keys", limits, memory, payloads);
  if (!keys.ok()) return keys.status();
  o.keys = *keys;
  if (request.has_values()) {
    absl::StatusOr<ArrayView> values =
        ParseArray(request.values(), "values", limits, memory, payloads);
    if (!values.ok()) return values.status();
    if (absl::Status s = CheckSameLength(*keys, "keys", *values, "values"); !s.ok()) return s;
    o.values = *values;
  }
  o.descending = request.descending();
  o.return_indices = request.return_indices();
  absl::StatusOr<absl::Span<const uint64_t>> segments =
      ParseSegments(request.segment_offsets(), o.keys.size(), limits);
  if (!segments.ok()) return segments.status();
  o.segment_offsets = *segments;
  shm::OutputSpec produced[3];
  size_t outputs = 0;
  const std::optional<uint64_t> n = KnownSize(o.keys, o.keys.size());
  produced[outputs++] = {shm::Slot::kKeys, o.keys.dtype, n, o.keys.size()};
  if (o.values) produced[outputs++] = {shm::Slot::kValues, o.values->dtype, n, o.keys.size()};
  if (o.return_indices) {
    produced[outputs++] = {shm::Slot::kIndices, DType::kInt64, n, o.keys.size()};
  }
  if (absl::Status s =
          PlaceOutputs(request, absl::MakeConstSpan(produced, outputs), memory, "Sort");
      !s.ok()) {
    return s;
  }
  o.places = shm::PlacesOf(memory);
  return WithinAnswerLimit(o, limits);
}

absl::StatusOr<Operation> ToOperation(const v1::GatherRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory,
                                      wire::ReceivedMessage* payloads) {
  GatherOperation o;
  absl::StatusOr<ArrayView> values = ParseArray(request.values(), "values", limits, memory, payloads);
  if (!values.ok()) return values.status();
  absl::StatusOr<ArrayView> indices =
      ParseArray(request.indices(), "indices", limits, memory, payloads);
  if (!indices.ok()) return indices.status();
  if (indices->dtype != DType::kInt64) {
    return Invalid(absl::StrCat("indices.dtype is ", DTypeName(indices->dtype),
                                "; Gather takes INT64 indices"));
  }
  o.values = *values;
  o.indices = *indices;
  if (absl::Status s = PlaceOutputs(
          request,
          {{shm::Slot::kValues, o.values.dtype, KnownSize(o.indices, o.indices.size()),
            o.indices.size()}},
          memory, "Gather");
      !s.ok()) {
    return s;
  }
  o.places = shm::PlacesOf(memory);
  return WithinAnswerLimit(o, limits);
}

}  // namespace primserve
