// A pipeline on one lane: on the device as one unit where its steps allow
// (device_pipeline.h); else each step runs as a request of its own (through
// the backend's dispatch), and the outputs later steps read are kept in
// device blocks on the lane's device, recorded as device ranges, so that the
// runners write them in place and the next steps read them where they lie:
// they never come to the host.
#include <utility>
#include <vector>

#include "server/cuda/cuda_status.h"
#include "server/cuda/device_pipeline.h"
#include "server/cuda/io.h"
#include "server/cuda/runners.h"
#include "server/engine/pipeline_run.h"

namespace primserve::cuda {
namespace {

class LaneSteps final : public StepRunner {
 public:
  LaneSteps(Lane& lane, absl::Time deadline, const StepRun& run_step, Metrics* metrics)
      : lane_(lane), deadline_(deadline), run_step_(run_step), metrics_(metrics) {}
  // The blocks are freed in stream order, after every step queued.
  ~LaneSteps() override {
    for (const char* data : ranges_) RemoveDeviceRange(data);
  }

  absl::StatusOr<Result> RunStep(const Operation& operation, bool returned) override {
    return run_step_(operation, returned);
  }

  absl::StatusOr<char*> KeepOutput(size_t bytes) override {
    if (bytes == 0) return nullptr;
    absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane_, bytes, deadline_);
    if (!block.ok()) return block.status();
    char* data = block->at<char>(0);
    blocks_.push_back(*std::move(block));
    AddDeviceRange(data, bytes, lane_.device());
    ranges_.push_back(data);
    return data;
  }

  absl::Status CopyKeptToHost(char* to, const char* from, size_t bytes) override {
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, lane_.stream()));
    return CudaStatus(cudaStreamSynchronize(lane_.stream()), "cudaStreamSynchronize");
  }

  void StepTimed(Rpc step, absl::Duration time) override {
    if (metrics_ != nullptr) metrics_->ObservePipelineStep(step, time);
  }

 private:
  Lane& lane_;
  const absl::Time deadline_;
  const StepRun& run_step_;
  Metrics* const metrics_;
  std::vector<DeviceBlock> blocks_;
  std::vector<const char*> ranges_;
};

}  // namespace

absl::StatusOr<Result> RunPipeline(Lane& lane, const PipelineOperation& op, absl::Time deadline,
                                   const StepRun& run_step, Metrics* metrics) {
  if (RunsOnDevice(op, lane.device())) return RunOnDevice(lane, op, deadline, metrics);
  if (metrics != nullptr) metrics->PipelineRan(op.steps.size());
  LaneSteps steps(lane, deadline, run_step, metrics);
  return primserve::RunPipeline(op, steps);
}

}  // namespace primserve::cuda
