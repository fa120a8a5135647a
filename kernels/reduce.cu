// Reductions. Reduce: a grid-stride pass (one block per SM slot; a fixed
// grid for float SUM/PROD), each block's partial result into temp storage,
// and the last block to finish (atomic ticket) combines the partials in
// block order: one read of the input, one kernel, and an association fixed
// by n and the grid alone.
// SegmentedReduce: a segmented scan pass (look-back) that writes only each
// segment's last inclusive value, so the work per tile is the same whether
// segments are tiny or huge.
#include "kernels/reduce.h"

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

using namespace detail;

// What a reduction with kOp carries per element: the value itself (in A,
// T or, for SUM/PROD, a wider accumulator that is also the answer's type),
// or a (value, index) candidate for ARGMIN/ARGMAX.
template <typename T, Op kOp, typename A = T>
struct ReduceConfig {
  static constexpr bool kArg = kOp == Op::kArgMin || kOp == Op::kArgMax;
  static_assert(!kArg || std::is_same_v<T, A>, "ARGMIN/ARGMAX answer in the input's type");
  using R = std::conditional_t<kArg, ArgItem<T>, A>;
  using ReduceOp =
      std::conditional_t<kArg, ArgCombineOp<T, kOp == Op::kArgMin>, CombineOp<A, kOp>>;

  __device__ static R Lift(T x, uint64_t index) {
    if constexpr (kArg) {
      return R{x, static_cast<int64_t>(index)};
    } else {
      return static_cast<A>(x);
    }
  }
  // Folds element x at `index` into acc, where every index folded into acc
  // so far is smaller (a thread walking its elements in order): ARG ops then
  // need ArgReplaces only, not the order-free tie-break of ArgCombineOp.
  __device__ static void Accumulate(R& acc, T x, uint64_t index) {
    if constexpr (kArg) {
      if (acc.index == kNoIndex || ArgReplaces(kOp == Op::kArgMin, acc.value, x)) {
        acc = R{x, static_cast<int64_t>(index)};
      }
    } else {
      acc = CombineOp<A, kOp>{}(acc, static_cast<A>(x));
    }
  }
  __device__ static R NeutralValue() {
    if constexpr (kArg) {
      return R{Identity<T>(kOp), kNoIndex};
    } else {
      return Neutral<A, kOp>();
    }
  }
  // Writes a result; ARG results of empty ranges become (Identity, -1).
  __device__ static void Write(const R& r, A* value_out, int64_t* index_out) {
    if constexpr (kArg) {
      const bool empty = r.index == kNoIndex;
      *value_out = empty ? Identity<T>(kOp) : r.value;
      *index_out = empty ? -1 : r.index;
    } else {
      *value_out = r;
    }
  }
  __device__ static void WriteEmpty(A* value_out, int64_t* index_out) {
    *value_out = Identity<A>(kOp);
    if constexpr (kArg) *index_out = -1;
  }
};

// ---------------------------------------------------------------- Reduce

// The better of a and b for ARGMIN (kIsMin) or ARGMAX, NaN if either is NaN
// (float: one min.NaN / max.NaN instruction, sm_80+). Which of two equal
// values (+0.0 / -0.0) it returns does not matter: callers then look for
// the first item that compares equal.
template <typename T, bool kIsMin>
__device__ __forceinline__ T ArgBestOrNan(T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float r;
    if constexpr (kIsMin) {
      asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    } else {
      asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    }
    return r;
#else
    return kIsMin ? PropagatingMin(a, b) : PropagatingMax(a, b);
#endif
  } else {
    return kIsMin ? (b < a ? b : a) : (a < b ? b : a);
  }
}

template <typename T>
inline constexpr int kReduceItems = kBytesPerThread / sizeof(T);
template <typename T>
inline constexpr int kReduceTileItems = kBlockThreads * kReduceItems<T>;

// The grid Reduce launches for n elements, grid_limit blocks at most: one
// block for a small input, else a block per tile up to the limit.
template <typename T>
__host__ __device__ int ReduceGrid(uint64_t n, int grid_limit) {
  const uint64_t tiles = (n + kReduceTileItems<T> - 1) / kReduceTileItems<T>;
  if (n * sizeof(T) <= static_cast<uint64_t>(kReduceSingleBlockMaxBytes)) return 1;
  return static_cast<int>(tiles < static_cast<uint64_t>(grid_limit) ? tiles : grid_limit);
}

