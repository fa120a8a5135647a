// Select, Partition and Unique: one fused pass with decoupled look-back over
// the kept counts (kernels/select.h). One 256-thread block per tile; per tile:
//   1. take the next tile index from the look-back counter;
//   2. each warp copies its contiguous chunk of the tile into shared memory
//      (cp.async, 16-byte, coalesced: no registers held while loads fly, so
//      up to 6 tiles stay resident per SM);
//   3. each warp evaluates keep (a branch-free range test for every
//      predicate kind, flags, or "differs from predecessor" for Unique),
//      ranks with one ballot per item slot + popc and compacts its kept
//      items to the front of its chunk in place (Partition: the values stay
//      where they are, and the tile-local indices of the kept items go to the
//      front of the chunk's index array, those of the rejected ones to its
//      back, last first);
//   4. barrier; warp 0 publishes the tile count at once and looks back for
//      the exclusive prefix; barrier;
//   5. each warp writes its compacted chunk out contiguously.
// The look-back value is the kept count: uint32 (packed status word, no
// fences) when n < 2^32, uint64 otherwise.
#include "kernels/runs.h"
#include "kernels/select.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/detail/block.cuh"
#include "kernels/detail/compaction.cuh"
#include "kernels/detail/device_info.cuh"
#include "kernels/detail/lookback.cuh"
#include "kernels/detail/range_keep.cuh"
#include "core/primitives.h"

