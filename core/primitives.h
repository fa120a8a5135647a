// The vocabulary shared by the CPU reference, the CUDA kernels and the server:
// element types, operators, predicates and their semantics. Plain C++ (no CUDA
// headers); device code sees the same definitions through PRIMSERVE_HD.
//
// Semantics every implementation must agree on (the CPU reference is the
// oracle):
// - Integer arithmetic wraps (two's complement), also for signed types.
// - Identities: SUM 0, PROD 1, MIN the type's maximum (+inf for floats),
//   MAX the type's lowest (-inf for floats).
// - NaN propagates through MIN and MAX: the result of MIN/MAX over a range
//   that holds a NaN is NaN. Otherwise MIN and MAX order -0.0 before +0.0
//   (as IEEE 754-2019 minimum and maximum do), so a range holding both zeros
//   has MIN -0.0 and MAX +0.0 however a parallel implementation associates.
//   ARGMIN/ARGMAX return the first NaN's index if there is one, otherwise
//   the first index of the extreme value; there the two zeros tie.
// - Predicates follow IEEE comparisons: a NaN element fails EQ, LT, LE, GT,
//   GE and IN_RANGE and passes NE and NONZERO.
// - Unique, RunLengthEncode and ReduceByKey compare elements by bit pattern,
//   so 0.0 and -0.0 are different runs and identical NaNs are one run.
// - An empty segment reduces to the operator's identity; its ARGMIN/ARGMAX
//   index is -1.
#ifndef PRIMSERVE_KERNELS_PRIMITIVES_H_
#define PRIMSERVE_KERNELS_PRIMITIVES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__CUDACC__)
#define PRIMSERVE_HD __host__ __device__ __forceinline__
#else
#define PRIMSERVE_HD inline
#endif

namespace primserve {

// Values match the protobuf enum primserve.v1.DType.
enum class DType : int {
  kInt32 = 1,
  kInt64 = 2,
  kUint32 = 3,
  kUint64 = 4,
  kFloat32 = 5,
  kFloat64 = 6,
};

// Values match the protobuf enum primserve.v1.Op.
enum class Op : int {
  kSum = 1,
  kProd = 2,
  kMin = 3,
  kMax = 4,
  kArgMin = 5,
  kArgMax = 6,
};

// Values match primserve.v1.Predicate.Kind.
enum class PredicateKind : int {
  kNonzero = 1,
  kEq = 2,
  kNe = 3,
  kLt = 4,
  kLe = 5,
  kGt = 6,
  kGe = 7,
  kInRange = 8,  // operand <= x < upper
};

inline constexpr size_t DTypeSize(DType dtype) {
  return (dtype == DType::kInt32 || dtype == DType::kUint32 ||
          dtype == DType::kFloat32)
             ? 4
             : 8;
}

inline constexpr bool IsIntegerDType(DType dtype) {
  return dtype != DType::kFloat32 && dtype != DType::kFloat64;
}

const char* DTypeName(DType dtype);
const char* OpName(Op op);
const char* PredicateKindName(PredicateKind kind);

// Calls f(T{}) with T the C++ type of `dtype`.
template <typename F>
decltype(auto) VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kUint32: return f(uint32_t{});
    case DType::kUint64: return f(uint64_t{});
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: break;
  }
  return f(double{});
}

// The DType of a C++ element type.
template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  else if constexpr (std::is_same_v<T, uint32_t>) return DType::kUint32;
  else if constexpr (std::is_same_v<T, uint64_t>) return DType::kUint64;
  else if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  else {
    static_assert(std::is_same_v<T, double>, "not a primserve element type");
    return DType::kFloat64;
  }
}

template <typename T>
PRIMSERVE_HD bool IsNan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

