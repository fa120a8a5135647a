// CUB radix sorts of cub_baseline.h.
#include <cuda_runtime.h>

#include <climits>
#include <cub/device/device_radix_sort.cuh>

#include "core/primitives.h"
#include "kernels/testing/cub_sort.h"

namespace primserve::gpu::testing {
namespace {

// Instantiated for the keys the tests and the benchmark compare (every dtype
// but float64), 4-byte values, and int counts (int64 for int32 keys only, the
// test past 2^31): each CUB sort instantiation is minutes of nvcc.
template <typename F>
int VisitCubKeys(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kInt32: return f(int32_t{});
    case DType::kUint32: return f(uint32_t{});
    case DType::kFloat32: return f(float{});
    case DType::kInt64: return f(int64_t{});
    case DType::kUint64: return f(uint64_t{});
    default: return cudaErrorInvalidValue;
  }
}

template <typename K, typename N>
cudaError_t RadixKeys(void* temp, size_t& bytes, const K* in, K* out, N n, bool descending,
                      cudaStream_t stream) {
  return descending
             ? cub::DeviceRadixSort::SortKeysDescending(temp, bytes, in, out, n, 0,
                                                        int{sizeof(K) * 8}, stream)
             : cub::DeviceRadixSort::SortKeys(temp, bytes, in, out, n, 0, int{sizeof(K) * 8},
                                              stream);
}

template <typename K>
cudaError_t RadixPairs(void* temp, size_t& bytes, const K* keys_in, K* keys_out,
                       const uint32_t* values_in, uint32_t* values_out, int n, bool descending,
                       cudaStream_t stream) {
  return descending ? cub::DeviceRadixSort::SortPairsDescending(
                          temp, bytes, keys_in, keys_out, values_in, values_out, n, 0,
                          int{sizeof(K) * 8}, stream)
                    : cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, values_in,
                                                      values_out, n, 0, int{sizeof(K) * 8},
                                                      stream);
}

}  // namespace

int CubRadixSort(void* temp, size_t* temp_bytes, const void* d_keys_in, void* d_keys_out,
                 const void* d_values_in, void* d_values_out, uint64_t n, DType key_dtype,
                 bool descending, bool int64_count, CUstream_st* stream) {
  if (n > INT_MAX && !int64_count) return cudaErrorInvalidValue;
  if (int64_count) {
    if (key_dtype != DType::kInt32 || d_values_in != nullptr) return cudaErrorInvalidValue;
    return RadixKeys(temp, *temp_bytes, static_cast<const int32_t*>(d_keys_in),
                     static_cast<int32_t*>(d_keys_out), static_cast<int64_t>(n), descending,
                     stream);
  }
  return VisitCubKeys(key_dtype, [&](auto key_tag) -> int {
    using K = decltype(key_tag);
    const K* keys_in = static_cast<const K*>(d_keys_in);
    K* keys_out = static_cast<K*>(d_keys_out);
    if (d_values_in == nullptr) {
      return RadixKeys(temp, *temp_bytes, keys_in, keys_out, static_cast<int>(n), descending,
                       stream);
    }
    return RadixPairs(temp, *temp_bytes, keys_in, keys_out,
                      static_cast<const uint32_t*>(d_values_in),
                      static_cast<uint32_t*>(d_values_out), static_cast<int>(n), descending,
                      stream);
  });
}

}  // namespace primserve::gpu::testing
