// The CPU reference implementation of every primitive: sequential and
// straightforward, so it is obviously right. It is the oracle for the GPU
// kernels and the engine of the CPU backend. Semantics are those documented
// in primitives.h.
//
// Segment starts, where a function takes them, are already validated by the
// caller: empty means one segment over the whole input; otherwise the first
// is 0, they are non-decreasing and each is <= n. Empty segments are allowed.
#ifndef PRIMSERVE_KERNELS_REFERENCE_H_
#define PRIMSERVE_KERNELS_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/primitives.h"

namespace primserve::reference {

// Inclusive or exclusive scan with SUM, PROD, MIN or MAX, restarting at each
// segment start. An exclusive scan starts each segment with the identity.
template <typename T>
std::vector<T> Scan(absl::Span<const T> input, Op op, bool exclusive,
                    absl::Span<const uint64_t> segment_starts = {});

template <typename T>
struct ReduceResult {
  std::vector<T> values;         // one per segment
  std::vector<int64_t> indices;  // ARGMIN/ARGMAX only: one per segment, -1 if empty
};

// One result per segment (one segment when segment_starts is empty).
template <typename T>
ReduceResult<T> Reduce(absl::Span<const T> input, Op op,
                       absl::Span<const uint64_t> segment_starts = {});

template <typename T>
struct SelectResult {
  std::vector<T> values;         // kept, then (partition) rejected
  std::vector<int64_t> indices;  // original index of each element of values
  uint64_t count = 0;            // number kept
};

// Keeps input[i] where keep[i] is true. With partition, the rejected elements
// follow the kept ones; both parts keep their input order.
template <typename T>
SelectResult<T> Select(absl::Span<const T> input, const std::vector<bool>& keep,
                       bool partition);

// keep[i] = predicate(input[i]).
template <typename T>
std::vector<bool> EvaluatePredicate(absl::Span<const T> input,
                                    const Predicate<T>& predicate);

// keep[i] = flags[i] != 0.
template <typename F>
std::vector<bool> EvaluateFlags(absl::Span<const F> flags);

// Drops consecutive duplicates (bit-pattern equality).
template <typename T>
std::vector<T> Unique(absl::Span<const T> input);

template <typename T>
struct Runs {
  std::vector<T> values;
  std::vector<int64_t> lengths;
};

template <typename T>
Runs<T> RunLengthEncode(absl::Span<const T> input);

template <typename K, typename V>
struct KeyedValues {
  std::vector<K> keys;
  std::vector<V> values;
};

// Reduces each run of consecutive equal keys with SUM, PROD, MIN or MAX.
// keys and values have the same length.
template <typename K, typename V>
KeyedValues<K, V> ReduceByKey(absl::Span<const K> keys,
                              absl::Span<const V> values, Op op);

// Aggregates values by integer key in [0, num_keys) with SUM, MIN or MAX;
// keys absent from the input get the identity. INVALID_ARGUMENT naming the
// first offending position if a key is out of range.
// The error for keys[position] = key outside [0, num_keys).
template <typename K>
absl::Status KeyOutOfRange(uint64_t position, K key, uint64_t num_keys);

template <typename K, typename V>
absl::StatusOr<std::vector<V>> AggregateByKey(absl::Span<const K> keys,
                                              absl::Span<const V> values,
                                              Op op, uint64_t num_keys);

}  // namespace primserve::reference

#include "reference/reference_impl.h"  // IWYU pragma: export

#endif  // PRIMSERVE_KERNELS_REFERENCE_H_
