// Select and partition: one request alone, or a batch of selects as one
// segmented launch in which each request is a segment compacted into its own
// slot. A request alone reads its input and flags where they lie in a CUDA
// region and writes its placed outputs there (StagedRun).
#include <cstring>

#include "kernels/runs.h"
#include "kernels/select.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/flag_kernels.h"
#include "server/cuda/io.h"
#include "server/cuda/runners.h"
#include "server/cuda/staged_run.h"

namespace primserve::cuda {
namespace {

bool WantsValues(SelectOutput output) {
  return output == SelectOutput::kValues || output == SelectOutput::kValuesAndIndices;
}
bool WantsIndices(SelectOutput output) {
  return output == SelectOutput::kIndices || output == SelectOutput::kValuesAndIndices;
}

// flags[i] != 0 as one byte each, the form the select kernels take.
void PackFlags(char* at, const ArrayView& flags) {
  VisitDType(flags.dtype, [&](auto zero) {
    using F = decltype(zero);
    for (F flag : flags.as<F>()) *at++ = flag != F(0);
  });
}

// A select's answer: `count` kept, and the first `returned` values and
// indices from the run's output slices at element `offset`, as far as the
// request asked for them.
SelectResult SelectAnswer(const SelectOperation& op, uint64_t count, uint64_t returned,
                          const StagedRun& run, const StagedRun::Slice& values,
                          const StagedRun::Slice& indices, uint64_t offset) {
  SelectResult result;
  result.count = count;
  const size_t element = DTypeSize(op.input.dtype);
  if (WantsValues(op.output)) {
    result.values = run.Answer(values, op.input.dtype, returned * element, offset * element);
  }
  if (WantsIndices(op.output)) {
    result.indices = run.Answer(indices, DType::kInt64, returned * sizeof(int64_t),
                                offset * sizeof(int64_t));
  }
  return result;
}

// The flags of every request in `ops` (which must outlive it), as bytes, end
// to end.
ComputedHostInput FlagBytes(absl::Span<const SelectOperation* const> ops, uint64_t n) {
  return ComputedHostInput(n, [ops](char* at) {
    for (const SelectOperation* op : ops) {
      PackFlags(at, *op->flags);
      at += op->flags->size();
    }
  });
}

absl::StatusOr<Result> RunSelect(Lane& lane, const SelectOperation& op, absl::Time deadline,
                                 const AnswerAllocator* answers) {
  const DType dtype = op.input.dtype;
  const size_t element = DTypeSize(dtype);
  const uint64_t n = op.input.size();
  const bool values_wanted = WantsValues(op.output);
  const bool indices_wanted = WantsIndices(op.output);
  gpu::SelectKeep keep = op.predicate ? KeepOf(*op.predicate) : gpu::SelectKeep{};
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::Select(nullptr, &temp_bytes, nullptr, dtype, n, keep,
                                             op.partition, nullptr, nullptr, nullptr,
                                             lane.stream()));
  HostInput data(op.input.bytes);
  // Flags in a CUDA region are packed to bytes on the device, from where
  // they lie (or from their copy in the block, on another device); host
  // flags while staged.
  const bool device_flags =
      op.flags && DeviceOf(op.flags->bytes.data(), op.flags->bytes.size()) >= 0;
  HostInput raw_flags(device_flags ? op.flags->bytes : absl::string_view());
  const SelectOperation* const alone[] = {&op};
  const ComputedHostInput flag_bytes = FlagBytes(alone, op.flags && !device_flags ? n : 0);
  StagedRun run(lane, deadline, answers);
  const StagedRun::Slice input = run.Input(data);
  const StagedRun::Slice device_flag_words = run.Input(raw_flags);
  const StagedRun::Slice flags = device_flags ? run.Scratch(n) : run.Input(flag_bytes);
  const StagedRun::Slice values =
      run.Output(values_wanted ? n * element : 0, op.places.values, "values");
  const StagedRun::Slice indices =
      run.Output(indices_wanted ? n * sizeof(int64_t) : 0, op.places.indices, "indices");
  const StagedRun::Slice count = run.Output(sizeof(uint64_t));
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  if (device_flags) {
    PRIMSERVE_RETURN_IF_ERROR(CudaStatus(
        gpu::PackFlags(run.device(device_flag_words), static_cast<int>(DTypeSize(op.flags->dtype)),
                       n, run.device<uint8_t>(flags), lane.stream()),
        "kernel launch"));
  }
  if (op.flags) keep = gpu::MakeFlagsKeep(run.device<uint8_t>(flags));
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(gpu::Select(
      run.device(temp), &temp_bytes, run.device(input), dtype, n, keep, op.partition,
      values_wanted ? run.device(values) : nullptr,
      indices_wanted ? run.device<int64_t>(indices) : nullptr, run.device<uint64_t>(count),
      lane.stream())));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(count, sizeof(uint64_t)));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  const uint64_t kept = *run.staged_as<uint64_t>(count);
  const uint64_t returned = op.partition ? n : kept;
  if (values_wanted) PRIMSERVE_RETURN_IF_ERROR(run.CheckRoom(values, returned * element));
  if (indices_wanted) {
    PRIMSERVE_RETURN_IF_ERROR(run.CheckRoom(indices, returned * sizeof(int64_t)));
  }
  if (values_wanted) PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(values, returned * element));
  if (indices_wanted) PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(indices, returned * sizeof(int64_t)));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  return SelectAnswer(op, kept, returned, run, values, indices, 0);
}

}  // namespace