template <typename T, Op kOp, typename A = T>
struct ReduceParams {
  using R = typename ReduceConfig<T, kOp, A>::R;
  const T* in;
  uint64_t n;
  R* partials;              // one per block (grid > 1)
  unsigned int* ticket;     // zeroed before the launch (grid > 1)
  A* value_out;
  int64_t* index_out;
  const uint64_t* count;    // nullable: n elements
  int grid_limit;           // with a count: ReduceGrid's limit
};

template <typename T, Op kOp, typename A = T>
__global__ void __launch_bounds__(kBlockThreads) ReduceKernel(const ReduceParams<T, kOp, A> p) {
  using Config = ReduceConfig<T, kOp, A>;
  using R = typename Config::R;
  constexpr int kItems = kReduceItems<T>;
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kTileItems = kReduceTileItems<T>;
  const typename Config::ReduceOp op{};
  __shared__ BlockScanStorage<R> storage;
  __shared__ bool is_last_block;

  // With a device count (n is then the most elements), the blocks of the
  // grid Reduce launches for the count do its work, in its association (the
  // same bits), and the others leave; no grid is larger than the launched
  // one, and a grid > 1 had its ticket zeroed.
  const uint64_t n = p.count != nullptr ? min(*p.count, p.n) : p.n;
  const unsigned grid =
      p.count != nullptr ? static_cast<unsigned>(ReduceGrid<T>(n, p.grid_limit)) : gridDim.x;
  if (blockIdx.x >= grid) return;

  R acc = Config::NeutralValue();
  const uint64_t full_tiles = n / kTileItems;
  const bool vector_ok = IsVectorAligned(p.in);
  for (uint64_t tile = blockIdx.x; tile < full_tiles; tile += grid) {
    const uint64_t tile_begin = tile * kTileItems;
    T x[kItems];
    if (vector_ok) {
      const uint4* vectors = reinterpret_cast<const uint4*>(p.in + tile_begin);
#pragma unroll
      for (int k = 0; k < kItems / kVec; ++k) {
        const uint4 vector = vectors[k * kBlockThreads + threadIdx.x];
        memcpy(x + k * kVec, &vector, 16);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kItems / kVec; ++k) {
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
          x[k * kVec + v] = p.in[tile_begin + (k * kBlockThreads + threadIdx.x) * kVec + v];
        }
      }
    }
    if constexpr (!Config::kArg && std::is_floating_point_v<T> &&
                  (kOp == Op::kMin || kOp == Op::kMax)) {
      // Float MIN/MAX: a tile without NaN folds as integer min/max over
      // ordered keys (operators.cuh), then joins acc through the op once.
      bool any_nan = false;
#pragma unroll
      for (int j = 0; j < kItems; ++j) any_nan |= IsNan(x[j]);
      if (!any_nan) {
        OrderedKey<T> key = ToOrderedKey(x[0]);
#pragma unroll
        for (int j = 1; j < kItems; ++j) key = CombineOrderedKeys<kOp>(key, ToOrderedKey(x[j]));
        acc = op(acc, FromOrderedKey<T>(key));
        continue;
      }
    }
    if constexpr (Config::kArg && !std::is_same_v<T, double>) {
      // ARGMIN/ARGMAX: this thread's best of the tile by one NaN-propagating
      // min/max per item, then the first item equal to it (one compare per
      // item) joins acc through ArgReplaces, once per tile. A NaN in the
      // tile (rare) takes the item-by-item path (first NaN wins).
      T best = x[0];
#pragma unroll
      for (int j = 1; j < kItems; ++j) best = ArgBestOrNan<T, kOp == Op::kArgMin>(best, x[j]);
      if (!IsNan(best)) {
        int pos = kItems - 1;
        T value = x[kItems - 1];
#pragma unroll
        for (int j = kItems - 2; j >= 0; --j) {
          const bool hit = x[j] == best;
          pos = hit ? j : pos;
          value = hit ? x[j] : value;
        }
        const uint64_t index =
            tile_begin + (static_cast<uint64_t>(pos / kVec) * kBlockThreads + threadIdx.x) * kVec +
            pos % kVec;
        Config::Accumulate(acc, value, index);
        continue;
      }
    }
#pragma unroll
    for (int k = 0; k < kItems / kVec; ++k) {
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const uint64_t index = tile_begin + (k * kBlockThreads + threadIdx.x) * kVec + v;
        Config::Accumulate(acc, x[k * kVec + v], index);
      }
    }
  }
  // The partial last tile, spread over all blocks.
  for (uint64_t i = full_tiles * kTileItems + static_cast<uint64_t>(blockIdx.x) * kBlockThreads +
                    threadIdx.x;
       i < n; i += static_cast<uint64_t>(grid) * kBlockThreads) {
    Config::Accumulate(acc, p.in[i], i);
  }
  acc = BlockReduce(acc, op, storage);
  if (grid == 1) {
    if (threadIdx.x == 0) {
      if (n == 0) {
        Config::WriteEmpty(p.value_out, p.index_out);  // Identity, not Neutral
      } else {
        Config::Write(acc, p.value_out, p.index_out);
      }
    }
    return;
  }

  if (threadIdx.x == 0) {
    StoreCg(p.partials + blockIdx.x, acc);
    __threadfence();  // partial visible before the ticket counts it
    is_last_block = atomicAdd(p.ticket, 1u) == grid - 1;
  }
  __syncthreads();
  if (!is_last_block) return;
  __threadfence();  // see every other block's partial
  R total = Config::NeutralValue();
  for (unsigned b = threadIdx.x; b < grid; b += kBlockThreads) {
    total = op(total, LoadCg(p.partials + b));
  }
  __syncthreads();  // storage reuse
  total = BlockReduce(total, op, storage);
  if (threadIdx.x == 0) Config::Write(total, p.value_out, p.index_out);
}

