// Host API of the GPU reductions. Same conventions as kernels/scan.h: plain
// C++, CUstream_st* streams, cudaError_t results as int, two-phase temporary
// storage (temp_storage == nullptr: set *temp_bytes and return 0).
#ifndef PRIMSERVE_KERNELS_REDUCE_H_
#define PRIMSERVE_KERNELS_REDUCE_H_

#include <cstddef>
#include <cstdint>

#include "core/primitives.h"

struct CUstream_st;

namespace primserve::gpu {

// Reduces n elements with any of the six ops into *d_value_out (device).
// ARGMIN/ARGMAX also write the index into *d_index_out (required for them,
// ignored otherwise); n == 0 gives Identity(op) and index -1. One pass.
// Float SUM/PROD combine in an order fixed by n alone (a fixed grid of
// blocks, each folding its tiles in order, the partials in block order):
// the same bits on every run and every GPU, at full speed. Segmented
// reductions below combine tiles in tile order through the look-back.
int Reduce(void* temp_storage, size_t* temp_bytes, const void* d_in, uint64_t n,
           DType dtype, Op op, void* d_value_out, int64_t* d_index_out,
           CUstream_st* stream);

// Reduce of the first min(*d_count, max_n) elements, where d_count is a
// device uint64 read only by the kernel (a pipeline's count from a step
// before, with no host synchronization): max_n sizes the temporary storage
// and the input holds max_n elements; a count of 0 gives Identity(op) and
// index -1. The same bits as Reduce with n = that count (the blocks of
// Reduce's grid for the count do the work).
int ReduceCounted(void* temp_storage, size_t* temp_bytes, const void* d_in, uint64_t max_n,
                  const uint64_t* d_count, DType dtype, Op op, void* d_value_out,
                  int64_t* d_index_out, CUstream_st* stream);

// One result per segment (segment starts as in SegmentedScan; num_segments
// == 0 means one segment; with zero or one segment this is Reduce):
// d_values_out[s] and, for ARGMIN/ARGMAX,
// d_indices_out[s] (-1 for an empty segment). One balanced pass over the
// data whatever the segment sizes: many tiny segments and a few huge ones
// cost the same per element.
int SegmentedReduce(void* temp_storage, size_t* temp_bytes, const void* d_in, uint64_t n,
                    const uint64_t* d_segment_starts, uint64_t num_segments, DType dtype,
                    Op op, void* d_values_out, int64_t* d_indices_out, CUstream_st* stream);

// SegmentedReduce of the first min(*d_count, max_n) elements (d_count as in
// ReduceCounted), for AggregateByKeyInOrderCounted: every segment start must
// be <= that count, and the last segment ends at it. The same bits as
// SegmentedReduce with n = the count (with a max_n past the warp-per-segment
// bound, both kernels are launched and the count picks the one that works).
int SegmentedReduceCounted(void* temp_storage, size_t* temp_bytes, const void* d_in,
                           uint64_t max_n, const uint64_t* d_count,
                           const uint64_t* d_segment_starts, uint64_t num_segments, DType dtype,
                           Op op, void* d_values_out, int64_t* d_indices_out,
                           CUstream_st* stream);

// As SegmentedReduce (num_segments <= 1: Reduce), for SUM and PROD with the
// `dtype` input accumulated and answered in `accumulator`, a wider dtype, as
// numpy's sum(dtype=): kInt32 into kInt64, kUint32 into kUint64, kFloat32
// into kFloat64 (any other pair or op: cudaErrorInvalidValue). d_values_out
// holds one `accumulator` element per segment. Float bits as Reduce's and
// SegmentedReduce's, in the wide type.
int WidenedReduce(void* temp_storage, size_t* temp_bytes, const void* d_in, uint64_t n,
                  const uint64_t* d_segment_starts, uint64_t num_segments, DType dtype,
                  DType accumulator, Op op, void* d_values_out, CUstream_st* stream);

}  // namespace primserve::gpu

#endif  // PRIMSERVE_KERNELS_REDUCE_H_
