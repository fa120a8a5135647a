// A scan whose input or output place is device memory from a CUDA IPC
// handle (a CUDA shared-memory region): the kernel reads and writes that
// memory where it is, on the lane's stream, with no staging and no copy
// through the host; the answer is complete when the run returns.
#ifndef PRIMSERVE_SERVER_CUDA_DEVICE_SCAN_H_
#define PRIMSERVE_SERVER_CUDA_DEVICE_SCAN_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/cuda/lane.h"
#include "server/engine/task.h"

namespace primserve::cuda {

// Whether `op` touches device memory (its input or its output place lies in
// a range recorded by AddDeviceRange): such a scan runs alone, through
// RunDeviceScan, never in a fused batch.
bool TouchesDevice(const ScanOperation& op);

// Runs `op` (TouchesDevice) on `lane`. An input in device memory on the
// lane's device is read in place (elsewhere: copied device to device into
// the batch's block); an output place in device memory on the lane's device
// is written in place unless it overlaps the input other than exactly (then
// the answer is computed in the block and copied device to device), and the
// result says so (HostArray::bytes_in_place). Host inputs go up as for any
// batch, and an answer not placed on the device comes back to the host.
absl::StatusOr<Result> RunDeviceScan(Lane& lane, const ScanOperation& op, absl::Time deadline);

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_DEVICE_SCAN_H_
