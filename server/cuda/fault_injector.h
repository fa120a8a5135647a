// Test-only faults for the CUDA backend: a test arms a fault and the backend
// produces it at its next chance, through the same code path as the real
// failure, so tests can show that each one gets the right status and health.
// A test-only library: production servers pass no FaultHooks.
#ifndef PRIMSERVE_SERVER_CUDA_FAULT_INJECTOR_H_
#define PRIMSERVE_SERVER_CUDA_FAULT_INJECTOR_H_

#include <array>
#include <cstddef>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/cuda/fault_hooks.h"

namespace primserve {

enum class CudaFault {
  // A device allocation fails as cudaMallocAsync does when the device is full.
  kAllocation,
  // A batch's first kernel launch is refused (a real launch with an
  // impossible block size, which CUDA 13 refuses with cudaErrorInvalidValue);
  // the context lives.
  kLaunch,
  // A batch's kernels hit a device-side trap: the context is lost for good
  // (cudaErrorLaunchFailure), as after an illegal address.
  kSticky,
};
inline constexpr size_t kNumCudaFaults = 3;

class CudaFaultInjector final : public cuda::FaultHooks {
 public:
  static constexpr int kAnyDevice = -1;
  // The next `times` chances for `fault` fail: on `device` alone (a CUDA
  // ordinal), or on whichever device comes first (kAnyDevice).
  void Arm(CudaFault fault, int times = 1, int device = kAnyDevice);
  // True, once per armed time, when `fault` should happen now on `device`
  // (armed for it or for any device).
  bool Fire(CudaFault fault, int device = kAnyDevice);

  // On the calling thread's current device (the lane's).
  bool FailAllocation() override;
  // On `stream`'s device.
  int BeforeKernels(CUstream_st* stream) override;

 private:
  absl::Mutex mu_;
  // Times armed, by device (kAnyDevice included) and fault.
  std::map<int, std::array<int, kNumCudaFaults>> armed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_CUDA_FAULT_INJECTOR_H_
