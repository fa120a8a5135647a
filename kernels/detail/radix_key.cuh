// Keys as radix digits: the order-preserving transform of the sort's keys to
// unsigned bits, applied when a digit is read (the keys themselves move with
// their original bits, so NaN payloads and -0.0 come back as sent).
#ifndef PRIMSERVE_KERNELS_DETAIL_RADIX_KEY_CUH_
#define PRIMSERVE_KERNELS_DETAIL_RADIX_KEY_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "core/primitives.h"
#include "kernels/detail/tuning_sort.cuh"

namespace primserve::gpu::detail {

enum class KeyKind : int { kUnsigned, kSigned, kFloat };

// U: the keys' bits (uint32_t or uint64_t).
template <typename U>
struct RadixCodec {
  static constexpr U kSign = U{1} << (sizeof(U) * 8 - 1);
  // +inf's bits; a larger magnitude is a NaN.
  static constexpr U kInfBits = sizeof(U) == 4 ? U{0x7F800000u} : U{0x7FF0000000000000ull};
  static constexpr int kPasses = static_cast<int>(sizeof(U)) * 8 / kRadixBits;

  KeyKind kind;
  bool descending;
  // Integers: the whole transform is one xor (the sign bit for signed keys,
  // every bit when descending), computed once here rather than per digit.
  U flip;

  __host__ __device__ RadixCodec(KeyKind kind_, bool descending_)
      : kind(kind_), descending(descending_),
        flip((kind_ == KeyKind::kSigned ? kSign : U{0}) ^ (descending_ ? ~U{0} : U{0})) {}

  // Unsigned bits in sort order: signed keys with the sign flipped, floats
  // sign-magnitude to two's-complement order with -0.0 folded onto +0.0;
  // descending complements the bits. NaN maps to all ones (last) either way:
  // no other float does (+inf and -inf map to 0xFF80.. / 0x007F..).
  __host__ __device__ __forceinline__ U Ordered(U bits) const {
    if (kind != KeyKind::kFloat) return bits ^ flip;
    const U magnitude = bits & ~kSign;
    if (magnitude > kInfBits) return ~U{0};
    if (magnitude == 0) bits = 0;
    const U ordered = (bits & kSign) ? ~bits : (bits ^ kSign);
    return descending ? ~ordered : ordered;
  }

  __host__ __device__ __forceinline__ uint32_t Digit(U bits, int pass) const {
    return static_cast<uint32_t>(Ordered(bits) >> (pass * kRadixBits)) & (kRadixDigits - 1);
  }
};

inline KeyKind KindOf(DType dtype) {
  switch (dtype) {
    case DType::kUint32:
    case DType::kUint64: return KeyKind::kUnsigned;
    case DType::kFloat32:
    case DType::kFloat64: return KeyKind::kFloat;
    default: return KeyKind::kSigned;
  }
}

// The unsigned type of a dtype's bits.
template <int kBytes>
using BitsOf = std::conditional_t<kBytes == 4, uint32_t, uint64_t>;

// What moves with the keys: nothing (kBytes 0), 4- or 8-byte values. With
// `iota`, the first pass makes the values (each key's index) instead of
// loading them: the argsort's permutation.
struct NoPayload {};
template <int kBytes>
using PayloadOf = std::conditional_t<kBytes == 0, NoPayload, BitsOf<kBytes == 0 ? 4 : kBytes>>;

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_RADIX_KEY_CUH_