int ReduceGridLimit() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return -1;
  }
  return sms * kReduceBlocksPerSm;
}

template <typename T, Op kOp, typename A = T>
int LaunchReduce(void* temp_storage, size_t* temp_bytes, const T* in, uint64_t n, A* value_out,
                 int64_t* index_out, cudaStream_t stream, const uint64_t* count = nullptr) {
  using R = typename ReduceConfig<T, kOp, A>::R;
  // Float SUM/PROD: the grid (so the partials, so the bits) is the same on
  // every GPU; other ops give the same result on any grid.
  const int grid_limit =
      AssociationMatters<CombineOp<A, kOp>>::value ? kFixedOrderReduceGrid : ReduceGridLimit();
  if (grid_limit <= 0) return cudaErrorInvalidDevice;
  const int grid = ReduceGrid<T>(n, grid_limit);
  const size_t ticket_bytes = 16;
  const size_t bytes = ticket_bytes + AlignUp16(static_cast<size_t>(grid_limit) * sizeof(R));
  if (temp_storage == nullptr) {
    *temp_bytes = bytes;
    return cudaSuccess;
  }
  if (*temp_bytes < bytes) return cudaErrorInvalidValue;
  ReduceParams<T, kOp, A> params{};
  params.in = in;
  params.n = n;
  params.ticket = static_cast<unsigned int*>(temp_storage);
  params.partials = reinterpret_cast<R*>(static_cast<char*>(temp_storage) + ticket_bytes);
  params.value_out = value_out;
  params.index_out = index_out;
  params.count = count;
  params.grid_limit = grid_limit;
  if (grid > 1) {
    if (const cudaError_t err = cudaMemsetAsync(params.ticket, 0, sizeof(unsigned int), stream);
        err != cudaSuccess) {
      return err;
    }
  }
  ReduceKernel<T, kOp, A><<<grid, kBlockThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

// ------------------------------------------------------- SegmentedReduce

template <typename T, Op kOp, typename A = T>
struct SegmentedReduceConfig {
  using R = typename ReduceConfig<T, kOp, A>::R;
  using V = Flagged<R>;
  using ScanOp = SegmentedOp<R, typename ReduceConfig<T, kOp, A>::ReduceOp>;
  static constexpr int kItems = kItemsPerThread<T, V>;
  static constexpr int kTileItems = kBlockThreads * kItems;
  static constexpr int kWarpItems = kWarpThreads * kItems;
};

template <typename T, Op kOp, typename A = T>
struct SegmentedReduceParams {
  using Config = SegmentedReduceConfig<T, kOp, A>;
  const T* in;
  uint64_t n;
  const uint64_t* segment_starts;
  uint64_t num_segments;
  int64_t num_tiles;
  TileStatus<typename Config::V> status;  // several tiles
  const uint64_t* tile_first_segment;     // several tiles
  A* values_out;
  int64_t* indices_out;
  const uint64_t* count;                  // nullable: n elements
};

// Whether SegmentedReduce takes WarpPerSegmentReduceKernel for n elements.
__host__ __device__ inline bool WarpPerSegment(uint64_t n, uint64_t num_segments) {
  return n <= kWarpPerSegmentMaxAverage * num_segments;
}

// Segment s is written by the tile holding its last element (an empty one:
// the tile holding its start; the last tile also takes those starting at n).
// With a device count (n is then the most elements, every start <= the
// count): launched beside WarpPerSegmentReduceKernel, only the one that
// SegmentedReduce would take for the count works, and only its tiles.
template <typename T, Op kOp, typename A = T>
__global__ void __launch_bounds__(kBlockThreads)
    SegmentedReduceKernel(const SegmentedReduceParams<T, kOp, A> p) {
  using Config = SegmentedReduceConfig<T, kOp, A>;
  using Reduce = ReduceConfig<T, kOp, A>;
  using R = typename Config::R;
  using V = typename Config::V;
  constexpr int kItems = Config::kItems;
  constexpr int kTileItems = Config::kTileItems;
  constexpr int kWarpItems = Config::kWarpItems;
  const typename Config::ScanOp op{};

  __shared__ WarpTransposeStorage<T, kItems> transpose;
  __shared__ BlockScanStorage<V> scan_storage;
  __shared__ V tile_prefix_slot;
  __shared__ int64_t tile_slot;
  __shared__ uint8_t heads[kTileItems];
  __shared__ R inclusive[kTileItems + kTileItems / kWarpThreads];  // Padded()

  const uint64_t n = p.count != nullptr ? min(*p.count, p.n) : p.n;
  const int64_t num_tiles =
      p.count != nullptr ? static_cast<int64_t>((n + kTileItems - 1) / kTileItems) : p.num_tiles;
  if (p.count != nullptr && (WarpPerSegment(n, p.num_segments) || blockIdx.x >= num_tiles)) {
    return;
  }

  int64_t tile = 0;
  if (p.num_tiles > 1) {
    if (threadIdx.x == 0) tile_slot = p.status.AcquireTileIndex();
    __syncthreads();
    tile = tile_slot;
  }
  const uint64_t tile_begin = static_cast<uint64_t>(tile) * kTileItems;
  const int tile_valid =
      n > tile_begin ? static_cast<int>(min(n - tile_begin, uint64_t{kTileItems})) : 0;
  const int warp_offset = WarpId() * kWarpItems;
  const int warp_valid = WarpValid<kWarpItems>(n, tile_begin + warp_offset);
  const int thread_offset = warp_offset + LaneId() * kItems;

  T x[kItems];
  WarpLoadBlocked(p.in + tile_begin + warp_offset, warp_valid, IsVectorAligned(p.in),
                  Identity<T>(kOp), x, transpose.items[WarpId()]);

  const bool last_tile = tile == num_tiles - 1;
  const uint64_t first = p.num_tiles > 1 ? p.tile_first_segment[tile] : 0;
  const uint64_t last =
      p.num_tiles > 1 && !last_tile ? p.tile_first_segment[tile + 1] : p.num_segments;
  BlockMarkHeads<kTileItems>(p.segment_starts, first, last, tile_begin, tile_valid, heads);
  V values[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    values[j] = V{heads[thread_offset + j], Reduce::Lift(x[j], tile_begin + thread_offset + j)};
  }

  V thread_total = values[0];
#pragma unroll
  for (int j = 1; j < kItems; ++j) thread_total = op(thread_total, values[j]);
  V running, tile_total;
  BlockExclusiveScan(thread_total, op, V{0, Reduce::NeutralValue()}, running, tile_total,
                     scan_storage);
  if (p.num_tiles > 1) {
    const V tile_prefix = BlockExclusivePrefix(p.status, tile, tile_total, op, tile_prefix_slot);
    if (tile > 0) running = op(tile_prefix, running);
  }
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    running = op(running, values[j]);
    inclusive[Padded(thread_offset + j)] = running.value;
  }
  __syncthreads();

  // Candidates: the segment running into this tile, and those starting in it.
  for (uint64_t s = (first > 0 ? first - 1 : 0) + threadIdx.x; s < last; s += kBlockThreads) {
    const uint64_t start = p.segment_starts[s];
    const uint64_t end = s + 1 < p.num_segments ? p.segment_starts[s + 1] : n;
    const uint64_t owner_pos = end > start ? end - 1 : start;
    if (owner_pos < tile_begin || (!last_tile && owner_pos >= tile_begin + kTileItems)) continue;
    if (end > start) {
      Reduce::Write(inclusive[Padded(static_cast<int>(end - 1 - tile_begin))], p.values_out + s,
                    p.indices_out + s);
    } else {
      Reduce::WriteEmpty(p.values_out + s, p.indices_out + s);
    }
  }
}

