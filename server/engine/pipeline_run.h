// Runs a Pipeline's steps in order on one backend: binds each step's inputs
// to the outputs of the steps before it, keeps the outputs later steps read,
// and every output of a step not returned, where the backend keeps them
// (device memory on a GPU: they never come to the host), and gives the
// returned steps' results once every step has run.
// A step that fails ends the run with its status, its message naming the
// step ("step 2: ..."), and no result: nothing of the pipeline is delivered.
#ifndef PRIMSERVE_SERVER_ENGINE_PIPELINE_RUN_H_
#define PRIMSERVE_SERVER_ENGINE_PIPELINE_RUN_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/engine/task.h"

namespace primserve {

// What a backend lends RunPipeline.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Runs one step's operation, its inputs bound. `returned`: its answer is
  // sent (it may go into the task's answer buffers).
  virtual absl::StatusOr<Result> RunStep(const Operation& operation, bool returned) = 0;
  // Memory for an output of `bytes` that later steps read, kept until the
  // pipeline ends: RunStep writes an output placed there (OutputPlace, in
  // place) and reads inputs viewing it where they lie. Null: this backend
  // keeps outputs in its results' host memory, where later steps read them.
  virtual absl::StatusOr<char*> KeepOutput(size_t bytes) { return nullptr; }
  // Copies `bytes` of kept memory to the host (a kept output also returned).
  virtual absl::Status CopyKeptToHost(char* to, const char* from, size_t bytes) {
    return absl::InternalError("this backend keeps no outputs");
  }
  // Each step's kind and time (metrics).
  virtual void StepTimed(Rpc step, absl::Duration time) {}
};

absl::StatusOr<Result> RunPipeline(const PipelineOperation& pipeline, StepRunner& runner);

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_PIPELINE_RUN_H_
