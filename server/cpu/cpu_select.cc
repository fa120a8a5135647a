#include "server/cpu/cpu_select.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "server/cpu/parts.h"

namespace primserve::cpu {
namespace {

// f(test) with test(x) the predicate for its kind, so that the loop that
// calls it compiles without the per-element switch.
template <typename T, typename F>
uint64_t WithTest(const Predicate<T>& p, F&& f) {
  const T v = p.operand;
  const T upper = p.upper;
  switch (p.kind) {
    case PredicateKind::kNonzero: return f([](T x) { return x != T(0); });
    case PredicateKind::kEq: return f([v](T x) { return x == v; });
    case PredicateKind::kNe: return f([v](T x) { return x != v; });
    case PredicateKind::kLt: return f([v](T x) { return x < v; });
    case PredicateKind::kLe: return f([v](T x) { return x <= v; });
    case PredicateKind::kGt: return f([v](T x) { return x > v; });
    case PredicateKind::kGe: return f([v](T x) { return x >= v; });
    case PredicateKind::kInRange: break;
  }
  return f([v, upper](T x) { return v <= x && x < upper; });
}

// Counts (and with a non-empty keep, marks) the elements of [0, n) passing
// test(i), in parts over threads.
template <typename Test>
uint64_t CountAndMark(uint64_t n, Test test, absl::Span<uint8_t> keep,
                      const Parallelism& parallelism) {
  std::vector<uint64_t> counts(std::max(1, parallelism.threads), 0);
  const int parts = ForEachPart(n, parallelism, [&](int p, uint64_t begin, uint64_t end) {
    uint64_t c = 0;
    if (keep.empty()) {
      for (uint64_t i = begin; i < end; ++i) c += test(i) ? 1 : 0;
    } else {
      for (uint64_t i = begin; i < end; ++i) {
        const uint8_t k = test(i) ? 1 : 0;
        keep[i] = k;
        c += k;
      }
    }
    counts[p] = c;
  });
  uint64_t total = 0;
  for (int p = 0; p < parts; ++p) total += counts[p];
  return total;
}

}  // namespace

template <typename T>
uint64_t Keep(absl::Span<const T> input, const Predicate<T>& predicate, absl::Span<uint8_t> keep,
              const Parallelism& parallelism) {
  const T* data = input.data();
  return WithTest(predicate, [&](auto test) {
    return CountAndMark(input.size(), [&](uint64_t i) { return test(data[i]); }, keep,
                        parallelism);
  });
}

template <typename F>
uint64_t KeepFlags(absl::Span<const F> flags, absl::Span<uint8_t> keep,
                   const Parallelism& parallelism) {
  const F* data = flags.data();
  return CountAndMark(flags.size(), [&](uint64_t i) { return data[i] != F(0); }, keep,
                      parallelism);
}

template <typename T>
void Compact(absl::Span<const T> input, absl::Span<const uint8_t> keep, uint64_t count,
             bool partition, absl::Span<T> values, absl::Span<int64_t> indices,
             const Parallelism& parallelism) {
  const uint64_t n = input.size();
  // Each part's kept elements first (ForEachPart cuts the same parts both
  // times), so that each part knows where its answers start.
  std::vector<uint64_t> kept_at(std::max(1, parallelism.threads), 0);
  const int parts = ForEachPart(n, parallelism, [&](int p, uint64_t begin, uint64_t end) {
    uint64_t c = 0;
    for (uint64_t i = begin; i < end; ++i) c += keep[i];
    kept_at[p] = c;
  });
  uint64_t kept_before = 0;
  for (int p = 0; p < parts; ++p) kept_at[p] = std::exchange(kept_before, kept_before + kept_at[p]);
  ForEachPart(n, parallelism, [&](int p, uint64_t begin, uint64_t end) {
    uint64_t at = kept_at[p];
    uint64_t other = count + (begin - kept_at[p]);  // after the rejected ones before `begin`
    for (uint64_t i = begin; i < end; ++i) {
      if (keep[i]) {
        if (!values.empty()) values[at] = input[i];
        if (!indices.empty()) indices[at] = static_cast<int64_t>(i);
        ++at;
      } else if (partition) {
        if (!values.empty()) values[other] = input[i];
        if (!indices.empty()) indices[other] = static_cast<int64_t>(i);
        ++other;
      }
    }
  });
}

#define PRIMSERVE_CPU_SELECT(T)                                                                \
  template uint64_t Keep<T>(absl::Span<const T>, const Predicate<T>&, absl::Span<uint8_t>,     \
                            const Parallelism&);                                               \
  template uint64_t KeepFlags<T>(absl::Span<const T>, absl::Span<uint8_t>, const Parallelism&); \
  template void Compact<T>(absl::Span<const T>, absl::Span<const uint8_t>, uint64_t, bool,      \
                           absl::Span<T>, absl::Span<int64_t>, const Parallelism&);
PRIMSERVE_CPU_SELECT(int32_t)
PRIMSERVE_CPU_SELECT(int64_t)
PRIMSERVE_CPU_SELECT(uint32_t)
PRIMSERVE_CPU_SELECT(uint64_t)
PRIMSERVE_CPU_SELECT(float)
PRIMSERVE_CPU_SELECT(double)
#undef PRIMSERVE_CPU_SELECT

}  // namespace primserve::cpu
