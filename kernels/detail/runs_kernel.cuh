// ReduceByKey's kernel (kernels/runs.h, runs.cu): one fused pass with
// decoupled look-back over a pair scan, templated on a RunsPolicy
// (tuning.cuh) so that bench/runs_variants.cu can time shapes side by side
// in one process.
//
// Each element i carries (head_i, v_i): head_i = 1 when i starts a run (i == 0
// or key differs bitwise from key i-1); v_i its value. The scan
// operator
//     (h_a, x_a) . (h_b, x_b) = (h_a + h_b, h_b > 0 ? x_b : x_a op x_b)
// is associative; its inclusive scan at i is (run index of i + 1, op over
// the values of i's run up to i). At each run's tail (last element: key i+1
// differs, or i == n-1) that pair is the run's result, written at the run
// index. Tails are staged in shared memory by tile-local run index and
// written out contiguously.
#ifndef PRIMSERVE_KERNELS_DETAIL_RUNS_KERNEL_CUH_
#define PRIMSERVE_KERNELS_DETAIL_RUNS_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/primitives.h"
#include "kernels/detail/compaction.cuh"
#include "kernels/detail/lookback.cuh"
#include "kernels/detail/tuning.cuh"

namespace primserve::gpu::detail {

// The value first: with uint32 counts and an 8-byte value the last 4 of the
// 16 bytes are padding, and the look-back keeps the pair and its state in
// one 16-byte word (StatusPayloadBytes below) instead of fenced separate
// arrays.
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

template <typename KB, typename V, typename OffsetT>
struct RunParams {
  const KB* keys;
  const V* values;
  uint64_t n;
  KB* keys_out;
  V* values_out;
  uint64_t* num_runs;
  bool keys_vector_ok;
  bool values_vector_ok;
  TileStatus<RunPair<OffsetT, V>> status;
};

// One tile's inputs for one thread: its keys and values (blocked), and the
// keys just before and after its items (warp edges need them from memory).
template <int kRunItems, typename KB, typename V, typename OffsetT>
__device__ __forceinline__ void LoadRunTile(const RunParams<KB, V, OffsetT>& p, int64_t tile,
                                            KB (&k)[kRunItems], V (&val)[kRunItems],
                                            KB& edge_prev, KB& edge_next) {
  constexpr int kRunTile = kCompactBlock * kRunItems;
  const uint64_t first = static_cast<uint64_t>(tile) * kRunTile + threadIdx.x * kRunItems;
  const int lane = threadIdx.x % 32;
  LoadBlocked<kRunItems>(p.keys, first, p.n, p.keys_vector_ok, k);
  LoadBlocked<kRunItems>(p.values, first, p.n, p.values_vector_ok, val);
  if (lane == 0 && first > 0 && first < p.n) edge_prev = p.keys[first - 1];
  if (lane == 31 && first + kRunItems < p.n) edge_next = p.keys[first + kRunItems];
}

// One tile per block (see SelectKernel's launch in select.cu). kSingleTile:
// the launch is one tile, which takes index 0 without the counter (see
// RunRuns); a
// compile-time choice: as a run-time test it made the many-tile kernels
// 0.6-2% slower at 2^28 on an H100.
// (kMinBlocks: the policy's, as a plain constant for __launch_bounds__.)
template <typename Policy, typename KB, typename V, typename OffsetT, Op kOp, typename Lookback,
          bool kSingleTile, int kMinBlocks = Policy::template kMinBlocksPerSm<KB, V>>
__global__ void __launch_bounds__(kCompactBlock, kMinBlocks)
    RunsKernel(const RunParams<KB, V, OffsetT> p) {
  using P = RunPair<OffsetT, V>;
  constexpr int kRunItems = Policy::template kItems<KB, V>;
  constexpr int kRunTile = kCompactBlock * kRunItems;
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
  constexpr bool kLocalFirst = Policy::kLocalFirst && (!AssociationMatters<RunPairOp<P, kOp>>::value ||
                                                      !Lookback::kFixedOrder);

  if (threadIdx.x == 0) {
    s_tile = kSingleTile ? 0 : p.status.AcquireTileIndex();
    s_num_tails = 0;
  }
  __syncthreads();
  const int64_t tile = s_tile;
  KB k[kRunItems];
  V val[kRunItems];
  KB edge_prev{}, edge_next{};
  LoadRunTile(p, tile, k, val, edge_prev, edge_next);
  {
    const uint64_t tile_base = static_cast<uint64_t>(tile) * kRunTile;
    const uint64_t first = tile_base + threadIdx.x * kRunItems;

    // Neighbours across thread boundaries: lanes by shuffle, warp edges
    // from the loaded edge keys.
    KB prev_last = ShuffleUp(k[kRunItems - 1], 1);
    KB next_first = ShuffleDown(k[0], 1);
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
      if (!in_range) val[e] = Identity<V>(kOp);
      // Items past n (last tile only) come after every real item, so what
      // they add never reaches an output.
      P item;
      item.heads = head ? 1 : 0;
      item.agg = val[e];
      acc = e == 0 ? item : pair_op(acc, item);
    }
    if (threadIdx.x == 0) s_first_head = head_bits & 1u;

    if constexpr (kLocalFirst) {
      // The tile-local scan first: the tile's aggregate is published at
      // once, and its tails are found and staged before the look-back, whose
      // wait for the predecessors then overlaps that work. Only the run
      // continuing from the previous tile (local index 0 when the tile does
      // not start a run) and the run offset need the tile's prefix.
      const int warp = threadIdx.x / 32;
      const P inclusive = WarpInclusiveScan(acc, pair_op);
      const P lane_before = ShuffleUp(inclusive, 1);
      if (lane == 31) s_warp[warp] = inclusive;
      __syncthreads();
      P tile_aggregate = s_warp[0];
#pragma unroll
      for (int w = 1; w < kCompactWarps; ++w) tile_aggregate = pair_op(tile_aggregate, s_warp[w]);
      if (threadIdx.x == 0) {
        if (tile == 0) {
          p.status.PublishInclusive(0, tile_aggregate);
        } else {
          p.status.template PublishAggregate<Lookback>(tile, tile_aggregate);
        }
      }
      const int first_head = s_first_head;
      bool have = warp > 0;
      P run = s_warp[0];
      for (int w = 1; w < warp; ++w) run = pair_op(run, s_warp[w]);
      if (lane > 0) {
        run = have ? pair_op(run, lane_before) : lane_before;
        have = true;
      }
      int my_tails = 0;
      int last_local = -1;  // the local index of the run ending at n - 1
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
            const int local = static_cast<int>(run.heads) - first_head;
            s_keys[local] = k[e];
            s_vals[local] = run.agg;
            ++my_tails;
            if (g == n - 1) last_local = local;
          }
        }
      }
      const unsigned warp_tails = __reduce_add_sync(0xffffffffu, my_tails);
      if (lane == 0 && warp_tails > 0) atomicAdd(&s_num_tails, static_cast<int>(warp_tails));
      if (tile > 0 && threadIdx.x < 32) {
        const P prefix =
            p.status.template ExclusivePrefixAfterAggregate<Lookback>(tile, tile_aggregate, pair_op);
        if (threadIdx.x == 0) s_slot = prefix;
      }
      __syncthreads();
      const uint64_t heads_before = tile > 0 ? static_cast<uint64_t>(s_slot.heads) : 0;
      const uint64_t r0 = heads_before + first_head - 1;
      if (last_local >= 0 && p.num_runs != nullptr) *p.num_runs = r0 + last_local + 1;
      const int num_tails = s_num_tails;
      const bool continues = tile > 0 && first_head == 0;
      for (int j = threadIdx.x; j < num_tails; j += kCompactBlock) {
        p.keys_out[r0 + j] = s_keys[j];
        p.values_out[r0 + j] = j == 0 && continues ? Combine(kOp, s_slot.agg, s_vals[0]) : s_vals[j];
      }
    } else {
      // Block scan joined to the look-back.
      P run;
      bool have = BlockScanLookback<Lookback>(acc, pair_op, p.status, tile, s_warp, s_slot, &run);
      // Global run index of the tile's first element.
      const uint64_t heads_before = tile > 0 ? static_cast<uint64_t>(s_slot.heads) : 0;
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
        p.values_out[r0 + j] = s_vals[j];
      }
    }
  }
}

