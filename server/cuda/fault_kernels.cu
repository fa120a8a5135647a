#include "server/cuda/fault_kernels.h"

#include <cuda_runtime.h>

namespace primserve::gpu {
namespace {

__global__ void Nothing() {}

__global__ void Trap() { __trap(); }

// %globaltimer counts nanoseconds of wall time.
__device__ uint64_t GlobalNanoseconds() {
  uint64_t now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void Spin(uint64_t nanoseconds) {
  const uint64_t begin = GlobalNanoseconds();
  while (GlobalNanoseconds() - begin < nanoseconds) __nanosleep(1000);
}

}  // namespace

int LaunchImpossibleKernel(CUstream_st* stream) {
  Nothing<<<1, 4096, 0, stream>>>();
  return cudaGetLastError();
}

int RunTrappingKernel(CUstream_st* stream) {
  if (int launched = LaunchTrappingKernel(stream); launched != cudaSuccess) return launched;
  return cudaStreamSynchronize(stream);
}

int LaunchTrappingKernel(CUstream_st* stream) {
  Trap<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

int LaunchSpin(CUstream_st* stream, uint64_t nanoseconds) {
  Spin<<<1, 1, 0, stream>>>(nanoseconds);
  return cudaGetLastError();
}

}  // namespace primserve::gpu
