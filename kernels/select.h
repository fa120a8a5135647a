// The stream-compaction family on the GPU, each a single fused pass over the
// input on the decoupled look-back machinery (kernels/detail/lookback.cuh):
// Select and Partition (by predicate or by flags) and segmented Select; the
// run family (Unique, RunLengthEncode, ReduceByKey) is in kernels/runs.h.
// Semantics are those of core/primitives.h; the CPU reference
// (reference/reference.h) is the oracle.
//
// Host-facing: plain C++, no CUDA headers; compiles with g++. Device pointers
// are void* (or typed where the type is fixed: int64 indices and lengths,
// uint64 counts, uint8 flags); the stream is a cudaStream_t (CUstream_st*,
// nullptr = legacy default stream). Every function returns a cudaError_t value
// as int: 0 on success, 1 (cudaErrorInvalidValue) for bad arguments,
// otherwise the CUDA error of a failed call or launch. Nothing here
// synchronizes the stream or allocates device memory. Element counts are
// 64-bit; n > 2^32 works.
//
// Two-phase temporary storage, as in CUB: with d_temp_storage == nullptr the
// call only writes the bytes it needs into *temp_storage_bytes and returns 0;
// call again with at least that many bytes (16-byte aligned, as cudaMalloc
// gives) and the same n. Temp storage must not be shared by calls that may
// run concurrently.
//
// Counts (number selected / unique / runs, per-segment counts) are written to
// DEVICE memory as uint64; the caller copies them back.
#ifndef PRIMSERVE_KERNELS_SELECT_H_
#define PRIMSERVE_KERNELS_SELECT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/primitives.h"

struct CUstream_st;

namespace primserve::gpu {

// What to keep: either flags (keep[i] = d_flags[i] != 0, one uint8 per
// element, on the device) or, when d_flags is null, a predicate over the
// element values with the IEEE semantics of Predicate<T> in primitives.h.
// The operands are values of the input's dtype, given by their bytes
// (MakeKeep below fills them).
struct SelectKeep {
  const uint8_t* d_flags = nullptr;
  PredicateKind kind = PredicateKind::kNonzero;
  unsigned char operand[8] = {};  // a value of the input dtype, its bytes
  unsigned char upper[8] = {};    // IN_RANGE only: operand <= x < upper
};

template <typename T>
inline SelectKeep MakeKeep(PredicateKind kind, T operand = T{},
                           T upper = T{}) {
  static_assert(sizeof(T) <= 8, "element types are 4 or 8 bytes");
  SelectKeep keep;
  keep.kind = kind;
  std::memcpy(keep.operand, &operand, sizeof(T));
  std::memcpy(keep.upper, &upper, sizeof(T));
  return keep;
}

inline SelectKeep MakeFlagsKeep(const uint8_t* d_flags) {
  SelectKeep keep;
  keep.d_flags = d_flags;
  return keep;
}

// Select / Partition. Outputs, each optional (null = not wanted):
//   d_values_out  : the kept values in input order; with partition, n values:
//                   the kept ones, then the rejected ones, both in input order.
//   d_indices_out : int64 original index of each element of d_values_out (same
//                   length and order).
//   d_num_selected: uint64 on the device, the number kept.
// With flags, d_in may be null when d_values_out is null (indices/count only).
//
// In place: d_values_out == d_in is allowed for Select without partition.
// It is safe because of the look-back's ordering (Merrill & Garland, sec. 4,
// "in-place compaction"): a tile writes its outputs only after it has its
// exclusive prefix, i.e. after every earlier tile has published its
// aggregate, which each tile does only after its whole input is loaded; and a
// tile's outputs land at positions below its own end, so they can overwrite
// only inputs that earlier tiles or the tile itself have already read. Not
// allowed for Partition (rejected values land above, over unread input):
// in-place partition returns cudaErrorInvalidValue.
//
// Partition runs a counting pass first (the kept total places the rejected
// part), then the fused pass: kept at [0, K), the rejected element of
// rejected-rank r at K + r, so both parts come out in input order directly.
int Select(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_in,
           DType dtype, uint64_t n, const SelectKeep& keep, bool partition,
           void* d_values_out, int64_t* d_indices_out,
           uint64_t* d_num_selected, CUstream_st* stream);

// Segmented Select: the input is the concatenation of num_segments segments,
// segment s = [d_segment_starts[s], d_segment_starts[s+1]) (the last ends at
// n). The starts (uint64, on the device) must be valid as in reference.h:
// starts[0] == 0, non-decreasing, each <= n; empty segments are allowed;
// num_segments >= 1. Each segment is compacted into its own slot of the
// outputs: its kept values go to d_values_out[starts[s] ...] in input order,
// with d_indices_out (int64) holding each one's index WITHIN ITS SEGMENT (what
// the request would get alone), and d_counts[s] (uint64) its number kept (0
// for empty segments). Slots past a segment's count are left untouched. So a
// batch of small requests runs in one launch. Not in place.
int SegmentedSelect(void* d_temp_storage, size_t* temp_storage_bytes,
                    const void* d_in, DType dtype, uint64_t n,
                    const uint64_t* d_segment_starts, uint64_t num_segments,
                    const SelectKeep& keep, void* d_values_out,
                    int64_t* d_indices_out, uint64_t* d_counts,
                    CUstream_st* stream);

}  // namespace primserve::gpu

#endif  // PRIMSERVE_KERNELS_SELECT_H_
