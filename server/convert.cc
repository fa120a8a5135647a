#include "server/convert.h"

#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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

absl::StatusOr<ArrayView> ParseArray(const v1::Array& array, absl::string_view field,
                                     const RequestLimits& limits) {
  absl::StatusOr<DType> dtype = ParseDType(array.dtype(), field);
  if (!dtype.ok()) return dtype.status();
  const size_t element_size = DTypeSize(*dtype);
  const std::string& data = array.data();
  if (data.size() % element_size != 0) {
    return Invalid(absl::StrFormat("%s.data has %d bytes, not a multiple of the %d-byte %s element",
                                   field, data.size(), element_size, DTypeName(*dtype)));
  }
  const uint64_t elements = data.size() / element_size;
  if (elements > limits.max_elements) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s has %d elements, over the server's limit of %d (--max_request_elements)",
                        field, elements, limits.max_elements));
  }
  // Backends read the bytes in place as elements; protobuf's strings are heap
  // or in-object buffers, both 8-byte aligned with libstdc++.
  if (reinterpret_cast<uintptr_t>(data.data()) % alignof(uint64_t) != 0) {
    return absl::InternalError(absl::StrCat(field, ".data is not 8-byte aligned in memory"));
  }
  return ArrayView{*dtype, data};
}

absl::Status CheckSameLength(const ArrayView& a, absl::string_view a_field, const ArrayView& b,
                             absl::string_view b_field) {
  if (a.size() == b.size()) return absl::OkStatus();
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

// The scalar as T's bit pattern, if it is of a kind T takes and fits.
template <typename T>
absl::StatusOr<uint64_t> ScalarBits(const v1::Scalar& scalar, absl::string_view field,
                                    DType dtype) {
  T value{};
  switch (scalar.value_case()) {
    case v1::Scalar::VALUE_NOT_SET:
      return Invalid(absl::StrCat(field, " has no value"));
    case v1::Scalar::kFloatValue:
      if constexpr (std::is_integral_v<T>) {
        return Invalid(absl::StrCat(field, " is a float_value but the input is ", DTypeName(dtype),
                                    "; use int_value or uint_value"));
      } else {
        value = static_cast<T>(scalar.float_value());
      }
      break;
    case v1::Scalar::kIntValue: {
      const int64_t v = scalar.int_value();
      if constexpr (std::is_integral_v<T>) {
        bool fits;
        if constexpr (std::is_signed_v<T>) {
          fits = v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
        } else {
          fits = v >= 0 && static_cast<uint64_t>(v) <= std::numeric_limits<T>::max();
        }
        if (!fits) {
          return Invalid(absl::StrCat(field, ".int_value ", v, " does not fit ", DTypeName(dtype)));
        }
      }
      value = static_cast<T>(v);
      break;
    }
    case v1::Scalar::kUintValue: {
      const uint64_t v = scalar.uint_value();
      if constexpr (std::is_integral_v<T>) {
        if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
          return Invalid(absl::StrCat(field, ".uint_value ", v, " does not fit ", DTypeName(dtype)));
        }
      }
      value = static_cast<T>(v);
      break;
    }
  }
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
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
  return VisitDType(dtype, [&](auto zero) -> absl::StatusOr<PredicateSpec> {
    using T = decltype(zero);
    if (!predicate.has_operand()) {
      return Invalid(absl::StrCat("predicate.operand is required for ",
                                  PredicateKindName(spec.kind)));
    }
    absl::StatusOr<uint64_t> operand = ScalarBits<T>(predicate.operand(), "predicate.operand", dtype);
    if (!operand.ok()) return operand.status();
    spec.operand_bits = *operand;
    if (spec.kind == PredicateKind::kInRange) {
      if (!predicate.has_upper()) return Invalid("predicate.upper is required for IN_RANGE");
      absl::StatusOr<uint64_t> upper = ScalarBits<T>(predicate.upper(), "predicate.upper", dtype);
      if (!upper.ok()) return upper.status();
      spec.upper_bits = *upper;
    }
    return spec;
  });
}

template <typename Want>
absl::StatusOr<Want> Take(Result& result) {
  if (auto* want = std::get_if<Want>(&result)) return std::move(*want);
  return absl::InternalError("the backend returned a result of another kind");
}

void MoveInto(HostArray array, v1::Array* out) {
  out->set_dtype(static_cast<v1::DType>(array.dtype));
  out->mutable_data()->swap(array.bytes);
}

}  // namespace

absl::StatusOr<Operation> ToOperation(const v1::ScanRequest& request, const RequestLimits& limits) {
  ScanOperation o;
  absl::StatusOr<ArrayView> input = ParseArray(request.input(), "input", limits);
  if (!input.ok()) return input.status();
  o.input = *input;
  absl::StatusOr<Op> op = ParseOp(request.op(), /*allow_arg=*/false, /*allow_prod=*/true, "Scan");
  if (!op.ok()) return op.status();
  o.op = *op;
  o.exclusive = request.exclusive();
  absl::StatusOr<absl::Span<const uint64_t>> segments =
      ParseSegments(request.segment_offsets(), o.input.size(), limits);
  if (!segments.ok()) return segments.status();
  o.segment_offsets = *segments;
  return o;
}

