// The run family of one request (kernels/runs.h): Unique, RunLengthEncode
// and ReduceByKey. The kernel counts the runs, then only that many values
// (and lengths, or keys) come back, or stay where the kernel wrote them in a
// CUDA region's place (StagedRun), the inputs read where they lie in one.
#include "core/messages.h"
#include "kernels/runs.h"
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

absl::StatusOr<Result> RunReduceByKey(Lane& lane, const ReduceByKeyOperation& op,
                                      absl::Time deadline, const AnswerAllocator* answers) {
  const uint64_t n = op.keys.size();
  const size_t key_size = DTypeSize(op.keys.dtype);
  const size_t value_size = DTypeSize(op.values.dtype);
  // Runs spanning tiles combine in tile order only where the request needs
  // the same bits every time (the in-order look-back costs 1.4-1.7x).
  const auto reduce_by_key = op.reproducible ? gpu::ReduceByKey : gpu::ReduceByKeyUnordered;
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(reduce_by_key(nullptr, &temp_bytes, nullptr, op.keys.dtype,
                                               nullptr, op.values.dtype, n, op.op, nullptr,
                                               nullptr, nullptr, lane.stream()));
  HostInput keys_input(op.keys.bytes);
  HostInput values_input(op.values.bytes);
  StagedRun run(lane, deadline, answers);
  const StagedRun::Slice keys = run.Input(keys_input);
  const StagedRun::Slice values = run.Input(values_input);
  const StagedRun::Slice keys_out = run.Output(n * key_size, op.places.keys, "keys");
  const StagedRun::Slice values_out = run.Output(n * value_size, op.places.values, "values");
  const StagedRun::Slice count = run.Output(sizeof(uint64_t));
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(reduce_by_key(
      run.device(temp), &temp_bytes, run.device(keys), op.keys.dtype, run.device(values),
      op.values.dtype, n, op.op, run.device(keys_out), run.device(values_out),
      run.device<uint64_t>(count), lane.stream())));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(count, sizeof(uint64_t)));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  const uint64_t runs = *run.staged_as<uint64_t>(count);
  PRIMSERVE_RETURN_IF_ERROR(run.CheckRoom(keys_out, runs * key_size));
  PRIMSERVE_RETURN_IF_ERROR(run.CheckRoom(values_out, runs * value_size));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(keys_out, runs * key_size));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(values_out, runs * value_size));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  return ReduceByKeyResult{run.Answer(keys_out, op.keys.dtype, runs * key_size),
                           run.Answer(values_out, op.values.dtype, runs * value_size)};
}

}  // namespace primserve::cuda
