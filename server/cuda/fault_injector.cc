#include "server/cuda/fault_injector.h"

#include "server/cuda/fault_kernels.h"

namespace primserve {

void CudaFaultInjector::Arm(CudaFault fault, int times) {
  absl::MutexLock lock(&mu_);
  armed_[static_cast<size_t>(fault)] += times;
}

bool CudaFaultInjector::Fire(CudaFault fault) {
  absl::MutexLock lock(&mu_);
  int& armed = armed_[static_cast<size_t>(fault)];
  if (armed == 0) return false;
  --armed;
  return true;
}

int CudaFaultInjector::BeforeKernels(CUstream_st* stream) {
  if (Fire(CudaFault::kLaunch)) return gpu::LaunchImpossibleKernel(stream);
  if (Fire(CudaFault::kSticky)) return gpu::RunTrappingKernel(stream);
  return 0;
}

}  // namespace primserve
