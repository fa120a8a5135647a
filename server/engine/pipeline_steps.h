// What a pipeline needs to know of each kind of step: the outputs an
// operation produces (for the steps after it to read), which of its inputs a
// request field fills, where each output goes, and the checks between
// inputs that only the bound data can settle.
#ifndef PRIMSERVE_SERVER_ENGINE_PIPELINE_STEPS_H_
#define PRIMSERVE_SERVER_ENGINE_PIPELINE_STEPS_H_

#include <array>
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/engine/task.h"

namespace primserve {

// Where the views of a step's inputs that earlier steps make point until
// the pipeline binds them: nothing may read there. Such a view has its
// producer's dtype and largest size.
const char* UnboundStepData();
inline bool IsUnbound(const ArrayView& view) { return view.bytes.data() == UnboundStepData(); }

// `status` with its message naming the pipeline step it is about
// ("step 2: ..."), as every pipeline error names it.
absl::Status InStep(size_t step, const absl::Status& status);

// One output of a step: its dtype and the most elements it can have.
struct StepOutputSpec {
  DType dtype = DType::kInt32;
  uint64_t max_elements = 0;
};
using StepOutputSpecs = std::array<std::optional<StepOutputSpec>, kNumStepOutputKinds>;

// The outputs `operation` produces, by StepOutputKind; nullopt where it
// produces none of that kind. Not for a PipelineOperation.
StepOutputSpecs OutputsOf(const Operation& operation);

// "VALUES", "INDICES", "LENGTHS", "KEYS" (v1::StepOutput.Which's names).
const char* StepOutputName(StepOutputKind output);

// The input of `operation` that its request's field `field` fills ("input",
// "flags", "keys", "values", "indices"), or null if it has none by that name.
ArrayView* InputField(Operation& operation, absl::string_view field);

// The array of `result` holding `output`, or null if it has none.
HostArray* OutputOf(Result& result, StepOutputKind output);

// Where the operation's `output` goes (its OutputPlaces field; a Scan's
// output_place, with the input's size as room).
OutputPlace PlaceOf(const Operation& operation, StepOutputKind output);
void SetPlace(Operation& operation, StepOutputKind output, OutputPlace place);

// The checks between an operation's inputs that its request could not make
// when some came from earlier steps (they had only their largest sizes
// then): equal lengths where two arrays pair up, segment offsets within the
// input. INVALID_ARGUMENT saying what differs.
absl::Status CheckBoundInputs(const Operation& operation);

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_PIPELINE_STEPS_H_
