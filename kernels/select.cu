// Select, Partition and Unique: one fused pass with decoupled look-back over
// the kept counts (kernels/select.h). Per tile:
//   1. take the next tile index from the look-back counter;
//   2. load the tile (16-byte vectors, striped per warp), evaluate keep
//      (predicate, flags, or "differs from predecessor" for Unique);
//   3. rank kept items with one ballot per item slot + popc, warp totals in
//      shared memory -> tile count;
//   4. stage kept items (and, for Partition, rejected ones after them) into
//      shared memory at their tile-local rank while warp 0 looks back for
//      the tile's exclusive kept prefix;
//   5. write the staged items out contiguously (coalesced).
// The look-back value is the kept count: uint32 (packed status word, no
// fences) when n < 2^32, uint64 otherwise.
#include "kernels/select.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/detail/compaction.cuh"
#include "kernels/detail/device_info.cuh"
#include "kernels/detail/lookback.cuh"
#include "kernels/primitives.h"

namespace primserve::gpu {
namespace {

using detail::kCompactBlock;
using detail::kCompactWarps;
using detail::Striped;
namespace pd = ::primserve::detail;

enum KeepMode : int { kByPredicate = 0, kByFlags = 1, kByUnique = 2 };

template <typename T, typename OffsetT>
struct SelectParams {
  const T* in;
  const uint8_t* flags;
  uint64_t n;
  Predicate<T> pred;
  T* values_out;
  int64_t* indices_out;
  uint64_t* num_selected;
  const unsigned long long* num_kept;  // Partition: the counting pass's total
  bool partition;
  bool vector_ok;  // in (and flags) aligned for vector loads
  int64_t num_tiles;
  pd::TileStatus<OffsetT> status;
};

struct PlusOp {
  template <typename U>
  __device__ U operator()(U a, U b) const { return a + b; }
};

// Loads tile `tile`'s inputs into registers (striped layout): the values
// when needed, and for kByFlags the flags as kVec-byte words per vector.
template <typename T, typename OffsetT, int kMode>
__device__ __forceinline__ void LoadSelectTile(
    const SelectParams<T, OffsetT>& p, int64_t tile, bool need_values,
    T (&items)[Striped<T>::kNumVec][Striped<T>::kVec],
    bool (&flag)[Striped<T>::kNumVec][Striped<T>::kVec]) {
  using S = Striped<T>;
  const uint64_t tile_base = static_cast<uint64_t>(tile) * S::kTileItems;
  const uint64_t remaining = p.n - tile_base;
  const int valid = remaining < static_cast<uint64_t>(S::kTileItems)
                        ? static_cast<int>(remaining)
                        : S::kTileItems;
  if (need_values) {
    detail::LoadStripedTile<T>(p.in, tile_base, valid, p.vector_ok, items);
  }
  if constexpr (kMode == kByFlags) {
    detail::LoadStripedFlags<T>(p.flags, tile_base, valid, p.vector_ok, flag);
  }
}

// Persistent blocks: each takes tiles from the look-back counter in order
// and, while it ranks, stages, looks back and writes tile i, already has
// the loads of its next tile in flight (register double-buffering), so the
// look-back and write phases do not leave HBM idle. Every tile depends only
// on smaller tiles, and the holder of a tile works on it or on a smaller one
// first, so the look-back cannot deadlock.
template <typename T, typename OffsetT, int kMode>
__global__ void __launch_bounds__(kCompactBlock, 4)
    SelectKernel(const SelectParams<T, OffsetT> p) {
  using S = Striped<T>;
  constexpr int kNumVec = S::kNumVec, kVec = S::kVec;
  __shared__ __align__(16) T s_values[S::kTileItems];
  __shared__ uint16_t s_index[S::kTileItems];
  __shared__ int s_warp_count[kCompactWarps];
  __shared__ int64_t s_tile;
  __shared__ OffsetT s_prefix;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool need_values = kMode != kByFlags || p.values_out != nullptr;

  if (threadIdx.x == 0) s_tile = p.status.AcquireTileIndex();
  __syncthreads();
  int64_t tile = s_tile;
  T items[kNumVec][kVec];
  bool flag[kNumVec][kVec];
  if (tile < p.num_tiles) LoadSelectTile<T, OffsetT, kMode>(p, tile, need_values, items, flag);

  while (tile < p.num_tiles) {
    __syncthreads();  // everyone has read s_tile (and the previous tile's smem)
    if (threadIdx.x == 0) s_tile = p.status.AcquireTileIndex();  // next tile
    const uint64_t tile_base = static_cast<uint64_t>(tile) * S::kTileItems;
    const uint64_t remaining = p.n - tile_base;
    const int valid = remaining < static_cast<uint64_t>(S::kTileItems)
                          ? static_cast<int>(remaining)
                          : S::kTileItems;

    // Keep bits of this thread's items: bit v * kVec + e.
    uint32_t keep_bits = 0;
    if constexpr (kMode == kByFlags) {
#pragma unroll
      for (int v = 0; v < kNumVec; ++v)
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          keep_bits |= (flag[v][e] ? 1u : 0u) << (v * kVec + e);
    } else if constexpr (kMode == kByPredicate) {
#pragma unroll
      for (int v = 0; v < kNumVec; ++v)
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          keep_bits |= (S::LocalIndex(warp, lane, v, e) < valid && p.pred(items[v][e]) ? 1u : 0u)
                       << (v * kVec + e);
    } else {  // Unique: kept when different from the predecessor.
      // Predecessor of (v, 0): lane-1's last item of vector v; for lane 0,
      // lane 31's last item of vector v-1; for lane 0 of vector 0, the item
      // before this warp's chunk (global memory).
#pragma unroll
      for (int v = 0; v < kNumVec; ++v) {
        const T up = pd::ShuffleUp(items[v][kVec - 1], 1);
        const T last_of_prev_vec =
            pd::ShuffleIdx(items[v > 0 ? v - 1 : 0][kVec - 1], 31);
        T before = up;
        if (lane == 0) {
          const uint64_t g0 = tile_base + static_cast<uint64_t>(
                                              S::LocalIndex(warp, lane, v, 0));
          if (v > 0) {
            before = last_of_prev_vec;
          } else if (g0 > 0 && g0 < p.n) {
            before = detail::LoadStreaming(p.in + g0 - 1);
          }
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const int j = S::LocalIndex(warp, lane, v, e);
          const T prev = e == 0 ? before : items[v][e > 0 ? e - 1 : 0];
          const bool k =
              j < valid && (tile_base + j == 0 || !BitEqual(items[v][e], prev));
          keep_bits |= (k ? 1u : 0u) << (v * kVec + e);
        }
      }
    }

    // Ranks: base[v] = kept items of this warp's chunk before this lane's
    // vector v (earlier vectors + lower lanes of vector v).
    const unsigned below_mask = (1u << lane) - 1u;
    int base[kNumVec];
    int running = 0;
#pragma unroll
    for (int v = 0; v < kNumVec; ++v) {
      int below = 0, total = 0;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const unsigned b = __ballot_sync(0xffffffffu, (keep_bits >> (v * kVec + e)) & 1u);
        below += __popc(b & below_mask);
        total += __popc(b);
      }
      base[v] = running + below;
      running += total;
    }
    if (lane == 0) s_warp_count[warp] = running;
    __syncthreads();
    const int64_t next_tile = s_tile;
    int warp_before = 0, tile_count = 0;
#pragma unroll
    for (int w = 0; w < kCompactWarps; ++w) {
      const int c = s_warp_count[w];
      warp_before += w < warp ? c : 0;
      tile_count += c;
    }

    // Stage at tile-local positions: kept at their rank, rejected
    // (Partition) after all kept ones, at tile_count + (rejected rank).
#pragma unroll
    for (int v = 0; v < kNumVec; ++v) {
      const uint32_t vbits = (keep_bits >> (v * kVec)) & ((1u << kVec) - 1u);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const int j = S::LocalIndex(warp, lane, v, e);
        const int kept_before = warp_before + base[v] + __popc(vbits & ((1u << e) - 1u));
        int pos = -1;
        if ((vbits >> e) & 1u) {
          pos = kept_before;
        } else if (p.partition && j < valid) {
          pos = tile_count + (j - kept_before);
        }
        if (pos >= 0) {
          if (p.values_out != nullptr) s_values[pos] = items[v][e];
          if (p.indices_out != nullptr) s_index[pos] = static_cast<uint16_t>(j);
        }
      }
    }
    // The next tile's loads go out now, to overlap the look-back and writes.
    if (next_tile < p.num_tiles) LoadSelectTile<T, OffsetT, kMode>(p, next_tile, need_values, items, flag);

