#include "server/cuda/fault_injector.h"

#include <cuda_runtime_api.h>

#include "server/cuda/fault_kernels.h"

namespace primserve {

void CudaFaultInjector::Arm(CudaFault fault, int times, int device) {
  absl::MutexLock lock(&mu_);
  armed_[device][static_cast<size_t>(fault)] += times;
}

bool CudaFaultInjector::Fire(CudaFault fault, int device) {
  absl::MutexLock lock(&mu_);
  for (int armed_for : {device, kAnyDevice}) {
    auto it = armed_.find(armed_for);
    if (it == armed_.end()) continue;
    int& armed = it->second[static_cast<size_t>(fault)];
    if (armed == 0) continue;
    --armed;
    return true;
  }
  return false;
}

bool CudaFaultInjector::FailAllocation() {
  int device = kAnyDevice;
  if (cudaGetDevice(&device) != cudaSuccess) cudaGetLastError();
  return Fire(CudaFault::kAllocation, device);
}

int CudaFaultInjector::BeforeKernels(CUstream_st* stream) {
  int device = kAnyDevice;
  if (cudaStreamGetDevice(stream, &device) != cudaSuccess) cudaGetLastError();
  if (Fire(CudaFault::kLaunch, device)) return gpu::LaunchImpossibleKernel(stream);
  if (Fire(CudaFault::kSticky, device)) return gpu::RunTrappingKernel(stream);
  return 0;
}

}  // namespace primserve
