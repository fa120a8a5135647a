// ToOperation for a PipelineRequest: each step validated as its own RPC
// would be, in a request memory of its own, with its Array.step inputs
// resolved against the outputs of the steps before it; then the whole
// checked against the limits, before anything runs.
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/engine/pipeline_steps.h"
#include "server/rpc/request_validation.h"

namespace primserve {
namespace {

absl::Status Invalid(absl::string_view message) { return absl::InvalidArgumentError(message); }

// The outputs of the steps validated so far, which the step being validated
// may read (shm::StepInputs), and what it reads of them.
class EarlierSteps final : public shm::StepInputs {
 public:
  void Begin(uint32_t step) {
    current_ = step;
    bindings_.clear();
  }
  void Done(const Operation& operation) {
    outputs_.push_back(OutputsOf(operation));
    rpcs_.push_back(RpcOf(operation));
  }
  std::vector<StepBinding> TakeBindings() { return std::move(bindings_); }
  const std::optional<StepOutputSpec>& Output(uint32_t step, StepOutputKind output) const {
    return outputs_[step][static_cast<size_t>(output)];
  }

  absl::StatusOr<ArrayView> Input(const v1::StepOutput& ref, v1::DType dtype,
                                  absl::string_view field) override {
    if (dtype != v1::DTYPE_UNSPECIFIED) {
      return Invalid(absl::StrCat(field,
                                  ".dtype is set, but an output of an earlier step has its own "
                                  "dtype; leave it unset"));
    }
    if (ref.step() >= current_) {
      return Invalid(absl::StrFormat(
          "%s.step names step %d, which does not come before this one (a step reads only the "
          "outputs of earlier steps)",
          field, ref.step()));
    }
    const int which = ref.output();
    if (which < v1::StepOutput::VALUES || which > v1::StepOutput::KEYS) {
      return Invalid(absl::StrFormat("%s.step.output %d is not a known Which", field, which));
    }
    const auto output = static_cast<StepOutputKind>(which);
    const std::optional<StepOutputSpec>& spec = Output(ref.step(), output);
    if (!spec) {
      return Invalid(absl::StrFormat("%s.step names the %s of step %d, which this %s produces no "
                                     "%s of",
                                     field, StepOutputName(output), ref.step(),
                                     RpcName(rpcs_[ref.step()]), StepOutputName(output)));
    }
    bindings_.push_back(StepBinding{std::string(field), ref.step(), output});
    return ArrayView{spec->dtype, absl::string_view(UnboundStepData(),
                                                    spec->max_elements * DTypeSize(spec->dtype))};
  }