    // Look-back (warp 0) for the tile's exclusive kept prefix; ends with a
    // barrier, so the staged items are visible after it.
    const OffsetT prefix_raw = pd::BlockExclusivePrefix(
        p.status, tile, static_cast<OffsetT>(tile_count), PlusOp{}, s_prefix);
    const uint64_t prefix = tile == 0 ? 0 : static_cast<uint64_t>(prefix_raw);

    // Write out, coalesced.
    const int limit = p.partition ? valid : tile_count;
    const uint64_t rejected_base =
        p.partition ? static_cast<uint64_t>(*p.num_kept) + (tile_base - prefix) -
                          static_cast<uint64_t>(tile_count)
                    : 0;
    for (int j = threadIdx.x; j < limit; j += kCompactBlock) {
      const uint64_t dst =
          j < tile_count ? prefix + j : rejected_base + static_cast<uint64_t>(j);
      if (p.values_out != nullptr) p.values_out[dst] = s_values[j];
      if (p.indices_out != nullptr) {
        p.indices_out[dst] = static_cast<int64_t>(tile_base + s_index[j]);
      }
    }
    if (p.num_selected != nullptr && tile == p.num_tiles - 1 && threadIdx.x == 0) {
      *p.num_selected = prefix + static_cast<uint64_t>(tile_count);
    }
    tile = next_tile;
  }
}

