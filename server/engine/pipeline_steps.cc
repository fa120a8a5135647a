#include "server/engine/pipeline_steps.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace primserve {
namespace {

constexpr size_t Kind(StepOutputKind output) { return static_cast<size_t>(output); }

OutputPlace* PlaceField(OutputPlaces& places, StepOutputKind output) {
  switch (output) {
    case StepOutputKind::kValues: return &places.values;
    case StepOutputKind::kIndices: return &places.indices;
    case StepOutputKind::kLengths: return &places.lengths;
    case StepOutputKind::kKeys: return &places.keys;
  }
  return nullptr;
}

absl::Status SameLength(const ArrayView& a, absl::string_view a_field, const ArrayView& b,
                        absl::string_view b_field) {
  if (a.size() == b.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s has %d elements but %s has %d once the steps before it ran; they must match", b_field,
      b.size(), a_field, a.size()));
}

absl::Status OffsetsWithin(absl::Span<const uint64_t> offsets, uint64_t n) {
  if (offsets.empty() || offsets.back() <= n) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "segment_offsets[%d] = %d is past the end of the input (%d elements once the steps before "
      "it ran)",
      offsets.size() - 1, offsets.back(), n));
}

}  // namespace

const char* UnboundStepData() {
  static const char kUnbound = 0;
  return &kUnbound;
}

absl::Status InStep(size_t step, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("step ", step, ": ", status.message()));
}

const char* StepOutputName(StepOutputKind output) {
  switch (output) {
    case StepOutputKind::kValues: return "VALUES";
    case StepOutputKind::kIndices: return "INDICES";
    case StepOutputKind::kLengths: return "LENGTHS";
    case StepOutputKind::kKeys: return "KEYS";
  }
  return "unknown";
}

StepOutputSpecs OutputsOf(const Operation& operation) {
  StepOutputSpecs specs;
  auto set = [&specs](StepOutputKind output, DType dtype, uint64_t elements) {
    specs[Kind(output)] = StepOutputSpec{dtype, elements};
  };
  using K = StepOutputKind;
  std::visit(
      Overloaded{
          [&](const ScanOperation& o) { set(K::kValues, ValuesDType(o), o.input.size()); },
          [&](const ReduceOperation& o) {
            const uint64_t answers = std::max<uint64_t>(1, o.segment_offsets.size());
            set(K::kValues, ValuesDType(o), answers);
            if (o.op == Op::kArgMin || o.op == Op::kArgMax) {
              set(K::kIndices, DType::kInt64, answers);
            }
          },
          [&](const SelectOperation& o) {
            if (o.output == SelectOutput::kValues || o.output == SelectOutput::kValuesAndIndices) {
              set(K::kValues, o.input.dtype, o.input.size());
            }
            if (o.output == SelectOutput::kIndices ||
                o.output == SelectOutput::kValuesAndIndices) {
              set(K::kIndices, DType::kInt64, o.input.size());
            }
          },
          [&](const UniqueOperation& o) { set(K::kValues, o.input.dtype, o.input.size()); },
          [&](const RunLengthEncodeOperation& o) {
            set(K::kValues, o.input.dtype, o.input.size());
            set(K::kLengths, DType::kInt64, o.input.size());
          },
          [&](const ReduceByKeyOperation& o) {
            set(K::kKeys, o.keys.dtype, o.keys.size());
            set(K::kValues, o.values.dtype, o.keys.size());
          },
          [&](const AggregateByKeyOperation& o) { set(K::kValues, o.values.dtype, o.num_keys); },
          [&](const SortOperation& o) {
            set(K::kKeys, o.keys.dtype, o.keys.size());
            if (o.values) set(K::kValues, o.values->dtype, o.keys.size());
            if (o.return_indices) set(K::kIndices, DType::kInt64, o.keys.size());
          },
          [&](const GatherOperation& o) { set(K::kValues, o.values.dtype, o.indices.size()); },
          [&](const PipelineOperation&) {},
      },
      operation);
  return specs;
}

