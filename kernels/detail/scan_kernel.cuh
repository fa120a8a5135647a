// The single-pass scan kernel (plain and segmented) with decoupled look-back,
// templated on a ScanPolicy (tuning.cuh) so that kernels/scan.cu instantiates
// the tuned one and the variant benchmark (kernels/bench/scan_variants.cu)
// can time others. Each element is read once and written once (~2n bytes).
// A segmented scan is the same pass over head-flagged values
// (operators.cuh: SegmentedOp). Optional carry: the scan starts from
// *carry_in instead of nothing, and *carry_out gets carry_in op all n inputs
// (the last tile's inclusive prefix). A, the accumulator and output type, is
// T or (SUM/PROD) a wider one: the narrow input is loaded as T (vectorised),
// converted once per element, and the look-back, the prefixes and the output
// are in A. Optional device count (pipelines): n is then the most elements,
// the grid is sized for it, and the first min(*count, n) are scanned.
#ifndef PRIMSERVE_KERNELS_DETAIL_SCAN_KERNEL_CUH_
#define PRIMSERVE_KERNELS_DETAIL_SCAN_KERNEL_CUH_

#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/detail/block.cuh"
#include "kernels/detail/dispatch.cuh"
#include "kernels/detail/lookback.cuh"
#include "kernels/detail/operators.cuh"
#include "kernels/detail/segments.cuh"
#include "kernels/detail/tuning.cuh"

namespace primserve::gpu::detail {

template <typename T, Op kOp, bool kSegmented, typename Policy, typename A = T>
struct ScanConfig {
  using BaseOp = CombineOp<A, kOp>;
  using V = std::conditional_t<kSegmented, Flagged<A>, A>;  // scanned value
  using ScanOp = std::conditional_t<kSegmented, SegmentedOp<A, BaseOp>, BaseOp>;
  static constexpr int kThreads = Policy::kThreads;
  static constexpr int kWarps = kThreads / kWarpThreads;
  static constexpr int kItems =
      kItemsPerThreadFor<T, V, Policy::kBytesPerThread, Policy::kValueBytesPerThread>;
  static constexpr int kTileItems = kThreads * kItems;
  static constexpr int kWarpItems = kWarpThreads * kItems;
};

template <typename T, Op kOp, bool kSegmented, typename Policy, typename A = T>
struct ScanParams {
  using Config = ScanConfig<T, kOp, kSegmented, Policy, A>;
  const T* in;
  A* out;
  uint64_t n;
  int64_t num_tiles;
  bool exclusive;
  TileStatus<typename Config::V> status;  // unused for a single tile
  const uint64_t* segment_starts;         // segmented only
  uint64_t num_segments;
  const uint64_t* tile_first_segment;     // segmented, several tiles
  const A* carry_in;                      // plain only; nullable
  A* carry_out;                           // plain only; nullable
  const uint64_t* count;                  // plain only; nullable: n elements
};

// kSkipLookback: timing diagnostic only (wrong results): every tile uses an
// empty prefix, so the look-back's share of the time can be measured.
template <typename T, Op kOp, bool kSegmented, typename Policy, bool kSkipLookback = false,
          typename A = T>
__global__ void __launch_bounds__(Policy::kThreads, Policy::kMinBlocksPerSm)
    ScanKernel(const ScanParams<T, kOp, kSegmented, Policy, A> p) {
  using Config = ScanConfig<T, kOp, kSegmented, Policy, A>;
  using V = typename Config::V;
  constexpr int kItems = Config::kItems;
  constexpr int kTileItems = Config::kTileItems;
  constexpr int kWarpItems = Config::kWarpItems;
  const typename Config::ScanOp op{};

  // In A: the output's transpose; the input's (T, no wider) uses its start.
  __shared__ WarpTransposeStorage<A, kItems, Config::kWarps> transpose;
  __shared__ BlockScanStorage<V, Config::kWarps> scan_storage;
  __shared__ V tile_prefix_slot;
  __shared__ int64_t tile_slot;
  __shared__ A carry_slot;
  __shared__ uint8_t heads[kSegmented ? kTileItems : 1];

  // With a device count, blocks past its tiles leave before taking a tile
  // index: the blocks that stay take exactly the tiles [0, num_tiles).
  const uint64_t n = p.count != nullptr ? min(*p.count, p.n) : p.n;
  const int64_t num_tiles =
      p.count != nullptr ? static_cast<int64_t>((n + kTileItems - 1) / kTileItems) : p.num_tiles;
  if (blockIdx.x >= num_tiles) return;

  int64_t tile = 0;
  if constexpr (Policy::kBlockIdxOrder) {
    // As CUB: relies on the hardware starting a grid's blocks in blockIdx
    // order, so that every predecessor of a running tile has started.
    (void)tile_slot;
    tile = blockIdx.x;
  } else if (p.num_tiles > 1) {
    if (threadIdx.x == 0) tile_slot = p.status.AcquireTileIndex();
    __syncthreads();
    tile = tile_slot;
  }
  // Only tile 0 reads the carry (before any tile can write carry_out, which
  // waits for tile 0's P: carry_in may alias carry_out).
  const bool has_carry = !kSegmented && p.carry_in != nullptr && tile == 0;
  if (has_carry && threadIdx.x == 0) carry_slot = *p.carry_in;
  const uint64_t tile_begin = static_cast<uint64_t>(tile) * kTileItems;
  const int tile_valid = static_cast<int>(min(n - tile_begin, uint64_t{kTileItems}));
  const int warp_offset = WarpId() * kWarpItems;
  const int warp_valid = WarpValid<kWarpItems>(n, tile_begin + warp_offset);
  const uint64_t thread_begin = tile_begin + warp_offset + LaneId() * kItems;

  T x[kItems];
  WarpLoadBlocked(p.in + tile_begin + warp_offset, warp_valid, IsVectorAligned(p.in),
                  Neutral<T, kOp>(), x, reinterpret_cast<T*>(transpose.items[WarpId()]));

  // Float MIN/MAX (plain scans), per thread, bit for bit the NaN-propagating
  // op's result either way (operators.cuh):
  //  - no NaN and no zero among its items: its two serial passes use the
  //    hardware min/max (one FMNMX per pair for float32);
  //  - zeros but no NaN: integer min/max over ordered keys;
  //  - a NaN: the generic op.
  constexpr bool kFloatMinMax = !kSegmented && std::is_floating_point_v<T> &&
                                std::is_same_v<T, A> && (kOp == Op::kMin || kOp == Op::kMax);
  FloatMinMaxPath path = FloatMinMaxPath::kGeneric;
  if constexpr (kFloatMinMax) {
    bool nan_or_zero = false;
#pragma unroll
    for (int j = 0; j < kItems; ++j) nan_or_zero |= !(fabs(x[j]) > T(0));
    path = FloatMinMaxPath::kPlain;
    if (nan_or_zero) {
      bool any_nan = false;
#pragma unroll
      for (int j = 0; j < kItems; ++j) any_nan |= IsNan(x[j]);
      path = any_nan ? FloatMinMaxPath::kGeneric : FloatMinMaxPath::kKeyed;
    }
  }

  V values[kItems];
  if constexpr (kSegmented) {
    const uint64_t first = p.num_tiles > 1 ? p.tile_first_segment[tile] : 0;
    const uint64_t last = p.num_tiles > 1 ? p.tile_first_segment[tile + 1] : p.num_segments;
    BlockMarkHeads<kTileItems>(p.segment_starts, first, last, tile_begin, tile_valid, heads);
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      values[j] = V{heads[warp_offset + LaneId() * kItems + j], static_cast<A>(x[j])};
    }
  } else {
#pragma unroll
    for (int j = 0; j < kItems; ++j) values[j] = static_cast<A>(x[j]);
  }

