// Gather of one request. Values and indices that lie in a CUDA region are
// read there, and a placed output written there (StagedRun); an output the
// caller could see is written only once every index was found valid.
#include "core/messages.h"
#include "kernels/gather.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/io.h"
#include "server/cuda/runners.h"
#include "server/cuda/staged_run.h"

namespace primserve::cuda {

absl::StatusOr<Result> RunGather(Lane& lane, const GatherOperation& op, absl::Time deadline,
                                 const AnswerAllocator* answers) {
  const uint64_t n = op.indices.size();
  const int element = static_cast<int>(DTypeSize(op.values.dtype));
  const size_t out_bytes = n * element;
  HostInput values_input(op.values.bytes);
  HostInput indices_input(op.indices.bytes);
  StagedRun run(lane, deadline, answers);
  const StagedRun::Slice values = run.Input(values_input);
  const StagedRun::Slice indices = run.Input(indices_input);
  const StagedRun::Slice out = run.Output(out_bytes, op.places.values, "values");
  const StagedRun::Slice bad = run.Output(sizeof(int64_t));
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  auto gather = [&](void* to) {
    return gpu::Gather(run.device(values), element, op.values.size(),
                       run.device<int64_t>(indices), n, to, run.device<int64_t>(bad),
                       lane.stream());
  };
  auto first_bad = [&]() -> absl::StatusOr<int64_t> {
    PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(bad, sizeof(int64_t)));
    PRIMSERVE_RETURN_IF_ERROR(run.Finish());
    return *run.staged_as<int64_t>(bad);
  };
  // A place in a caller's CUDA region gets nothing unless every index is
  // good: those are checked first, in a pass of their own.
  const bool check_first = op.places.values.data != nullptr &&
                           !op.places.values.unseen_on_failure &&
                           DeviceOf(op.places.values.data, op.places.values.room) >= 0;
  absl::StatusOr<int64_t> position = -1;
  if (check_first) {
    PRIMSERVE_RETURN_IF_ERROR(CudaStatus(gather(nullptr), "kernel launch"));
    position = first_bad();
  }
  if (position.ok() && *position < 0) {
    PRIMSERVE_RETURN_IF_ERROR(run.Launched(gather(run.device(out))));
    position = first_bad();
  }
  if (!position.ok()) return position.status();
  if (*position >= 0) {
    // Read on the device: the indices may be in a CUDA region.
    int64_t index = 0;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpy(&index, run.device<int64_t>(indices) + *position,
                                              sizeof(index), cudaMemcpyDefault));
    return absl::InvalidArgumentError(
        IndexOutOfRangeMessage(static_cast<uint64_t>(*position), index, op.values.size()));
  }
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(out, out_bytes));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  return GatherResult{run.Answer(out, op.values.dtype, out_bytes)};
}

}  // namespace primserve::cuda
