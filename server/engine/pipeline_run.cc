#include "server/engine/pipeline_run.h"

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/engine/pipeline_steps.h"

namespace primserve {
namespace {

// A step's outputs that later steps read: where each lies, and whether in
// memory the runner keeps (rather than in the step's result).
struct Kept {
  std::array<ArrayView, kNumStepOutputKinds> views;
  std::array<bool, kNumStepOutputKinds> in_kept_memory{};
};

}  // namespace

absl::StatusOr<Result> RunPipeline(const PipelineOperation& pipeline, StepRunner& runner) {
  const size_t count = pipeline.steps.size();
  // Later steps view these results' arrays: the vectors never grow.
  std::vector<std::optional<Result>> results(count);
  std::vector<Kept> kept(count);
  for (size_t k = 0; k < count; ++k) {
    const PipelineStep& step = pipeline.steps[k];
    Operation operation = step.operation;
    for (const StepBinding& binding : step.bindings) {
      ArrayView* input = InputField(operation, binding.field);
      if (input == nullptr || binding.step >= k) {
        return InStep(k, absl::InternalError(absl::StrCat("cannot bind ", binding.field)));
      }
      *input = kept[binding.step].views[static_cast<size_t>(binding.output)];
    }
    if (absl::Status bound = CheckBoundInputs(operation); !bound.ok()) return InStep(k, bound);
    const StepOutputSpecs outputs = OutputsOf(operation);
    for (int output = 0; output < kNumStepOutputKinds; ++output) {
      // A step not returned keeps every output where the runner keeps them,
      // so that none it makes travels to the host for nothing.
      if (!outputs[output] || (step.returned && !step.read_later[output])) continue;
      const size_t bytes = outputs[output]->max_elements * DTypeSize(outputs[output]->dtype);
      absl::StatusOr<char*> memory = runner.KeepOutput(bytes);
      if (!memory.ok()) return InStep(k, memory.status());
      if (*memory == nullptr) continue;
      SetPlace(operation, static_cast<StepOutputKind>(output),
               OutputPlace{*memory, bytes, /*unseen_on_failure=*/true});
      kept[k].in_kept_memory[output] = true;
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<Result> result = runner.RunStep(operation, step.returned);
    runner.StepTimed(RpcOf(operation), absl::Now() - start);
    if (!result.ok()) return InStep(k, result.status());
    results[k] = *std::move(result);
    for (int output = 0; output < kNumStepOutputKinds; ++output) {
      if (!step.read_later[output]) continue;
      HostArray* array = OutputOf(*results[k], static_cast<StepOutputKind>(output));
      if (array == nullptr) {
        return InStep(k, absl::InternalError(absl::StrCat(
                             "the step gave no ", StepOutputName(static_cast<StepOutputKind>(output)))));
      }
      const OutputPlace place = PlaceOf(operation, static_cast<StepOutputKind>(output));
      kept[k].in_kept_memory[output] = kept[k].in_kept_memory[output] && array->bytes_in_place != 0;
      kept[k].views[output] =
          kept[k].in_kept_memory[output]
              ? ArrayView{array->dtype, absl::string_view(place.data, array->bytes_in_place)}
              : ArrayView{array->dtype, array->data()};
    }
  }
  PipelineResult answer;
  for (size_t k = 0; k < count; ++k) {
    if (!pipeline.steps[k].returned) continue;
    for (int output = 0; output < kNumStepOutputKinds; ++output) {
      if (!kept[k].in_kept_memory[output]) continue;
      // Kept where later steps read it; its answer goes out from the host.
      HostArray* array = OutputOf(*results[k], static_cast<StepOutputKind>(output));
      const ArrayView& view = kept[k].views[output];
      std::string bytes(view.bytes.size(), '\0');
      if (absl::Status copied = runner.CopyKeptToHost(bytes.data(), view.bytes.data(), bytes.size());
          !copied.ok()) {
        return InStep(k, copied);
      }
      array->bytes = std::move(bytes);
      array->bytes_in_place = 0;
    }
    answer.steps.push_back(StepResult{static_cast<uint32_t>(k), *std::move(results[k])});
  }
  return Result(std::move(answer));
}

}  // namespace primserve