namespace primserve::gpu {
namespace {

using detail::kCompactBlock;
using detail::kCompactWarps;

enum KeepMode : int { kByPredicate = 0, kByFlags = 1, kByUnique = 2 };

template <typename T, typename OffsetT>
struct SelectParams {
  const T* in;
  const uint8_t* flags;
  uint64_t n;
  detail::RangeKeep<T> keep;
  T* values_out;
  int64_t* indices_out;
  uint64_t* num_selected;
  const unsigned long long* num_kept;  // Partition of 2+ tiles: the counting pass's total
  bool partition;
  bool vector_ok;  // in (and flags) aligned for 16-byte (flags: kVec-byte) loads
  int64_t num_tiles;
  detail::TileStatus<OffsetT> status;
};

struct PlusOp {
  template <typename U>
  __device__ U operator()(U a, U b) const { return a + b; }
};

// Tile shape: kBlock threads; warp w owns the contiguous chunk
// [w * kWarpItems, (w + 1) * kWarpItems) of the tile, and in it lane l's
// vector v is the kVec items at (v * 32 + l) * kVec (16 bytes).
template <typename T, int kNumVec_>
struct SelectTile {
  static constexpr int kBlock = kCompactBlock;
  static constexpr int kWarps = kBlock / 32;
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  static constexpr int kNumVec = kNumVec_;
  static constexpr int kItems = kVec * kNumVec;
  static constexpr int kWarpItems = 32 * kItems;
  static constexpr int kTileItems = kBlock * kItems;
  static_assert(kTileItems <= 65536, "tile-local indices are uint16");
};

// Dynamic shared memory of a select block, in this order (each region only
// when needed): values [kTileItems] (the loaded tile; Select and Unique:
// each warp compacts its kept values to the front of its own chunk, in
// place), tile-local indices [kTileItems] uint16 (Select: of the kept items,
// in order; Partition: of the kept items from the front of the warp's chunk
// and of the rejected ones from its back, so that one array serves both and
// a partition block needs 48 KB (4-byte values) instead of 64: 4 blocks per
// SM instead of 3).
struct SelectSmem {
  bool values, indices;
  template <typename S, typename T>
  __host__ __device__ size_t Bytes() const {
    return S::kTileItems * ((values ? sizeof(T) : 0) + (indices ? 2 : 0));
  }
};

// One warp: ranks and stages vector v of its chunk (values already in
// w_vals). kFull: every item of the warp's chunk is in range.
template <typename S, int kMode, bool kFull, typename T, typename OffsetT, typename U>
__device__ __forceinline__ void StageWarpChunk(
    const SelectParams<T, OffsetT>& p, const SelectSmem& sm, U* w_vals, uint16_t* w_idx,
    const uint32_t (&flag_words)[S::kNumVec],
    U before_chunk, bool chunk_is_first, int warp_first, int warp_valid, int& kept_out) {
  constexpr int kVec = S::kVec;
  const int lane = threadIdx.x % 32;
  const unsigned below_mask = (1u << lane) - 1u;
  int kept = 0, rejected = 0;
  U last_of_prev_vec = before_chunk;  // lane 0's predecessor of (v, 0) (Unique)
#pragma unroll
  for (int v = 0; v < S::kNumVec; ++v) {
    const int j0 = (v * 32 + lane) * kVec;  // chunk-local index of item (v, 0)
    U x[kVec];
    if (sm.values) {
      if constexpr (kVec == 4) {
        const uint4 q = *reinterpret_cast<const uint4*>(w_vals + j0);
        memcpy(x, &q, 16);
      } else {
        const ulonglong2 q = *reinterpret_cast<const ulonglong2*>(w_vals + j0);
        memcpy(x, &q, 16);
      }
    }
    uint32_t bits = 0;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      bool k;
      if constexpr (kMode == kByPredicate) {
        k = p.keep.OnBits(x[e]);
      } else if constexpr (kMode == kByFlags) {
        k = ((flag_words[v] >> (8 * e)) & 0xffu) != 0;
      } else {  // Unique: differs from the predecessor (bit patterns)
        U prev;
        if (e > 0) {
          prev = x[e > 0 ? e - 1 : 0];
        } else {
          prev = detail::ShuffleUp(x[kVec - 1], 1);
          if (lane == 0) prev = last_of_prev_vec;
        }
        k = x[e] != prev || (e == 0 && lane == 0 && v == 0 && chunk_is_first);
      }
      if (!kFull) k = k && j0 + e < warp_valid;
      bits |= (k ? 1u : 0u) << e;
    }
    if constexpr (kMode == kByUnique) {
      last_of_prev_vec = detail::ShuffleIdx(x[kVec - 1], 31);
    }
    int below = 0, total = 0;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const unsigned b = __ballot_sync(0xffffffffu, (bits >> e) & 1u);
      below += __popc(b & below_mask);
      total += __popc(b);
    }
    // Kept: to the front of the chunk, in place (positions never above the
    // item's own, so only vector v and earlier are overwritten). Every lane
    // must have read vector v first: the barrier makes that an ordering the
    // memory model guarantees, not one the ballots give only in practice.
    __syncwarp();
    int pos = kept + below;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      if ((bits >> e) & 1u) {
        if (sm.values && !p.partition) w_vals[pos] = x[e];
        if (sm.indices) w_idx[pos] = static_cast<uint16_t>(warp_first + j0 + e);
        ++pos;
      }
    }
    if (p.partition) {
      // In-range items of this vector before this lane / in all lanes.
      const int vec_first = v * 32 * kVec;
      const int in_below = kFull ? lane * kVec : min(max(warp_valid - vec_first, 0), lane * kVec);
      const int in_total = kFull ? 32 * kVec : min(max(warp_valid - vec_first, 0), 32 * kVec);
      int rpos = rejected + in_below - below;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if (!((bits >> e) & 1u) && (kFull || j0 + e < warp_valid)) {
          w_idx[S::kWarpItems - 1 - rpos] = static_cast<uint16_t>(warp_first + j0 + e);
          ++rpos;
        }
      }
      rejected += in_total - total;
    }
    kept += total;
  }
  kept_out = kept;
}

