#include "server/cpu/cpu_kernels.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "server/cpu/parts.h"

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

// The fold of input[begin, end) (non-empty); a float SUM in eight
// interleaved lanes combined pairwise, which lets it run at memory speed
// (the left fold waits on each add) and is as exact as numpy's pairwise sum.
// Integers and MIN/MAX give the left fold's bits whatever the grouping; a
// float PROD keeps the left fold (a product that overflows in one lane and
// underflows in another would give NaN where the left fold gives 0 or inf).
template <Op kOp, typename A, typename T>
A LaneFold(const T* input, uint64_t begin, uint64_t end) {
  constexpr uint64_t kLanes = 8;
  if (kOp == Op::kProd || end - begin < 2 * kLanes) return Fold<kOp, A>(input, begin, end);
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
    // Two passes: each part's total, then each part scanned from the fold of
    // the totals before it.
    const int most = std::max(1, parallelism.threads);
    std::vector<A> totals(most);
    const int parts = ForEachPart(n, parallelism, [&](int p, uint64_t begin, uint64_t end) {
      if (begin < end) totals[p] = Fold<kOp, A>(input.data(), begin, end);
    });
    if (parts == 1) {
      ScanRange<kOp>(input.data(), out.data(), 0, n, exclusive, false, A{});
      return;
    }
    std::vector<A> prefixes(parts);
    for (int p = 1; p < parts; ++p) {
      prefixes[p] = p == 1 ? totals[0] : Combine(kOp, prefixes[p - 1], totals[p - 1]);
    }
    ForEachPart(n, parallelism, [&](int p, uint64_t begin, uint64_t end) {
      ScanRange<kOp>(input.data(), out.data(), begin, end, exclusive, p > 0, prefixes[p]);
    });
  });
}

template <typename T, typename A>
void Reduce(absl::Span<const T> input, Op op, absl::Span<const uint64_t> segment_starts,
            absl::Span<A> out, const Parallelism& parallelism) {
  const uint64_t n = input.size();
  WithOp(op, [&](auto op_constant) {
    constexpr Op kOp = decltype(op_constant)::value;
    if (!segment_starts.empty() || !SplitsExactly<A>(kOp)) {
      ForEachSegment(n, segment_starts, [&](uint64_t begin, uint64_t end, size_t s) {
        out[s] = begin == end ? Identity<A>(kOp) : LaneFold<kOp, A>(input.data(), begin, end);
      });
      return;
    }
    if (n == 0) {
      out[0] = Identity<A>(kOp);
      return;
    }
    std::vector<A> totals(std::max(1, parallelism.threads));
    const int parts = ForEachPart(n, parallelism, [&](int p, uint64_t begin, uint64_t end) {
      if (begin < end) totals[p] = LaneFold<kOp, A>(input.data(), begin, end);
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
