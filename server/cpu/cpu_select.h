// The CPU backend's Select: the predicate evaluated with its kind fixed at
// compile time (reference::EvaluatePredicate switches on it per element and
// builds a vector<bool>), counted and compacted in parts over threads. The
// answers are reference::Select's, element for element (cpu_select_test).
#ifndef PRIMSERVE_SERVER_CPU_CPU_SELECT_H_
#define PRIMSERVE_SERVER_CPU_CPU_SELECT_H_

#include <cstdint>

#include "absl/types/span.h"
#include "core/primitives.h"
#include "server/cpu/cpu_kernels.h"

namespace primserve::cpu {

// How many elements of `input` pass `predicate`; with a non-empty `keep`
// (input's length), also keep[i] = 1 where input[i] passes, else 0.
template <typename T>
uint64_t Keep(absl::Span<const T> input, const Predicate<T>& predicate, absl::Span<uint8_t> keep,
              const Parallelism& parallelism);

// The same for flags: an element is kept where its flag is nonzero.
template <typename F>
uint64_t KeepFlags(absl::Span<const F> flags, absl::Span<uint8_t> keep,
                   const Parallelism& parallelism);

// The kept elements in order (`count` of them, Keep's answer), then with
// `partition` the others in order: their values into `values` and their
// positions into `indices`, each skipped where empty (else `count` long, or
// input's length with `partition`).
template <typename T>
void Compact(absl::Span<const T> input, absl::Span<const uint8_t> keep, uint64_t count,
             bool partition, absl::Span<T> values, absl::Span<int64_t> indices,
             const Parallelism& parallelism);

}  // namespace primserve::cpu

#endif  // PRIMSERVE_SERVER_CPU_CPU_SELECT_H_
