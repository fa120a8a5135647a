#include "server/fault_kernels.h"

#include <cuda_runtime.h>

namespace primserve::gpu {
namespace {

__global__ void Nothing() {}

__global__ void Trap() { __trap(); }

}  // namespace

int LaunchImpossibleKernel(CUstream_st* stream) {
  Nothing<<<1, 4096, 0, stream>>>();
  return cudaGetLastError();
}

int RunTrappingKernel(CUstream_st* stream) {
  Trap<<<1, 1, 0, stream>>>();
  if (cudaError_t launched = cudaGetLastError(); launched != cudaSuccess) return launched;
  return cudaStreamSynchronize(stream);
}

}  // namespace primserve::gpu