// Partition's counting pass: the number kept, into *total (zeroed first).
template <typename T, typename Keep>
__global__ void __launch_bounds__(kCompactBlock)
    CountKeptKernel(const T* in, uint64_t n, Keep keep, bool vector_ok,
                    unsigned long long* total) {
  constexpr int kPerVec = 16 / static_cast<int>(sizeof(T));
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * kCompactBlock;
  const uint64_t gtid =
      static_cast<uint64_t>(blockIdx.x) * kCompactBlock + threadIdx.x;
  unsigned count = 0;
  uint64_t scalar_begin = 0;
  if (vector_ok) {
    const uint64_t num_vec = n / kPerVec;
    const uint4* src = reinterpret_cast<const uint4*>(in);
    uint64_t i = gtid;
    for (; i + 3 * stride < num_vec; i += 4 * stride) {
      uint4 q[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) q[u] = __ldcs(src + i + u * stride);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        T x[kPerVec];
        memcpy(x, &q[u], 16);
#pragma unroll
        for (int e = 0; e < kPerVec; ++e) count += keep(x[e]) ? 1u : 0u;
      }
    }
    for (; i < num_vec; i += stride) {
      const uint4 q = __ldcs(src + i);
      T x[kPerVec];
      memcpy(x, &q, 16);
#pragma unroll
      for (int e = 0; e < kPerVec; ++e) count += keep(x[e]) ? 1u : 0u;
    }
    scalar_begin = num_vec * kPerVec;
  }
  for (uint64_t i = scalar_begin + gtid; i < n; i += stride) {
    count += keep(in[i]) ? 1u : 0u;
  }
  const unsigned warp_total = __reduce_add_sync(0xffffffffu, count);
  if ((threadIdx.x & 31) == 0 && warp_total != 0) {
    atomicAdd(total, static_cast<unsigned long long>(warp_total));
  }
}

