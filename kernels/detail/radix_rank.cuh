// Stable ranking of a tile's keys by one radix digit, for a whole block: the
// position each key takes when the tile is sorted by that digit, keys of one
// digit in tile order. Keys sit "warp-striped": item j of lane l of warp w is
// tile position w * 32 * kItems + j * 32 + l, so a warp's loads of item j are
// coalesced and positions grow with (w, j, l).
//
// The match-based ranking of CUB's onesweep (Adinets and Merrill 2022), in
// its order: each warp first counts its keys per digit by shared atomics into
// a private histogram (independent adds, no chain between items); one thread
// per digit turns the warps' counts into the tile's count of the digit (what
// the look-back publishes early) and, after a scan over the digits, into
// each warp's first position for the digit; last, for item j,
// __match_any_sync groups the lanes holding the same digit and the group's
// last lane takes the group's positions from the warp's counter with one
// atomicAdd, whose result no later item waits for (the adds of one warp
// land in issue order). Keys past the tile's end are given the last digit:
// their positions are the tile's last, so they rank after every real key of
// that digit and the real keys' ranks stay right; the caller takes them out
// of that digit's count.
#ifndef PRIMSERVE_KERNELS_DETAIL_RADIX_RANK_CUH_
#define PRIMSERVE_KERNELS_DETAIL_RADIX_RANK_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/detail/tuning_sort.cuh"
#include "kernels/detail/warp.cuh"

namespace primserve::gpu::detail {

// The lanes of this warp holding the same digit, by one ballot per digit bit:
// CUB's replacement for __match_any_sync, which is slower on few bits (on
// the H200 the onesweep pass stalled on it; perf/NOTES.md).
__device__ __forceinline__ unsigned MatchDigit(uint32_t digit) {
  unsigned peers = kFullMask;
#pragma unroll
  for (int bit = 0; bit < kRadixBits; ++bit) {
    const bool set = digit & (1u << bit);
    const unsigned ones = __ballot_sync(kFullMask, set);
    peers &= set ? ones : ~ones;
  }
  return peers;
}

template <int kThreads, int kItems>
struct BlockRadixRank {
  static constexpr int kWarps = kThreads / kWarpThreads;
  static_assert(kThreads >= kRadixDigits, "one thread per digit");

  struct Storage {
    uint32_t warp_counts[kWarps][kRadixDigits];
    uint32_t warp_totals[kRadixDigits / kWarpThreads];
  };

  Storage& s;

  // Phase 1 (whole block): each warp's count of every digit. Ends with
  // __syncthreads().
  __device__ __forceinline__ void CountWarps(const uint32_t (&digit)[kItems]) {
    uint32_t* counts = s.warp_counts[WarpId()];
    for (int i = LaneId(); i < kRadixDigits; i += kWarpThreads) counts[i] = 0;
    __syncwarp();
#pragma unroll
    for (int j = 0; j < kItems; ++j) atomicAdd(&counts[digit[j]], 1u);
    __syncthreads();
  }

  // Phase 2 (threads < kRadixDigits, digit = threadIdx.x): each warp's count
  // of the digit becomes the count in the warps before it; returns the tile's
  // count of the digit. Other threads return 0. No barrier.
  __device__ __forceinline__ uint32_t ScanWarps() {
    uint32_t total = 0;
    if (threadIdx.x < kRadixDigits) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const uint32_t count = s.warp_counts[w][threadIdx.x];
        s.warp_counts[w][threadIdx.x] = total;
        total += count;
      }
    }
    return total;
  }

  // Phase 3 (whole block): the exclusive scan of the tile's digit counts
  // (count: ScanWarps' result), added to every warp's offsets of the digit;
  // returns this thread's digit start (threads < kRadixDigits). Ends with
  // __syncthreads().
  __device__ __forceinline__ uint32_t ScanDigits(uint32_t count) {
    uint32_t inclusive = count;
    if (threadIdx.x < kRadixDigits) {
      const int lane = LaneId();
#pragma unroll
      for (int delta = 1; delta < kWarpThreads; delta *= 2) {
        const uint32_t up = __shfl_up_sync(kFullMask, inclusive, delta);
        if (lane >= delta) inclusive += up;
      }
      if (lane == kWarpThreads - 1) s.warp_totals[WarpId()] = inclusive;
    }
    __syncthreads();
    uint32_t start = 0;
    if (threadIdx.x < kRadixDigits) {
      uint32_t before = 0;
      for (int w = 0; w < WarpId(); ++w) before += s.warp_totals[w];
      start = before + inclusive - count;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) s.warp_counts[w][threadIdx.x] += start;
    }
    __syncthreads();
    return start;
  }

  // Phase 4 (whole block): rank[j] = the key's position in the tile sorted by
  // digit (keys past the end get a meaningless one). No barrier.
  __device__ __forceinline__ void RankKeys(const uint32_t (&digit)[kItems],
                                           uint32_t (&rank)[kItems]) {
    uint32_t* counts = s.warp_counts[WarpId()];
    const int lane = LaneId();
    const unsigned lower_or_self = (2u << lane) - 1;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const unsigned peers = MatchDigit(digit[j]);
      const int leader = kWarpThreads - 1 - __clz(peers);
      const uint32_t below = __popc(peers & lower_or_self);
      uint32_t first = 0;
      if (lane == leader) first = atomicAdd(&counts[digit[j]], below);
      rank[j] = __shfl_sync(kFullMask, first, leader) + below - 1;
    }
  }

  // The four phases in one (ends with __syncthreads()).
  __device__ __forceinline__ void Rank(const uint32_t (&digit)[kItems], uint32_t (&rank)[kItems]) {
    CountWarps(digit);
    ScanDigits(ScanWarps());
    RankKeys(digit, rank);
    __syncthreads();
  }
};

// Tile position of item j of this thread (warp-striped).
template <int kItems>
__device__ __forceinline__ uint32_t StripedPosition(int j) {
  return static_cast<uint32_t>(WarpId() * kWarpThreads * kItems + j * kWarpThreads + LaneId());
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_RADIX_RANK_CUH_