gpu::SelectKeep KeepOf(const PredicateSpec& predicate) {
  gpu::SelectKeep keep;
  keep.kind = predicate.kind;
  static_assert(sizeof(keep.operand) == sizeof(predicate.operand_bits));
  std::memcpy(keep.operand, &predicate.operand_bits, sizeof(keep.operand));
  std::memcpy(keep.upper, &predicate.upper_bits, sizeof(keep.upper));
  return keep;
}

absl::StatusOr<Results> RunSelects(Lane& lane, absl::Span<const SelectOperation* const> ops,
                                   absl::Time deadline, const AnswerAllocator* answers) {
  const SelectOperation& first = *ops.front();
  if (ops.size() == 1 || first.partition) {
    Results results;
    for (const SelectOperation* op : ops) {
      results.push_back(RunSelect(lane, *op, deadline, ops.size() == 1 ? answers : nullptr));
    }
    return results;
  }
  const DType dtype = first.input.dtype;
  const size_t element = DTypeSize(dtype);
  const bool values_wanted = WantsValues(first.output);
  const bool indices_wanted = WantsIndices(first.output);
  Concatenation all;
  HostInput data;
  for (const SelectOperation* op : ops) {
    all.Append(op->input.size(), {});
    data.Append(op->input.bytes);
  }
  const uint64_t n = all.total;
  const uint64_t num_segments = all.segment_starts.size();
  gpu::SelectKeep keep = first.predicate ? KeepOf(*first.predicate) : gpu::SelectKeep{};
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::SegmentedSelect(nullptr, &temp_bytes, nullptr, dtype, n,
                                                      nullptr, num_segments, keep, nullptr,
                                                      nullptr, nullptr, lane.stream()));
  const ComputedHostInput flag_bytes = FlagBytes(ops, first.flags ? n : 0);
  HostInput starts_input(absl::Span<const uint64_t>(all.segment_starts));
  StagedRun run(lane, deadline);
  const StagedRun::Slice input = run.Input(data);
  const StagedRun::Slice flags = run.Input(flag_bytes);
  const StagedRun::Slice starts = run.Input(starts_input);
  const StagedRun::Slice values = run.Output(values_wanted ? n * element : 0);
  const StagedRun::Slice indices = run.Output(indices_wanted ? n * sizeof(int64_t) : 0);
  const StagedRun::Slice counts = run.Output(num_segments * sizeof(uint64_t));
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  if (first.flags) keep = gpu::MakeFlagsKeep(run.device<uint8_t>(flags));
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(gpu::SegmentedSelect(
      run.device(temp), &temp_bytes, run.device(input), dtype, n, run.device<uint64_t>(starts),
      num_segments, keep, values_wanted ? run.device(values) : nullptr,
      indices_wanted ? run.device<int64_t>(indices) : nullptr, run.device<uint64_t>(counts),
      lane.stream())));
  // A batch is small by construction: one whole copy beats a copy per request.
  if (values_wanted) PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(values, n * element));
  if (indices_wanted) PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(indices, n * sizeof(int64_t)));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(counts, num_segments * sizeof(uint64_t)));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());

  const uint64_t* kept = run.staged_as<uint64_t>(counts);
  Results results;
  for (size_t i = 0; i < ops.size(); ++i) {
    const uint64_t offset = all.offsets[i];
    results.push_back(SelectAnswer(*ops[i], kept[i], kept[i], run, values, indices, offset));
  }
  return results;
}

}  // namespace primserve::cuda
