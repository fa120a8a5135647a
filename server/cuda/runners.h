// One runner per family of primitives. Each takes a batch of operations with
// one BatchKey, runs it on a lane through StagedRun (or the chunked pipeline
// for a large scan), and gives one result per operation; a status for the
// whole batch when it could not run. `answers`: for a batch of one request,
// where its large inline answers may go (Task::answers), or null.
#ifndef PRIMSERVE_SERVER_CUDA_RUNNERS_H_
#define PRIMSERVE_SERVER_CUDA_RUNNERS_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kernels/select.h"
#include "server/cuda/lane.h"
#include "server/engine/metrics.h"
#include "server/engine/task.h"

namespace primserve::cuda {

using Results = std::vector<absl::StatusOr<Result>>;

// A single unsegmented scan of at least this many bytes runs as a pipeline
// of chunks (where the lane's pinned staging holds its slots), which fills a
// pending input (ArrayView::pending; only scans' inputs are left pending)
// chunk by chunk; every other scan fills its input whole first.
inline constexpr size_t kPipelinedScanMinBytes = (size_t{64} << 20) + 1;

// Fills the pending input of each operation (ArrayView::pending), whole.
void FillPendingInputs(absl::Span<const ScanOperation* const> ops);

// The kernel call of `like`'s scan (its dtype, op, exclusive and
// accumulator) over n elements from d_in to d_out with num_segments segment
// starts (0: one segment): gpu::SegmentedScan (gpu::Scan without starts),
// or gpu::WidenedScan for a wider accumulator, whose d_out must not overlap
// d_in. Two-phase as the kernels: temp_storage null sizes *temp_bytes.
int LaunchScanOf(const ScanOperation& like, void* temp_storage, size_t* temp_bytes,
                 const void* d_in, void* d_out, uint64_t n, const uint64_t* d_segment_starts,
                 uint64_t num_segments, cudaStream_t stream);

// A predicate as the select kernels take it.
gpu::SelectKeep KeepOf(const PredicateSpec& predicate);

// Segmented launches over the whole batch (a large single scan: a pipeline).
absl::StatusOr<Results> RunScans(Lane& lane, absl::Span<const ScanOperation* const> ops,
                                 absl::Time deadline, const AnswerAllocator* answers);
absl::StatusOr<Results> RunReduces(Lane& lane, absl::Span<const ReduceOperation* const> ops,
                                   absl::Time deadline, const AnswerAllocator* answers);
absl::StatusOr<Results> RunSelects(Lane& lane, absl::Span<const SelectOperation* const> ops,
                                   absl::Time deadline, const AnswerAllocator* answers);

// One request at a time.
absl::StatusOr<Result> RunUnique(Lane& lane, const UniqueOperation& op, absl::Time deadline,
                                 const AnswerAllocator* answers);
absl::StatusOr<Result> RunRunLengthEncode(Lane& lane, const RunLengthEncodeOperation& op,
                                          absl::Time deadline, const AnswerAllocator* answers);
absl::StatusOr<Result> RunReduceByKey(Lane& lane, const ReduceByKeyOperation& op,
                                      absl::Time deadline, const AnswerAllocator* answers);
absl::StatusOr<Result> RunAggregateByKey(Lane& lane, const AggregateByKeyOperation& op,
                                         absl::Time deadline, const AnswerAllocator* answers);
absl::StatusOr<Result> RunSort(Lane& lane, const SortOperation& op, absl::Time deadline,
                               const AnswerAllocator* answers);
absl::StatusOr<Result> RunGather(Lane& lane, const GatherOperation& op, absl::Time deadline,
                                 const AnswerAllocator* answers);

// One operation run as a request of its own on the lane (the backend's
// dispatch); `returned`: its answer is sent.
using StepRun = std::function<absl::StatusOr<Result>(const Operation&, bool returned)>;
// A pipeline's steps in order on `lane`, each through `run_step`, the
// outputs later steps read kept on the lane's device (pipeline_runner.cc).
// `metrics` (null: none) gets the step times.
absl::StatusOr<Result> RunPipeline(Lane& lane, const PipelineOperation& op, absl::Time deadline,
                                   const StepRun& run_step, Metrics* metrics);

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_RUNNERS_H_