 private:
  uint32_t current_ = 0;
  std::vector<StepOutputSpecs> outputs_;
  std::vector<Rpc> rpcs_;
  std::vector<StepBinding> bindings_;
};

template <typename Request>
absl::Status RefusePlacesUnlessReturned(const Request& request) {
  if (request.has_output_location()) {
    return Invalid(
        "output_location is set but the step is not returned; only a returned step's outputs "
        "go anywhere (set returned)");
  }
  if (request.has_output_buffers()) {
    return Invalid(
        "output_buffers is set but the step is not returned; only a returned step's outputs "
        "go anywhere (set returned)");
  }
  return absl::OkStatus();
}

// The step's request validated as its RPC would validate it.
absl::StatusOr<Operation> StepOperation(const v1::PipelineStep& step, const RequestLimits& limits,
                                        shm::RequestMemory* memory,
                                        wire::ReceivedMessage* payloads) {
  auto validate = [&](const auto& request) -> absl::StatusOr<Operation> {
    if (!step.returned()) {
      if (absl::Status s = RefusePlacesUnlessReturned(request); !s.ok()) return s;
    }
    return ToOperation(request, limits, memory, payloads);
  };
  switch (step.op_case()) {
    case v1::PipelineStep::kScan:
      if (step.scan().accumulator_dtype() != v1::DTYPE_UNSPECIFIED) {
        return absl::InvalidArgumentError(
            "scan.accumulator_dtype is not taken in a Pipeline step (a unary Scan takes it)");
      }
      return validate(step.scan());
    case v1::PipelineStep::kReduce:
      if (step.reduce().accumulator_dtype() != v1::DTYPE_UNSPECIFIED) {
        return absl::InvalidArgumentError(
            "reduce.accumulator_dtype is not taken in a Pipeline step (a unary Reduce takes it)");
      }
      return validate(step.reduce());
    case v1::PipelineStep::kSelect: return validate(step.select());
    case v1::PipelineStep::kUnique: return validate(step.unique());
    case v1::PipelineStep::kRunLengthEncode: return validate(step.run_length_encode());
    case v1::PipelineStep::kReduceByKey: return validate(step.reduce_by_key());
    case v1::PipelineStep::kAggregateByKey: return validate(step.aggregate_by_key());
    case v1::PipelineStep::kGather: return validate(step.gather());
    case v1::PipelineStep::kSort: return validate(step.sort());
    case v1::PipelineStep::OP_NOT_SET: break;
  }
  return Invalid(
      "op is not set: set one of scan, reduce, select, unique, run_length_encode, "
      "reduce_by_key, aggregate_by_key, gather or sort");
}

}  // namespace

absl::StatusOr<Operation> ToOperation(const v1::PipelineRequest& request,
                                      const RequestLimits& limits, shm::RequestMemory* memory,
                                      wire::ReceivedMessage* payloads) {
  if (memory == nullptr) {
    return absl::InternalError("a Pipeline is validated with the memory of its request");
  }
  const uint64_t count = request.steps_size();
  if (count == 0) return Invalid("steps is empty: a Pipeline runs at least one step");
  if (count > limits.max_pipeline_steps) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("steps has %d steps, over the server's limit of %d (--max_pipeline_steps)",
                        count, limits.max_pipeline_steps));
  }
  PipelineOperation pipeline;
  EarlierSteps earlier;
  for (uint32_t k = 0; k < count; ++k) {
    const v1::PipelineStep& step = request.steps(k);
    shm::RequestMemory* step_memory = memory->AddStep();
    step_memory->UseStepInputs(&earlier);
    earlier.Begin(k);
    absl::StatusOr<Operation> operation = StepOperation(step, limits, step_memory, payloads);
    if (!operation.ok()) return InStep(k, operation.status());
    // Outputs for shared memory wait until every step has run (RequestMemory
    // Deliver writes them), so that a failing step leaves none written; a
    // buffer's new contents show only once delivered, so they may be
    // written in place.
    const OutputPlaces buffers = step_memory->BufferPlaces();
    SetPlace(*operation, StepOutputKind::kValues, buffers.values);
    SetPlace(*operation, StepOutputKind::kIndices, buffers.indices);
    SetPlace(*operation, StepOutputKind::kLengths, buffers.lengths);
    SetPlace(*operation, StepOutputKind::kKeys, buffers.keys);
    earlier.Done(*operation);
    pipeline.steps.push_back(
        PipelineStep{*std::move(operation), earlier.TakeBindings(), {}, step.returned()});
  }
  uint64_t intermediate_bytes = 0;
  uint64_t answer_bytes = 0;
  bool any_returned = false;
  for (uint32_t k = 0; k < count; ++k) {
    for (const StepBinding& binding : pipeline.steps[k].bindings) {
      pipeline.steps[binding.step].read_later[static_cast<size_t>(binding.output)] = true;
    }
  }
  for (uint32_t k = 0; k < count; ++k) {
    const PipelineStep& step = pipeline.steps[k];
    // What RunPipeline keeps: the outputs later steps read, and every output
    // of a step not returned.
    for (int output = 0; output < kNumStepOutputKinds; ++output) {
      const std::optional<StepOutputSpec>& made =
          earlier.Output(k, static_cast<StepOutputKind>(output));
      if (!made || (step.returned && !step.read_later[output])) continue;
      const StepOutputSpec& spec = *made;
      intermediate_bytes =
          SaturatingAdd(intermediate_bytes, spec.max_elements * DTypeSize(spec.dtype));
    }
    if (intermediate_bytes > limits.max_pipeline_intermediate_bytes) {
      return InStep(k, absl::ResourceExhaustedError(absl::StrFormat(
                           "the outputs later steps read could take %d bytes by this step, over "
                           "the server's limit of %d for one caller "
                           "(--max_buffer_bytes_per_caller)",
                           intermediate_bytes, limits.max_pipeline_intermediate_bytes)));
    }
    if (!step.returned) continue;
    any_returned = true;
    answer_bytes = SaturatingAdd(answer_bytes, MaxAnswerBytes(step.operation));
    if (answer_bytes > limits.max_response_bytes) {
      return InStep(k, absl::ResourceExhaustedError(absl::StrFormat(
                           "the answers of the returned steps could take %d bytes by this step, "
                           "over the server's limit of %d (--max_response_bytes)",
                           answer_bytes, limits.max_response_bytes)));
    }
  }
  if (!any_returned) {
    return Invalid("no step is returned: set returned on the steps whose answers you want");
  }
  return Operation(std::move(pipeline));
}

}  // namespace primserve
