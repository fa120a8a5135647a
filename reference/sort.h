// The CPU reference of the sort: std::stable_sort of positions with the
// project's order (kernels/sort.h): -0.0 and +0.0 equal, every NaN last in
// both directions, descending reversing only the order of distinct non-NaN
// keys, equal keys in input order. The oracle of the GPU sort and the order
// the CPU backend answers in.
#ifndef PRIMSERVE_REFERENCE_SORT_H_
#define PRIMSERVE_REFERENCE_SORT_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"

namespace primserve::reference {

// Whether key a goes before key b (a strict weak order; NaNs are equal to
// each other and after everything else).
template <typename K>
bool SortsBefore(K a, K b, bool descending) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return descending ? b < a : a < b;
}

// The permutation that sorts each segment of keys: out[i] is the input
// position of the key that goes to position i (positions in the whole
// array). segment_starts as in reference.h (validated; empty: one segment).
template <typename K>
std::vector<int64_t> SortPermutation(absl::Span<const K> keys, bool descending,
                                     absl::Span<const uint64_t> segment_starts = {}) {
  std::vector<int64_t> order(keys.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  const size_t segments = segment_starts.empty() ? 1 : segment_starts.size();
  for (size_t s = 0; s < segments; ++s) {
    const size_t begin = segment_starts.empty() ? 0 : segment_starts[s];
    const size_t end = s + 1 < segment_starts.size() ? segment_starts[s + 1] : keys.size();
    std::stable_sort(order.begin() + begin, order.begin() + end,
                     [&](int64_t a, int64_t b) { return SortsBefore(keys[a], keys[b], descending); });
  }
  return order;
}

// out[i] = in[permutation[i]]: keys or values in sorted order.
template <typename T>
std::vector<T> Permute(absl::Span<const T> in, absl::Span<const int64_t> permutation) {
  std::vector<T> out(permutation.size());
  for (size_t i = 0; i < permutation.size(); ++i) out[i] = in[permutation[i]];
  return out;
}

}  // namespace primserve::reference

#endif  // PRIMSERVE_REFERENCE_SORT_H_