// One tile per block; the tile index comes from the look-back counter (block
// start order), so every earlier tile is already held by a running block.
// Per tile: each warp copies its chunk into shared memory (cp.async, no
// registers held), ranks it with ballots and compacts its kept items to the
// chunk's front; one barrier gives the tile count, which warp 0 publishes
// and looks back with; after the second barrier each warp writes its
// compacted chunk out (coalesced).
template <typename T, typename OffsetT, int kMode, int kNumVec>
__global__ void __launch_bounds__(kCompactBlock, detail::kSelectMinBlocksPerSm)
    SelectKernel(const SelectParams<T, OffsetT> p, const SelectSmem sm) {
  using S = SelectTile<T, kNumVec>;
  using U = detail::UBits<T>;
  extern __shared__ __align__(16) unsigned char select_smem[];
  __shared__ int s_warp_count[S::kWarps];
  __shared__ int64_t s_tile;
  __shared__ OffsetT s_prefix;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // A single tile takes index 0 without the counter (see RunSelect).
  if (threadIdx.x == 0) s_tile = p.num_tiles > 1 ? p.status.AcquireTileIndex() : 0;
  __syncthreads();
  const int64_t tile = s_tile;
  const uint64_t tile_base = static_cast<uint64_t>(tile) * S::kTileItems;
  const uint64_t remaining = p.n - tile_base;
  const int valid = remaining < static_cast<uint64_t>(S::kTileItems) ? static_cast<int>(remaining)
                                                                     : S::kTileItems;
  const int warp_first = warp * S::kWarpItems;
  const int warp_valid = detail::WarpValid<S::kWarpItems>(p.n, tile_base + warp_first);
  const bool full = warp_valid == S::kWarpItems;

  U* s_vals = reinterpret_cast<U*>(select_smem);
  uint16_t* s_idx =
      reinterpret_cast<uint16_t*>(select_smem + (sm.values ? S::kTileItems * sizeof(U) : 0));
  U* w_vals = s_vals + warp_first;
  uint16_t* w_idx = s_idx + warp_first;

  // Load the warp's chunk.
  const U* g_in = reinterpret_cast<const U*>(p.in) + tile_base + warp_first;
  if (sm.values) {
    if (full && p.vector_ok) {
#pragma unroll
      for (int v = 0; v < S::kNumVec; ++v) {
        const int j = (v * 32 + lane) * S::kVec;
        detail::CopyAsync16(w_vals + j, g_in + j);
      }
      detail::CopyAsyncWaitAll();
    } else {
      for (int j = lane; j < warp_valid; j += 32) w_vals[j] = detail::LoadStreaming(g_in + j);
    }
  }
  uint32_t flag_words[S::kNumVec];
  if constexpr (kMode == kByFlags) {
    const uint8_t* g_flags = p.flags + tile_base + warp_first;
#pragma unroll
    for (int v = 0; v < S::kNumVec; ++v) {
      const int j = (v * 32 + lane) * S::kVec;
      if (full && p.vector_ok) {
        if constexpr (S::kVec == 4) {
          flag_words[v] = __ldcs(reinterpret_cast<const unsigned int*>(g_flags + j));
        } else {
          flag_words[v] = __ldcs(reinterpret_cast<const unsigned short*>(g_flags + j));
        }
      } else {
        uint32_t w = 0;
#pragma unroll
        for (int e = 0; e < S::kVec; ++e) {
          if (j + e < warp_valid && g_flags[j + e] != 0) w |= 1u << (8 * e);
        }
        flag_words[v] = w;
      }
    }
  }
  U before_chunk = 0;
  const uint64_t chunk_global = tile_base + warp_first;
  if constexpr (kMode == kByUnique) {
    if (lane == 0 && chunk_global > 0 && warp_valid > 0) {
      before_chunk = detail::LoadStreaming(reinterpret_cast<const U*>(p.in) + chunk_global - 1);
    }
  }
  __syncwarp();

  int kept = 0;
  if (warp_valid > 0) {
    if (full) {
      StageWarpChunk<S, kMode, true>(p, sm, w_vals, w_idx, flag_words,
                                     before_chunk, chunk_global == 0, warp_first, warp_valid,
                                     kept);
    } else {
      StageWarpChunk<S, kMode, false>(p, sm, w_vals, w_idx, flag_words,
                                      before_chunk, chunk_global == 0, warp_first, warp_valid,
                                      kept);
    }
  }
  if (lane == 0) s_warp_count[warp] = kept;
  __syncthreads();
  int warp_before = 0, tile_count = 0;
#pragma unroll
  for (int w = 0; w < S::kWarps; ++w) {
    const int c = s_warp_count[w];
    warp_before += w < warp ? c : 0;
    tile_count += c;
  }
  // Publishes the tile's count at once, then looks back (warp 0); ends with
  // a barrier.
  const OffsetT prefix_raw = detail::BlockExclusivePrefix<detail::CompactLookback>(
      p.status, tile, static_cast<OffsetT>(tile_count), PlusOp{}, s_prefix);
  const uint64_t prefix = tile == 0 ? 0 : static_cast<uint64_t>(prefix_raw);

  // Write out the warp's compacted chunk (its own shared region: no barrier).
  const uint64_t out_base = prefix + static_cast<uint64_t>(warp_before);
  U* values_out = reinterpret_cast<U*>(p.values_out);
  if (!p.partition) {
    for (int i = lane; i < kept; i += 32) {
      if (sm.values && values_out != nullptr) values_out[out_base + i] = w_vals[i];
      if (sm.indices) {
        p.indices_out[out_base + i] = static_cast<int64_t>(tile_base + w_idx[i]);
      }
    }
  } else {
    // Items through their tile-local indices: the kept ones from the front of
    // the warp's index chunk, the rejected ones from its back (last first).
    // Rejected before this warp: all in earlier tiles, plus this tile's
    // in-range items of earlier warps not kept. A single tile knows the
    // total kept itself (no counting pass).
    const uint64_t num_kept = p.num_tiles == 1 ? static_cast<uint64_t>(tile_count)
                                               : static_cast<uint64_t>(*p.num_kept);
    const uint64_t rejected_base = num_kept + (tile_base - prefix) +
                                   static_cast<uint64_t>(min(warp_first, valid) - warp_before);
    for (int i = lane; i < warp_valid; i += 32) {
      const bool is_kept = i < kept;
      const int j = w_idx[is_kept ? i : S::kWarpItems - 1 - (i - kept)];
      const uint64_t at = is_kept ? out_base + i : rejected_base + (i - kept);
      if (values_out != nullptr) values_out[at] = s_vals[j];
      if (p.indices_out != nullptr) p.indices_out[at] = static_cast<int64_t>(tile_base + j);
    }
  }
  if (p.num_selected != nullptr && tile == p.num_tiles - 1 && threadIdx.x == 0) {
    *p.num_selected = prefix + static_cast<uint64_t>(tile_count);
  }
}

