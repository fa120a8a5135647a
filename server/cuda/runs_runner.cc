// Unique and RunLengthEncode of one request: the kernel counts the runs,
// then only that many values (and lengths) come back, or stay where the
// kernel wrote them in a CUDA region's place (StagedRun), the input read
// where it lies in one.
#include "kernels/select.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/io.h"
#include "server/cuda/runners.h"
#include "server/cuda/staged_run.h"

namespace primserve::cuda {
namespace {

struct Runs {
  HostArray values;
  HostArray lengths;  // empty unless asked for
};

absl::StatusOr<Runs> RunRuns(Lane& lane, const ArrayView& input, const OutputPlaces& places,
                             bool with_lengths, absl::Time deadline,
                             const AnswerAllocator* answers) {
  const DType dtype = input.dtype;
  const size_t element = DTypeSize(dtype);
  const uint64_t n = input.size();
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(
      with_lengths ? gpu::RunLengthEncode(nullptr, &temp_bytes, nullptr, dtype, n, nullptr,
                                          nullptr, nullptr, lane.stream())
                   : gpu::Unique(nullptr, &temp_bytes, nullptr, dtype, n, nullptr, nullptr,
                                 lane.stream()));
  HostInput data(input.bytes);
  StagedRun run(lane, deadline, answers);
  const StagedRun::Slice in = run.Input(data);
  const StagedRun::Slice values = run.Output(n * element, places.values, "values");
  const StagedRun::Slice lengths =
      run.Output(with_lengths ? n * sizeof(int64_t) : 0, places.lengths, "lengths");
  const StagedRun::Slice count = run.Output(sizeof(uint64_t));
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(
      with_lengths
          ? gpu::RunLengthEncode(run.device(temp), &temp_bytes, run.device(in), dtype, n,
                                 run.device(values), run.device<int64_t>(lengths),
                                 run.device<uint64_t>(count), lane.stream())
          : gpu::Unique(run.device(temp), &temp_bytes, run.device(in), dtype, n,
                        run.device(values), run.device<uint64_t>(count), lane.stream())));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(count, sizeof(uint64_t)));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  const uint64_t runs = *run.staged_as<uint64_t>(count);
  PRIMSERVE_RETURN_IF_ERROR(run.CheckRoom(values, runs * element));
  if (with_lengths) PRIMSERVE_RETURN_IF_ERROR(run.CheckRoom(lengths, runs * sizeof(int64_t)));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(values, runs * element));
  if (with_lengths) PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(lengths, runs * sizeof(int64_t)));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  Runs result{run.Answer(values, dtype, runs * element), HostArray{}};
  if (with_lengths) result.lengths = run.Answer(lengths, DType::kInt64, runs * sizeof(int64_t));
  return result;
}

}  // namespace

absl::StatusOr<Result> RunUnique(Lane& lane, const UniqueOperation& op, absl::Time deadline,
                                 const AnswerAllocator* answers) {
  absl::StatusOr<Runs> runs =
      RunRuns(lane, op.input, op.places, /*with_lengths=*/false, deadline, answers);
  if (!runs.ok()) return runs.status();
  return UniqueResult{std::move(runs->values)};
}

absl::StatusOr<Result> RunRunLengthEncode(Lane& lane, const RunLengthEncodeOperation& op,
                                          absl::Time deadline, const AnswerAllocator* answers) {
  absl::StatusOr<Runs> runs =
      RunRuns(lane, op.input, op.places, /*with_lengths=*/true, deadline, answers);
  if (!runs.ok()) return runs.status();
  return RunLengthEncodeResult{std::move(runs->values), std::move(runs->lengths)};
}

}  // namespace primserve::cuda
