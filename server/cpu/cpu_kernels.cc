#include "server/cpu/cpu_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "server/cpu/parts.h"
#include "server/cpu/sanitizers.h"

namespace primserve::cpu {
namespace {

// Whether a combine's bits do not depend on how the input is split: wrapping
// integer arithmetic and MIN/MAX (the first NaN, else the first extreme, in
// any grouping) are associative; float SUM/PROD are not.
template <typename T>
bool SplitsExactly(Op op) {
  return std::is_integral_v<T> || op == Op::kMin || op == Op::kMax;
}

// f(std::integral_constant<Op, op>) for SUM, PROD, MIN or MAX, so that the
// loops below compile with the op fixed.
template <typename F>
void WithOp(Op op, F&& f) {
  switch (op) {
    case Op::kSum: return f(std::integral_constant<Op, Op::kSum>());
    case Op::kProd: return f(std::integral_constant<Op, Op::kProd>());
    case Op::kMin: return f(std::integral_constant<Op, Op::kMin>());
    default: return f(std::integral_constant<Op, Op::kMax>());
  }
}

// The fold of input[begin, end) (non-empty), left to right, in A (T or a
// wider accumulator).
template <Op kOp, typename A, typename T>
A Fold(const T* input, uint64_t begin, uint64_t end) {
  A acc = static_cast<A>(input[begin]);
  for (uint64_t i = begin + 1; i < end; ++i) acc = Combine(kOp, acc, static_cast<A>(input[i]));
  return acc;
}

// A float's bits as the signed integer of its width.
template <typename T>
using SignedBits = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;

// Every bit but the sign's.
template <typename T>
constexpr SignedBits<T> kMagnitudeBits = std::numeric_limits<SignedBits<T>>::max();

// The key of a float's bits: the same bits when positive, the magnitude's
// bits flipped when negative, so that keys order as the floats do, with
// -0.0 before +0.0 (core/primitives.h's MIN/MAX order). Its own inverse.
template <typename T>
SignedBits<T> FloatKey(SignedBits<T> bits) {
  return bits ^ ((bits >> (8 * sizeof(T) - 1)) & kMagnitudeBits<T>);
}

// Over x[0, n) (non-empty): the largest (kMax) or smallest key, and the
// largest magnitude's bits, from which the caller tells whether a NaN is
// there. No branch, so it vectorises; AVX2 where the machine has it, for the
// 64-bit compares that SSE2 lacks.
template <bool kMax, typename T>
PRIMSERVE_AVX2_CLONES void ExtremeKey(
    const T* x, uint64_t n, SignedBits<T>* key, SignedBits<T>* magnitude) {
  using S = SignedBits<T>;
  S best = kMax ? std::numeric_limits<S>::min() : std::numeric_limits<S>::max();
  S largest = 0;
  for (uint64_t i = 0; i < n; ++i) {
    S bits;
    std::memcpy(&bits, &x[i], sizeof(T));
    const S k = FloatKey<T>(bits);
    best = kMax ? (k > best ? k : best) : (k < best ? k : best);
    const S m = bits & kMagnitudeBits<T>;
    largest = m > largest ? m : largest;
  }
  *key = best;
  *magnitude = largest;
}

// The float MIN or MAX of input[begin, end) (non-empty), the left fold's
// bits: the first NaN if there is one (it wins in any grouping), else the
// extreme by key. Blocks of a few thousand elements are searched for that
// NaN only when ExtremeKey says they hold one.
template <Op kOp, typename T>
T FloatExtreme(const T* input, uint64_t begin, uint64_t end) {
  using S = SignedBits<T>;
  constexpr bool kMax = kOp == Op::kMax;
  constexpr uint64_t kBlock = 4096;
  S infinity_bits;
  const T infinity = std::numeric_limits<T>::infinity();
  std::memcpy(&infinity_bits, &infinity, sizeof(T));
  S best = kMax ? std::numeric_limits<S>::min() : std::numeric_limits<S>::max();
  for (uint64_t b = begin; b < end; b += kBlock) {
    const uint64_t e = std::min(end, b + kBlock);
    S key;
    S magnitude;
    ExtremeKey<kMax, T>(input + b, e - b, &key, &magnitude);
    if (magnitude > infinity_bits) return *std::find_if(input + b, input + e, IsNan<T>);
    best = kMax ? std::max(best, key) : std::min(best, key);
  }
  const S bits = FloatKey<T>(best);
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// The fold of input[begin, end) (non-empty); a float SUM in eight
// interleaved lanes combined pairwise, which lets it run at memory speed
// (the left fold waits on each add; SumFold keeps it as exact as numpy's
// pairwise sum for long arrays);
// a float MIN/MAX through FloatExtreme.
// Integers and MIN/MAX give the left fold's bits whatever the grouping; a
// float PROD keeps the left fold (a product that overflows in one lane and
// underflows in another would give NaN where the left fold gives 0 or inf).
// Compiled for AVX2 too (chosen at load): the 64-bit integer MIN/MAX
// compares that SSE2 lacks.
template <Op kOp, typename A, typename T>
PRIMSERVE_AVX2_CLONES A LaneFold(const T* input, uint64_t begin, uint64_t end) {
  constexpr uint64_t kLanes = 8;
  if (kOp == Op::kProd || end - begin < 2 * kLanes) return Fold<kOp, A>(input, begin, end);
  if constexpr (std::is_floating_point_v<T> && std::is_same_v<A, T> &&
                (kOp == Op::kMin || kOp == Op::kMax)) {
    return FloatExtreme<kOp>(input, begin, end);
  }
  A lanes[kLanes];
  for (uint64_t j = 0; j < kLanes; ++j) lanes[j] = static_cast<A>(input[begin + j]);
  uint64_t i = begin + kLanes;
  for (; i + kLanes <= end; i += kLanes) {
    for (uint64_t j = 0; j < kLanes; ++j) {
      lanes[j] = Combine(kOp, lanes[j], static_cast<A>(input[i + j]));
    }
  }
  for (uint64_t j = 0; i < end; ++i, ++j) lanes[j] = Combine(kOp, lanes[j], static_cast<A>(input[i]));
  for (uint64_t width = kLanes / 2; width > 0; width /= 2) {
    for (uint64_t j = 0; j < width; ++j) lanes[j] = Combine(kOp, lanes[j], lanes[j + width]);
  }
  return lanes[0];
}

// LaneFold, except that a float SUM of more than a few thousand elements
// adds the halves' sums (pairwise, as numpy's sum does): lanes that each
// fold an eighth of a long array lose precision as n grows (a 64M float32
// sum left numpy's by more than 1e-4 of the sum), pairs of halves as log n.
template <Op kOp, typename A, typename T>
A SumFold(const T* input, uint64_t begin, uint64_t end) {
  constexpr uint64_t kBlock = 2048;
  if constexpr (std::is_floating_point_v<A> && kOp == Op::kSum) {
    if (end - begin > kBlock) {
      const uint64_t half = begin + (end - begin) / 2;
      return Combine(kOp, SumFold<kOp, A>(input, begin, half), SumFold<kOp, A>(input, half, end));
    }
  }
  return LaneFold<kOp, A>(input, begin, end);
}

// Scans input[begin, end) into out in A (T or a wider accumulator),
// continuing `prefix` (the inclusive scan of everything before `begin` in
// the segment) when `has_prefix`.
template <Op kOp, typename T, typename A>
void ScanRange(const T* input, A* out, uint64_t begin, uint64_t end, bool exclusive,
               bool has_prefix, A prefix) {
  if (begin == end) return;
  A acc = has_prefix ? Combine(kOp, prefix, static_cast<A>(input[begin])) : static_cast<A>(input[begin]);
  if (exclusive) {
    out[begin] = has_prefix ? prefix : Identity<A>(kOp);
    for (uint64_t i = begin + 1; i < end; ++i) {
      const A x = static_cast<A>(input[i]);  // read before the write: out may be input
      out[i] = acc;
      acc = Combine(kOp, acc, x);
    }
  } else {
    out[begin] = acc;
    for (uint64_t i = begin + 1; i < end; ++i) {
      acc = Combine(kOp, acc, static_cast<A>(input[i]));
      out[i] = acc;
    }
  }
}

template <typename F>
void ForEachSegment(uint64_t n, absl::Span<const uint64_t> starts, F&& f) {
  if (starts.empty()) return f(uint64_t{0}, n, size_t{0});
  for (size_t s = 0; s < starts.size(); ++s) {
    f(starts[s], s + 1 < starts.size() ? starts[s + 1] : n, s);
  }
}

}  // namespace

template <typename T, typename A>
void Scan(absl::Span<const T> input, Op op, bool exclusive,
          absl::Span<const uint64_t> segment_starts, absl::Span<A> out,
          const Parallelism& parallelism) {
  const uint64_t n = input.size();
  WithOp(op, [&](auto op_constant) {
    constexpr Op kOp = decltype(op_constant)::value;
    if (!segment_starts.empty() || !SplitsExactly<A>(kOp)) {
      ForEachSegment(n, segment_starts, [&](uint64_t begin, uint64_t end, size_t) {
        ScanRange<kOp>(input.data(), out.data(), begin, end, exclusive, false, A{});
      });
      return;
    }
    const int threads = PartCount(n, parallelism);
    if (threads == 1) {
      ScanRange<kOp>(input.data(), out.data(), 0, n, exclusive, false, A{});
      return;
    }
    // One pass: in each round every thread takes the next chunk, folds it
    // (reading it into cache), and once all have, scans it from the fold of
    // everything before it. Round r's totals sit in totals[r % 2]: a thread
    // writes round r + 1's only after the barrier that all threads reach
    // after reading round r - 1's.
    // At most kMostRounds rounds: a thread that the machine's other work
    // keeps off its core holds up every round's barrier.
    constexpr uint64_t kMostRounds = 16;
    const uint64_t chunk = std::max<uint64_t>(
        {1, parallelism.scan_chunk_items, (n + kMostRounds * threads - 1) / (kMostRounds * threads)});
    const uint64_t round_items = chunk * threads;
    std::vector<A> totals(2 * threads);
    Barrier barrier(threads);
    OnThreads(threads, [&](int t) {
      A carry{};
      bool has_carry = false;
      for (uint64_t round = 0, at = 0; at < n; ++round, at += round_items) {
        A* round_totals = totals.data() + (round % 2) * threads;
        const uint64_t begin = std::min(n, at + t * chunk);
        const uint64_t end = std::min(n, begin + chunk);
        if (begin < end) round_totals[t] = LaneFold<kOp, A>(input.data(), begin, end);
        barrier.Wait();
        for (int u = 0; u < threads && at + u * chunk < n; ++u) {
          if (u == t) ScanRange<kOp>(input.data(), out.data(), begin, end, exclusive, has_carry, carry);
          carry = has_carry ? Combine(kOp, carry, round_totals[u]) : round_totals[u];
          has_carry = true;
        }
      }
    });
  });
}

template <typename T, typename A>
void Reduce(absl::Span<const T> input, Op op, absl::Span<const uint64_t> segment_starts,
            absl::Span<A> out, const Parallelism& parallelism) {
  const uint64_t n = input.size();
  WithOp(op, [&](auto op_constant) {
    constexpr Op kOp = decltype(op_constant)::value;
    if constexpr (std::is_floating_point_v<A> && kOp == Op::kSum) {
      // SumFold's own first split, its halves on two threads: the bits of
      // one thread's SumFold, at twice its speed (the lanes wait on each add).
      if (segment_starts.empty() && parallelism.threads >= 2 && n >= 2 * parallelism.min_items &&
          n > 4096) {
        const uint64_t half = n / 2;
        A halves[2];
        OnThreads(2, [&](int t) {
          halves[t] = t == 0 ? SumFold<kOp, A>(input.data(), 0, half)
                             : SumFold<kOp, A>(input.data(), half, n);
        });
        out[0] = Combine(kOp, halves[0], halves[1]);
        return;
      }
    }
    if (!segment_starts.empty() || !SplitsExactly<A>(kOp)) {
      ForEachSegment(n, segment_starts, [&](uint64_t begin, uint64_t end, size_t s) {
        out[s] = begin == end ? Identity<A>(kOp) : SumFold<kOp, A>(input.data(), begin, end);
      });
      return;
    }
    if (n == 0) {
      out[0] = Identity<A>(kOp);
      return;
    }
    std::vector<A> totals(std::max(1, parallelism.threads));
    const int parts = ForEachPart(n, parallelism, [&](int p, uint64_t begin, uint64_t end) {
      if (begin < end) totals[p] = SumFold<kOp, A>(input.data(), begin, end);
    });
    A acc = totals[0];
    for (int p = 1; p < parts; ++p) acc = Combine(kOp, acc, totals[p]);
    out[0] = acc;
  });
}

#define PRIMSERVE_CPU_KERNELS(T)                                                           \
  template void Scan<T, T>(absl::Span<const T>, Op, bool, absl::Span<const uint64_t>,      \
                           absl::Span<T>, const Parallelism&);                             \
  template void Reduce<T, T>(absl::Span<const T>, Op, absl::Span<const uint64_t>, absl::Span<T>, \
                             const Parallelism&);
PRIMSERVE_CPU_KERNELS(int32_t)
PRIMSERVE_CPU_KERNELS(int64_t)
PRIMSERVE_CPU_KERNELS(uint32_t)
PRIMSERVE_CPU_KERNELS(uint64_t)
PRIMSERVE_CPU_KERNELS(float)
PRIMSERVE_CPU_KERNELS(double)
#undef PRIMSERVE_CPU_KERNELS

// The accumulators Scan's and Reduce's accumulator_dtype widen to.
template void Scan<int32_t, int64_t>(absl::Span<const int32_t>, Op, bool, absl::Span<const uint64_t>,
                                     absl::Span<int64_t>, const Parallelism&);
template void Scan<uint32_t, uint64_t>(absl::Span<const uint32_t>, Op, bool,
                                       absl::Span<const uint64_t>, absl::Span<uint64_t>,
                                       const Parallelism&);
template void Scan<float, double>(absl::Span<const float>, Op, bool, absl::Span<const uint64_t>,
                                  absl::Span<double>, const Parallelism&);
template void Reduce<int32_t, int64_t>(absl::Span<const int32_t>, Op, absl::Span<const uint64_t>,
                                       absl::Span<int64_t>, const Parallelism&);
template void Reduce<uint32_t, uint64_t>(absl::Span<const uint32_t>, Op,
                                         absl::Span<const uint64_t>, absl::Span<uint64_t>,
                                         const Parallelism&);
template void Reduce<float, double>(absl::Span<const float>, Op, absl::Span<const uint64_t>,
                                    absl::Span<double>, const Parallelism&);

}  // namespace primserve::cpu