// Partition's counting pass: the number kept, into *total (zeroed first),
// one atomic per block (one per warp made 8K same-address atomics at 2^20).
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
  __shared__ unsigned s_warp_total[kCompactWarps];
  const unsigned warp_total = __reduce_add_sync(0xffffffffu, count);
  if ((threadIdx.x & 31) == 0) s_warp_total[threadIdx.x / 32] = warp_total;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned block_total = 0;
#pragma unroll
    for (int w = 0; w < kCompactWarps; ++w) block_total += s_warp_total[w];
    if (block_total != 0) atomicAdd(total, static_cast<unsigned long long>(block_total));
  }
}

// Blocks of a counting pass over n items of Item: one 16-byte vector per
// thread up to 8 blocks per SM (small inputs launch only what they need).
template <typename Item>
unsigned CountKeptGrid(uint64_t n, int sms) {
  constexpr uint64_t kBlockItems = kCompactBlock * (16 / sizeof(Item));
  const uint64_t need = (n + kBlockItems - 1) / kBlockItems;
  const uint64_t most = static_cast<uint64_t>(sms) * 8;
  return static_cast<unsigned>(need < most ? (need > 0 ? need : 1) : most);
}

struct FlagKeep {
  __device__ bool operator()(uint8_t f) const { return f != 0; }
};

template <typename T>
detail::RangeKeep<T> ToRangeKeep(const SelectKeep& keep) {
  Predicate<T> pred;
  pred.kind = keep.kind;
  memcpy(&pred.operand, keep.operand, sizeof(T));
  memcpy(&pred.upper, keep.upper, sizeof(T));
  return detail::RangeKeep<T>::From(pred);
}

template <typename T, int kNumVec>
int64_t NumTiles(uint64_t n) {
  constexpr int kTile = SelectTile<T, kNumVec>::kTileItems;
  return static_cast<int64_t>((n + kTile - 1) / kTile);
}

using detail::kSelectNumVec;

// Temp bytes for a select-kernel pass over n items of T.
template <typename T>
size_t SelectTempBytes(uint64_t n) {
  return n < (1ull << 32)
             ? detail::CompactionTempBytes<uint32_t>(NumTiles<T, kSelectNumVec>(n))
             : detail::CompactionTempBytes<uint64_t>(NumTiles<T, kSelectNumVec>(n));
}

