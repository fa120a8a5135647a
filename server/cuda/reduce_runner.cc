// Reductions: a batch of requests (each with its segments, or one) as one
// segmented launch; ARGMIN/ARGMAX also give each segment's index. A batch of
// reproducible float SUM/PROD reductions is staged together and each
// request reduced by its own launch, exactly as alone. A request alone (one
// that reads or writes a CUDA region runs alone: io.h TouchesDevice) reads
// its input where it lies and writes its placed answers there (StagedRun).
// A SUM/PROD into a wider accumulator (ReduceOperation::accumulator) answers
// in it, through gpu::WidenedReduce.
#include <algorithm>
#include <vector>

#include "kernels/reduce.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/io.h"
#include "server/cuda/runners.h"
#include "server/cuda/staged_run.h"

namespace primserve::cuda {
namespace {

// The kernel call of `like`'s reduction (its dtype, op and accumulator) over
// n elements with num_segments segment starts (<= 1: the whole input):
// gpu::SegmentedReduce, or gpu::WidenedReduce for a wider accumulator (no
// indices: SUM and PROD only). Two-phase: temp_storage null sizes it.
int LaunchReduceOf(const ReduceOperation& like, void* temp_storage, size_t* temp_bytes,
                   const void* d_in, uint64_t n, const uint64_t* d_segment_starts,
                   uint64_t num_segments, void* d_values_out, int64_t* d_indices_out,
                   cudaStream_t stream) {
  if (like.accumulator) {
    return gpu::WidenedReduce(temp_storage, temp_bytes, d_in, n, d_segment_starts, num_segments,
                              like.input.dtype, *like.accumulator, like.op, d_values_out, stream);
  }
  return gpu::SegmentedReduce(temp_storage, temp_bytes, d_in, n, d_segment_starts, num_segments,
                              like.input.dtype, like.op, d_values_out, d_indices_out, stream);
}

// Every request reduced by the launch it gets alone (gpu::SegmentedReduce
// over its own elements and segment starts, one segment without any), each
// at a kAlignment-aligned place in one staged buffer as alone, one after
// another on the lane's stream; one copy in and one copy out for the batch.
absl::StatusOr<Results> RunReproducibleReduces(Lane& lane,
                                               absl::Span<const ReduceOperation* const> ops,
                                               absl::Time deadline,
                                               const AnswerAllocator* answers) {
  const ReduceOperation& first = *ops.front();
  const DType dtype = ValuesDType(first);  // the answers'
  const size_t element = DTypeSize(dtype);
  HostInput data;
  std::vector<size_t> place(ops.size());
  // Each request's segment starts as alone (from 0; one segment without
  // any), end to end; request i's are [first_segment[i], first_segment[i+1]).
  std::vector<uint64_t> own_starts;
  std::vector<uint64_t> first_segment;
  std::vector<size_t> temp_of(ops.size(), 0);
  size_t temp_bytes = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const ReduceOperation& op = *ops[i];
    place[i] = data.AppendAligned(op.input.bytes);
    Concatenation alone;
    alone.Append(op.input.size(), op.segment_offsets);
    first_segment.push_back(own_starts.size());
    own_starts.insert(own_starts.end(), alone.segment_starts.begin(),
                      alone.segment_starts.end());
    PRIMSERVE_RETURN_IF_CUDA_ERROR(LaunchReduceOf(op, nullptr, &temp_of[i], nullptr,
                                                  op.input.size(), nullptr,
                                                  alone.segment_starts.size(), nullptr, nullptr,
                                                  lane.stream()));
    temp_bytes = std::max(temp_bytes, temp_of[i]);
  }
  first_segment.push_back(own_starts.size());  // the end
  const uint64_t num_segments = own_starts.size();
  HostInput starts_input{absl::Span<const uint64_t>(own_starts)};
  StagedRun run(lane, deadline, ops.size() == 1 ? answers : nullptr);
  const StagedRun::Slice input = run.Input(data);
  const StagedRun::Slice starts = run.Input(starts_input);
  const bool alone = ops.size() == 1;
  const StagedRun::Slice values =
      run.Output(num_segments * element, alone ? first.places.values : OutputPlace{}, "values");
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  int error = 0;
  for (size_t i = 0; i < ops.size() && error == 0; ++i) {
    const ReduceOperation& op = *ops[i];
    error = LaunchReduceOf(
        op, run.device(temp), &temp_of[i], run.device<char>(input) + place[i], op.input.size(),
        run.device<uint64_t>(starts) + first_segment[i], first_segment[i + 1] - first_segment[i],
        run.device<char>(values) + first_segment[i] * element, nullptr, lane.stream());
  }
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(error));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(values, num_segments * element));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  Results results;
  for (size_t i = 0; i < ops.size(); ++i) {
    const uint64_t count = first_segment[i + 1] - first_segment[i];
    results.push_back(ReduceResult{
        run.Answer(values, dtype, count * element, first_segment[i] * element), std::nullopt});
  }
  return results;
}

}  // namespace

absl::StatusOr<Results> RunReduces(Lane& lane, absl::Span<const ReduceOperation* const> ops,
                                   absl::Time deadline, const AnswerAllocator* answers) {
  if (RunsReproducibly(*ops.front())) {
    return RunReproducibleReduces(lane, ops, deadline, answers);
  }
  const ReduceOperation& first = *ops.front();
  const DType dtype = ValuesDType(first);  // the answers'
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
  PRIMSERVE_RETURN_IF_CUDA_ERROR(LaunchReduceOf(first, nullptr, &temp_bytes, nullptr, all.total,
                                                nullptr, num_segments, nullptr, nullptr,
                                                lane.stream()));
  HostInput starts_input(absl::Span<const uint64_t>(all.segment_starts));
  StagedRun run(lane, deadline, ops.size() == 1 ? answers : nullptr);
  const StagedRun::Slice input = run.Input(data);
  const StagedRun::Slice starts = run.Input(starts_input);
  // A request alone may have placed its answers (a fused batch has none in
  // a CUDA region: TouchesDevice).
  const bool alone = ops.size() == 1;
  const StagedRun::Slice values =
      run.Output(num_segments * element, alone ? first.places.values : OutputPlace{}, "values");
  const StagedRun::Slice indices = run.Output(arg ? num_segments * sizeof(int64_t) : 0,
                                              alone ? first.places.indices : OutputPlace{},
                                              "indices");
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(LaunchReduceOf(
      first, run.device(temp), &temp_bytes, run.device(input), all.total,
      run.device<uint64_t>(starts), num_segments, run.device(values),
      arg ? run.device<int64_t>(indices) : nullptr, lane.stream())));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(values, num_segments * element));
  if (arg) PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(indices, num_segments * sizeof(int64_t)));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());

  const int64_t* staged_indices = run.staged_as<int64_t>(indices);
  Results results;
  for (size_t i = 0; i < ops.size(); ++i) {
    const uint64_t first_segment = all.first_segment[i];
    const uint64_t count = all.segments_of(i);
    ReduceResult result{run.Answer(values, dtype, count * element, first_segment * element),
                        std::nullopt};
    if (arg && alone) {
      // Alone, the kernel's indices are the caller's own.
      result.indices = run.Answer(indices, DType::kInt64, count * sizeof(int64_t));
    } else if (arg) {
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
