// Sort of one request: keys (and values, and the permutation) through
// gpu::SegmentedRadixSort, every answer n elements, written in a CUDA
// region's place where the caller put one (StagedRun).
#include "kernels/sort.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/io.h"
#include "server/cuda/runners.h"
#include "server/cuda/staged_run.h"

namespace primserve::cuda {

absl::StatusOr<Result> RunSort(Lane& lane, const SortOperation& op, absl::Time deadline,
                               const AnswerAllocator* answers) {
  const uint64_t n = op.keys.size();
  const size_t key_bytes = n * DTypeSize(op.keys.dtype);
  const size_t value_bytes = op.values ? n * DTypeSize(op.values->dtype) : 0;
  const size_t index_bytes = op.return_indices ? n * sizeof(int64_t) : 0;
  gpu::SortPayload payload;
  payload.has_values = op.values.has_value();
  payload.value_dtype = op.values ? op.values->dtype : DType::kInt32;
  payload.has_indices = op.return_indices;
  const uint64_t* starts = op.segment_offsets.data();
  const uint64_t num_segments = op.segment_offsets.size();
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::SegmentedRadixSort(nullptr, &temp_bytes, nullptr, nullptr,
                                                         n, op.keys.dtype, starts, num_segments,
                                                         payload, op.descending, lane.stream()));
  HostInput keys_input(op.keys.bytes);
  HostInput values_input;
  if (op.values) values_input.Append(op.values->bytes);
  StagedRun run(lane, deadline, answers);
  const StagedRun::Slice keys = run.Input(keys_input);
  const StagedRun::Slice values = run.Input(values_input);
  const StagedRun::Slice keys_out = run.Output(key_bytes, op.places.keys, "keys");
  const StagedRun::Slice values_out = run.Output(value_bytes, op.places.values, "values");
  const StagedRun::Slice indices_out = run.Output(index_bytes, op.places.indices, "indices");
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  payload.d_values_in = run.device(values);
  payload.d_values_out = run.device(values_out);
  payload.d_indices_out = run.device<int64_t>(indices_out);
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(gpu::SegmentedRadixSort(
      run.device(temp), &temp_bytes, run.device(keys), run.device(keys_out), n, op.keys.dtype,
      starts, num_segments, payload, op.descending, lane.stream())));
  PRIMSERVE_RETURN_IF_ERROR(run.CheckRoom(keys_out, key_bytes));
  if (op.values) PRIMSERVE_RETURN_IF_ERROR(run.CheckRoom(values_out, value_bytes));
  if (op.return_indices) PRIMSERVE_RETURN_IF_ERROR(run.CheckRoom(indices_out, index_bytes));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(keys_out, key_bytes));
  if (op.values) PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(values_out, value_bytes));
  if (op.return_indices) PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(indices_out, index_bytes));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  SortResult result{run.Answer(keys_out, op.keys.dtype, key_bytes)};
  if (op.values) result.values = run.Answer(values_out, op.values->dtype, value_bytes);
  if (op.return_indices) result.indices = run.Answer(indices_out, DType::kInt64, index_bytes);
  return result;
}

}  // namespace primserve::cuda