template <typename T, typename OffsetT, int kMode, int kNumVec>
int RunSelect(void* d_temp, const T* in, uint64_t n, const SelectKeep& keep,
              bool partition, T* values_out, int64_t* indices_out,
              uint64_t* num_selected, cudaStream_t stream) {
  using S = SelectTile<T, kNumVec>;
  const int64_t num_tiles = NumTiles<T, kNumVec>(n);
  auto* header = static_cast<unsigned long long*>(d_temp);
  detail::TileStatus<OffsetT> status(static_cast<char*>(d_temp) + detail::kHeaderBytes,
                                 num_tiles);
  // A single tile needs no reset: it takes tile 0 without the counter, its
  // published slot is never read, and Partition skips the counting pass.
  // One launch instead of two (about 2 us of a small select's time).
  if (num_tiles > 1) {
    if (int e = detail::LaunchCompactionInit(status, header, stream)) return e;
  }

  SelectParams<T, OffsetT> p{};
  p.in = in;
  p.flags = keep.d_flags;
  p.n = n;
  if constexpr (kMode == kByPredicate) p.keep = ToRangeKeep<T>(keep);
  p.values_out = values_out;
  p.indices_out = indices_out;
  p.num_selected = num_selected;
  p.num_kept = header;
  p.partition = partition;
  p.vector_ok = (in == nullptr || reinterpret_cast<uintptr_t>(in) % 16 == 0) &&
                (keep.d_flags == nullptr ||
                 reinterpret_cast<uintptr_t>(keep.d_flags) % S::kVec == 0);
  p.num_tiles = num_tiles;
  p.status = status;

  // Partition needs the total kept before any rejected item is placed; one
  // tile finds it itself.
  if (partition && num_tiles > 1) {
    int sms = 0;
    if (int e = detail::MultiprocessorCount(&sms)) return e;
    if constexpr (kMode == kByFlags) {
      CountKeptKernel<uint8_t, FlagKeep><<<CountKeptGrid<uint8_t>(n, sms), kCompactBlock, 0,
                                           stream>>>(
          keep.d_flags, n, FlagKeep{},
          reinterpret_cast<uintptr_t>(keep.d_flags) % 16 == 0, header);
    } else {
      CountKeptKernel<T, detail::RangeKeep<T>><<<CountKeptGrid<T>(n, sms), kCompactBlock, 0,
                                                 stream>>>(
          in, n, p.keep, reinterpret_cast<uintptr_t>(in) % 16 == 0, header);
    }
    PRIMSERVE_CUDA_TRY(cudaGetLastError());
  }
  // One block per tile. (Measured slower on an H200: a persistent grid that
  // prefetched its next tile into registers during the look-back. Holding a
  // tile index across a look-back delays that tile's aggregate, and every
  // later tile's look-back waits on it.)
  SelectSmem sm{};
  sm.values = kMode != kByFlags || values_out != nullptr;
  sm.indices = partition || indices_out != nullptr;
  const size_t smem = sm.Bytes<S, T>();
  auto* kernel = SelectKernel<T, OffsetT, kMode, kNumVec>;
  // Once per device and kernel (two runtime calls on every call were a
  // visible part of a small select's time): opt in above 48 KB, and prefer
  // shared memory over L1 (the input streams through; tiles resident per SM
  // are what matters). The opt-in is the most any call of this kernel
  // needs, not this call's smem: the attribute is process-wide, and a
  // concurrent call lowering it under our launch would fail that launch
  // with cudaErrorInvalidValue; nothing lowers it.
  static std::atomic<uint64_t> configured_devices{0};
  int device = 0;
  PRIMSERVE_CUDA_TRY(cudaGetDevice(&device));
  const uint64_t device_bit = device >= 0 && device < 64 ? uint64_t{1} << device : 0;
  if ((configured_devices.load(std::memory_order_acquire) & device_bit) == 0 ||
      device_bit == 0) {
    const size_t most_smem = SelectSmem{true, true}.Bytes<S, T>();
    if (most_smem > 48 * 1024 - 1024) {
      PRIMSERVE_CUDA_TRY(cudaFuncSetAttribute(kernel,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(most_smem)));
    }
    PRIMSERVE_CUDA_TRY(cudaFuncSetAttribute(
        kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    configured_devices.fetch_or(device_bit, std::memory_order_release);
  }
  kernel<<<static_cast<unsigned>(num_tiles), S::kBlock, smem, stream>>>(p, sm);
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
    return RunSelect<T, uint32_t, kMode, kSelectNumVec>(d_temp, in, n, keep, partition, out,
                                                        indices_out, num_selected, stream);
  }
  return RunSelect<T, uint64_t, kMode, kSelectNumVec>(d_temp, in, n, keep, partition, out,
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
