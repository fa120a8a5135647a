// Single-pass scans (plain and segmented) with decoupled look-back: each
// element is read once and written once (~2n bytes). A segmented scan is the
// same pass over head-flagged values (detail/operators.cuh: SegmentedOp).
#include "kernels/scan.h"

#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/detail/block.cuh"
#include "kernels/detail/dispatch.cuh"
#include "kernels/detail/lookback.cuh"
#include "kernels/detail/operators.cuh"
#include "kernels/detail/segments.cuh"
#include "kernels/detail/tuning.cuh"

namespace primserve::gpu {
namespace {

using namespace primserve::detail;

template <typename T, Op kOp, bool kSegmented>
struct ScanConfig {
  using BaseOp = CombineOp<T, kOp>;
  using V = std::conditional_t<kSegmented, Flagged<T>, T>;  // scanned value
  using ScanOp = std::conditional_t<kSegmented, SegmentedOp<T, BaseOp>, BaseOp>;
  static constexpr int kItems = kItemsPerThread<T, V>;
  static constexpr int kTileItems = kBlockThreads * kItems;
  static constexpr int kWarpItems = kWarpThreads * kItems;
};

template <typename T, Op kOp, bool kSegmented>
struct ScanParams {
  using Config = ScanConfig<T, kOp, kSegmented>;
  const T* in;
  T* out;
  uint64_t n;
  int64_t num_tiles;
  bool exclusive;
  TileStatus<typename Config::V> status;  // unused for a single tile
  const uint64_t* segment_starts;         // segmented only
  uint64_t num_segments;
  const uint64_t* tile_first_segment;     // segmented, several tiles
};

template <typename T, Op kOp, bool kSegmented>
__global__ void __launch_bounds__(kBlockThreads)
    ScanKernel(const ScanParams<T, kOp, kSegmented> p) {
  using Config = ScanConfig<T, kOp, kSegmented>;
  using V = typename Config::V;
  constexpr int kItems = Config::kItems;
  constexpr int kTileItems = Config::kTileItems;
  constexpr int kWarpItems = Config::kWarpItems;
  const typename Config::ScanOp op{};

  __shared__ WarpTransposeStorage<T, kItems> transpose;
  __shared__ BlockScanStorage<V> scan_storage;
  __shared__ V tile_prefix_slot;
  __shared__ int64_t tile_slot;
  __shared__ uint8_t heads[kSegmented ? kTileItems : 1];

  int64_t tile = 0;
  if (p.num_tiles > 1) {
    if (threadIdx.x == 0) tile_slot = p.status.AcquireTileIndex();
    __syncthreads();
    tile = tile_slot;
  }
  const uint64_t tile_begin = static_cast<uint64_t>(tile) * kTileItems;
  const int tile_valid = static_cast<int>(min(p.n - tile_begin, uint64_t{kTileItems}));
  const int warp_offset = WarpId() * kWarpItems;
  const int warp_valid = max(0, min(tile_valid - warp_offset, kWarpItems));
  const uint64_t thread_begin = tile_begin + warp_offset + LaneId() * kItems;

  T x[kItems];
  WarpLoadBlocked(p.in + tile_begin + warp_offset, warp_valid, IsVectorAligned(p.in),
                  Neutral<T, kOp>(), x, transpose.items[WarpId()]);

  V values[kItems];
  if constexpr (kSegmented) {
    const uint64_t first = p.num_tiles > 1 ? p.tile_first_segment[tile] : 0;
    const uint64_t last = p.num_tiles > 1 ? p.tile_first_segment[tile + 1] : p.num_segments;
    BlockMarkHeads<kTileItems>(p.segment_starts, first, last, tile_begin, tile_valid, heads);
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      values[j] = V{heads[warp_offset + LaneId() * kItems + j], x[j]};
    }
  } else {
#pragma unroll
    for (int j = 0; j < kItems; ++j) values[j] = x[j];
  }

  V thread_total = values[0];
#pragma unroll
  for (int j = 1; j < kItems; ++j) thread_total = op(thread_total, values[j]);

