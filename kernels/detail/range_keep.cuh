// Branch-free select predicates (compaction family). Every Predicate<T> of
// core/primitives.h (NONZERO, EQ, NE, LT, LE, GT, GE, IN_RANGE, with IEEE
// semantics for floats) is one range test on an order-preserving unsigned key
// of the element's bits:
//     keep(x) = ((Key(x) - lo) <= span) != invert        (unsigned arithmetic)
// so the kernels evaluate any kind with three integer instructions per item
// and no switch on the kind. RangeKeep<T>::From builds (lo, span, invert) on
// the host from the predicate.
//
// Keys: unsigned types as they are; signed types with the sign bit flipped;
// floats by the usual radix-sort transform (negative: all bits flipped,
// positive: sign bit set), which orders -NaN < -inf < ... < -0 < +0 < ... <
// +inf < +NaN. -0 and +0 are adjacent keys, so "== 0" is the range [key(-0),
// key(+0)]; NaN keys lie outside [key(-inf), key(+inf)], so every range built
// from an ordered bound excludes them; NE and NONZERO (which NaN passes) are
// the inverted EQ range. A NaN operand makes EQ/LT/LE/GT/GE/IN_RANGE empty
// and NE true everywhere. An empty range is the inverted full range.
//
// Plain C++ when not compiled by nvcc (host-testable).
#ifndef PRIMSERVE_KERNELS_DETAIL_RANGE_KEEP_CUH_
#define PRIMSERVE_KERNELS_DETAIL_RANGE_KEEP_CUH_

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/primitives.h"

namespace primserve::gpu::detail {

template <typename T>
struct RangeKeep {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static constexpr U kSign = U(1) << (8 * sizeof(T) - 1);

  U lo = 0;
  U span = ~U(0);
  bool invert = true;  // default: keeps nothing

  PRIMSERVE_HD static U KeyOfBits(U bits) {
    if constexpr (std::is_floating_point_v<T>) {
      // (bits >> top) is all ones for negatives: flip all; else set sign.
      const U neg = static_cast<U>(static_cast<std::make_signed_t<U>>(bits) >>
                                   (8 * sizeof(T) - 1));
      return bits ^ (neg | kSign);
    } else if constexpr (std::is_signed_v<T>) {
      return bits ^ kSign;
    } else {
      return bits;
    }
  }
  PRIMSERVE_HD static U Key(T x) {
    U bits;
    memcpy(&bits, &x, sizeof(T));
    return KeyOfBits(bits);
  }
  PRIMSERVE_HD bool operator()(T x) const {
    return ((Key(x) - lo) <= span) != invert;
  }
  // The same test on a value's raw bits.
  PRIMSERVE_HD bool OnBits(U bits) const {
    return ((KeyOfBits(bits) - lo) <= span) != invert;
  }

  // Host: the range form of `pred`.
  static RangeKeep From(const Predicate<T>& pred) {
    constexpr bool kFloat = std::is_floating_point_v<T>;
    const U kmin = kFloat ? Key(-std::numeric_limits<T>::infinity()) : U(0);
    const U kmax = kFloat ? Key(std::numeric_limits<T>::infinity()) : ~U(0);
    auto is_nan = [](T v) { return v != v; };
    // Smallest / largest key of values equal to v (±0 are one value).
    auto low_key = [&](T v) { return v == T(0) ? Key(static_cast<T>(-T(0))) : Key(v); };
    auto high_key = [&](T v) { return v == T(0) ? Key(T(0)) : Key(v); };
    auto range = [](U a, U b, bool inv) {  // [a, b], a <= b
      RangeKeep r;
      r.lo = a;
      r.span = b - a;
      r.invert = inv;
      return r;
    };
    const RangeKeep empty;                         // keeps nothing
    const RangeKeep all = range(0, ~U(0), false);  // keeps everything (NaN too)
    const T op = pred.operand;
    if (pred.kind == PredicateKind::kNonzero) {
      return range(low_key(T(0)), high_key(T(0)), true);
    }
    if (is_nan(op)) return pred.kind == PredicateKind::kNe ? all : empty;
    switch (pred.kind) {
      case PredicateKind::kEq: return range(low_key(op), high_key(op), false);
      case PredicateKind::kNe: return range(low_key(op), high_key(op), true);
      case PredicateKind::kLt:
        return low_key(op) == kmin ? empty : range(kmin, low_key(op) - 1, false);
      case PredicateKind::kLe: return range(kmin, high_key(op), false);
      case PredicateKind::kGt:
        return high_key(op) == kmax ? empty : range(high_key(op) + 1, kmax, false);
      case PredicateKind::kGe: return range(low_key(op), kmax, false);
      default: break;
    }
    // IN_RANGE: op <= x < upper.
    const T up = pred.upper;
    if (is_nan(up) || low_key(up) <= low_key(op)) return empty;
    return range(low_key(op), low_key(up) - 1, false);
  }
};

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_RANGE_KEEP_CUH_
