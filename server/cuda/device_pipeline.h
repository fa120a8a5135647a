// A pipeline run on the device as one unit: each step's kernels are queued on
// the lane's stream right after the previous step's, and a size that depends
// on the data (a Select's kept count, a RunLengthEncode's run count) stays in
// device memory, where the kernels of the steps reading that output take
// their element count from (kernels' *Counted calls). The host waits once, at
// the end, for the counts, the checks (indices and keys out of range) and the
// answers. Pipelines of other shapes run step by step (pipeline_runner.cc).
#ifndef PRIMSERVE_SERVER_CUDA_DEVICE_PIPELINE_H_
#define PRIMSERVE_SERVER_CUDA_DEVICE_PIPELINE_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/cuda/lane.h"
#include "server/engine/metrics.h"
#include "server/engine/task.h"

namespace primserve::cuda {

// Whether every step of `pipeline` can run on `device` so:
//  - steps: Select by a predicate (not a partition), Unique and
//    RunLengthEncode, each over an input of a size known before the run;
//    unsegmented Scan and Reduce in the input's dtype (a reproducible
//    float SUM or PROD only over an input of known size, which fixes its
//    tiles); Gather (values of known size); AggregateByKey (keys and values
//    of one length);
//  - every input not made by an earlier step in host memory (copied to the
//    device first) or on `device` (resident buffers, CUDA regions), and
//    every placed output on `device`.
bool RunsOnDevice(const PipelineOperation& pipeline, int device);

// Runs such a pipeline; every step's output that is also returned comes
// back as RunPipeline's would (primserve::RunPipeline). `metrics` (null:
// none) gets each step's kernel time from events on the stream.
absl::StatusOr<Result> RunOnDevice(Lane& lane, const PipelineOperation& pipeline,
                                   absl::Time deadline, Metrics* metrics);

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_DEVICE_PIPELINE_H_