// The identity element of `op` for T (ARGMIN/ARGMAX use MIN/MAX's).
template <typename T>
PRIMSERVE_HD T Identity(Op op) {
  switch (op) {
    case Op::kSum: return T(0);
    case Op::kProd: return T(1);
    case Op::kMin:
    case Op::kArgMin:
      return std::numeric_limits<T>::has_infinity
                 ? std::numeric_limits<T>::infinity()
                 : std::numeric_limits<T>::max();
    case Op::kMax:
    case Op::kArgMax:
      break;
  }
  return std::numeric_limits<T>::has_infinity
             ? -std::numeric_limits<T>::infinity()
             : std::numeric_limits<T>::lowest();
}

// Wrapping sum and product: signed overflow is undefined in C++, so integer
// arithmetic goes through the unsigned type of the same width.
template <typename T>
PRIMSERVE_HD T WrappingAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
PRIMSERVE_HD T WrappingMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    // uint32 * uint32 promotes to (signed) int on 32-bit int platforms only
    // for narrower types; U is at least 32 bits here, so no promotion.
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// NaN-propagating min and max (see the header comment).
// True for -0.0 and other values with the sign bit set (floats only).
template <typename T>
PRIMSERVE_HD bool SignBit(T x) {
  if constexpr (sizeof(T) == 4) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    return bits >> 31;
  } else {
    uint64_t bits;
    std::memcpy(&bits, &x, 8);
    return bits >> 63;
  }
}

// x < y, except that -0.0 comes before +0.0: with it MIN and MAX pick the
// same zero whatever the order of their operands.
template <typename T>
PRIMSERVE_HD bool OrderedBefore(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (x == y) return SignBit(x) && !SignBit(y);
  }
  return x < y;
}

template <typename T>
PRIMSERVE_HD T PropagatingMin(T a, T b) {
  if (IsNan(a)) return a;
  if (IsNan(b)) return b;
  return OrderedBefore(b, a) ? b : a;
}

template <typename T>
PRIMSERVE_HD T PropagatingMax(T a, T b) {
  if (IsNan(a)) return a;
  if (IsNan(b)) return b;
  return OrderedBefore(a, b) ? b : a;
}

// Combines two values with one of SUM, PROD, MIN, MAX.
template <typename T>
PRIMSERVE_HD T Combine(Op op, T a, T b) {
  switch (op) {
    case Op::kSum: return WrappingAdd(a, b);
    case Op::kProd: return WrappingMul(a, b);
    case Op::kMin:
    case Op::kArgMin:
      return PropagatingMin(a, b);
    case Op::kMax:
    case Op::kArgMax:
      break;
  }
  return PropagatingMax(a, b);
}

// True when `candidate` (at a later index) should replace `best` (at an
// earlier index) as the ARGMIN (is_min) or ARGMAX result: a first NaN wins
// and stays, otherwise a strictly better value wins, so ties keep the first.
template <typename T>
PRIMSERVE_HD bool ArgReplaces(bool is_min, T best, T candidate) {
  if (IsNan(best)) return false;
  if (IsNan(candidate)) return true;
  return is_min ? candidate < best : best < candidate;
}

// Bit-pattern equality, used to find runs (Unique, RLE, ReduceByKey).
template <typename T>
PRIMSERVE_HD bool BitEqual(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    Bits x, y;
    std::memcpy(&x, &a, sizeof(T));
    std::memcpy(&y, &b, sizeof(T));
    return x == y;
  } else {
    return a == b;
  }
}

// A predicate over elements of type T; operands already converted to T.
template <typename T>
struct Predicate {
  PredicateKind kind = PredicateKind::kNonzero;
  T operand{};
  T upper{};

  PRIMSERVE_HD bool operator()(T x) const {
    switch (kind) {
      case PredicateKind::kNonzero: return x != T(0);
      case PredicateKind::kEq: return x == operand;
      case PredicateKind::kNe: return x != operand;
      case PredicateKind::kLt: return x < operand;
      case PredicateKind::kLe: return x <= operand;
      case PredicateKind::kGt: return x > operand;
      case PredicateKind::kGe: return x >= operand;
      case PredicateKind::kInRange: break;
    }
    return operand <= x && x < upper;
  }
};

}  // namespace primserve

#endif  // PRIMSERVE_KERNELS_PRIMITIVES_H_
