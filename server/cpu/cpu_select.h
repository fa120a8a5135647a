// The CPU backend's Select: the predicate evaluated with its kind fixed at
// compile time (reference::EvaluatePredicate switches on it per element and
// builds a vector<bool>), counted in parts over threads, then each part
// compacted without a branch per element. A predicate is evaluated again
// where it is compacted rather than stored as a mask; flags, of another
// dtype than the input, go through a mask. Unique and RunLengthEncode are
// the same compaction, of the first element of each run. The answers are
// reference::Select's, Unique's and RunLengthEncode's, element for element
// (cpu_select_test).
#ifndef PRIMSERVE_SERVER_CPU_CPU_SELECT_H_
#define PRIMSERVE_SERVER_CPU_CPU_SELECT_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "core/primitives.h"
#include "server/cpu/cpu_kernels.h"

namespace primserve::cpu {

// How many elements are kept, in all and in each part ForEachPart cuts the
// input into (the parts Compact* cuts it into again, for the same length and
// parallelism).
struct KeptCounts {
  uint64_t total = 0;
  std::vector<uint64_t> parts;
};

// The elements of `input` that pass `predicate`.
template <typename T>
KeptCounts CountPassing(absl::Span<const T> input, const Predicate<T>& predicate,
                        const Parallelism& parallelism);

// The elements whose flag is nonzero; with a non-empty `keep` (flags'
// length), also keep[i] = 1 where flags[i] is nonzero, else 0.
template <typename F>
KeptCounts CountFlagged(absl::Span<const F> flags, absl::Span<uint8_t> keep,
                        const Parallelism& parallelism);

// The kept elements in order (counts.total of them), then with `partition`
// the others in order: their values into `values` and their positions into
// `indices`, each skipped where empty (else counts.total long, or input's
// length with `partition`). `counts` is CountPassing's answer for the same
// input, predicate and parallelism.
template <typename T>
void CompactPassing(absl::Span<const T> input, const Predicate<T>& predicate,
                    const KeptCounts& counts, bool partition, absl::Span<T> values,
                    absl::Span<int64_t> indices, const Parallelism& parallelism);

// The same for the mask `keep` CountFlagged wrote (`counts` its answer).
template <typename T>
void CompactMarked(absl::Span<const T> input, absl::Span<const uint8_t> keep,
                   const KeptCounts& counts, bool partition, absl::Span<T> values,
                   absl::Span<int64_t> indices, const Parallelism& parallelism);

// The runs of bit-equal consecutive elements (core/primitives.h: 0.0 and
// -0.0 differ, identical NaNs are one run), counted as their first elements.
template <typename T>
KeptCounts CountRuns(absl::Span<const T> input, const Parallelism& parallelism);

// Each run's first element into `values` and, with a non-empty `lengths`,
// its length (each counts.total long, or skipped where empty); `counts` is
// CountRuns' answer for the same input and parallelism.
template <typename T>
void CompactRuns(absl::Span<const T> input, const KeptCounts& counts, absl::Span<T> values,
                 absl::Span<int64_t> lengths, const Parallelism& parallelism);

// reference::ReduceByKey's answer, bit for bit: each run of bit-equal
// consecutive keys (`runs` is CountRuns' answer for `keys` and the same
// parallelism) gives its first key into keys_out and the left fold of its
// values under `op` (SUM, PROD, MIN or MAX) into values_out (runs.total
// each). Each thread folds the runs that start in its part.
template <typename K, typename V>
void ReduceRuns(absl::Span<const K> keys, absl::Span<const V> values, Op op,
                const KeptCounts& runs, absl::Span<K> keys_out, absl::Span<V> values_out,
                const Parallelism& parallelism);

}  // namespace primserve::cpu

#endif  // PRIMSERVE_SERVER_CPU_CPU_SELECT_H_
