#include "server/cpu/cpu_select.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "server/cpu/parts.h"
#include "server/cpu/sanitizers.h"

namespace primserve::cpu {
namespace {

// f(test) with test(x) the predicate for its kind, so that the loop that
// calls it compiles without the per-element switch.
template <typename T, typename F>
void WithTest(const Predicate<T>& p, F&& f) {
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

// f(std::integral_constant<Op, op>) for SUM, PROD, MIN or MAX.
template <typename F>
void WithCombineOp(Op op, F&& f) {
  switch (op) {
    case Op::kSum: return f(std::integral_constant<Op, Op::kSum>());
    case Op::kProd: return f(std::integral_constant<Op, Op::kProd>());
    case Op::kMin: return f(std::integral_constant<Op, Op::kMin>());
    default: return f(std::integral_constant<Op, Op::kMax>());
  }
}

// How many positions of [begin, end) are kept(i): counted in blocks of C
// (the unsigned type of the tested elements' width, so that each compare's
// mask is subtracted in its own lane), with no branch, so that it
// vectorises; compiled for AVX2 too (the 64-bit compares SSE2 lacks; an
// int64 count ran at scalar speed, 2.5x numpy's time), chosen at load.
template <typename C, typename Kept>
PRIMSERVE_AVX2_CLONES __attribute__((flatten)) uint64_t CountRange(const Kept& kept,
                                                                   uint64_t begin, uint64_t end) {
  constexpr uint64_t kBlock = 4096;
  uint64_t c = 0;
  for (uint64_t b = begin; b < end; b += kBlock) {
    const uint64_t e = std::min(end, b + kBlock);
    C block = 0;
    for (uint64_t i = b; i < e; ++i) block += kept(i) ? 1 : 0;
    c += block;
  }
  return c;
}

// Counts (and with a non-empty keep, marks) the positions of [0, n) where
// kept(i), in parts over threads; `first` is kept(0), which `kept` need not
// answer (a run's test reads the element before).
template <typename C, typename Kept>
KeptCounts CountAndMark(uint64_t n, Kept kept, absl::Span<uint8_t> keep,
                        const Parallelism& parallelism, bool first) {
  KeptCounts counts;
  counts.parts.resize(PartCount(n, parallelism));
  ForEachPart(n, parallelism, [&](int p, uint64_t begin, uint64_t end) {
    uint64_t c = 0;
    if (keep.empty()) {
      if (begin == 0 && end > 0) {
        c = first ? 1 : 0;
        begin = 1;
      }
      c += CountRange<C>(kept, begin, end);
    } else {
      for (uint64_t i = begin; i < end; ++i) {
        const uint8_t k = (i == 0 ? first : kept(i)) ? 1 : 0;
        keep[i] = k;
        c += k;
      }
    }
    counts.parts[p] = c;
  });
  for (uint64_t c : counts.parts) counts.total += c;
  return counts;
}

// Writes position i's value and index to slot `at` where wanted.
template <bool kValues, bool kIndices, typename T>
inline void Put(const T* input, uint64_t i, uint64_t at, T* values, int64_t* indices) {
  if constexpr (kValues) values[at] = input[i];
  if constexpr (kIndices) indices[at] = static_cast<int64_t>(i);
}

// The compaction of the positions of [0, n) where kept(i), each part of it
// on its own thread from the slots `counts` gives it. Every element is
// written and the slot moves on by whether it is kept, with no branch to
// mispredict: to a partition every element has its own slot; without one a
// rejected element is written over by the next kept one, and the part stops
// after its last kept element, so nothing is written past its slots.
template <bool kValues, bool kIndices, typename T, typename Kept>
void CompactWhere(const T* input, uint64_t n, Kept kept, const KeptCounts& counts, bool partition,
                  T* values, int64_t* indices, const Parallelism& parallelism) {
  std::vector<uint64_t> kept_before(counts.parts.size());
  uint64_t sum = 0;
  for (size_t p = 0; p < counts.parts.size(); ++p) {
    kept_before[p] = sum;
    sum += counts.parts[p];
  }
  ForEachPart(n, parallelism, [&](int p, uint64_t begin, uint64_t end) {
    uint64_t at = kept_before[p];
    if (partition) {
      uint64_t other = counts.total + (begin - kept_before[p]);  // after the rejected ones before
      for (uint64_t i = begin; i < end; ++i) {
        const bool k = kept(i);
        Put<kValues, kIndices>(input, i, k ? at : other, values, indices);
        at += k;
        other += !k;
      }
      return;
    }
    if (counts.parts[p] == 0) return;
    // Few kept (a run's first elements, mostly): a branch per element
    // mispredicts at most about once per kept one, and only those are
    // written, where the branch-free loop below writes every element.
    if (counts.parts[p] * 8 < end - begin) {
      for (uint64_t i = begin; i < end; ++i) {
        if (kept(i)) Put<kValues, kIndices>(input, i, at++, values, indices);
      }
      return;
    }
    uint64_t last = end;
    while (!kept(last - 1)) --last;
    for (uint64_t i = begin; i < last; ++i) {
      Put<kValues, kIndices>(input, i, at, values, indices);
      at += kept(i);
    }
  });
}

// CompactWhere with what is written fixed at compile time.
template <typename T, typename Kept>
void Compact(absl::Span<const T> input, Kept kept, const KeptCounts& counts, bool partition,
             absl::Span<T> values, absl::Span<int64_t> indices, const Parallelism& parallelism) {
  const uint64_t n = input.size();
  if (!values.empty() && !indices.empty()) {
    CompactWhere<true, true>(input.data(), n, kept, counts, partition, values.data(),
                             indices.data(), parallelism);
  } else if (!values.empty()) {
    CompactWhere<true, false>(input.data(), n, kept, counts, partition, values.data(), nullptr,
                              parallelism);
  } else if (!indices.empty()) {
    CompactWhere<false, true>(input.data(), n, kept, counts, partition, static_cast<T*>(nullptr),
                              indices.data(), parallelism);
  }
}

// The unsigned integer of T's width.
template <typename T>
using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// The test of position i > 0 that keeps the first element of each run of
// bit-equal elements of data (position 0 always starts one).
template <typename T>
auto RunContinuesNot(const T* data) {
  return [data](uint64_t i) {
    Bits<T> here;
    Bits<T> before;
    std::memcpy(&here, &data[i], sizeof(T));
    std::memcpy(&before, &data[i - 1], sizeof(T));
    return here != before;
  };
}

// The same for any position.
template <typename T>
auto RunStart(const T* data) {
  return [data](uint64_t i) { return i == 0 || RunContinuesNot(data)(i); };
}

}  // namespace

template <typename T>
KeptCounts CountPassing(absl::Span<const T> input, const Predicate<T>& predicate,
                        const Parallelism& parallelism) {
  const T* data = input.data();
  KeptCounts counts;
  WithTest(predicate, [&](auto test) {
    const auto kept = [data, test](uint64_t i) { return test(data[i]); };
    counts = CountAndMark<Bits<T>>(input.size(), kept, {}, parallelism,
                                   !input.empty() && kept(0));
  });
  return counts;
}

template <typename F>
KeptCounts CountFlagged(absl::Span<const F> flags, absl::Span<uint8_t> keep,
                        const Parallelism& parallelism) {
  const F* data = flags.data();
  const auto kept = [data](uint64_t i) { return data[i] != F(0); };
  return CountAndMark<Bits<F>>(flags.size(), kept, keep, parallelism,
                               !flags.empty() && kept(0));
}

template <typename T>
void CompactPassing(absl::Span<const T> input, const Predicate<T>& predicate,
                    const KeptCounts& counts, bool partition, absl::Span<T> values,
                    absl::Span<int64_t> indices, const Parallelism& parallelism) {
  const T* data = input.data();
  WithTest(predicate, [&](auto test) {
    Compact<T>(input, [&](uint64_t i) { return test(data[i]); }, counts, partition, values,
               indices, parallelism);
  });
}

template <typename T>
void CompactMarked(absl::Span<const T> input, absl::Span<const uint8_t> keep,
                   const KeptCounts& counts, bool partition, absl::Span<T> values,
                   absl::Span<int64_t> indices, const Parallelism& parallelism) {
  const uint8_t* marks = keep.data();
  Compact<T>(input, [marks](uint64_t i) { return marks[i] != 0; }, counts, partition, values,
             indices, parallelism);
}

template <typename T>
KeptCounts CountRuns(absl::Span<const T> input, const Parallelism& parallelism) {
  return CountAndMark<Bits<T>>(input.size(), RunContinuesNot(input.data()), {}, parallelism,
                               true);
}

template <typename T>
void CompactRuns(absl::Span<const T> input, const KeptCounts& counts, absl::Span<T> values,
                 absl::Span<int64_t> lengths, const Parallelism& parallelism) {
  // The runs' first positions into `lengths`, then each length from the
  // next run's start.
  Compact<T>(input, RunStart(input.data()), counts, false, values, lengths, parallelism);
  const uint64_t runs = lengths.size();
  for (uint64_t r = 0; r + 1 < runs; ++r) lengths[r] = lengths[r + 1] - lengths[r];
  if (runs > 0) lengths[runs - 1] = static_cast<int64_t>(input.size()) - lengths[runs - 1];
}

template <typename K, typename V>
void ReduceRuns(absl::Span<const K> keys, absl::Span<const V> values, Op op,
                const KeptCounts& runs, absl::Span<K> keys_out, absl::Span<V> values_out,
                const Parallelism& parallelism) {
  const uint64_t n = keys.size();
  std::vector<uint64_t> runs_before(runs.parts.size());
  uint64_t sum = 0;
  for (size_t p = 0; p < runs.parts.size(); ++p) {
    runs_before[p] = sum;
    sum += runs.parts[p];
  }
  const K* k = keys.data();
  const V* v = values.data();
  const auto continues = [k](uint64_t i) {
    Bits<K> here;
    Bits<K> before;
    std::memcpy(&here, &k[i], sizeof(K));
    std::memcpy(&before, &k[i - 1], sizeof(K));
    return here == before;
  };
  WithCombineOp(op, [&](auto op_constant) {
    constexpr Op kOp = decltype(op_constant)::value;
    // Each part folds the runs that start in it (CountRuns counted them
    // there), the last one past the part's end where it goes on.
    ForEachPart(n, parallelism, [&](int p, uint64_t begin, uint64_t end) {
      if (runs.parts[p] == 0) return;
      uint64_t i = begin;
      while (i > 0 && continues(i)) ++i;  // a run of an earlier part
      const uint64_t last = runs_before[p] + runs.parts[p];
      for (uint64_t r = runs_before[p]; r < last; ++r) {
        keys_out[r] = k[i];
        V acc = v[i];
        for (++i; i < n && continues(i); ++i) acc = Combine(kOp, acc, v[i]);
        values_out[r] = acc;
      }
    });
  });
}

#define PRIMSERVE_CPU_REDUCE_RUNS(K, V)                                                      \
  template void ReduceRuns<K, V>(absl::Span<const K>, absl::Span<const V>, Op,               \
                                 const KeptCounts&, absl::Span<K>, absl::Span<V>,            \
                                 const Parallelism&);
#define PRIMSERVE_CPU_REDUCE_RUNS_OF(K)   \
  PRIMSERVE_CPU_REDUCE_RUNS(K, int32_t)   \
  PRIMSERVE_CPU_REDUCE_RUNS(K, int64_t)   \
  PRIMSERVE_CPU_REDUCE_RUNS(K, uint32_t)  \
  PRIMSERVE_CPU_REDUCE_RUNS(K, uint64_t)  \
  PRIMSERVE_CPU_REDUCE_RUNS(K, float)     \
  PRIMSERVE_CPU_REDUCE_RUNS(K, double)
PRIMSERVE_CPU_REDUCE_RUNS_OF(int32_t)
PRIMSERVE_CPU_REDUCE_RUNS_OF(int64_t)
PRIMSERVE_CPU_REDUCE_RUNS_OF(uint32_t)
PRIMSERVE_CPU_REDUCE_RUNS_OF(uint64_t)
PRIMSERVE_CPU_REDUCE_RUNS_OF(float)
PRIMSERVE_CPU_REDUCE_RUNS_OF(double)
#undef PRIMSERVE_CPU_REDUCE_RUNS_OF
#undef PRIMSERVE_CPU_REDUCE_RUNS

#define PRIMSERVE_CPU_SELECT(T)                                                                 \
  template KeptCounts CountPassing<T>(absl::Span<const T>, const Predicate<T>&,                 \
                                      const Parallelism&);                                      \
  template KeptCounts CountFlagged<T>(absl::Span<const T>, absl::Span<uint8_t>,                 \
                                      const Parallelism&);                                      \
  template void CompactPassing<T>(absl::Span<const T>, const Predicate<T>&, const KeptCounts&,  \
                                  bool, absl::Span<T>, absl::Span<int64_t>, const Parallelism&); \
  template void CompactMarked<T>(absl::Span<const T>, absl::Span<const uint8_t>,                \
                                 const KeptCounts&, bool, absl::Span<T>, absl::Span<int64_t>,   \
                                 const Parallelism&);                                           \
  template KeptCounts CountRuns<T>(absl::Span<const T>, const Parallelism&);                    \
  template void CompactRuns<T>(absl::Span<const T>, const KeptCounts&, absl::Span<T>,           \
                               absl::Span<int64_t>, const Parallelism&);
PRIMSERVE_CPU_SELECT(int32_t)
PRIMSERVE_CPU_SELECT(int64_t)
PRIMSERVE_CPU_SELECT(uint32_t)
PRIMSERVE_CPU_SELECT(uint64_t)
PRIMSERVE_CPU_SELECT(float)
PRIMSERVE_CPU_SELECT(double)
#undef PRIMSERVE_CPU_SELECT

}  // namespace primserve::cpu
