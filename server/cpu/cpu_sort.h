// The CPU backend's sort: the order reference::SortPermutation gives (the
// same order and tie rule, reference/sort.h), computed over threads. Long
// segments are radix sorted on keys whose unsigned order is that order;
// short ones go through std::stable_sort.
#ifndef PRIMSERVE_SERVER_CPU_CPU_SORT_H_
#define PRIMSERVE_SERVER_CPU_CPU_SORT_H_

#include <cstdint>

#include "absl/types/span.h"
#include "server/cpu/cpu_kernels.h"

namespace primserve::cpu {

// Each segment of `keys` sorted on its own (segment_starts validated as in
// reference.h; empty: one segment): sorted[i] is the key that goes to
// position i, with its own bits (the -0.0 or NaN that was there), and
// order[i] its input position (both keys' length). Segments of at least
// kRadixSortItems keys are radix sorted, each over up to
// parallelism.threads threads; shorter ones are shared out among the threads
// whole.
template <typename K>
void Sort(absl::Span<const K> keys, bool descending, absl::Span<const uint64_t> segment_starts,
          const Parallelism& parallelism, absl::Span<K> sorted, absl::Span<int64_t> order);

// The shortest segment Sort radix sorts: below it, a comparison sort does
// less work than passes over 256 buckets.
constexpr uint64_t kRadixSortItems = 2048;

}  // namespace primserve::cpu

#endif  // PRIMSERVE_SERVER_CPU_CPU_SORT_H_
