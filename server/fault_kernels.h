// Kernels that fail on purpose, for CudaFaultInjector. Plain C++ (streams as
// CUstream_st*, results as cudaError_t values).
#ifndef PRIMSERVE_SERVER_FAULT_KERNELS_H_
#define PRIMSERVE_SERVER_FAULT_KERNELS_H_

struct CUstream_st;

namespace primserve::gpu {

// Launches a kernel with more threads per block than any GPU allows; returns
// the launch's error (cudaErrorInvalidValue on CUDA 13). Nothing runs.
int LaunchImpossibleKernel(CUstream_st* stream);

// Runs a kernel that traps, and waits for it: returns cudaErrorLaunchFailure,
// after which the process's context on this device is unusable.
int RunTrappingKernel(CUstream_st* stream);

}  // namespace primserve::gpu

#endif  // PRIMSERVE_SERVER_FAULT_KERNELS_H_
