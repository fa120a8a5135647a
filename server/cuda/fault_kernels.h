// Kernels for tests of the engine: ones that fail on purpose (for
// CudaFaultInjector) and one that keeps a stream busy. Plain C++ (streams as
// CUstream_st*, results as cudaError_t values).
#ifndef PRIMSERVE_SERVER_CUDA_FAULT_KERNELS_H_
#define PRIMSERVE_SERVER_CUDA_FAULT_KERNELS_H_

#include <cstdint>

struct CUstream_st;

namespace primserve::gpu {

// Launches a kernel with more threads per block than any GPU allows; returns
// the launch's error (cudaErrorInvalidValue on CUDA 13). Nothing runs.
int LaunchImpossibleKernel(CUstream_st* stream);

// Runs a kernel that traps, and waits for it: returns cudaErrorLaunchFailure,
// after which the process's context on this device is unusable.
int RunTrappingKernel(CUstream_st* stream);

// Queues a kernel that traps and returns at once (the launch's error).
int LaunchTrappingKernel(CUstream_st* stream);

// Queues a kernel that spins for about `nanoseconds`, so that what is queued
// after it on `stream` is still pending for that long. Returns the launch's
// error.
int LaunchSpin(CUstream_st* stream, uint64_t nanoseconds);

}  // namespace primserve::gpu

#endif  // PRIMSERVE_SERVER_CUDA_FAULT_KERNELS_H_
