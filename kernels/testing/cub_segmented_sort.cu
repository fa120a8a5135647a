// CUB segmented sorts of cub_baseline.h.
#include <cuda_runtime.h>

#include <cub/device/device_segmented_sort.cuh>

#include "kernels/testing/cub_sort.h"

namespace primserve::gpu::testing {

int CubSegmentedSort(void* temp, size_t* temp_bytes, const float* d_keys_in, float* d_keys_out,
                     const uint32_t* d_values_in, uint32_t* d_values_out, uint64_t n,
                     const uint64_t* d_begins, const uint64_t* d_ends, uint64_t num_segments,
                     bool descending, CUstream_st* stream) {
  const int64_t items = static_cast<int64_t>(n);
  const int64_t segments = static_cast<int64_t>(num_segments);
  if (d_values_in == nullptr) {
    return descending ? cub::DeviceSegmentedSort::StableSortKeysDescending(
                            temp, *temp_bytes, d_keys_in, d_keys_out, items, segments, d_begins,
                            d_ends, stream)
                      : cub::DeviceSegmentedSort::StableSortKeys(temp, *temp_bytes, d_keys_in,
                                                                 d_keys_out, items, segments,
                                                                 d_begins, d_ends, stream);
  }
  return descending ? cub::DeviceSegmentedSort::StableSortPairsDescending(
                          temp, *temp_bytes, d_keys_in, d_keys_out, d_values_in, d_values_out,
                          items, segments, d_begins, d_ends, stream)
                    : cub::DeviceSegmentedSort::StableSortPairs(
                          temp, *temp_bytes, d_keys_in, d_keys_out, d_values_in, d_values_out,
                          items, segments, d_begins, d_ends, stream);
}

}  // namespace primserve::gpu::testing