// Many small segments: one warp per segment, no look-back and no tile
// bookkeeping (the scan-based kernel above pays those per tile, which only
// amortizes over long segments). Each lane folds its elements in index order.
// With a device count (nullable; n is then the most elements), it works only
// where SegmentedReduce would take it for the count.
template <typename T, Op kOp, typename A = T>
__global__ void __launch_bounds__(kBlockThreads)
    WarpPerSegmentReduceKernel(const T* in, uint64_t n, const uint64_t* starts,
                               uint64_t num_segments, A* values_out, int64_t* indices_out,
                               const uint64_t* count) {
  using Config = ReduceConfig<T, kOp, A>;
  if (count != nullptr) {
    n = min(*count, n);
    if (!WarpPerSegment(n, num_segments)) return;
  }
  const uint64_t s = (static_cast<uint64_t>(blockIdx.x) * kBlockThreads + threadIdx.x) / kWarpThreads;
  if (s >= num_segments) return;  // whole warps leave together
  const uint64_t begin = starts[s];
  const uint64_t end = s + 1 < num_segments ? starts[s + 1] : n;
  const int lane = LaneId();
  typename Config::R acc = Config::NeutralValue();
  for (uint64_t base = begin; base < end; base += kWarpThreads * kWarpSegmentUnroll) {
    T x[kWarpSegmentUnroll];
#pragma unroll
    for (int k = 0; k < kWarpSegmentUnroll; ++k) {
      const uint64_t i = base + k * kWarpThreads + lane;
      if (i < end) x[k] = in[i];
    }
#pragma unroll
    for (int k = 0; k < kWarpSegmentUnroll; ++k) {
      const uint64_t i = base + k * kWarpThreads + lane;
      if (i < end) Config::Accumulate(acc, x[k], i);
    }
  }
  acc = WarpSuffixReduce(acc, typename Config::ReduceOp{});
  if (lane == 0) {
    if (begin == end) {
      Config::WriteEmpty(values_out + s, indices_out + s);
    } else {
      Config::Write(acc, values_out + s, indices_out + s);
    }
  }
}