absl::StatusOr<Operation> ToOperation(const v1::ReduceRequest& request,
                                      const RequestLimits& limits) {
  ReduceOperation o;
  absl::StatusOr<ArrayView> input = ParseArray(request.input(), "input", limits);
  if (!input.ok()) return input.status();
  o.input = *input;
  absl::StatusOr<Op> op = ParseOp(request.op(), /*allow_arg=*/true, /*allow_prod=*/true, "Reduce");
  if (!op.ok()) return op.status();
  o.op = *op;
  absl::StatusOr<absl::Span<const uint64_t>> segments =
      ParseSegments(request.segment_offsets(), o.input.size(), limits);
  if (!segments.ok()) return segments.status();
  o.segment_offsets = *segments;
  return o;
}

absl::StatusOr<Operation> ToOperation(const v1::SelectRequest& request,
                                      const RequestLimits& limits) {
  SelectOperation o;
  absl::StatusOr<ArrayView> input = ParseArray(request.input(), "input", limits);
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
      absl::StatusOr<ArrayView> flags = ParseArray(request.flags(), "flags", limits);
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
  return o;
}

absl::StatusOr<Operation> ToOperation(const v1::UniqueRequest& request,
                                      const RequestLimits& limits) {
  absl::StatusOr<ArrayView> input = ParseArray(request.input(), "input", limits);
  if (!input.ok()) return input.status();
  return UniqueOperation{*input};
}

absl::StatusOr<Operation> ToOperation(const v1::RunLengthEncodeRequest& request,
                                      const RequestLimits& limits) {
  absl::StatusOr<ArrayView> input = ParseArray(request.input(), "input", limits);
  if (!input.ok()) return input.status();
  return RunLengthEncodeOperation{*input};
}

absl::StatusOr<Operation> ToOperation(const v1::ReduceByKeyRequest& request,
                                      const RequestLimits& limits) {
  ReduceByKeyOperation o;
  absl::StatusOr<ArrayView> keys = ParseArray(request.keys(), "keys", limits);
  if (!keys.ok()) return keys.status();
  absl::StatusOr<ArrayView> values = ParseArray(request.values(), "values", limits);
  if (!values.ok()) return values.status();
  if (absl::Status s = CheckSameLength(*keys, "keys", *values, "values"); !s.ok()) return s;
  absl::StatusOr<Op> op =
      ParseOp(request.op(), /*allow_arg=*/false, /*allow_prod=*/true, "ReduceByKey");
  if (!op.ok()) return op.status();
  o.keys = *keys;
  o.values = *values;
  o.op = *op;
  return o;
}

absl::StatusOr<Operation> ToOperation(const v1::AggregateByKeyRequest& request,
                                      const RequestLimits& limits) {
  AggregateByKeyOperation o;
  absl::StatusOr<ArrayView> keys = ParseArray(request.keys(), "keys", limits);
  if (!keys.ok()) return keys.status();
  if (!IsIntegerDType(keys->dtype)) {
    return Invalid(absl::StrCat("keys.dtype is ", DTypeName(keys->dtype),
                                "; AggregateByKey keys must be of an integer dtype"));
  }
  absl::StatusOr<ArrayView> values = ParseArray(request.values(), "values", limits);
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
  return o;
}

absl::Status ToResponse(Result result, v1::ScanResponse* response) {
  absl::StatusOr<ScanResult> r = Take<ScanResult>(result);
  if (!r.ok()) return r.status();
  MoveInto(std::move(r->output), response->mutable_output());
  return absl::OkStatus();
}

absl::Status ToResponse(Result result, v1::ReduceResponse* response) {
  absl::StatusOr<ReduceResult> r = Take<ReduceResult>(result);
  if (!r.ok()) return r.status();
  MoveInto(std::move(r->values), response->mutable_values());
  if (r->indices) MoveInto(std::move(*r->indices), response->mutable_indices());
  return absl::OkStatus();
}

absl::Status ToResponse(Result result, v1::SelectResponse* response) {
  absl::StatusOr<SelectResult> r = Take<SelectResult>(result);
  if (!r.ok()) return r.status();
  if (r->values) MoveInto(std::move(*r->values), response->mutable_values());
  if (r->indices) MoveInto(std::move(*r->indices), response->mutable_indices());
  response->set_count(r->count);
  return absl::OkStatus();
}

absl::Status ToResponse(Result result, v1::UniqueResponse* response) {
  absl::StatusOr<UniqueResult> r = Take<UniqueResult>(result);
  if (!r.ok()) return r.status();
  MoveInto(std::move(r->values), response->mutable_values());
  return absl::OkStatus();
}

absl::Status ToResponse(Result result, v1::RunLengthEncodeResponse* response) {
  absl::StatusOr<RunLengthEncodeResult> r = Take<RunLengthEncodeResult>(result);
  if (!r.ok()) return r.status();
  MoveInto(std::move(r->values), response->mutable_values());
  MoveInto(std::move(r->lengths), response->mutable_lengths());
  return absl::OkStatus();
}

absl::Status ToResponse(Result result, v1::ReduceByKeyResponse* response) {
  absl::StatusOr<ReduceByKeyResult> r = Take<ReduceByKeyResult>(result);
  if (!r.ok()) return r.status();
  MoveInto(std::move(r->keys), response->mutable_keys());
  MoveInto(std::move(r->values), response->mutable_values());
  return absl::OkStatus();
}

absl::Status ToResponse(Result result, v1::AggregateByKeyResponse* response) {
  absl::StatusOr<AggregateByKeyResult> r = Take<AggregateByKeyResult>(result);
  if (!r.ok()) return r.status();
  MoveInto(std::move(r->values), response->mutable_values());
  return absl::OkStatus();
}

}  // namespace primserve