template <typename Policy, typename KB, typename OffsetT, typename V>
size_t RunsTempBytes(uint64_t n) {
  constexpr int kRunTile = kCompactBlock * Policy::template kItems<KB, V>;
  const int64_t tiles = static_cast<int64_t>((n + kRunTile - 1) / kRunTile);
  return kHeaderBytes + TileStatus<RunPair<OffsetT, V>>::StorageBytes(tiles);
}

// The policy's look-back with the tree combine, for float run aggregates
// whose caller did not ask for the in-order one (ReduceByKeyUnordered).
template <typename L>
using TreeLookbackOf =
    LookbackPolicy<L::kSlotsPerLane, L::kFirstSleepNs, L::kMaxSleepNs, L::kWaitAll, false,
                   L::kInitialDelayNs, L::kRelaxed, L::kPollNs, L::kNearestFirst,
                   L::kDelayMinTiles>;

// One launch over n > 0 items (d_temp: RunsTempBytes of this policy, 16-byte
// aligned). in_order: float SUM/PROD values get the in-order look-back.
template <typename Policy, typename KB, typename V, typename OffsetT, Op kOp>
int RunRuns(void* d_temp, const void* keys, const void* values, uint64_t n, void* keys_out,
            void* values_out, uint64_t* num_runs, bool in_order, cudaStream_t stream) {
  using P = RunPair<OffsetT, V>;
  using Lookback = typename Policy::Lookback;
  constexpr int kRunTile = kCompactBlock * Policy::template kItems<KB, V>;
  const int64_t tiles = static_cast<int64_t>((n + kRunTile - 1) / kRunTile);
  TileStatus<P> status(static_cast<char*>(d_temp) + kHeaderBytes, tiles);
  // A single tile needs no reset: it takes tile 0 without the counter and
  // its published slot is never read (one launch instead of two).
  if (tiles > 1) PRIMSERVE_CUDA_TRY(InitTileStatusAsync(status, stream));
  RunParams<KB, V, OffsetT> p{};
  p.keys = static_cast<const KB*>(keys);
  p.values = static_cast<const V*>(values);
  p.n = n;
  p.keys_out = static_cast<KB*>(keys_out);
  p.values_out = static_cast<V*>(values_out);
  p.num_runs = num_runs;
  p.keys_vector_ok = reinterpret_cast<uintptr_t>(keys) % 16 == 0;
  p.values_vector_ok = reinterpret_cast<uintptr_t>(values) % 16 == 0;
  p.status = status;
  // One block per tile: see SelectKernel's launch for why not persistent.
  // A single tile never looks back, so one look-back policy serves it.
  if (tiles == 1) {
    RunsKernel<Policy, KB, V, OffsetT, kOp, Lookback, true>
        <<<1, kCompactBlock, 0, stream>>>(p);
    return static_cast<int>(cudaGetLastError());
  }
  if constexpr (AssociationMatters<RunPairOp<P, kOp>>::value) {
    if (!in_order) {
      RunsKernel<Policy, KB, V, OffsetT, kOp, TreeLookbackOf<Lookback>, false>
          <<<static_cast<unsigned>(tiles), kCompactBlock, 0, stream>>>(p);
      return static_cast<int>(cudaGetLastError());
    }
  }
  RunsKernel<Policy, KB, V, OffsetT, kOp, Lookback, false>
      <<<static_cast<unsigned>(tiles), kCompactBlock, 0, stream>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_RUNS_KERNEL_CUH_