  V neutral;
  if constexpr (kSegmented) {
    neutral = V{0, Neutral<T, kOp>()};
  } else {
    neutral = Neutral<T, kOp>();
  }
  V running, tile_total;
  BlockExclusiveScan(thread_total, op, neutral, running, tile_total, scan_storage);
  if (p.num_tiles > 1) {
    const V tile_prefix = BlockExclusivePrefix(p.status, tile, tile_total, op, tile_prefix_slot);
    if (tile > 0) running = op(tile_prefix, running);
  }

  T y[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    if constexpr (kSegmented) {
      if (p.exclusive) y[j] = values[j].head ? Identity<T>(kOp) : running.value;
      running = op(running, values[j]);
      if (!p.exclusive) y[j] = running.value;
    } else {
      if (p.exclusive) y[j] = thread_begin + j == 0 ? Identity<T>(kOp) : running;
      running = op(running, values[j]);
      if (!p.exclusive) y[j] = running;
    }
  }
  WarpStoreBlocked(p.out + tile_begin + warp_offset, warp_valid, IsVectorAligned(p.out), y,
                   transpose.items[WarpId()]);
}

template <typename T, Op kOp, bool kSegmented>
int LaunchScan(void* temp_storage, size_t* temp_bytes, const T* in, T* out, uint64_t n,
               const uint64_t* starts, uint64_t num_segments, bool exclusive,
               cudaStream_t stream) {
  using Config = ScanConfig<T, kOp, kSegmented>;
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
  if (n == 0) return cudaSuccess;

  ScanParams<T, kOp, kSegmented> params{};
  params.in = in;
  params.out = out;
  params.n = n;
  params.num_tiles = num_tiles;
  params.exclusive = exclusive;
  params.segment_starts = starts;
  params.num_segments = num_segments;
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
  ScanKernel<T, kOp, kSegmented>
      <<<static_cast<unsigned>(num_tiles), kBlockThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

template <bool kSegmented>
int DispatchScan(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
                 uint64_t n, const uint64_t* starts, uint64_t num_segments, DType dtype,
                 Op op, bool exclusive, CUstream_st* stream) {
  if (temp_bytes == nullptr || !IsValidDType(dtype) || !IsCombineOp(op)) {
    return cudaErrorInvalidValue;
  }
  if (temp_storage != nullptr && n > 0 && (d_in == nullptr || d_out == nullptr)) {
    return cudaErrorInvalidValue;
  }
  return VisitDType(dtype, [&](auto type_tag) {
    using T = decltype(type_tag);
    return VisitOp(op, [&](auto op_tag) -> int {
      constexpr Op kOp = decltype(op_tag)::value;
      if constexpr (kOp == Op::kArgMin || kOp == Op::kArgMax) {
        return cudaErrorInvalidValue;
      } else {
        return LaunchScan<T, kOp, kSegmented>(temp_storage, temp_bytes,
                                              static_cast<const T*>(d_in), static_cast<T*>(d_out),
                                              n, starts, num_segments, exclusive, stream);
      }
    });
  });
}

}  // namespace

int Scan(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out, uint64_t n,
         DType dtype, Op op, bool exclusive, CUstream_st* stream) {
  return DispatchScan<false>(temp_storage, temp_bytes, d_in, d_out, n, nullptr, 0, dtype, op,
                             exclusive, stream);
}

int SegmentedScan(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
                  uint64_t n, const uint64_t* d_segment_starts, uint64_t num_segments,
                  DType dtype, Op op, bool exclusive, CUstream_st* stream) {
  if (num_segments == 0) {
    return Scan(temp_storage, temp_bytes, d_in, d_out, n, dtype, op, exclusive, stream);
  }
  if (temp_storage != nullptr && d_segment_starts == nullptr) return cudaErrorInvalidValue;
  return DispatchScan<true>(temp_storage, temp_bytes, d_in, d_out, n, d_segment_starts,
                            num_segments, dtype, op, exclusive, stream);
}

}  // namespace primserve::gpu
