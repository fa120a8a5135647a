#include "server/cpu/cpu_gather.h"

#include <algorithm>
#include <vector>

#include "server/cpu/parts.h"

namespace primserve::cpu {

int64_t FirstIndexOutOfRange(absl::Span<const int64_t> indices, uint64_t n,
                             const Parallelism& parallelism) {
  // Whether any index is bad, without a branch per index (a negative one is
  // a large unsigned one); the rare bad request is searched again for the
  // first.
  std::vector<char> bad(PartCount(indices.size(), parallelism));
  ForEachPart(indices.size(), parallelism, [&](int p, uint64_t begin, uint64_t end) {
    bool any = false;
    for (uint64_t i = begin; i < end; ++i) any |= static_cast<uint64_t>(indices[i]) >= n;
    bad[p] = any;
  });
  if (std::find(bad.begin(), bad.end(), 1) == bad.end()) return -1;
  const auto first = std::find_if(indices.begin(), indices.end(), [n](int64_t index) {
    return static_cast<uint64_t>(index) >= n;
  });
  return first - indices.begin();
}

template <typename T>
void Gather(absl::Span<const T> values, absl::Span<const int64_t> indices, absl::Span<T> out,
            const Parallelism& parallelism) {
  // Far enough ahead that the value is there by the time it is read, near
  // enough that it is not evicted before.
  constexpr uint64_t kAhead = 16;
  const T* from = values.data();
  const int64_t* at = indices.data();
  T* to = out.data();
  ForEachPart(indices.size(), parallelism, [&](int, uint64_t begin, uint64_t end) {
    uint64_t i = begin;
    for (; i + kAhead < end; ++i) {
      __builtin_prefetch(from + at[i + kAhead]);
      to[i] = from[at[i]];
    }
    for (; i < end; ++i) to[i] = from[at[i]];
  });
}

#define PRIMSERVE_CPU_GATHER(T)                                                              \
  template void Gather<T>(absl::Span<const T>, absl::Span<const int64_t>, absl::Span<T>,     \
                          const Parallelism&);
PRIMSERVE_CPU_GATHER(int32_t)
PRIMSERVE_CPU_GATHER(int64_t)
PRIMSERVE_CPU_GATHER(uint32_t)
PRIMSERVE_CPU_GATHER(uint64_t)
PRIMSERVE_CPU_GATHER(float)
PRIMSERVE_CPU_GATHER(double)
#undef PRIMSERVE_CPU_GATHER

}  // namespace primserve::cpu
