// Gather: see kernels/gather.h.
#include "kernels/gather.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace primserve::gpu {
namespace {

constexpr int kThreads = 256;
// Indices per thread: independent loads in flight hide the random reads'
// latency.
constexpr int kItems = 4;

__global__ void ResetBadKernel(unsigned long long* bad) { *bad = ~0ull; }

// Each block takes kThreads * kItems consecutive indices; a thread loads its
// kItems indices (coalesced, strided by kThreads), then their values. With
// a device count (nullable), n is the most indices and the first
// min(*count, n) are gathered.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    GatherKernel(const T* __restrict__ values, uint64_t num_values,
                 const int64_t* __restrict__ indices, uint64_t n, T* __restrict__ out,
                 unsigned long long* bad, const uint64_t* __restrict__ count) {
  if (count != nullptr) n = min(*count, n);
  const uint64_t base = static_cast<uint64_t>(blockIdx.x) * (kThreads * kItems) + threadIdx.x;
  int64_t index[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const uint64_t i = base + static_cast<uint64_t>(j) * kThreads;
    index[j] = i < n ? __ldcs(indices + i) : 0;
  }
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const uint64_t i = base + static_cast<uint64_t>(j) * kThreads;
    if (i >= n) break;
    if (index[j] < 0 || static_cast<uint64_t>(index[j]) >= num_values) {
      atomicMin(bad, static_cast<unsigned long long>(i));
    } else if (out != nullptr) {
      __stcs(out + i, __ldg(values + index[j]));
    }
  }
}

int LaunchGather(const void* d_values, int element_size, uint64_t num_values,
                 const int64_t* d_indices, uint64_t n, const uint64_t* count, void* d_out,
                 int64_t* d_bad_position, CUstream_st* stream) {
  if (d_bad_position == nullptr || (element_size != 4 && element_size != 8)) {
    return cudaErrorInvalidValue;
  }
  auto* bad = reinterpret_cast<unsigned long long*>(d_bad_position);
  ResetBadKernel<<<1, 1, 0, stream>>>(bad);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (n == 0) return cudaSuccess;
  constexpr uint64_t kPerBlock = kThreads * kItems;
  const uint64_t blocks = (n + kPerBlock - 1) / kPerBlock;
  if (blocks > 0x7fffffffull) return cudaErrorInvalidValue;
  if (element_size == 4) {
    GatherKernel<uint32_t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(d_values), num_values, d_indices, n,
        static_cast<uint32_t*>(d_out), bad, count);
  } else {
    GatherKernel<uint64_t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        static_cast<const uint64_t*>(d_values), num_values, d_indices, n,
        static_cast<uint64_t*>(d_out), bad, count);
  }
  return cudaGetLastError();
}

}  // namespace

int Gather(const void* d_values, int element_size, uint64_t num_values,
           const int64_t* d_indices, uint64_t n, void* d_out, int64_t* d_bad_position,
           CUstream_st* stream) {
  return LaunchGather(d_values, element_size, num_values, d_indices, n, nullptr, d_out,
                      d_bad_position, stream);
}

int GatherCounted(const void* d_values, int element_size, uint64_t num_values,
                  const int64_t* d_indices, uint64_t max_n, const uint64_t* d_count, void* d_out,
                  int64_t* d_bad_position, CUstream_st* stream) {
  if (d_count == nullptr) return cudaErrorInvalidValue;
  return LaunchGather(d_values, element_size, num_values, d_indices, max_n, d_count, d_out,
                      d_bad_position, stream);
}

}  // namespace primserve::gpu
