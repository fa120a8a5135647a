// Building blocks of the compaction family (kernels/select.h), on top of the
// decoupled look-back (kernels/detail/lookback.cuh) and warp helpers
// (kernels/detail/warp.cuh):
//  - 16-byte cp.async helpers (Select/Unique/RLE stage their tiles in shared
//    memory, select.cu);
//  - the blocked layout of the pair-scan kernels (ReduceByKey, segmented
//    Select) and their block-wide scan joined to the look-back;
//  - the shared init kernel (tile status + counters) and temp layout.
#ifndef PRIMSERVE_KERNELS_DETAIL_COMPACTION_CUH_
#define PRIMSERVE_KERNELS_DETAIL_COMPACTION_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/detail/lookback.cuh"
#include "kernels/detail/tuning.cuh"
#include "kernels/detail/warp.cuh"
#include "core/primitives.h"

namespace primserve::gpu::detail {


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

// 16-byte asynchronous global -> shared copy (cp.async, L2 only), and the
// wait for all of this thread's copies; other threads of the warp see the
// data after a __syncwarp() (of the block: __syncthreads()).
__device__ __forceinline__ void CopyAsync16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#else
  *static_cast<uint4*>(smem) = __ldcs(static_cast<const uint4*>(gmem));
#endif
}

__device__ __forceinline__ void CopyAsyncWaitAll() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
#endif
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
template <typename Policy = DefaultLookbackPolicy, typename P, typename ScanOp,
          typename AfterBarrier = NoOp>
__device__ __forceinline__ bool BlockScanLookback(
    const P& thread_value, ScanOp op, const detail::TileStatus<P>& status,
    int64_t tile, P* s_warp /* [kCompactWarps] shared */, P& s_slot,
    P* prefix, AfterBarrier after_barrier = {}) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const P inclusive = detail::WarpInclusiveScan(thread_value, op);
  const P lane_before = detail::ShuffleUp(inclusive, 1);
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
      detail::BlockExclusivePrefix<Policy>(status, tile, tile_aggregate, op, s_slot);
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
  return kHeaderBytes + detail::TileStatus<V>::StorageBytes(num_tiles);
}

// Resets the tile status (slots to X, tile counter to 0) and the header's
// counter to 0; one launch before each compaction pass.
template <typename V>
__global__ void CompactionInitKernel(detail::TileStatus<V> status,
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
int LaunchCompactionInit(const detail::TileStatus<V>& status,
                         unsigned long long* header, cudaStream_t stream) {
  const int64_t blocks = (status.num_tiles() + kInitBlockThreads - 1) / kInitBlockThreads;
  CompactionInitKernel<V>
      <<<static_cast<unsigned>(blocks > 0 ? blocks : 1), kInitBlockThreads, 0, stream>>>(
          status, header);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_COMPACTION_CUH_