  V thread_total;
  if (path == FloatMinMaxPath::kPlain) {
    if constexpr (kFloatMinMax) {
      thread_total = x[0];
#pragma unroll
      for (int j = 1; j < kItems; ++j) thread_total = CombinePlainFloats<kOp>(thread_total, x[j]);
    }
  } else if (path == FloatMinMaxPath::kKeyed) {
    if constexpr (kFloatMinMax) {
      OrderedKey<T> key = ToOrderedKey(x[0]);
#pragma unroll
      for (int j = 1; j < kItems; ++j) key = CombineOrderedKeys<kOp>(key, ToOrderedKey(x[j]));
      thread_total = FromOrderedKey<T>(key);
    }
  } else {
    thread_total = values[0];
#pragma unroll
    for (int j = 1; j < kItems; ++j) thread_total = op(thread_total, values[j]);
  }

  V neutral;
  if constexpr (kSegmented) {
    neutral = V{0, Neutral<A, kOp>()};
  } else {
    neutral = Neutral<A, kOp>();
  }
  V running, tile_total;
  // Also orders carry_slot's write before the reads below.
  BlockExclusiveScan(thread_total, op, neutral, running, tile_total, scan_storage);
  V carry{};
  if constexpr (!kSegmented) {
    if (has_carry) {
      carry = carry_slot;
      tile_total = op(carry, tile_total);  // tile 0 publishes carry op tile as its P
    }
  }
  V tile_inclusive = tile_total;  // the P this tile publishes
  if (p.num_tiles > 1) {
    if constexpr (kSkipLookback) {
      (void)tile_prefix_slot;
    } else {
      const V tile_prefix = BlockExclusivePrefix<typename Policy::Lookback>(
          p.status, tile, tile_total, op, tile_prefix_slot);
      if (tile > 0) {
        running = op(tile_prefix, running);
        tile_inclusive = op(tile_prefix, tile_total);
      }
    }
  }
  if constexpr (!kSegmented) {
    if (has_carry) running = op(carry, running);
  }

