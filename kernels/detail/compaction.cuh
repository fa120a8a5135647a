// Building blocks of the compaction family (kernels/select.h), on top of
// K1's decoupled look-back (kernels/detail/lookback.cuh) and warp helpers
// (kernels/detail/warp.cuh):
//  - the striped tile layout of Select/Unique: each warp owns a contiguous
//    chunk of the tile, loaded as 16-byte vectors with every load instruction
//    coalesced across the warp; items ranked with __ballot_sync/__popc;
//  - the blocked layout of the pair-scan kernels (RLE, ReduceByKey,
//    segmented Select) and their block-wide scan joined to the look-back;
//  - the shared init kernel (tile status + counters) and temp layout.
#ifndef PRIMSERVE_KERNELS_DETAIL_COMPACTION_CUH_
#define PRIMSERVE_KERNELS_DETAIL_COMPACTION_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/detail/lookback.cuh"
#include "kernels/detail/warp.cuh"
#include "kernels/primitives.h"

namespace primserve::gpu::detail {

namespace pd = ::primserve::detail;

constexpr int kCompactBlock = 256;
constexpr int kCompactWarps = kCompactBlock / 32;

// Returns a cudaError_t as int from an expression; used by the launchers.
#define PRIMSERVE_CUDA_TRY(expr)                          \
  do {                                                    \
    const cudaError_t primserve_err_ = (expr);            \
    if (primserve_err_ != cudaSuccess)                    \
      return static_cast<int>(primserve_err_);            \
  } while (0)

// Unsigned type of the same width: Unique/RLE/ReduceByKey keys and values
// that are only moved or compared by bit pattern travel as these.
template <typename T>
using UBits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// ---------------------------------------------------------------------------
// Striped layout: a tile is kCompactWarps chunks of 32 * kItems items; in a
// warp's chunk, vector v of lane l holds items [v*32*kVec + l*kVec, +kVec).
template <typename T>
struct Striped {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  static constexpr int kNumVec = 4;
  static constexpr int kItems = kVec * kNumVec;
  static constexpr int kWarpItems = 32 * kItems;
  static constexpr int kTileItems = kCompactBlock * kItems;

  // Tile-local index of item (v, e) of this thread.
  __device__ static int LocalIndex(int warp, int lane, int v, int e) {
    return warp * kWarpItems + v * 32 * kVec + lane * kVec + e;
  }
};

template <typename T>
__device__ __forceinline__ T LoadStreaming(const T* p) {
  if constexpr (sizeof(T) == 4) {
    const unsigned int b = __ldcs(reinterpret_cast<const unsigned int*>(p));
    T v;
    memcpy(&v, &b, 4);
    return v;
  } else {
    const unsigned long long b =
        __ldcs(reinterpret_cast<const unsigned long long*>(p));
    T v;
    memcpy(&v, &b, 8);
    return v;
  }
}

// Loads a tile's items in the striped layout. Full tiles with a 16-byte
// aligned base use one 16-byte load per vector; otherwise guarded scalar
// loads (items past `valid` are left as they are).
template <typename T>
__device__ __forceinline__ void LoadStripedTile(
    const T* in, uint64_t tile_base, int valid, bool vector_ok,
    T (&items)[Striped<T>::kNumVec][Striped<T>::kVec]) {
  using S = Striped<T>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (vector_ok && valid == S::kTileItems) {
    const uint4* src = reinterpret_cast<const uint4*>(
                           in + tile_base + warp * S::kWarpItems) +
                       lane;
    uint4 q[S::kNumVec];
#pragma unroll
    for (int v = 0; v < S::kNumVec; ++v) q[v] = __ldcs(src + v * 32);
#pragma unroll
    for (int v = 0; v < S::kNumVec; ++v) memcpy(items[v], &q[v], 16);
  } else {
#pragma unroll
    for (int v = 0; v < S::kNumVec; ++v) {
#pragma unroll
      for (int e = 0; e < S::kVec; ++e) {
        const int j = S::LocalIndex(warp, lane, v, e);
        if (j < valid) items[v][e] = LoadStreaming(in + tile_base + j);
      }
    }
  }
}

// Loads the uint8 flags of a tile in the striped layout of T (kVec flags
// per vector: one 4- or 2-byte load when aligned and full).
template <typename T>
__device__ __forceinline__ void LoadStripedFlags(
    const uint8_t* flags, uint64_t tile_base, int valid, bool vector_ok,
    bool (&keep)[Striped<T>::kNumVec][Striped<T>::kVec]) {
  using S = Striped<T>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (vector_ok && valid == S::kTileItems) {
#pragma unroll
    for (int v = 0; v < S::kNumVec; ++v) {
      const uint8_t* p =
          flags + tile_base + S::LocalIndex(warp, lane, v, 0);
      if constexpr (S::kVec == 4) {
        const unsigned int w = __ldcs(reinterpret_cast<const unsigned int*>(p));
#pragma unroll
        for (int e = 0; e < 4; ++e) keep[v][e] = ((w >> (8 * e)) & 0xffu) != 0;
      } else {
        const unsigned short w =
            __ldcs(reinterpret_cast<const unsigned short*>(p));
#pragma unroll
        for (int e = 0; e < 2; ++e) keep[v][e] = ((w >> (8 * e)) & 0xffu) != 0;
      }
    }
  } else {
#pragma unroll
    for (int v = 0; v < S::kNumVec; ++v) {
#pragma unroll
      for (int e = 0; e < S::kVec; ++e) {
        const int j = S::LocalIndex(warp, lane, v, e);
        keep[v][e] = j < valid && flags[tile_base + j] != 0;
      }
    }
  }
}

// Warp-local ranks in the striped layout: rank[v][e] = number of kept items
// of this warp's chunk that come before item (v, e) (for a rejected item
// too). Returns the warp's kept total. One ballot per (v, e), popc on the
// lanes below.
template <int kNumVec, int kVec>
__device__ __forceinline__ int WarpStripedRanks(const bool (&keep)[kNumVec][kVec],
                                                int (&rank)[kNumVec][kVec]) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned below_mask = (1u << lane) - 1u;
  int running = 0;
#pragma unroll
  for (int v = 0; v < kNumVec; ++v) {
    int below = 0, total = 0;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const unsigned b = __ballot_sync(0xffffffffu, keep[v][e]);
      below += __popc(b & below_mask);
      total += __popc(b);
    }
    int own = 0;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      rank[v][e] = running + below + own;
      own += keep[v][e] ? 1 : 0;
    }
    running += total;
  }
  return running;
}

