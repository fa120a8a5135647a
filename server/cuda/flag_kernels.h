// Select's flags, of any integer dtype, as the one byte each (flag != 0)
// that the select kernels take: on the device, for flags that lie in a CUDA
// region (host flags are packed while staged). Plain C++ (streams as
// CUstream_st*, results as cudaError_t values).
#ifndef PRIMSERVE_SERVER_CUDA_FLAG_KERNELS_H_
#define PRIMSERVE_SERVER_CUDA_FLAG_KERNELS_H_

#include <cstdint>

struct CUstream_st;

namespace primserve::gpu {

// Queues on `stream` out[i] = flags[i] != 0 for i < n, where each flag is
// `flag_bytes` (4 or 8) bytes. Returns the launch's error
// (cudaErrorInvalidValue for another width).
int PackFlags(const void* flags, int flag_bytes, uint64_t n, uint8_t* out, CUstream_st* stream);

}  // namespace primserve::gpu

#endif  // PRIMSERVE_SERVER_CUDA_FLAG_KERNELS_H_
