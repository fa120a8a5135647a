#include "server/cuda/device_scan.h"

#include <optional>

#include "kernels/scan.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/io.h"
#include "server/cuda/runners.h"
#include "server/cuda/staged_run.h"

namespace primserve::cuda {

bool TouchesDevice(const ScanOperation& op) {
  return DeviceOf(op.input.bytes.data(), op.input.bytes.size()) >= 0 ||
         (op.output_place != nullptr && DeviceOf(op.output_place, OutputBytes(op)) >= 0);
}

absl::StatusOr<Result> RunDeviceScan(Lane& lane, const ScanOperation& op, absl::Time deadline) {
  const DType dtype = op.input.dtype;
  const uint64_t n = op.input.size();
  const size_t bytes = op.input.bytes.size();
  // The answer's dtype and bytes: the input's, or a wider accumulator's.
  const DType out_dtype = ValuesDType(op);
  const size_t out_bytes = OutputBytes(op);
  const bool widened = op.accumulator.has_value();
  const char* const input = op.input.bytes.data();
  char* const place = op.output_place;
  const bool input_here = DeviceOf(input, bytes) == lane.device();
  const int place_device = place != nullptr ? DeviceOf(place, out_bytes) : -1;
  // In place in the region: the kernel's output is the place itself, which
  // the scan may share with its input exactly (it works in place; not a
  // wider answer) but not partly (a later element would read an answer).
  const bool disjoint = place + out_bytes <= input || input + bytes <= place;
  const bool write_in_place =
      place_device == lane.device() &&
      (input_here ? ((place == input && !widened) || disjoint) : true);
  if (n == 0) {
    return ScanResult{HostArray{out_dtype, {}, 0}};
  }
  const bool segmented = !op.segment_offsets.empty();
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(LaunchScanOf(op, nullptr, &temp_bytes, nullptr, nullptr, n,
                                              nullptr, op.segment_offsets.size(), lane.stream()));
  if (input_here && write_in_place && !segmented && !widened) {
    // Nothing to stage: the kernel reads and writes the region, with the
    // lane's kept temporary storage (no allocation, no stream-ordered free
    // and budget callback for the lane's drain to wait on).
    absl::StatusOr<void*> temp = lane.TempStorage(temp_bytes, deadline);
    if (!temp.ok()) return temp.status();
    if (*temp != nullptr) {
      PRIMSERVE_RETURN_IF_ERROR(lane.Mark(Lane::kStart));
      PRIMSERVE_RETURN_IF_ERROR(lane.Mark(Lane::kInputsIn));
      if (lane.faults() != nullptr) {
        PRIMSERVE_RETURN_IF_ERROR(
            CudaStatus(lane.faults()->BeforeKernels(lane.stream()), "kernel launch"));
      }
      PRIMSERVE_RETURN_IF_ERROR(
          CudaStatus(gpu::Scan(*temp, &temp_bytes, input, place, n, dtype, op.op, op.exclusive,
                               lane.stream()),
                     "kernel launch"));
      PRIMSERVE_RETURN_IF_ERROR(lane.Mark(Lane::kKernelDone));
      PRIMSERVE_RETURN_IF_ERROR(lane.Mark(Lane::kOutputsOut));
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(lane.stream()));
      return ScanResult{HostArray{dtype, {}, bytes}};
    }
  }
  StagedRun run(lane, deadline);
  // The input: in place, or brought into the block (host bytes staged up,
  // another device's copied across).
  HostInput data(op.input.bytes);
  std::optional<StagedRun::Slice> in_block;
  if (!input_here) in_block = run.Input(data);
  HostInput starts_input(op.segment_offsets);
  const StagedRun::Slice starts = segmented ? run.Input(starts_input) : StagedRun::Slice{};
  // The answer: in the place, else in the block (over the input's copy when
  // there is one and the answer is no wider: the scan works in place) and
  // then where it goes.
  std::optional<StagedRun::Slice> out_block;
  if (!write_in_place) {
    out_block = in_block && !widened ? *in_block
                : place_device >= 0  ? run.Scratch(out_bytes)  // no host staging for it
                                     : run.Output(out_bytes);
  }
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  const void* d_in = input_here ? static_cast<const void*>(input) : run.device(*in_block);
  void* d_out = write_in_place ? static_cast<void*>(place) : run.device(*out_block);
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(
      LaunchScanOf(op, run.device(temp), &temp_bytes, d_in, d_out, n,
                   segmented ? run.device<uint64_t>(starts) : nullptr, op.segment_offsets.size(),
                   lane.stream())));
  if (write_in_place) {
    PRIMSERVE_RETURN_IF_ERROR(run.Finish());
    return ScanResult{HostArray{out_dtype, {}, out_bytes}};
  }
  if (place_device >= 0) {
    // A place on another device, or overlapping the input partly: one copy
    // on the device side.
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(place, d_out, out_bytes, cudaMemcpyDefault, lane.stream()));
    RegionCopyCounters().output_bytes += out_bytes;
    PRIMSERVE_RETURN_IF_ERROR(run.Finish());
    return ScanResult{HostArray{out_dtype, {}, out_bytes}};
  }
  // A host answer (inline, or for a system region's place).
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(*out_block, out_bytes));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  return ScanResult{ToHostArray(out_dtype, run.staged(*out_block), out_bytes)};
}

}  // namespace primserve::cuda
