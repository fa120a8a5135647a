// CUB's sorts for the sort's GPU test and benchmark (the baseline of
// kernels/sort.h): plain C++ header, compiled by nvcc in cub_sort.cu and
// cub_segmented_sort.cu. Two-phase like CUB (temp == nullptr: set
// *temp_bytes and return 0); enqueues on `stream`; returns a cudaError_t as
// int.
#ifndef PRIMSERVE_KERNELS_TESTING_CUB_SORT_H_
#define PRIMSERVE_KERNELS_TESTING_CUB_SORT_H_

#include <cstddef>
#include <cstdint>

#include "core/primitives.h"

struct CUstream_st;

namespace primserve::gpu::testing {

// DeviceRadixSort::SortKeys / SortPairs (their *Descending forms when
// descending) over the full bit range; d_values_in == nullptr: keys only,
// else 4-byte values (moved as bits). Keys of every dtype but float64 with an
// int count (n <= INT_MAX); int64_count: an int64 count, for int32 keys
// alone (keys only). Same order as primserve's sort on NaN-free input (CUB
// sorts a NaN by its sign bit; zeros are equal in both).
int CubRadixSort(void* temp, size_t* temp_bytes, const void* d_keys_in, void* d_keys_out,
                 const void* d_values_in, void* d_values_out, uint64_t n, DType key_dtype,
                 bool descending, bool int64_count, CUstream_st* stream);
// DeviceSegmentedSort::StableSortKeys / StableSortPairs (and *Descending) of
// float keys and 4-byte values (nullptr: keys only), segments
// [d_begins[s], d_ends[s]) (device arrays); NaN as above.
int CubSegmentedSort(void* temp, size_t* temp_bytes, const float* d_keys_in, float* d_keys_out,
                     const uint32_t* d_values_in, uint32_t* d_values_out, uint64_t n,
                     const uint64_t* d_begins, const uint64_t* d_ends, uint64_t num_segments,
                     bool descending, CUstream_st* stream);

}  // namespace primserve::gpu::testing

#endif  // PRIMSERVE_KERNELS_TESTING_CUB_SORT_H_
