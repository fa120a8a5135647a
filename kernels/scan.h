// Host API of the GPU scans. Plain C++ (no CUDA headers needed): streams are
// passed as CUstream_st* (cudaStream_t), results are cudaError_t values as
// int (0 = success, 1 = cudaErrorInvalidValue for bad arguments).
//
// Temporary storage is two-phase, as in CUB: call with temp_storage ==
// nullptr to get *temp_bytes (and nothing else happens), then again with at
// least that much device memory. Nothing here allocates. All pointers are
// device pointers; work is enqueued on `stream` and not waited for.
#ifndef PRIMSERVE_KERNELS_SCAN_H_
#define PRIMSERVE_KERNELS_SCAN_H_

#include <cstddef>
#include <cstdint>

#include "core/primitives.h"

struct CUstream_st;

namespace primserve::gpu {

// Inclusive or exclusive scan of n elements with SUM, PROD, MIN or MAX (see
// primitives.h for the semantics); an exclusive scan starts with
// Identity(op). d_out may equal d_in (in place). One pass over the data.
int Scan(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
         uint64_t n, DType dtype, Op op, bool exclusive, CUstream_st* stream);

// Scan continuing a running prefix, for scanning a large array in chunks
// (chunk k on the device while chunk k+1 is copied in) with no host round
// trip. As Scan, except: d_carry_in (device, one element; nullable = the
// identity) is combined in front of the first input, so an exclusive scan
// starts with *d_carry_in and an inclusive one with (*d_carry_in op in[0]);
// d_carry_out (device, one element; nullable = not wanted) gets *d_carry_in
// op in[0] op ... op in[n-1] (just *d_carry_in, or the identity, if n == 0).
// d_carry_out may equal d_carry_in (one running-prefix slot for all chunks).
// *d_carry_out is the last tile's inclusive prefix. Scanning chunks in order
// with the carry gives the same results as one Scan of the whole array, bit
// for bit when every chunk but the last is a multiple of
// ScanTileItems(dtype, false) elements (float SUM/PROD; other ops always).
//
// Float SUM/PROD combine tile aggregates in tile order (a left fold), so the
// bits of every scan here depend on the input, n and the tile size alone,
// never on timing: the same call gives the same bits every time.
int ScanWithCarry(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
                  uint64_t n, DType dtype, Op op, bool exclusive, const void* d_carry_in,
                  void* d_carry_out, CUstream_st* stream);

// Scan whose element count is on the device, for pipelines that chain
// kernels with no host synchronization (the count of a step before, e.g. a
// Select's). As Scan of the first min(*d_count, max_n) elements, where
// d_count is a device uint64 read only by the kernel: max_n sizes the grid
// and the temporary storage, the buffers hold max_n elements, and d_out past
// the count is not written. The same bits as Scan with n = that count.
int ScanCounted(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
                uint64_t max_n, const uint64_t* d_count, DType dtype, Op op, bool exclusive,
                CUstream_st* stream);

// Scan that restarts at each segment start. d_segment_starts (device) holds
// num_segments starts, validated by the caller as in reference/reference.h:
// the first is 0, they are non-decreasing and <= n; empty segments are
// allowed; num_segments == 0 means one segment (a plain Scan).
int SegmentedScan(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
                  uint64_t n, const uint64_t* d_segment_starts, uint64_t num_segments,
                  DType dtype, Op op, bool exclusive, CUstream_st* stream);

// As SegmentedScan (num_segments == 0: Scan), with the `dtype` input
// accumulated and written in `accumulator`, a wider dtype, as numpy's
// cumsum(dtype=): kInt32 into kInt64, kUint32 into kUint64, kFloat32 into
// kFloat64; SUM and PROD only (any other pair or op: cudaErrorInvalidValue).
// d_out holds n elements of `accumulator` and must not overlap d_in (the
// answer is wider than the input, so no scan in place). Float bits as
// Scan's: the tile aggregates, in the wide type, combined in tile order.
int WidenedScan(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
                uint64_t n, const uint64_t* d_segment_starts, uint64_t num_segments,
                DType dtype, DType accumulator, Op op, bool exclusive, CUstream_st* stream);

// Elements per tile of Scan/ScanWithCarry (segmented == false) or
// SegmentedScan (true) for `dtype`; 0 for an invalid dtype. The unit of
// reproducible chunking (reference/gpu_order.h mirrors these numbers).
uint64_t ScanTileItems(DType dtype, bool segmented);

}  // namespace primserve::gpu

#endif  // PRIMSERVE_KERNELS_SCAN_H_