  A y[kItems];
  // A NaN prefix (it comes first) is every output of this thread.
  if (path != FloatMinMaxPath::kGeneric && IsNan(running)) {
    if constexpr (kFloatMinMax) {
#pragma unroll
      for (int j = 0; j < kItems; ++j) y[j] = running;
    }
  } else if (path == FloatMinMaxPath::kPlain) {
    if constexpr (kFloatMinMax) {
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        if (p.exclusive) y[j] = thread_begin + j == 0 && !has_carry ? Identity<T>(kOp) : running;
        running = CombinePlainFloats<kOp>(running, x[j]);
        if (!p.exclusive) y[j] = running;
      }
    }
  } else if (path == FloatMinMaxPath::kKeyed) {
    if constexpr (kFloatMinMax) {
      OrderedKey<T> key = ToOrderedKey(running);
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        if (p.exclusive) {
          y[j] = thread_begin + j == 0 && !has_carry ? Identity<T>(kOp) : FromOrderedKey<T>(key);
        }
        key = CombineOrderedKeys<kOp>(key, ToOrderedKey(x[j]));
        if (!p.exclusive) y[j] = FromOrderedKey<T>(key);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      if constexpr (kSegmented) {
        if (p.exclusive) y[j] = values[j].head ? Identity<A>(kOp) : running.value;
        running = op(running, values[j]);
        if (!p.exclusive) y[j] = running.value;
      } else {
        if (p.exclusive) y[j] = thread_begin + j == 0 && !has_carry ? Identity<A>(kOp) : running;
        running = op(running, values[j]);
        if (!p.exclusive) y[j] = running;
      }
    }
  }
  // The last tile's P, not its last output: the same value up to
  // association, and with it a scan in whole-tile chunks, carrying this,
  // has exactly the bits of one scan (the P's of one launch are the tile
  // aggregates' left fold under the in-order look-back).
  if constexpr (!kSegmented) {
    if (p.carry_out != nullptr && tile == num_tiles - 1 && threadIdx.x == 0) {
      *p.carry_out = tile_inclusive;
    }
  }
  WarpStoreBlocked(p.out + tile_begin + warp_offset, warp_valid, IsVectorAligned(p.out), y,
                   transpose.items[WarpId()]);
}

// n == 0 with a carry: carry_out = carry_in, or the identity.
template <typename A, Op kOp>
__global__ void ScanEmptyCarryKernel(const A* carry_in, A* carry_out) {
  *carry_out = carry_in != nullptr ? *carry_in : Identity<A>(kOp);
}

template <typename T, Op kOp, bool kSegmented, typename Policy, bool kSkipLookback = false,
          typename A = T>
int LaunchScan(void* temp_storage, size_t* temp_bytes, const T* in, A* out, uint64_t n,
               const uint64_t* starts, uint64_t num_segments, bool exclusive,
               const A* carry_in, A* carry_out, cudaStream_t stream,
               const uint64_t* count = nullptr) {
  using Config = ScanConfig<T, kOp, kSegmented, Policy, A>;
  using Status = TileStatus<typename Config::V>;
  const int64_t num_tiles = n == 0 ? 1 : CeilDiv(n, Config::kTileItems);
  const size_t status_bytes = num_tiles > 1 ? Status::StorageBytes(num_tiles) : 0;
  const size_t map_bytes =
      kSegmented && num_tiles > 1 ? AlignUp16((num_tiles + 1) * sizeof(uint64_t)) : 0;
  const size_t bytes = status_bytes + map_bytes > kMinTempBytes ? status_bytes + map_bytes
                                                                : kMinTempBytes;
  if (temp_storage == nullptr) {
    *temp_bytes = bytes;
    return cudaSuccess;
  }
  if (*temp_bytes < bytes) return cudaErrorInvalidValue;
  if (n == 0) {
    if (!kSegmented && carry_out != nullptr) {
      ScanEmptyCarryKernel<A, kOp><<<1, 1, 0, stream>>>(carry_in, carry_out);
      return cudaGetLastError();
    }
    return cudaSuccess;
  }

  ScanParams<T, kOp, kSegmented, Policy, A> params{};
  params.in = in;
  params.out = out;
  params.n = n;
  params.num_tiles = num_tiles;
  params.exclusive = exclusive;
  params.segment_starts = starts;
  params.num_segments = num_segments;
  params.carry_in = carry_in;
  params.carry_out = carry_out;
  params.count = count;
  if (num_tiles > 1) {
    params.status = Status(temp_storage, num_tiles);
    if constexpr (kSegmented) {
      uint64_t* map = reinterpret_cast<uint64_t*>(static_cast<char*>(temp_storage) + status_bytes);
      params.tile_first_segment = map;
      const int64_t blocks = CeilDiv(num_tiles + 1, 256);
      InitSegmentedTilesKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
          params.status, starts, num_segments, Config::kTileItems, map);
      if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
    } else {
      if (const cudaError_t err = InitTileStatusAsync(params.status, stream); err != cudaSuccess) {
        return err;
      }
    }
  }
  ScanKernel<T, kOp, kSegmented, Policy, kSkipLookback, A>
      <<<static_cast<unsigned>(num_tiles), Config::kThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_SCAN_KERNEL_CUH_
