// RunLengthEncode and ReduceByKey (kernels/runs.h): one fused pass with
// decoupled look-back over a pair scan.
//
// Each element i carries (head_i, v_i): head_i = 1 when i starts a run (i == 0
// or key differs bitwise from key i-1); v_i its value (1 for RLE). The scan
// operator
//     (h_a, x_a) . (h_b, x_b) = (h_a + h_b, h_b > 0 ? x_b : x_a op x_b)
// is associative; its inclusive scan at i is (run index of i + 1, op over
// the values of i's run up to i). At each run's tail (last element: key i+1
// differs, or i == n-1) that pair is the run's result, written at the run
// index. Tails are staged in shared memory by tile-local run index and
// written out contiguously.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/detail/compaction.cuh"
#include "kernels/detail/device_info.cuh"
#include "kernels/detail/lookback.cuh"
#include "core/primitives.h"
#include "kernels/runs.h"

namespace primserve::gpu {
namespace {

using detail::kCompactBlock;
using detail::kCompactWarps;

using detail::kRunItemsFor;
template <typename KB, typename V>
inline constexpr int kRunTileFor = kCompactBlock * kRunItemsFor<KB, V>;

// The value first: with uint32 counts and an 8-byte value the last 4 of the
// 16 bytes are padding, and the look-back keeps the pair and its state in
// one 16-byte word (detail::StatusPayloadBytes below) instead of fenced
// separate arrays.
template <typename OffsetT, typename V>
struct RunPair {
  V agg;
  OffsetT heads;
};

// The op is a template argument: with a run-time op every combine was a
// switch, and ReduceByKey's kernels needed 140+ registers (1 block per SM).
template <typename P, Op kOp>
struct RunPairOp {
  __device__ __forceinline__ P operator()(const P& a, const P& b) const {
    P r;
    r.heads = a.heads + b.heads;
    r.agg = b.heads > 0 ? b.agg : Combine(kOp, a.agg, b.agg);
    return r;
  }
};

}  // namespace

namespace detail {
// A run's aggregate depends on the association for float SUM/PROD only
// (MIN/MAX give the same bits in either order).
template <typename OffsetT, typename V, Op kOp>
struct AssociationMatters<RunPairOp<RunPair<OffsetT, V>, kOp>>
    : std::bool_constant<std::is_floating_point_v<V> && (kOp == Op::kSum || kOp == Op::kProd)> {};
// Once b starts a run (heads > 0), a's value is dropped and only its
// integer count is added.
template <typename OffsetT, typename V, Op kOp>
struct RestartingOp<RunPairOp<RunPair<OffsetT, V>, kOp>> : std::true_type {
  __device__ static bool Restarts(const RunPair<OffsetT, V>& b) { return b.heads > 0; }
};
template <typename V>
struct StatusPayloadBytes<RunPair<uint32_t, V>>
    : std::integral_constant<size_t, sizeof(RunPair<uint32_t, V>) == 16 ? 12
                                                                         : sizeof(RunPair<uint32_t, V>)> {};
}  // namespace detail

namespace {

template <typename KB, typename V, typename OffsetT>
struct RunParams {
  const KB* keys;
  const V* values;  // ReduceByKey only
  uint64_t n;
  KB* keys_out;
  V* values_out;           // ReduceByKey only
  int64_t* lengths_out;    // RLE only
  uint64_t* num_runs;
  bool keys_vector_ok;
  bool values_vector_ok;
  detail::TileStatus<RunPair<OffsetT, V>> status;
};

// One tile's inputs for one thread: its keys and values (blocked), and the
// keys just before and after its items (warp edges need them from memory).
template <typename KB, typename V, typename OffsetT, bool kRle,
          int kRunItems = kRunItemsFor<KB, V>, int kRunTile = kRunTileFor<KB, V>>
__device__ __forceinline__ void LoadRunTile(const RunParams<KB, V, OffsetT>& p,
                                            int64_t tile, KB (&k)[kRunItems],
                                            V (&val)[kRunItems], KB& edge_prev,
                                            KB& edge_next) {
  const uint64_t first = static_cast<uint64_t>(tile) * kRunTile +
                         threadIdx.x * kRunItems;
  const int lane = threadIdx.x % 32;
  detail::LoadBlocked<kRunItems>(p.keys, first, p.n, p.keys_vector_ok, k);
  if constexpr (!kRle) {
    detail::LoadBlocked<kRunItems>(p.values, first, p.n, p.values_vector_ok, val);
  }
  if (lane == 0 && first > 0 && first < p.n) edge_prev = p.keys[first - 1];
  if (lane == 31 && first + kRunItems < p.n) edge_next = p.keys[first + kRunItems];
}

// kRle: V = OffsetT counts, values implicit ones, op SUM. One tile per
// block (see SelectKernel's launch in select.cu). kSingleTile: the launch is
// one tile, which takes index 0 without the counter (see RunRuns); a
// compile-time choice: as a run-time test it made the many-tile kernels
// 0.6-2% slower at 2^28 on an H100.
template <typename KB, typename V, typename OffsetT, bool kRle, Op kOp, typename Lookback,
          bool kSingleTile>
__global__ void __launch_bounds__(kCompactBlock, detail::kRunMinBlocksPerSm)
    RunsKernel(const RunParams<KB, V, OffsetT> p) {
  using P = RunPair<OffsetT, V>;
  constexpr int kRunItems = kRunItemsFor<KB, V>;
  constexpr int kRunTile = kRunTileFor<KB, V>;
  __shared__ __align__(16) KB s_keys[kRunTile];
  __shared__ __align__(16) V s_vals[kRunTile];
  __shared__ P s_warp[kCompactWarps];
  __shared__ P s_slot;
  __shared__ int64_t s_tile;
  __shared__ int s_first_head;
  __shared__ int s_num_tails;

  const uint64_t n = p.n;
  const int lane = threadIdx.x % 32;
  const RunPairOp<P, kOp> pair_op{};

  if (threadIdx.x == 0) {
    s_tile = kSingleTile ? 0 : p.status.AcquireTileIndex();
    s_num_tails = 0;
  }
  __syncthreads();
  const int64_t tile = s_tile;
  KB k[kRunItems];
  V val[kRunItems];
  KB edge_prev{}, edge_next{};
  LoadRunTile<KB, V, OffsetT, kRle>(p, tile, k, val, edge_prev, edge_next);
  {
    const uint64_t tile_base = static_cast<uint64_t>(tile) * kRunTile;
    const uint64_t first = tile_base + threadIdx.x * kRunItems;

    // Neighbours across thread boundaries: lanes by shuffle, warp edges
    // from the loaded edge keys.
    KB prev_last = detail::ShuffleUp(k[kRunItems - 1], 1);
    KB next_first = detail::ShuffleDown(k[0], 1);
    if (lane == 0) prev_last = edge_prev;
    if (lane == 31) next_first = edge_next;

    uint32_t head_bits = 0, tail_bits = 0;
    P acc;
#pragma unroll
    for (int e = 0; e < kRunItems; ++e) {
      const uint64_t g = first + e;
      const bool in_range = g < n;
      const KB prev = e > 0 ? k[e > 0 ? e - 1 : 0] : prev_last;
      const KB next = e < kRunItems - 1 ? k[e < kRunItems - 1 ? e + 1 : 0] : next_first;
      const bool head = in_range && (g == 0 || k[e] != prev);
      const bool tail = in_range && (g == n - 1 || k[e] != next);
      head_bits |= (head ? 1u : 0u) << e;
      tail_bits |= (tail ? 1u : 0u) << e;
      if constexpr (kRle) {
        val[e] = in_range ? V(1) : V(0);
      } else {
        if (!in_range) val[e] = Identity<V>(kOp);
      }
      // Items past n (last tile only) come after every real item, so what
      // they add never reaches an output.
      P item;
      item.heads = head ? 1 : 0;
      item.agg = val[e];
      acc = e == 0 ? item : pair_op(acc, item);
    }
    if (threadIdx.x == 0) s_first_head = head_bits & 1u;

    // Block scan joined to the look-back.
    P run;
    bool have = detail::BlockScanLookback<Lookback>(acc, pair_op, p.status, tile, s_warp, s_slot, &run);
    // Global run index of the tile's first element.
    const uint64_t heads_before =
        tile > 0 ? static_cast<uint64_t>(s_slot.heads) : 0;
    const uint64_t r0 = heads_before + s_first_head - 1;

    int my_tails = 0;
#pragma unroll
    for (int e = 0; e < kRunItems; ++e) {
      const uint64_t g = first + e;
      if (g < n) {
        P item;
        item.heads = (head_bits >> e) & 1u;
        item.agg = val[e];
        run = have ? pair_op(run, item) : item;
        have = true;
        if ((tail_bits >> e) & 1u) {
          const uint64_t r = static_cast<uint64_t>(run.heads) - 1;
          const int local = static_cast<int>(r - r0);
          s_keys[local] = k[e];
          s_vals[local] = run.agg;
          ++my_tails;
          if (g == n - 1 && p.num_runs != nullptr) *p.num_runs = r + 1;
        }
      }
    }
    const unsigned warp_tails = __reduce_add_sync(0xffffffffu, my_tails);
    if (lane == 0 && warp_tails > 0) atomicAdd(&s_num_tails, static_cast<int>(warp_tails));
    __syncthreads();
    const int num_tails = s_num_tails;
    for (int j = threadIdx.x; j < num_tails; j += kCompactBlock) {
      p.keys_out[r0 + j] = s_keys[j];
      if constexpr (kRle) {
        p.lengths_out[r0 + j] = static_cast<int64_t>(s_vals[j]);
      } else {
        p.values_out[r0 + j] = s_vals[j];
      }
    }
  }
}

template <typename KB, typename OffsetT, typename V>
size_t RunsTempBytes(uint64_t n) {
  constexpr int kRunTile = kRunTileFor<KB, V>;
  const int64_t tiles = static_cast<int64_t>((n + kRunTile - 1) / kRunTile);
  return detail::kHeaderBytes + detail::TileStatus<RunPair<OffsetT, V>>::StorageBytes(tiles);
}

// The compaction look-back with the tree combine, for float run aggregates
// whose caller did not ask for the in-order one (ReduceByKeyUnordered).
using detail::RunsLookback;
using TreeRunsLookback =
    detail::LookbackPolicy<RunsLookback::kSlotsPerLane, RunsLookback::kFirstSleepNs,
                           RunsLookback::kMaxSleepNs, RunsLookback::kWaitAll, false,
                           RunsLookback::kInitialDelayNs, RunsLookback::kRelaxed,
                           RunsLookback::kPollNs, RunsLookback::kNearestFirst,
                           RunsLookback::kDelayMinTiles>;

template <typename KB, typename V, typename OffsetT, bool kRle, Op kOp>
int RunRuns(void* d_temp, const void* keys, const void* values, uint64_t n,
            void* keys_out, void* values_out, int64_t* lengths_out,
            uint64_t* num_runs, bool in_order, cudaStream_t stream) {
  using P = RunPair<OffsetT, V>;
  constexpr int kRunTile = kRunTileFor<KB, V>;
  const int64_t tiles = static_cast<int64_t>((n + kRunTile - 1) / kRunTile);
  detail::TileStatus<P> status(static_cast<char*>(d_temp) + detail::kHeaderBytes, tiles);
  // A single tile needs no reset: it takes tile 0 without the counter and
  // its published slot is never read (one launch instead of two).
  if (tiles > 1) PRIMSERVE_CUDA_TRY(detail::InitTileStatusAsync(status, stream));
  RunParams<KB, V, OffsetT> p{};
  p.keys = static_cast<const KB*>(keys);
  p.values = static_cast<const V*>(values);
  p.n = n;
  p.keys_out = static_cast<KB*>(keys_out);
  p.values_out = static_cast<V*>(values_out);
  p.lengths_out = lengths_out;
  p.num_runs = num_runs;
  p.keys_vector_ok = reinterpret_cast<uintptr_t>(keys) % 16 == 0;
  p.values_vector_ok = reinterpret_cast<uintptr_t>(values) % 16 == 0;
  p.status = status;
  // One block per tile: see SelectKernel's launch for why not persistent.
  // A single tile never looks back, so one look-back policy serves it.
  if (tiles == 1) {
    RunsKernel<KB, V, OffsetT, kRle, kOp, RunsLookback, true><<<1, kCompactBlock, 0, stream>>>(p);
    return static_cast<int>(cudaGetLastError());
  }
  if constexpr (detail::AssociationMatters<RunPairOp<P, kOp>>::value) {
    if (!in_order) {
      RunsKernel<KB, V, OffsetT, kRle, kOp, TreeRunsLookback, false>
          <<<static_cast<unsigned>(tiles), kCompactBlock, 0, stream>>>(p);
      return static_cast<int>(cudaGetLastError());
    }
  }
  RunsKernel<KB, V, OffsetT, kRle, kOp, RunsLookback, false>
      <<<static_cast<unsigned>(tiles), kCompactBlock, 0, stream>>>(p);
  return static_cast<int>(cudaGetLastError());
}

// Picks the offset type (uint32 below 2^32 items) and handles the size
// query and n == 0.
template <typename KB, typename V, bool kRle>
int DispatchRuns(void* d_temp, size_t* temp_bytes, const void* keys,
                 const void* values, uint64_t n, Op op, void* keys_out,
                 void* values_out, int64_t* lengths_out, uint64_t* num_runs,
                 bool in_order, cudaStream_t stream) {
  const bool small = n < (1ull << 32);
  // RLE's value is the run length itself, in the offset type.
  using V32 = std::conditional_t<kRle, uint32_t, V>;
  using V64 = std::conditional_t<kRle, uint64_t, V>;
  const size_t need =
      small ? RunsTempBytes<KB, uint32_t, V32>(n) : RunsTempBytes<KB, uint64_t, V64>(n);
  if (d_temp == nullptr) {
    *temp_bytes = need;
    return 0;
  }
  if (*temp_bytes < need) return static_cast<int>(cudaErrorInvalidValue);
  if (reinterpret_cast<uintptr_t>(d_temp) % 16 != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  if (n == 0) {
    if (num_runs != nullptr) {
      PRIMSERVE_CUDA_TRY(cudaMemsetAsync(num_runs, 0, sizeof(uint64_t), stream));
    }
    return 0;
  }
  auto run = [&](auto op_tag) {
    constexpr Op kOp = decltype(op_tag)::value;
    if (small) {
      return RunRuns<KB, V32, uint32_t, kRle, kOp>(d_temp, keys, values, n, keys_out,
                                                   values_out, lengths_out, num_runs, in_order,
                                                   stream);
    }
    return RunRuns<KB, V64, uint64_t, kRle, kOp>(d_temp, keys, values, n, keys_out, values_out,
                                                 lengths_out, num_runs, in_order, stream);
  };
  if constexpr (kRle) {
    return run(std::integral_constant<Op, Op::kSum>{});
  } else {
    switch (op) {
      case Op::kSum: return run(std::integral_constant<Op, Op::kSum>{});
      case Op::kProd: return run(std::integral_constant<Op, Op::kProd>{});
      case Op::kMin: return run(std::integral_constant<Op, Op::kMin>{});
      default: return run(std::integral_constant<Op, Op::kMax>{});
    }
  }
}

bool ValidDType(DType d) {
  return static_cast<int>(d) >= 1 && static_cast<int>(d) <= 6;
}

}  // namespace

int RunLengthEncode(void* d_temp_storage, size_t* temp_storage_bytes,
                    const void* d_in, DType dtype, uint64_t n,
                    void* d_values_out, int64_t* d_lengths_out,
                    uint64_t* d_num_runs, CUstream_st* stream) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (temp_storage_bytes == nullptr || !ValidDType(dtype)) return kInvalid;
  if (d_temp_storage != nullptr && n > 0 &&
      (d_in == nullptr || d_values_out == nullptr || d_lengths_out == nullptr)) {
    return kInvalid;
  }
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  if (DTypeSize(dtype) == 4) {
    return DispatchRuns<uint32_t, uint32_t, true>(
        d_temp_storage, temp_storage_bytes, d_in, nullptr, n, Op::kSum,
        d_values_out, nullptr, d_lengths_out, d_num_runs, true, s);
  }
  return DispatchRuns<uint64_t, uint64_t, true>(
      d_temp_storage, temp_storage_bytes, d_in, nullptr, n, Op::kSum,
      d_values_out, nullptr, d_lengths_out, d_num_runs, true, s);
}

namespace {

int DispatchReduceByKey(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_keys,
                        DType key_dtype, const void* d_values, DType value_dtype, uint64_t n,
                        Op op, void* d_keys_out, void* d_values_out, uint64_t* d_num_runs,
                        bool in_order, CUstream_st* stream) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (temp_storage_bytes == nullptr || !ValidDType(key_dtype) ||
      !ValidDType(value_dtype)) {
    return kInvalid;
  }
  if (op != Op::kSum && op != Op::kProd && op != Op::kMin && op != Op::kMax) {
    return kInvalid;
  }
  if (d_temp_storage != nullptr && n > 0 &&
      (d_keys == nullptr || d_values == nullptr || d_keys_out == nullptr ||
       d_values_out == nullptr)) {
    return kInvalid;
  }
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  return VisitDType(value_dtype, [&](auto tag) {
    using V = decltype(tag);
    if (DTypeSize(key_dtype) == 4) {
      return DispatchRuns<uint32_t, V, false>(
          d_temp_storage, temp_storage_bytes, d_keys, d_values, n, op,
          d_keys_out, d_values_out, nullptr, d_num_runs, in_order, s);
    }
    return DispatchRuns<uint64_t, V, false>(
        d_temp_storage, temp_storage_bytes, d_keys, d_values, n, op,
        d_keys_out, d_values_out, nullptr, d_num_runs, in_order, s);
  });
}

}  // namespace

int ReduceByKey(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_keys,
                DType key_dtype, const void* d_values, DType value_dtype, uint64_t n, Op op,
                void* d_keys_out, void* d_values_out, uint64_t* d_num_runs, CUstream_st* stream) {
  return DispatchReduceByKey(d_temp_storage, temp_storage_bytes, d_keys, key_dtype, d_values,
                             value_dtype, n, op, d_keys_out, d_values_out, d_num_runs, true,
                             stream);
}

int ReduceByKeyUnordered(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_keys,
                         DType key_dtype, const void* d_values, DType value_dtype, uint64_t n,
                         Op op, void* d_keys_out, void* d_values_out, uint64_t* d_num_runs,
                         CUstream_st* stream) {
  return DispatchReduceByKey(d_temp_storage, temp_storage_bytes, d_keys, key_dtype, d_values,
                             value_dtype, n, op, d_keys_out, d_values_out, d_num_runs, false,
                             stream);
}

}  // namespace primserve::gpu
