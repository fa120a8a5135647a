// Stable ranking of a tile's keys by one radix digit, for a whole block: the
// position each key takes when the tile is sorted by that digit, keys of one
// digit in tile order. Keys sit "warp-striped": item j of lane l of warp w is
// tile position w * 32 * kItems + j * 32 + l, so a warp's loads of item j are
// coalesced and positions grow with (w, j, l).
//
// Each warp counts its keys per digit in a private histogram: for item j,
// __match_any_sync groups the lanes holding the same digit, the group's first
// lane reads and bumps the warp's counter, and each lane's rank inside the
// warp is the counter plus its lower peers (the match-based ranking of CUB's
// onesweep, Adinets and Merrill 2022). Then one thread per digit turns the
// warps' counts into exclusive offsets (and the tile's count of the digit),
// and a scan over the digits gives each digit's first position in the tile.
// Keys past the tile's end carry digit kRadixDigits and are not counted.
#ifndef PRIMSERVE_KERNELS_DETAIL_RADIX_RANK_CUH_
#define PRIMSERVE_KERNELS_DETAIL_RADIX_RANK_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/detail/tuning_sort.cuh"
#include "kernels/detail/warp.cuh"

namespace primserve::gpu::detail {

template <int kThreads, int kItems>
struct BlockRadixRank {
  static constexpr int kWarps = kThreads / kWarpThreads;
  static constexpr int kCounters = kRadixDigits + 1;  // + the bin of keys past the end
  static_assert(kThreads >= kRadixDigits, "one thread per digit");

  struct Storage {
    uint32_t warp_counts[kWarps][kCounters];
    uint32_t digit_start[kRadixDigits];
    uint32_t warp_totals[kRadixDigits / kWarpThreads];
  };

  Storage& s;

  // Phase 1 (whole block): per-warp counts; rank[j] gets the key's rank among
  // the keys of its digit in this warp. Ends with __syncthreads().
  __device__ __forceinline__ void CountWarps(const uint32_t (&digit)[kItems],
                                             uint32_t (&rank)[kItems]) {
    for (int i = threadIdx.x; i < kWarps * kCounters; i += kThreads) {
      (&s.warp_counts[0][0])[i] = 0;
    }
    __syncthreads();
    const int lane = LaneId();
    const unsigned lower = (1u << lane) - 1;
    uint32_t* counts = s.warp_counts[WarpId()];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const unsigned peers = __match_any_sync(kFullMask, digit[j]);
      const int leader = __ffs(peers) - 1;
      uint32_t before = 0;
      if (lane == leader) {
        before = counts[digit[j]];
        counts[digit[j]] = before + __popc(peers);
      }
      before = __shfl_sync(kFullMask, before, leader);
      rank[j] = before + __popc(peers & lower);
      __syncwarp();
    }
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
  // (count: ScanWarps' result) into digit_start; returns this thread's digit
  // start (threads < kRadixDigits). Ends with __syncthreads().
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
      s.digit_start[threadIdx.x] = start;
    }
    __syncthreads();
    return start;
  }

  // Phase 4 (whole block): ranks within the tile. No barrier.
  __device__ __forceinline__ void FinishRanks(const uint32_t (&digit)[kItems],
                                              uint32_t (&rank)[kItems]) {
    const uint32_t* counts = s.warp_counts[WarpId()];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      if (digit[j] < kRadixDigits) rank[j] += s.digit_start[digit[j]] + counts[digit[j]];
    }
  }

  // The four phases in one (ends with __syncthreads()).
  __device__ __forceinline__ void Rank(const uint32_t (&digit)[kItems], uint32_t (&rank)[kItems]) {
    CountWarps(digit, rank);
    ScanDigits(ScanWarps());
    FinishRanks(digit, rank);
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
