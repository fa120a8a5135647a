// Host API of the GPU radix sorts. Plain C++ (no CUDA headers needed), in the
// style of scan.h: streams are CUstream_st* (cudaStream_t), results are
// cudaError_t values as int (0 = success, 1 = cudaErrorInvalidValue for bad
// arguments), and temporary storage is two-phase (temp_storage == nullptr:
// set *temp_bytes and return). Nothing here allocates. Array pointers are
// device pointers; work is enqueued on `stream` and not waited for.
//
// Order (numpy.sort(kind="stable") for ascending): stable, so equal keys keep
// their input order; -0.0 and +0.0 are equal; every NaN sorts last whatever
// its sign bit, also when descending (descending reverses the order of the
// distinct non-NaN keys only). Keys and values come back bit for bit (NaN
// payloads, the sign of zero).
#ifndef PRIMSERVE_KERNELS_SORT_H_
#define PRIMSERVE_KERNELS_SORT_H_

#include <cstddef>
#include <cstdint>

#include "core/primitives.h"

struct CUstream_st;

namespace primserve::gpu {

// What a sort moves besides the keys: has_values, values of value_dtype (any
// dtype) moved with their keys, from d_values_in to d_values_out (n each);
// has_indices, the permutation into d_indices_out (n int64: output position
// -> input position; numpy.argsort(kind="stable") when ascending; positions
// in the whole array, also for a segmented sort). The flags and value_dtype
// size the temporary storage; the pointers are read only when it is given.
struct SortPayload {
  bool has_values = false;
  DType value_dtype = DType::kInt32;
  const void* d_values_in = nullptr;
  void* d_values_out = nullptr;
  bool has_indices = false;
  int64_t* d_indices_out = nullptr;
};

// Sorts n keys of key_dtype from d_keys_in into d_keys_out, LSD radix with
// one pass over all digits' histograms, then one pass per 8-bit digit
// (onesweep: each tile finds its digits' global offsets by decoupled
// look-back). Inputs may be their outputs (in place), except d_values_out
// when d_indices_out is asked for too (values are then gathered by index).
// Any n (64-bit offsets); up to kernels/detail/tuning_sort.cuh
// kSortBlockItems keys one block sorts in shared memory.
int RadixSort(void* temp_storage, size_t* temp_bytes, const void* d_keys_in, void* d_keys_out,
              uint64_t n, DType key_dtype, const SortPayload& payload, bool descending,
              CUstream_st* stream);

// Sorts each segment on its own. h_segment_starts is HOST memory (the
// launches are planned by segment size), num_segments starts validated by the
// caller as in reference/reference.h: the first is 0, non-decreasing, <= n;
// empty segments are allowed; num_segments == 0 means one segment. Segments
// of up to kWarpSortItems keys are sorted by one warp each and those of up to
// kSortBlockItems by one block each, in shared memory (one launch for each
// kind); longer ones by the global passes of RadixSort, one after another.
// Both phases must get the same starts.
int SegmentedRadixSort(void* temp_storage, size_t* temp_bytes, const void* d_keys_in,
                       void* d_keys_out, uint64_t n, DType key_dtype,
                       const uint64_t* h_segment_starts, uint64_t num_segments,
                       const SortPayload& payload, bool descending, CUstream_st* stream);

}  // namespace primserve::gpu

#endif  // PRIMSERVE_KERNELS_SORT_H_
