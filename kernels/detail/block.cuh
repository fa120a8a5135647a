// Block-level building blocks: moving a tile between global memory and a
// blocked register arrangement (thread t owns items t*kItems .. t*kItems +
// kItems - 1 of its warp's chunk), and block-wide scan/reduce of one value
// per thread. Global accesses are striped across the warp (coalesced, 16-byte
// vectors when the chunk is full and aligned); a per-warp shared-memory
// transpose turns stripes into blocks, so only __syncwarp() is needed.
#ifndef PRIMSERVE_KERNELS_DETAIL_BLOCK_CUH_
#define PRIMSERVE_KERNELS_DETAIL_BLOCK_CUH_

#include <cstdint>
#include <cstring>

#include "kernels/detail/tuning.cuh"
#include "kernels/detail/warp.cuh"

namespace primserve::gpu::detail {

inline constexpr int kBlockWarps = kBlockThreads / kWarpThreads;

// One padding element per 32 keeps both the striped and the blocked
// shared-memory accesses free of bank conflicts for 4-byte types.
__device__ __forceinline__ int Padded(int i) { return i + i / kWarpThreads; }

template <typename T, int kItems, int kWarps = kBlockWarps>
struct WarpTransposeStorage {
  static constexpr int kWarpItems = kWarpThreads * kItems;
  T items[kWarps][kWarpItems + kWarpItems / kWarpThreads];
};

template <typename T>
__host__ __device__ inline bool IsVectorAligned(const T* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

// How many of the kWarpItems items from `warp_begin` on are below n. In
// unsigned 64-bit on purpose: the signed max(0, min(tile_valid - offset,
// kWarpItems)) form compiled (nvcc 13.0, sm_90) to a full-warp test that
// compute-sanitizer caught passing for a partial last warp, so
// WarpLoadBlocked's vector path read past n.
template <int kWarpItems>
__device__ __forceinline__ int WarpValid(uint64_t n, uint64_t warp_begin) {
  return n > warp_begin ? static_cast<int>(min(n - warp_begin, uint64_t{kWarpItems})) : 0;
}

// Loads this warp's chunk (`valid` of its items in range; the rest get
// `fill`) into blocked registers. `vector_ok`: the chunk is 16-B aligned.
template <typename T, int kItems>
__device__ __forceinline__ void WarpLoadBlocked(const T* chunk, int valid, bool vector_ok,
                                                T fill, T (&items)[kItems], T* scratch) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kWarpItems = kWarpThreads * kItems;
  static_assert(kItems % kVec == 0, "items per thread are whole vectors");
  const int lane = LaneId();
  if (valid == kWarpItems && vector_ok) {
    uint4 vectors[kItems / kVec];
#pragma unroll
    for (int k = 0; k < kItems / kVec; ++k) {
      vectors[k] = reinterpret_cast<const uint4*>(chunk)[k * kWarpThreads + lane];
    }
#pragma unroll
    for (int k = 0; k < kItems / kVec; ++k) {
      T values[kVec];
      memcpy(values, &vectors[k], 16);
#pragma unroll
      for (int v = 0; v < kVec; ++v) scratch[Padded((k * kWarpThreads + lane) * kVec + v)] = values[v];
    }
  } else {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const int i = j * kWarpThreads + lane;
      scratch[Padded(i)] = i < valid ? chunk[i] : fill;
    }
  }
  __syncwarp();
#pragma unroll
  for (int j = 0; j < kItems; ++j) items[j] = scratch[Padded(lane * kItems + j)];
  __syncwarp();
}

// Stores blocked registers to this warp's chunk (the first `valid` items).
template <typename T, int kItems>
__device__ __forceinline__ void WarpStoreBlocked(T* chunk, int valid, bool vector_ok,
                                                 const T (&items)[kItems], T* scratch) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kWarpItems = kWarpThreads * kItems;
  const int lane = LaneId();
#pragma unroll
  for (int j = 0; j < kItems; ++j) scratch[Padded(lane * kItems + j)] = items[j];
  __syncwarp();
  if (valid == kWarpItems && vector_ok) {
#pragma unroll
    for (int k = 0; k < kItems / kVec; ++k) {
      T values[kVec];
#pragma unroll
      for (int v = 0; v < kVec; ++v) values[v] = scratch[Padded((k * kWarpThreads + lane) * kVec + v)];
      uint4 vector;
      memcpy(&vector, values, 16);
      reinterpret_cast<uint4*>(chunk)[k * kWarpThreads + lane] = vector;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const int i = j * kWarpThreads + lane;
      if (i < valid) chunk[i] = scratch[Padded(i)];
    }
  }
  __syncwarp();
}

template <typename V, int kWarps = kBlockWarps>
struct BlockScanStorage {
  V warp_aggregates[kWarps];
};

// Block-wide exclusive scan of one value per thread, in thread order:
// thread_prefix gets the combination of threads before this one (`neutral`
// for thread 0), block_aggregate that of all threads. Ends with the block
// synchronized once (storage reusable after a further __syncthreads()).
template <typename V, typename ScanOp, int kWarps>
__device__ __forceinline__ void BlockExclusiveScan(V value, ScanOp op, V neutral,
                                                   V& thread_prefix, V& block_aggregate,
                                                   BlockScanStorage<V, kWarps>& storage) {
  const int lane = LaneId();
  const int warp = WarpId();
  const V inclusive = WarpInclusiveScan(value, op);
  if (lane == kWarpThreads - 1) storage.warp_aggregates[warp] = inclusive;
  V in_warp = ShuffleUp(inclusive, 1);
  if (lane == 0) in_warp = neutral;
  __syncthreads();
  V warp_prefix = neutral;
  block_aggregate = storage.warp_aggregates[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) {
    if (w == warp) warp_prefix = block_aggregate;
    block_aggregate = op(block_aggregate, storage.warp_aggregates[w]);
  }
  thread_prefix = op(warp_prefix, in_warp);
}

// Block-wide reduction of one value per thread; the result is valid in
// thread 0 only. Order-independent ops only (threads combine in tree order).
template <typename V, typename ReduceOp>
__device__ __forceinline__ V BlockReduce(V value, ReduceOp op, BlockScanStorage<V>& storage) {
  value = WarpSuffixReduce(value, op);
  if (LaneId() == 0) storage.warp_aggregates[WarpId()] = value;
  __syncthreads();
  if (threadIdx.x == 0) {
#pragma unroll
    for (int w = 1; w < kBlockWarps; ++w) value = op(value, storage.warp_aggregates[w]);
  }
  return value;
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_BLOCK_CUH_
