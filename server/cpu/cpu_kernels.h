// The CPU backend's own loops for the primitives a user without a GPU runs
// most (scan, reduce): the op fixed at compile time so each loop is a few
// instructions per element that the compiler vectorises (float MIN/MAX on
// integer keys, the NaN test once per block), and work split over threads
// where the answer's bits do not depend on the split (integers, float
// MIN/MAX). The reference
// (reference/reference.h) stays the oracle: cpu_kernels_test checks these
// against it bit for bit, except the float SUM reduce, which sums in several
// lanes (as numpy's pairwise sum does, not a left fold) and agrees within
// rounding.
#ifndef PRIMSERVE_SERVER_CPU_CPU_KERNELS_H_
#define PRIMSERVE_SERVER_CPU_CPU_KERNELS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "core/primitives.h"

namespace primserve::cpu {

// How a call may split its work: into at most `threads` parts (the calling
// thread runs one), none smaller than `min_items` elements. A threaded scan
// goes through its input in rounds of `scan_chunk_items` elements a thread
// (more where that would take over 16 rounds), few enough that each chunk is
// still in cache when it is read the second time (once for its total, once
// to scan it).
struct Parallelism {
  int threads = 1;
  uint64_t min_items = uint64_t{1} << 20;
  uint64_t scan_chunk_items = uint64_t{1} << 16;
};

// The scan of `input` into `out` (same length; may be the same memory when
// A is T), restarting at each segment start, as reference::Scan gives it
// (same bits). `op` is SUM, PROD, MIN or MAX. A, the accumulator and the
// answer's type, is T or (SUM, PROD) a wider one, as for Reduce.
template <typename T, typename A = T>
void Scan(absl::Span<const T> input, Op op, bool exclusive,
          absl::Span<const uint64_t> segment_starts, absl::Span<A> out,
          const Parallelism& parallelism);

// The SUM, PROD, MIN or MAX of each segment (one over all of `input` when
// `segment_starts` is empty) into `out` (one per segment): reference::Reduce's
// values, bit for bit but for a float SUM (within rounding). A, the
// accumulator and the answer's type, is T or (SUM, PROD) a wider one:
// int32 into int64, uint32 into uint64, float into double.
template <typename T, typename A = T>
void Reduce(absl::Span<const T> input, Op op, absl::Span<const uint64_t> segment_starts,
            absl::Span<A> out, const Parallelism& parallelism);

}  // namespace primserve::cpu

#endif  // PRIMSERVE_SERVER_CPU_CPU_KERNELS_H_
