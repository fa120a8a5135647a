// The CPU backend's Gather: the indices checked, then the values read at
// them, both in parts over threads; each read's value is prefetched a few
// indices ahead, so that several random reads wait on memory at once instead
// of one after another.
#ifndef PRIMSERVE_SERVER_CPU_CPU_GATHER_H_
#define PRIMSERVE_SERVER_CPU_CPU_GATHER_H_

#include <cstdint>

#include "absl/types/span.h"
#include "server/cpu/cpu_kernels.h"

namespace primserve::cpu {

// The first i with indices[i] outside [0, n), or -1 when there is none.
int64_t FirstIndexOutOfRange(absl::Span<const int64_t> indices, uint64_t n,
                             const Parallelism& parallelism);

// out[i] = values[indices[i]] (out as long as indices, every index checked).
template <typename T>
void Gather(absl::Span<const T> values, absl::Span<const int64_t> indices, absl::Span<T> out,
            const Parallelism& parallelism);

}  // namespace primserve::cpu

#endif  // PRIMSERVE_SERVER_CPU_CPU_GATHER_H_