struct FlagKeep {
  __device__ bool operator()(uint8_t f) const { return f != 0; }
};

template <typename T>
struct PredKeep {
  Predicate<T> pred;
  __device__ bool operator()(T x) const { return pred(x); }
};

template <typename T>
Predicate<T> ToPredicate(const SelectKeep& keep) {
  Predicate<T> pred;
  pred.kind = keep.kind;
  memcpy(&pred.operand, keep.operand, sizeof(T));
  memcpy(&pred.upper, keep.upper, sizeof(T));
  return pred;
}

template <typename T>
int64_t NumTiles(uint64_t n) {
  return static_cast<int64_t>((n + Striped<T>::kTileItems - 1) /
                              Striped<T>::kTileItems);
}

// Temp bytes for a select-kernel pass over n items of T.
template <typename T>
size_t SelectTempBytes(uint64_t n) {
  return n < (1ull << 32)
             ? detail::CompactionTempBytes<uint32_t>(NumTiles<T>(n))
             : detail::CompactionTempBytes<uint64_t>(NumTiles<T>(n));
}

template <typename T, typename OffsetT, int kMode>
int RunSelect(void* d_temp, const T* in, uint64_t n, const SelectKeep& keep,
              bool partition, T* values_out, int64_t* indices_out,
              uint64_t* num_selected, cudaStream_t stream) {
  const int64_t num_tiles = NumTiles<T>(n);
  auto* header = static_cast<unsigned long long*>(d_temp);
  pd::TileStatus<OffsetT> status(static_cast<char*>(d_temp) + detail::kHeaderBytes,
                                 num_tiles);
  if (int e = detail::LaunchCompactionInit(status, header, stream)) return e;

  SelectParams<T, OffsetT> p{};
  p.in = in;
  p.flags = keep.d_flags;
  p.n = n;
  if constexpr (kMode == kByPredicate) p.pred = ToPredicate<T>(keep);
  p.values_out = values_out;
  p.indices_out = indices_out;
  p.num_selected = num_selected;
  p.num_kept = header;
  p.partition = partition;
  constexpr int kVec = Striped<T>::kVec;
  p.vector_ok = (in == nullptr || reinterpret_cast<uintptr_t>(in) % 16 == 0) &&
                (keep.d_flags == nullptr ||
                 reinterpret_cast<uintptr_t>(keep.d_flags) % kVec == 0);
  p.num_tiles = num_tiles;
  p.status = status;

  if (partition) {
    int sms = 0;
    if (int e = detail::MultiprocessorCount(&sms)) return e;
    const unsigned grid = static_cast<unsigned>(sms) * 8;
    if constexpr (kMode == kByFlags) {
      CountKeptKernel<uint8_t, FlagKeep><<<grid, kCompactBlock, 0, stream>>>(
          keep.d_flags, n, FlagKeep{},
          reinterpret_cast<uintptr_t>(keep.d_flags) % 16 == 0, header);
    } else {
      CountKeptKernel<T, PredKeep<T>><<<grid, kCompactBlock, 0, stream>>>(
          in, n, PredKeep<T>{p.pred}, reinterpret_cast<uintptr_t>(in) % 16 == 0,
          header);
    }
    PRIMSERVE_CUDA_TRY(cudaGetLastError());
  }
  // Persistent grid: as many blocks as fit at once, at most one per tile.
  static int blocks_per_sm = 0;  // per instantiation; same on every device here
  if (blocks_per_sm == 0) {
    int b = 0;
    PRIMSERVE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &b, SelectKernel<T, OffsetT, kMode>, kCompactBlock, 0));
    blocks_per_sm = b > 0 ? b : 1;
  }
  int sms = 0;
  if (int e = detail::MultiprocessorCount(&sms)) return e;
  const int64_t resident = static_cast<int64_t>(sms) * blocks_per_sm;
  const int64_t grid = num_tiles < resident ? num_tiles : resident;
  SelectKernel<T, OffsetT, kMode>
      <<<static_cast<unsigned>(grid), kCompactBlock, 0, stream>>>(p);
  return static_cast<int>(cudaGetLastError());
}

