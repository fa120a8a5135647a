// Reductions: a batch of requests (each with its segments, or one) as one
// segmented launch; ARGMIN/ARGMAX also give each segment's index.
#include <vector>

#include "kernels/reduce.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/io.h"
#include "server/cuda/runners.h"
#include "server/cuda/staged_run.h"

namespace primserve::cuda {

absl::StatusOr<Results> RunReduces(Lane& lane, absl::Span<const ReduceOperation* const> ops,
                                   absl::Time deadline) {
  const ReduceOperation& first = *ops.front();
  const DType dtype = first.input.dtype;
  const size_t element = DTypeSize(dtype);
  const bool arg = first.op == Op::kArgMin || first.op == Op::kArgMax;
  Concatenation all;
  HostInput data;
  for (const ReduceOperation* op : ops) {
    all.Append(op->input.size(), op->segment_offsets);
    data.Append(op->input.bytes);
  }
  const uint64_t num_segments = all.segment_starts.size();
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::SegmentedReduce(nullptr, &temp_bytes, nullptr, all.total,
                                                      nullptr, num_segments, dtype, first.op,
                                                      nullptr, nullptr, lane.stream()));
  HostInput starts_input(absl::Span<const uint64_t>(all.segment_starts));
  StagedRun run(lane, deadline);
  const StagedRun::Slice input = run.Input(data);
  const StagedRun::Slice starts = run.Input(starts_input);
  const StagedRun::Slice values = run.Output(num_segments * element);
  const StagedRun::Slice indices = run.Output(arg ? num_segments * sizeof(int64_t) : 0);
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(gpu::SegmentedReduce(
      run.device(temp), &temp_bytes, run.device(input), all.total, run.device<uint64_t>(starts),
      num_segments, dtype, first.op, run.device(values),
      arg ? run.device<int64_t>(indices) : nullptr, lane.stream())));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(values, num_segments * element));
  if (arg) PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(indices, num_segments * sizeof(int64_t)));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());

  const int64_t* staged_indices = run.staged_as<int64_t>(indices);
  Results results;
  for (size_t i = 0; i < ops.size(); ++i) {
    const uint64_t first_segment = all.first_segment[i];
    const uint64_t count = all.segments_of(i);
    ReduceResult result{
        ToHostArray(dtype, run.staged(values) + first_segment * element, count * element),
        std::nullopt};
    if (arg) {
      // The kernel indexes the whole batch; each caller wants its own indices.
      std::vector<int64_t> own(staged_indices + first_segment,
                               staged_indices + first_segment + count);
      for (int64_t& index : own) {
        if (index >= 0) index -= static_cast<int64_t>(all.offsets[i]);
      }
      result.indices = HostArray::Of<int64_t>(DType::kInt64, own);
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace primserve::cuda
