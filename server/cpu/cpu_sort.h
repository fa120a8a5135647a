// The CPU backend's sort: the permutation reference::SortPermutation gives
// (the same order and tie rule, reference/sort.h), computed over threads.
#ifndef PRIMSERVE_SERVER_CPU_CPU_SORT_H_
#define PRIMSERVE_SERVER_CPU_CPU_SORT_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "server/cpu/cpu_kernels.h"

namespace primserve::cpu {

// out[i] is the input position of the key that goes to position i, each
// segment sorted on its own (segment_starts validated as in reference.h;
// empty: one segment). A segment of at least 2 * parallelism.min_items keys
// is cut into up to parallelism.threads parts sorted at once, then merged;
// shorter segments are shared out among the threads whole.
template <typename K>
std::vector<int64_t> SortPermutation(absl::Span<const K> keys, bool descending,
                                     absl::Span<const uint64_t> segment_starts,
                                     const Parallelism& parallelism);

}  // namespace primserve::cpu

#endif  // PRIMSERVE_SERVER_CPU_CPU_SORT_H_