template <typename T, Op kOp, typename A = T>
int LaunchSegmentedReduce(void* temp_storage, size_t* temp_bytes, const T* in, uint64_t n,
                          const uint64_t* starts, uint64_t num_segments, A* values_out,
                          int64_t* indices_out, cudaStream_t stream,
                          const uint64_t* count = nullptr) {
  using Config = SegmentedReduceConfig<T, kOp, A>;
  using Status = TileStatus<typename Config::V>;
  const int64_t num_tiles = n == 0 ? 1 : CeilDiv(n, Config::kTileItems);
  const size_t status_bytes = num_tiles > 1 ? Status::StorageBytes(num_tiles) : 0;
  const size_t map_bytes = num_tiles > 1 ? AlignUp16((num_tiles + 1) * sizeof(uint64_t)) : 0;
  const size_t bytes = status_bytes + map_bytes > kMinTempBytes ? status_bytes + map_bytes
                                                                : kMinTempBytes;
  if (temp_storage == nullptr) {
    *temp_bytes = bytes;
    return cudaSuccess;
  }
  if (*temp_bytes < bytes) return cudaErrorInvalidValue;

  // With a device count, a max n past the warp-per-segment bound launches
  // both kernels: the count picks the one that works.
  const bool warp_per_segment = WarpPerSegment(n, num_segments);
  if (warp_per_segment || count != nullptr) {
    const uint64_t blocks = CeilDiv(num_segments, kBlockThreads / kWarpThreads);
    WarpPerSegmentReduceKernel<T, kOp, A><<<static_cast<unsigned>(blocks), kBlockThreads, 0, stream>>>(
        in, n, starts, num_segments, values_out, indices_out, count);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess || warp_per_segment) {
      return err;
    }
  }
  SegmentedReduceParams<T, kOp, A> params{};
  params.in = in;
  params.n = n;
  params.segment_starts = starts;
  params.num_segments = num_segments;
  params.num_tiles = num_tiles;
  params.values_out = values_out;
  params.indices_out = indices_out;
  params.count = count;
  if (num_tiles > 1) {
    params.status = Status(temp_storage, num_tiles);
    uint64_t* map = reinterpret_cast<uint64_t*>(static_cast<char*>(temp_storage) + status_bytes);
    params.tile_first_segment = map;
    const int64_t blocks = CeilDiv(num_tiles + 1, 256);
    InitSegmentedTilesKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
        params.status, starts, num_segments, Config::kTileItems, map);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  SegmentedReduceKernel<T, kOp, A>
      <<<static_cast<unsigned>(num_tiles), kBlockThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace

int WidenedReduce(void* temp_storage, size_t* temp_bytes, const void* d_in, uint64_t n,
                  const uint64_t* d_segment_starts, uint64_t num_segments, DType dtype,
                  DType accumulator, Op op, void* d_values_out, CUstream_st* stream) {
  if (temp_bytes == nullptr) return cudaErrorInvalidValue;
  if (temp_storage != nullptr &&
      ((n > 0 && d_in == nullptr) || d_values_out == nullptr ||
       (num_segments > 1 && d_segment_starts == nullptr))) {
    return cudaErrorInvalidValue;
  }
  return VisitWidening(dtype, accumulator, op, [&](auto type_tag, auto wide_tag, auto op_tag) {
    using T = decltype(type_tag);
    using A = decltype(wide_tag);
    constexpr Op kOp = decltype(op_tag)::value;
    const T* in = static_cast<const T*>(d_in);
    A* values_out = static_cast<A*>(d_values_out);
    // As SegmentedReduce: one segment is the whole input, the plain Reduce.
    if (num_segments <= 1) {
      return LaunchReduce<T, kOp, A>(temp_storage, temp_bytes, in, n, values_out, nullptr,
                                     stream);
    }
    return LaunchSegmentedReduce<T, kOp, A>(temp_storage, temp_bytes, in, n, d_segment_starts,
                                            num_segments, values_out, nullptr, stream);
  });
}

int Reduce(void* temp_storage, size_t* temp_bytes, const void* d_in, uint64_t n, DType dtype,
           Op op, void* d_value_out, int64_t* d_index_out, CUstream_st* stream) {
  if (temp_bytes == nullptr || !IsValidDType(dtype)) return cudaErrorInvalidValue;
  if (temp_storage != nullptr &&
      ((n > 0 && d_in == nullptr) || d_value_out == nullptr ||
       (IsArgOp(op) && d_index_out == nullptr))) {
    return cudaErrorInvalidValue;
  }
  return VisitDType(dtype, [&](auto type_tag) {
    using T = decltype(type_tag);
    return VisitOp(op, [&](auto op_tag) {
      return LaunchReduce<T, decltype(op_tag)::value>(temp_storage, temp_bytes,
                                                      static_cast<const T*>(d_in), n,
                                                      static_cast<T*>(d_value_out), d_index_out,
                                                      stream);
    });
  });
}

