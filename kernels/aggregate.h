// AggregateByKey on the GPU: values aggregated by unsorted integer key in
// [0, num_keys) with SUM, MIN or MAX (semantics in core/primitives.h; the
// CPU reference is reference/reference.h).
//
// Host-facing: plain C++, no CUDA headers; compiles with g++. Device pointers
// are void*; the stream is a cudaStream_t (CUstream_st*, nullptr = legacy
// default stream). Every function returns a cudaError_t value as int: 0 on
// success, 1 (cudaErrorInvalidValue) for bad arguments, otherwise the CUDA
// error of a failed call or launch. Nothing here synchronizes the stream or
// allocates device memory.
//
// Two-phase temporary storage, as in CUB: with d_temp_storage == nullptr the
// call only writes the bytes it needs into *temp_storage_bytes and returns 0;
// then call again with at least that many bytes of device memory.
#ifndef PRIMSERVE_KERNELS_AGGREGATE_H_
#define PRIMSERVE_KERNELS_AGGREGATE_H_

#include <cstddef>
#include <cstdint>

#include "core/primitives.h"

struct CUstream_st;

namespace primserve::gpu {

// d_out[k] = op over every d_values[i] with d_keys[i] == k, for k in
// [0, num_keys); Identity(op) for keys that do not occur. key_dtype is one of
// INT32, INT64, UINT32, UINT64; value_dtype any DType; op SUM, MIN or MAX.
//
// Out-of-range keys (negative, or >= num_keys) are detected on the device and
// never written anywhere: *d_bad_position (a device int64) receives the
// smallest index i whose key is out of range, or -1 when every key is valid.
// The caller copies it back with the results and treats >= 0 as
// INVALID_ARGUMENT; d_out is then unspecified. d_bad_position is required.
//
// Floating-point SUM is accumulated with atomics in no fixed order, so it
// matches the reference's left fold only within rounding; integer SUM wraps
// and is exact; MIN and MAX are exact (NaN propagates; a key whose values
// hold +0.0 and -0.0 as its extreme may give either zero).
//
// The path is chosen by num_keys: when num_keys values fit in shared memory,
// each block aggregates privately (warp-aggregated shared-memory atomics)
// and merges once per key; otherwise warp-aggregated global atomics (peers
// with the same key in a warp found with __match_any_sync, combined in
// registers, one atomic per key per warp).
int AggregateByKey(void* d_temp_storage, size_t* temp_storage_bytes,
                   const void* d_keys, DType key_dtype, const void* d_values,
                   DType value_dtype, uint64_t n, Op op, uint64_t num_keys,
                   void* d_out, int64_t* d_bad_position, CUstream_st* stream);

// As AggregateByKey, with each key's values combined in a fixed association
// (reproducible float SUM: the same bits every time): a stable radix sort of
// (key, value) by key (CUB), then SegmentedReduce (kernels/reduce.h) of the
// sorted values with one segment per key, so each key's values meet in index
// order and in SegmentedReduce's association. Needs temporary storage of
// about n * (key + value size) + num_keys * 8 bytes plus the sort's; several
// times the atomics' cost (perf/runs/2026-11-25-h100-kernels-reproducible/).
int AggregateByKeyInOrder(void* d_temp_storage, size_t* temp_storage_bytes,
                          const void* d_keys, DType key_dtype, const void* d_values,
                          DType value_dtype, uint64_t n, Op op, uint64_t num_keys,
                          void* d_out, int64_t* d_bad_position, CUstream_st* stream);

// AggregateByKey and AggregateByKeyInOrder of the first min(*d_count,
// max_n) pairs, where d_count is a device uint64 read only by the kernels (a
// pipeline's count from a step before, with no host synchronization): max_n
// sizes the grids and the temporary storage, and the keys and values hold
// max_n elements. Only keys before the count are checked (a bad key past it
// is never reported); a count of 0 gives every key Identity(op) and bad
// position -1. The in-order one gives the same bits as AggregateByKeyInOrder
// with n = the count; it sorts max_n pairs (the keys past the count replaced
// by one that sorts last) and needs max_n more keys of temporary storage.
int AggregateByKeyCounted(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_keys,
                          DType key_dtype, const void* d_values, DType value_dtype,
                          uint64_t max_n, const uint64_t* d_count, Op op, uint64_t num_keys,
                          void* d_out, int64_t* d_bad_position, CUstream_st* stream);
int AggregateByKeyInOrderCounted(void* d_temp_storage, size_t* temp_storage_bytes,
                                 const void* d_keys, DType key_dtype, const void* d_values,
                                 DType value_dtype, uint64_t max_n, const uint64_t* d_count,
                                 Op op, uint64_t num_keys, void* d_out, int64_t* d_bad_position,
                                 CUstream_st* stream);

// Benchmark/diagnostic variant: which kernel to use. kAuto is what
// AggregateByKey does; kGlobalPlain is plain per-element global atomics (no
// warp aggregation), the baseline the benchmark compares against.
enum class AggregatePath : int {
  kAuto = 0,
  kGlobalWarpAggregated = 1,
  kSharedPrivatized = 2,
  kGlobalPlain = 3,
};

int AggregateByKeyWithPath(void* d_temp_storage, size_t* temp_storage_bytes,
                           const void* d_keys, DType key_dtype,
                           const void* d_values, DType value_dtype,
                           uint64_t n, Op op, uint64_t num_keys, void* d_out,
                           int64_t* d_bad_position, AggregatePath path,
                           CUstream_st* stream);

}  // namespace primserve::gpu

#endif  // PRIMSERVE_KERNELS_AGGREGATE_H_