ArrayView* InputField(Operation& operation, absl::string_view field) {
  return std::visit(
      Overloaded{
          [&](ScanOperation& o) -> ArrayView* { return field == "input" ? &o.input : nullptr; },
          [&](ReduceOperation& o) -> ArrayView* { return field == "input" ? &o.input : nullptr; },
          [&](SelectOperation& o) -> ArrayView* {
            if (field == "input") return &o.input;
            return field == "flags" && o.flags ? &*o.flags : nullptr;
          },
          [&](UniqueOperation& o) -> ArrayView* { return field == "input" ? &o.input : nullptr; },
          [&](RunLengthEncodeOperation& o) -> ArrayView* {
            return field == "input" ? &o.input : nullptr;
          },
          [&](ReduceByKeyOperation& o) -> ArrayView* {
            if (field == "keys") return &o.keys;
            return field == "values" ? &o.values : nullptr;
          },
          [&](AggregateByKeyOperation& o) -> ArrayView* {
            if (field == "keys") return &o.keys;
            return field == "values" ? &o.values : nullptr;
          },
          [&](SortOperation& o) -> ArrayView* {
            if (field == "keys") return &o.keys;
            return field == "values" && o.values ? &*o.values : nullptr;
          },
          [&](GatherOperation& o) -> ArrayView* {
            if (field == "values") return &o.values;
            return field == "indices" ? &o.indices : nullptr;
          },
          [&](PipelineOperation&) -> ArrayView* { return nullptr; },
      },
      operation);
}

HostArray* OutputOf(Result& result, StepOutputKind output) {
  using K = StepOutputKind;
  auto opt = [](std::optional<HostArray>& a) { return a ? &*a : nullptr; };
  return std::visit(
      Overloaded{
          [&](ScanResult& r) { return output == K::kValues ? &r.output : nullptr; },
          [&](ReduceResult& r) {
            return output == K::kValues ? &r.values : output == K::kIndices ? opt(r.indices)
                                                                            : nullptr;
          },
          [&](SelectResult& r) {
            return output == K::kValues ? opt(r.values) : output == K::kIndices ? opt(r.indices)
                                                                                : nullptr;
          },
          [&](UniqueResult& r) { return output == K::kValues ? &r.values : nullptr; },
          [&](RunLengthEncodeResult& r) {
            return output == K::kValues ? &r.values : output == K::kLengths ? &r.lengths : nullptr;
          },
          [&](ReduceByKeyResult& r) {
            return output == K::kValues ? &r.values : output == K::kKeys ? &r.keys : nullptr;
          },
          [&](AggregateByKeyResult& r) { return output == K::kValues ? &r.values : nullptr; },
          [&](SortResult& r) {
            switch (output) {
              case K::kKeys: return &r.keys;
              case K::kValues: return opt(r.values);
              case K::kIndices: return opt(r.indices);
              case K::kLengths: return static_cast<HostArray*>(nullptr);
            }
            return static_cast<HostArray*>(nullptr);
          },
          [&](GatherResult& r) { return output == K::kValues ? &r.output : nullptr; },
          [&](PipelineResult&) { return static_cast<HostArray*>(nullptr); },
      },
      result);
}

OutputPlace PlaceOf(const Operation& operation, StepOutputKind output) {
  if (const auto* scan = std::get_if<ScanOperation>(&operation)) {
    if (output != StepOutputKind::kValues || scan->output_place == nullptr) return {};
    return OutputPlace{scan->output_place, scan->input.bytes.size()};
  }
  OutputPlaces places = std::visit(
      Overloaded{
          [](const ScanOperation&) { return OutputPlaces{}; },
          [](const PipelineOperation&) { return OutputPlaces{}; },
          [](const auto& o) { return o.places; },
      },
      operation);
  return *PlaceField(places, output);
}

void SetPlace(Operation& operation, StepOutputKind output, OutputPlace place) {
  std::visit(Overloaded{
                 [&](ScanOperation& o) {
                   if (output == StepOutputKind::kValues) o.output_place = place.data;
                 },
                 [](PipelineOperation&) {},
                 [&](auto& o) { *PlaceField(o.places, output) = place; },
             },
             operation);
}

absl::Status CheckBoundInputs(const Operation& operation) {
  return std::visit(
      Overloaded{
          [](const ScanOperation& o) { return OffsetsWithin(o.segment_offsets, o.input.size()); },
          [](const ReduceOperation& o) {
            return OffsetsWithin(o.segment_offsets, o.input.size());
          },
          [](const SelectOperation& o) {
            return o.flags ? SameLength(o.input, "input", *o.flags, "flags") : absl::OkStatus();
          },
          [](const ReduceByKeyOperation& o) {
            return SameLength(o.keys, "keys", o.values, "values");
          },
          [](const AggregateByKeyOperation& o) {
            return SameLength(o.keys, "keys", o.values, "values");
          },
          [](const SortOperation& o) {
            if (o.values) {
              if (absl::Status s = SameLength(o.keys, "keys", *o.values, "values"); !s.ok()) {
                return s;
              }
            }
            return OffsetsWithin(o.segment_offsets, o.keys.size());
          },
          [](const auto&) { return absl::OkStatus(); },
      },
      operation);
}

}  // namespace primserve