template <typename T, int kMode>
int DispatchSelect(void* d_temp, size_t* temp_bytes, const void* d_in,
                   uint64_t n, const SelectKeep& keep, bool partition,
                   void* values_out, int64_t* indices_out,
                   uint64_t* num_selected, cudaStream_t stream) {
  const size_t need = SelectTempBytes<T>(n);
  if (d_temp == nullptr) {
    *temp_bytes = need;
    return 0;
  }
  if (*temp_bytes < need) return static_cast<int>(cudaErrorInvalidValue);
  if (n == 0) {
    if (num_selected != nullptr) {
      PRIMSERVE_CUDA_TRY(cudaMemsetAsync(num_selected, 0, sizeof(uint64_t), stream));
    }
    return 0;
  }
  const T* in = static_cast<const T*>(d_in);
  T* out = static_cast<T*>(values_out);
  if (n < (1ull << 32)) {
    return RunSelect<T, uint32_t, kMode>(d_temp, in, n, keep, partition, out,
                                         indices_out, num_selected, stream);
  }
  return RunSelect<T, uint64_t, kMode>(d_temp, in, n, keep, partition, out,
                                       indices_out, num_selected, stream);
}

bool ValidDType(DType d) {
  return static_cast<int>(d) >= 1 && static_cast<int>(d) <= 6;
}

}  // namespace

int Select(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_in,
           DType dtype, uint64_t n, const SelectKeep& keep, bool partition,
           void* d_values_out, int64_t* d_indices_out,
           uint64_t* d_num_selected, CUstream_st* stream) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (temp_storage_bytes == nullptr || !ValidDType(dtype)) return kInvalid;
  const bool by_flags = keep.d_flags != nullptr;
  if (!by_flags && (static_cast<int>(keep.kind) < 1 ||
                    static_cast<int>(keep.kind) > 8)) {
    return kInvalid;
  }
  if (d_temp_storage != nullptr && n > 0) {
    if ((!by_flags || d_values_out != nullptr) && d_in == nullptr) return kInvalid;
    if (partition && d_values_out != nullptr && d_values_out == d_in) return kInvalid;
    if (reinterpret_cast<uintptr_t>(d_temp_storage) % 16 != 0) return kInvalid;
  }
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  if (by_flags) {
    if (DTypeSize(dtype) == 4) {
      return DispatchSelect<uint32_t, kByFlags>(
          d_temp_storage, temp_storage_bytes, d_in, n, keep, partition,
          d_values_out, d_indices_out, d_num_selected, s);
    }
    return DispatchSelect<uint64_t, kByFlags>(
        d_temp_storage, temp_storage_bytes, d_in, n, keep, partition,
        d_values_out, d_indices_out, d_num_selected, s);
  }
  return VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    return DispatchSelect<T, kByPredicate>(
        d_temp_storage, temp_storage_bytes, d_in, n, keep, partition,
        d_values_out, d_indices_out, d_num_selected, s);
  });
}

int Unique(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_in,
           DType dtype, uint64_t n, void* d_out, uint64_t* d_num_unique,
           CUstream_st* stream) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (temp_storage_bytes == nullptr || !ValidDType(dtype)) return kInvalid;
  if (d_temp_storage != nullptr && n > 0) {
    if (d_in == nullptr) return kInvalid;
    if (reinterpret_cast<uintptr_t>(d_temp_storage) % 16 != 0) return kInvalid;
  }
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  const SelectKeep keep;
  if (DTypeSize(dtype) == 4) {
    return DispatchSelect<uint32_t, kByUnique>(d_temp_storage, temp_storage_bytes,
                                               d_in, n, keep, false, d_out,
                                               nullptr, d_num_unique, s);
  }
  return DispatchSelect<uint64_t, kByUnique>(d_temp_storage, temp_storage_bytes,
                                             d_in, n, keep, false, d_out,
                                             nullptr, d_num_unique, s);
}

}  // namespace primserve::gpu