// ---------------------------------------------------------------------------
// Blocked layout (pair-scan kernels): thread t owns kItems consecutive items.
//
// Block-wide exclusive scan of per-thread values in thread order, joined to
// the look-back. Every thread passes its own reduction; returns true and
// *prefix = the reduction of everything before this thread's first item (in
// all earlier tiles and threads), or false when there is nothing before it
// (first thread of tile 0). Ends with a __syncthreads().
struct NoOp {
  __device__ void operator()() const {}
};

// after_barrier() runs in every thread right after the first barrier, before
// the look-back: a persistent kernel issues its next tile's loads there.
template <typename P, typename ScanOp, typename AfterBarrier = NoOp>
__device__ __forceinline__ bool BlockScanLookback(
    const P& thread_value, ScanOp op, const pd::TileStatus<P>& status,
    int64_t tile, P* s_warp /* [kCompactWarps] shared */, P& s_slot,
    P* prefix, AfterBarrier after_barrier = {}) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const P inclusive = pd::WarpInclusiveScan(thread_value, op);
  const P lane_before = pd::ShuffleUp(inclusive, 1);
  if (lane == 31) s_warp[warp] = inclusive;
  __syncthreads();
  after_barrier();
  P warp_prefix = s_warp[0];
  for (int w = 1; w < warp; ++w) warp_prefix = op(warp_prefix, s_warp[w]);
  P tile_aggregate = s_warp[0];
#pragma unroll
  for (int w = 1; w < kCompactWarps; ++w)
    tile_aggregate = op(tile_aggregate, s_warp[w]);
  const P tile_prefix =
      pd::BlockExclusivePrefix(status, tile, tile_aggregate, op, s_slot);
  bool have = tile > 0;
  P acc = tile_prefix;
  if (warp > 0) {
    acc = have ? op(acc, warp_prefix) : warp_prefix;
    have = true;
  }
  if (lane > 0) {
    acc = have ? op(acc, lane_before) : lane_before;
    have = true;
  }
  *prefix = acc;
  return have;
}

// Blocked layout: thread t of the block owns items [first, first + kItems)
// with first = tile_base + t * kItems. Loads them (16-byte vectors when the
// whole tile is in range and the pointer is 16-byte aligned, else guarded
// scalar loads; items past n are left as they are).
template <int kItems, typename T>
__device__ __forceinline__ void LoadBlocked(const T* in, uint64_t first,
                                            uint64_t n, bool vector_ok,
                                            T (&items)[kItems]) {
  constexpr int kPerVec = 16 / static_cast<int>(sizeof(T));
  if constexpr (kItems % kPerVec == 0) {
    if (vector_ok && first + kItems <= n) {
      const uint4* src = reinterpret_cast<const uint4*>(in + first);
      uint4 q[kItems / kPerVec];
#pragma unroll
      for (int u = 0; u < kItems / kPerVec; ++u) q[u] = __ldcs(src + u);
#pragma unroll
      for (int u = 0; u < kItems / kPerVec; ++u)
        memcpy(&items[u * kPerVec], &q[u], 16);
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < kItems; ++e) {
    if (first + e < n) items[e] = LoadStreaming(in + first + e);
  }
}

// Temp layout shared by the compaction launchers: a 16-byte header (uint64
// counter(s)) followed by the tile status of look-back value type V.
constexpr size_t kHeaderBytes = 16;

template <typename V>
size_t CompactionTempBytes(int64_t num_tiles) {
  return kHeaderBytes + pd::TileStatus<V>::StorageBytes(num_tiles);
}

// Resets the tile status (slots to X, tile counter to 0) and the header's
// counter to 0; one launch before each compaction pass.
template <typename V>
__global__ void CompactionInitKernel(pd::TileStatus<V> status,
                                     unsigned long long* header) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t == 0) {
    status.ResetCounter();
    header[0] = 0;
    header[1] = 0;
  }
  if (t < status.num_tiles()) status.InitSlot(t);
}

template <typename V>
int LaunchCompactionInit(const pd::TileStatus<V>& status,
                         unsigned long long* header, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t blocks = (status.num_tiles() + kThreads - 1) / kThreads;
  CompactionInitKernel<V>
      <<<static_cast<unsigned>(blocks > 0 ? blocks : 1), kThreads, 0, stream>>>(
          status, header);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_COMPACTION_CUH_