int ReduceCounted(void* temp_storage, size_t* temp_bytes, const void* d_in, uint64_t max_n,
                  const uint64_t* d_count, DType dtype, Op op, void* d_value_out,
                  int64_t* d_index_out, CUstream_st* stream) {
  if (temp_bytes == nullptr || !IsValidDType(dtype)) return cudaErrorInvalidValue;
  if (temp_storage != nullptr &&
      ((max_n > 0 && d_in == nullptr) || d_count == nullptr || d_value_out == nullptr ||
       (IsArgOp(op) && d_index_out == nullptr))) {
    return cudaErrorInvalidValue;
  }
  return VisitDType(dtype, [&](auto type_tag) {
    using T = decltype(type_tag);
    return VisitOp(op, [&](auto op_tag) {
      return LaunchReduce<T, decltype(op_tag)::value>(
          temp_storage, temp_bytes, static_cast<const T*>(d_in), max_n,
          static_cast<T*>(d_value_out), d_index_out, stream, d_count);
    });
  });
}

namespace {

// SegmentedReduce, and with a device count (nullable) SegmentedReduceCounted.
int DispatchSegmentedReduce(void* temp_storage, size_t* temp_bytes, const void* d_in,
                            uint64_t n, const uint64_t* count, const uint64_t* d_segment_starts,
                            uint64_t num_segments, DType dtype, Op op, void* d_values_out,
                            int64_t* d_indices_out, CUstream_st* stream) {
  // One segment (its start is 0) is the whole input: the plain Reduce,
  // which needs no look-back and runs at the speed of reading the input.
  if (num_segments <= 1) {
    return count != nullptr ? ReduceCounted(temp_storage, temp_bytes, d_in, n, count, dtype, op,
                                            d_values_out, d_indices_out, stream)
                            : Reduce(temp_storage, temp_bytes, d_in, n, dtype, op, d_values_out,
                                     d_indices_out, stream);
  }
  if (temp_bytes == nullptr || !IsValidDType(dtype)) return cudaErrorInvalidValue;
  if (temp_storage != nullptr &&
      ((n > 0 && d_in == nullptr) || d_values_out == nullptr || d_segment_starts == nullptr ||
       (IsArgOp(op) && d_indices_out == nullptr))) {
    return cudaErrorInvalidValue;
  }
  return VisitDType(dtype, [&](auto type_tag) {
    using T = decltype(type_tag);
    return VisitOp(op, [&](auto op_tag) {
      return LaunchSegmentedReduce<T, decltype(op_tag)::value>(
          temp_storage, temp_bytes, static_cast<const T*>(d_in), n, d_segment_starts,
          num_segments, static_cast<T*>(d_values_out), d_indices_out, stream, count);
    });
  });
}

}  // namespace

int SegmentedReduce(void* temp_storage, size_t* temp_bytes, const void* d_in, uint64_t n,
                    const uint64_t* d_segment_starts, uint64_t num_segments, DType dtype, Op op,
                    void* d_values_out, int64_t* d_indices_out, CUstream_st* stream) {
  return DispatchSegmentedReduce(temp_storage, temp_bytes, d_in, n, nullptr, d_segment_starts,
                                 num_segments, dtype, op, d_values_out, d_indices_out, stream);
}

int SegmentedReduceCounted(void* temp_storage, size_t* temp_bytes, const void* d_in,
                           uint64_t max_n, const uint64_t* d_count,
                           const uint64_t* d_segment_starts, uint64_t num_segments, DType dtype,
                           Op op, void* d_values_out, int64_t* d_indices_out,
                           CUstream_st* stream) {
  if (temp_storage != nullptr && d_count == nullptr) return cudaErrorInvalidValue;
  return DispatchSegmentedReduce(temp_storage, temp_bytes, d_in, max_n, d_count,
                                 d_segment_starts, num_segments, dtype, op, d_values_out,
                                 d_indices_out, stream);
}

}  // namespace primserve::gpu
