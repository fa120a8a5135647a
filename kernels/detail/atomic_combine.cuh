// Device atomics that apply primserve's combine semantics (kernels/
// primitives.h) to global or shared memory, and warp-aggregation of values by
// key (paper 003: peers found with __match_any_sync, combined in registers by
// a tree over the peers' relative positions, one atomic per key per warp).
//
// SUM: wrapping for integers (done in the unsigned type), IEEE for floats.
// MIN/MAX: integers through atomicMin/atomicMax; floats through a CAS loop on
// the bit pattern with PropagatingMin/Max, so NaN propagates and, once a NaN
// is stored, it stays.
#ifndef PRIMSERVE_KERNELS_DETAIL_ATOMIC_COMBINE_CUH_
#define PRIMSERVE_KERNELS_DETAIL_ATOMIC_COMBINE_CUH_

#include <cstdint>
#include <type_traits>

#include "core/primitives.h"

namespace primserve::gpu::detail {

template <typename T>
using BitsOf = std::conditional_t<sizeof(T) == 4, unsigned int,
                                  unsigned long long>;

template <typename T>
__device__ __forceinline__ BitsOf<T> ToBits(T v) {
  BitsOf<T> b;
  memcpy(&b, &v, sizeof(T));
  return b;
}

template <typename T>
__device__ __forceinline__ T FromBits(BitsOf<T> b) {
  T v;
  memcpy(&v, &b, sizeof(T));
  return v;
}

// CAS loop: *addr = f(*addr, v) until it sticks; returns without writing when
// f leaves the value unchanged (bitwise).
template <typename T, typename F>
__device__ __forceinline__ void AtomicCasUpdate(T* addr, T v, F f) {
  using B = BitsOf<T>;
  B* baddr = reinterpret_cast<B*>(addr);
  B old_bits = *reinterpret_cast<volatile B*>(baddr);
  while (true) {
    const T updated = f(FromBits<T>(old_bits), v);
    const B new_bits = ToBits(updated);
    if (new_bits == old_bits) return;
    const B seen = atomicCAS(baddr, old_bits, new_bits);
    if (seen == old_bits) return;
    old_bits = seen;
  }
}

template <typename T>
__device__ __forceinline__ void AtomicSum(T* addr, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    atomicAdd(addr, v);
  } else {
    using B = BitsOf<T>;
    atomicAdd(reinterpret_cast<B*>(addr), static_cast<B>(v));
  }
}

template <typename T>
__device__ __forceinline__ void AtomicMin(T* addr, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    AtomicCasUpdate(addr, v, [](T a, T b) { return PropagatingMin(a, b); });
  } else if constexpr (std::is_same_v<T, int64_t>) {
    atomicMin(reinterpret_cast<long long*>(addr), static_cast<long long>(v));
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    atomicMin(reinterpret_cast<unsigned long long*>(addr),
              static_cast<unsigned long long>(v));
  } else {
    atomicMin(addr, v);
  }
}

template <typename T>
__device__ __forceinline__ void AtomicMax(T* addr, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    AtomicCasUpdate(addr, v, [](T a, T b) { return PropagatingMax(a, b); });
  } else if constexpr (std::is_same_v<T, int64_t>) {
    atomicMax(reinterpret_cast<long long*>(addr), static_cast<long long>(v));
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    atomicMax(reinterpret_cast<unsigned long long*>(addr),
              static_cast<unsigned long long>(v));
  } else {
    atomicMax(addr, v);
  }
}

// op is SUM, MIN or MAX (uniform across the warp).
template <typename T>
__device__ __forceinline__ void AtomicCombine(Op op, T* addr, T v) {
  if (op == Op::kSum) {
    AtomicSum(addr, v);
  } else if (op == Op::kMin) {
    AtomicMin(addr, v);
  } else {
    AtomicMax(addr, v);
  }
}

// Warp-aggregation by key. Lanes in `mask` (all of which must call this)
// hold (key, v). Returns true in exactly one lane per distinct key (the
// lowest lane of the key's peers), whose *v then holds op over the values of
// all its peers.
template <typename K, typename T>
__device__ __forceinline__ bool WarpAggregateByKey(unsigned mask, K key,
                                                   Op op, T* v) {
  const unsigned lane = threadIdx.x & 31u;
  unsigned peers = __match_any_sync(mask, key);
  const bool leader = (__ffs(peers) - 1) == static_cast<int>(lane);
  // Position among peers (0 for the leader).
  unsigned rel_pos = __popc(peers & ((1u << lane) - 1u));
  // Peers above this lane.
  peers &= lane == 31 ? 0u : (0xffffffffu << (lane + 1));
  T x = *v;
  // Tree over relative positions: each round a lane with even rel_pos adds
  // the next remaining peer above it; lanes with odd rel_pos are then done.
  while (__any_sync(mask, peers != 0)) {
    const int next = __ffs(peers);  // 1-based, 0 if none
    const T t = __shfl_sync(mask, x, next > 0 ? next - 1 : static_cast<int>(lane));
    if (next > 0) x = Combine(op, x, t);
    const unsigned done = __ballot_sync(mask, rel_pos & 1u);
    peers &= ~done;
    rel_pos >>= 1;
  }
  *v = x;
  return leader;
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_ATOMIC_COMBINE_CUH_
