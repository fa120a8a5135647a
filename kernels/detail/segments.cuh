// Segment bookkeeping shared by the segmented scan and segmented reduce: the
// init kernel that also maps tiles to the segment starts they hold, and the
// head flags a tile derives from those starts.
#ifndef PRIMSERVE_KERNELS_DETAIL_SEGMENTS_CUH_
#define PRIMSERVE_KERNELS_DETAIL_SEGMENTS_CUH_

#include <cstdint>

#include "kernels/detail/lookback.cuh"
#include "kernels/detail/tuning.cuh"

namespace primserve::gpu::detail {

// First index s with starts[s] >= value (starts is non-decreasing).
__device__ __forceinline__ uint64_t LowerBound(const uint64_t* starts, uint64_t count,
                                               uint64_t value) {
  uint64_t lo = 0, hi = count;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (starts[mid] < value) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// Fused look-back init: also records, for each tile t, the first segment
// starting at or after the tile (tile_first_segment[t], t in [0, num_tiles];
// the last entry is num_segments, so the last tile takes every remaining
// start, including empty segments at n). One thread per entry.
template <typename V>
__global__ void InitSegmentedTilesKernel(TileStatus<V> status, const uint64_t* starts,
                                         uint64_t num_segments, int tile_items,
                                         uint64_t* tile_first_segment) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t num_tiles = status.num_tiles();
  if (t == 0) status.ResetCounter();
  if (t < num_tiles) status.InitSlot(t);
  if (t <= num_tiles) {
    tile_first_segment[t] =
        t == num_tiles ? num_segments
                       : LowerBound(starts, num_segments, static_cast<uint64_t>(t) * tile_items);
  }
}

// Marks heads[i] = 1 where a segment starts at tile position i < valid, for
// the starts [first, last) of this tile; heads has the tile's size. Whole
// block; ends synchronized.
template <int kTileItems>
__device__ __forceinline__ void BlockMarkHeads(const uint64_t* starts, uint64_t first,
                                               uint64_t last, uint64_t tile_begin, int valid,
                                               uint8_t* heads) {
  for (int i = threadIdx.x; i < kTileItems; i += kBlockThreads) heads[i] = 0;
  __syncthreads();
  for (uint64_t s = first + threadIdx.x; s < last; s += kBlockThreads) {
    const uint64_t pos = starts[s] - tile_begin;
    if (pos < static_cast<uint64_t>(valid)) heads[pos] = 1;
  }
  __syncthreads();
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_SEGMENTS_CUH_
