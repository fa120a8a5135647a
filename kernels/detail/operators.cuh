// Device functors over the shared semantics of core/primitives.h, plus the
// value types the kernels scan or reduce: (value, index) pairs for
// ARGMIN/ARGMAX and head-flagged values for segmented scans.
#ifndef PRIMSERVE_KERNELS_DETAIL_OPERATORS_CUH_
#define PRIMSERVE_KERNELS_DETAIL_OPERATORS_CUH_

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/primitives.h"
#include "kernels/detail/lookback.cuh"

namespace primserve::gpu::detail {

// SUM, PROD, MIN or MAX with the op fixed at compile time.
template <typename T, Op kOp>
struct CombineOp {
  __host__ __device__ __forceinline__ T operator()(T a, T b) const {
    return Combine(kOp, a, b);
  }
};

// A two-sided identity that is exact bit for bit, used to pad partial tiles
// and to seed prefixes: Identity(op), except that float SUM uses -0.0
// (+0.0 + -0.0 is +0.0, while -0.0 + x is x for every x). Outputs that the
// semantics define as the identity still use Identity(op).
template <typename T, Op kOp>
__host__ __device__ __forceinline__ T Neutral() {
  if constexpr (std::is_floating_point_v<T>) {
    if (kOp == Op::kSum) return -T(0);
  }
  return Identity<T>(kOp);
}

// Float MIN/MAX over NaN-free values as integer min/max: the bits read as a
// signed integer, with the magnitude bits flipped when the sign bit is set,
// order every non-NaN float as OrderedBefore does (-0.0 just below +0.0;
// bit-identical values only tie). The map is its own inverse. One integer
// min/max per pair instead of PropagatingMin's NaN tests and zero-sign
// compare-and-select chain.
template <typename T>
using OrderedKey = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;

template <typename T>
__host__ __device__ __forceinline__ OrderedKey<T> ToOrderedKey(T x) {
  using K = OrderedKey<T>;
  K bits;
  memcpy(&bits, &x, sizeof(T));
  return bits ^ ((bits >> (8 * sizeof(T) - 1)) & std::numeric_limits<K>::max());
}

template <typename T>
__host__ __device__ __forceinline__ T FromOrderedKey(OrderedKey<T> key) {
  using K = OrderedKey<T>;
  const K bits = key ^ ((key >> (8 * sizeof(T) - 1)) & std::numeric_limits<K>::max());
  T x;
  memcpy(&x, &bits, sizeof(T));
  return x;
}

template <Op kOp, typename K>
__host__ __device__ __forceinline__ K CombineOrderedKeys(K a, K b) {
  static_assert(kOp == Op::kMin || kOp == Op::kMax, "keys serve MIN and MAX");
  if constexpr (kOp == Op::kMin) {
    return b < a ? b : a;
  } else {
    return a < b ? b : a;
  }
}

// MIN/MAX of two floats that are not NaN and not two zeros: then IEEE
// minNum/maxNum (one FMNMX for float32) is PropagatingMin/Max exactly (the
// only distinct bit patterns that compare equal are -0.0 and +0.0).
template <Op kOp, typename T>
__device__ __forceinline__ T CombinePlainFloats(T a, T b) {
  static_assert(kOp == Op::kMin || kOp == Op::kMax, "plain floats serve MIN and MAX");
  if constexpr (kOp == Op::kMin) {
    return fmin(a, b);
  } else {
    return fmax(a, b);
  }
}

// How a float MIN/MAX scan thread combines its items (scan_kernel.cuh).
enum class FloatMinMaxPath { kGeneric, kKeyed, kPlain };

// ARGMIN/ARGMAX candidate. The empty candidate is (Identity, kNoIndex).
template <typename T>
struct ArgItem {
  T value;
  int64_t index;
};

inline constexpr int64_t kNoIndex = std::numeric_limits<int64_t>::max();

// Picks the ARGMIN/ARGMAX winner of two candidates in ANY order: b wins if
// it replaces a by ArgReplaces (a first NaN, or a strictly better value), or
// if neither replaces the other (tie, or both NaN) and b comes first. So the
// op is commutative and associative, and (Identity, kNoIndex) is its exact
// identity.
template <typename T, bool kIsMin>
struct ArgCombineOp {
  __host__ __device__ __forceinline__ ArgItem<T> operator()(
      const ArgItem<T>& a, const ArgItem<T>& b) const {
    const bool b_wins =
        ArgReplaces(kIsMin, a.value, b.value) ||
        (!ArgReplaces(kIsMin, b.value, a.value) && b.index < a.index);
    return b_wins ? b : a;
  }
};

// A value with a segment-head flag; the segmented op restarts at heads.
template <typename V>
struct Flagged {
  uint32_t head;
  V value;
};

// (fa, a) op (fb, b) = (fa | fb, fb ? b : a op b): associative, so a
// segmented scan is a plain scan of flagged values (Blelloch's trick).
template <typename V, typename BaseOp>
struct SegmentedOp {
  BaseOp base;
  __host__ __device__ __forceinline__ Flagged<V> operator()(
      const Flagged<V>& a, const Flagged<V>& b) const {
    return b.head ? b : Flagged<V>{a.head, base(a.value, b.value)};
  }
};

template <typename T, Op kOp>
struct AssociationMatters<CombineOp<T, kOp>>
    : std::bool_constant<std::is_floating_point_v<T> && (kOp == Op::kSum || kOp == Op::kProd)> {};
template <typename V, typename BaseOp>
struct AssociationMatters<SegmentedOp<V, BaseOp>> : AssociationMatters<BaseOp> {};

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_OPERATORS_CUH_
