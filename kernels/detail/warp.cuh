// Warp-level building blocks: shuffles of any 4-byte-multiple value type and
// Kogge-Stone scans/reductions over the 32 lanes of a warp. Every function
// here must be called by all 32 lanes of the warp (full mask).
#ifndef PRIMSERVE_KERNELS_DETAIL_WARP_CUH_
#define PRIMSERVE_KERNELS_DETAIL_WARP_CUH_

#include <cstdint>
#include <cstring>

namespace primserve::gpu::detail {

inline constexpr int kWarpThreads = 32;
inline constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ int LaneId() { return threadIdx.x % kWarpThreads; }
__device__ __forceinline__ int WarpId() { return threadIdx.x / kWarpThreads; }

// Shuffles a value word by word: __shfl_*_sync has no overloads for structs
// or for int64_t (long on LP64).
template <typename T, typename Shuffle>
__device__ __forceinline__ T ShuffleWords(T value, Shuffle shuffle) {
  static_assert(sizeof(T) % 4 == 0, "shuffled types are 4-byte multiples");
  constexpr int kWords = sizeof(T) / 4;
  uint32_t words[kWords];
  memcpy(words, &value, sizeof(T));
#pragma unroll
  for (int i = 0; i < kWords; ++i) words[i] = shuffle(words[i]);
  memcpy(&value, words, sizeof(T));
  return value;
}

template <typename T>
__device__ __forceinline__ T ShuffleUp(T value, int delta) {
  return ShuffleWords(value, [delta](uint32_t w) {
    return __shfl_up_sync(kFullMask, w, delta);
  });
}

template <typename T>
__device__ __forceinline__ T ShuffleDown(T value, int delta) {
  return ShuffleWords(value, [delta](uint32_t w) {
    return __shfl_down_sync(kFullMask, w, delta);
  });
}

template <typename T>
__device__ __forceinline__ T ShuffleIdx(T value, int src_lane) {
  return ShuffleWords(value, [src_lane](uint32_t w) {
    return __shfl_sync(kFullMask, w, src_lane);
  });
}

// Inclusive scan across the warp; lane i gets x0 op ... op xi (in lane
// order, so non-commutative ops are fine).
template <typename T, typename ScanOp>
__device__ __forceinline__ T WarpInclusiveScan(T value, ScanOp op) {
  const int lane = LaneId();
#pragma unroll
  for (int delta = 1; delta < kWarpThreads; delta *= 2) {
    const T before = ShuffleUp(value, delta);
    if (lane >= delta) value = op(before, value);
  }
  return value;
}

// Suffix reduction: lane i gets xi op ... op x31, in lane order. Lane 0 holds
// the whole warp's reduction. Needs no identity: each step combines with a
// partner range only when that range exists.
template <typename T, typename ScanOp>
__device__ __forceinline__ T WarpSuffixReduce(T value, ScanOp op) {
  const int lane = LaneId();
#pragma unroll
  for (int delta = 1; delta < kWarpThreads; delta *= 2) {
    const T after = ShuffleDown(value, delta);
    if (lane + delta < kWarpThreads) value = op(value, after);
  }
  return value;
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_WARP_CUH_
