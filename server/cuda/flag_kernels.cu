#include "server/cuda/flag_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace primserve::gpu {
namespace {

template <typename F>
__global__ void PackFlagsKernel(const F* flags, uint64_t n, uint8_t* out) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = flags[i] != F(0);
  }
}

}  // namespace

int PackFlags(const void* flags, int flag_bytes, uint64_t n, uint8_t* out, CUstream_st* stream) {
  if (flag_bytes != 4 && flag_bytes != 8) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  constexpr unsigned kThreads = 256;
  const unsigned blocks =
      static_cast<unsigned>(std::min<uint64_t>((n + kThreads - 1) / kThreads, 8192));
  // Integer flags of either signedness are nonzero exactly when their bits are.
  if (flag_bytes == 4) {
    PackFlagsKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t*>(flags), n, out);
  } else {
    PackFlagsKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint64_t*>(flags), n, out);
  }
  return cudaPeekAtLastError();
}

}  // namespace primserve::gpu
