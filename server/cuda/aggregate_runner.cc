// AggregateByKey of one request (keys are indices into num_keys slots; a
// reproducible float SUM through the order-fixed AggregateByKeyInOrder
// instead of atomics). Keys and values that lie in a CUDA region are read
// there, and placed answers written there (StagedRun).
#include "core/messages.h"
#include "kernels/aggregate.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/io.h"
#include "server/cuda/runners.h"
#include "server/cuda/staged_run.h"

namespace primserve::cuda {

absl::StatusOr<Result> RunAggregateByKey(Lane& lane, const AggregateByKeyOperation& op,
                                         absl::Time deadline, const AnswerAllocator* answers) {
  const uint64_t n = op.keys.size();
  const size_t value_size = DTypeSize(op.values.dtype);
  const auto aggregate = op.reproducible && OrderSensitive(op.op, op.values.dtype)
                             ? gpu::AggregateByKeyInOrder
                             : gpu::AggregateByKey;
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(aggregate(nullptr, &temp_bytes, nullptr, op.keys.dtype, nullptr,
                                           op.values.dtype, n, op.op, op.num_keys, nullptr,
                                           nullptr, lane.stream()));
  HostInput keys_input(op.keys.bytes);
  HostInput values_input(op.values.bytes);
  StagedRun run(lane, deadline, answers);
  const StagedRun::Slice keys = run.Input(keys_input);
  const StagedRun::Slice values = run.Input(values_input);
  // In place, a request that fails on a key out of range may leave partial
  // answers in its place (the call fails INVALID_ARGUMENT).
  const StagedRun::Slice out = run.Output(op.num_keys * value_size, op.places.values, "values");
  const StagedRun::Slice bad = run.Output(sizeof(int64_t));
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(aggregate(
      run.device(temp), &temp_bytes, run.device(keys), op.keys.dtype, run.device(values),
      op.values.dtype, n, op.op, op.num_keys, run.device(out), run.device<int64_t>(bad),
      lane.stream())));
  // The answer comes back with the check, in one wait: a bad key discards it.
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(bad, sizeof(int64_t)));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(out, op.num_keys * value_size));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  // The first key outside [0, num_keys), or -1.
  const int64_t bad_position = *run.staged_as<int64_t>(bad);
  if (bad_position >= 0) {
    return VisitDType(op.keys.dtype, [&](auto zero) -> absl::Status {
      using K = decltype(zero);
      // Read on the device: the keys may be in a CUDA region (read in
      // place, or copied into the block), which the host cannot read.
      K key{};
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpy(&key, run.device<K>(keys) + bad_position,
                                                sizeof(K), cudaMemcpyDefault));
      return absl::InvalidArgumentError(
          KeyOutOfRangeMessage(static_cast<uint64_t>(bad_position), key, op.num_keys));
    });
  }
  return AggregateByKeyResult{run.Answer(out, op.values.dtype, op.num_keys * value_size)};
}

}  // namespace primserve::cuda
