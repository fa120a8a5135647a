// The kernels' association order on the CPU (reference/gpu_order.h): each
// function below names the kernel code it follows, step by step. Built with
// -ffp-contract=off (reference/BUILD.bazel).
//
// UNSURE (details to confirm against the kernels when the look-back change
// lands; the GPU test comparing bit for bit settles them):
//  - carry_out: the brief's new rule is L(last tile), the left fold of the
//    tile aggregates (tile 0's with the carry in front), including the
//    padding of the last tile (Neutral: exact). The working tree's
//    ScanKernel still writes InclusiveThrough(...) (the last element's
//    inclusive value, another association); until it changes, carry_out and
//    hence chunked scans differ from this emulation.
//  - The in-order look-back (lookback.cuh WarpLookbackInOrder) folds
//    P_j op A_{j+1} op ... op A_{t-1} with P_j = L(j) by induction; this
//    file folds L directly, which is the same only if every tile publishes
//    P_t = op(L(t - 1), A_t) with A_t exactly the tile_total used here
//    (tile 0: op(carry, tile_total), published as P directly).
//  - gpu::Reduce's grid for float SUM/PROD is kFixedOrderReduceGrid (528)
//    since the lead's 7d3153d, and SegmentedReduce with one segment is
//    Reduce; the emulation follows that source. Its last block folds the
//    partials after a __threadfence and an atomic ticket: the partials'
//    values do not depend on timing, only which block folds them, and
//    every block folds them the same way.
//  - NaN payloads and signs are not emulated (gpu_order.h).
#include "reference/gpu_order.h"

#include <array>
#include <cassert>
#include <cfloat>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"
#include "core/primitives.h"

#if defined(__FAST_MATH__)
#error "reference/gpu_order.cc must not be built with -ffast-math: it emulates IEEE float order"
#endif
static_assert(FLT_EVAL_METHOD == 0,
              "float math must be done in float and double math in double (SSE, not x87)");

namespace primserve::reference {
namespace {

// operators.cuh CombineOp<T, kOp>: core/primitives.h Combine.
template <typename T, Op kOp>
struct BaseOp {
  T operator()(T a, T b) const { return Combine(kOp, a, b); }
};

// operators.cuh SegmentedOp: (fa, a) op (fb, b) = fb ? (fb, b) : (fa, a op b).
template <typename T, Op kOp>
struct SegOp {
  GpuFlagged<T> operator()(const GpuFlagged<T>& a, const GpuFlagged<T>& b) const {
    return b.head ? b : GpuFlagged<T>{a.head, Combine(kOp, a.value, b.value)};
  }
};

// operators.cuh Neutral<T, kOp>: Identity, except -0.0 for float SUM.
template <typename T, Op kOp>
T Neutral() {
  if constexpr (std::is_floating_point_v<T>) {
    if (kOp == Op::kSum) return -T(0);
  }
  return Identity<T>(kOp);
}

// Calls f(std::integral_constant<Op, op>{}) for SUM, PROD, MIN, MAX.
template <typename F>
void WithOp(Op op, F&& f) {
  switch (op) {
    case Op::kSum: return f(std::integral_constant<Op, Op::kSum>{});
    case Op::kProd: return f(std::integral_constant<Op, Op::kProd>{});
    case Op::kMin: return f(std::integral_constant<Op, Op::kMin>{});
    case Op::kMax: return f(std::integral_constant<Op, Op::kMax>{});
    case Op::kArgMin:
    case Op::kArgMax:
      break;
  }
  assert(false && "GpuOrder*: SUM, PROD, MIN or MAX only");
}

constexpr int kWarpsPerBlock = kGpuScanThreads / kGpuWarpThreads;
static_assert(kGpuScanThreads == kGpuReduceThreads, "one block shape for both kernels");

// block.cuh BlockExclusiveScan of one tile's thread totals, after each
// thread's left fold of its items (ScanKernel / SegmentedReduceKernel:
// thread_total = values[0] op values[1] op ...). values: the whole tile,
// padded. thread_prefix[t] = op(warp_prefix, in_warp) for every thread.
template <typename V, typename F>
void BlockScanTile(const V* values, int items, F op, const V& neutral,
                   std::array<V, kGpuScanThreads>& thread_prefix, V& tile_total) {
  std::array<V, kGpuScanThreads> inclusive;
  for (int t = 0; t < kGpuScanThreads; ++t) {
    const V* mine = values + static_cast<size_t>(t) * items;
    V total = mine[0];
    for (int j = 1; j < items; ++j) total = op(total, mine[j]);
    inclusive[t] = total;
  }
  std::array<V, kWarpsPerBlock> warp_aggregates;
  for (int w = 0; w < kWarpsPerBlock; ++w) {
    V* lane = inclusive.data() + w * kGpuWarpThreads;
    // warp.cuh WarpInclusiveScan: at each delta every lane >= delta takes
    // op(the value lane - delta had before this step, its own). Going down
    // from lane 31 reads lane - delta before it is updated.
    for (int delta = 1; delta < kGpuWarpThreads; delta *= 2) {
      for (int l = kGpuWarpThreads - 1; l >= delta; --l) lane[l] = op(lane[l - delta], lane[l]);
    }
    warp_aggregates[w] = lane[kGpuWarpThreads - 1];
    // in_warp: ShuffleUp(inclusive, 1), neutral in lane 0.
    for (int l = 0; l < kGpuWarpThreads; ++l) {
      thread_prefix[w * kGpuWarpThreads + l] = l == 0 ? neutral : lane[l - 1];
    }
  }
  std::array<V, kWarpsPerBlock> warp_prefix;
  warp_prefix[0] = neutral;
  V aggregate = warp_aggregates[0];
  for (int w = 1; w < kWarpsPerBlock; ++w) {
    warp_prefix[w] = aggregate;
    aggregate = op(aggregate, warp_aggregates[w]);
  }
  tile_total = aggregate;
  for (int t = 0; t < kGpuScanThreads; ++t) {
    thread_prefix[t] = op(warp_prefix[t / kGpuWarpThreads], thread_prefix[t]);
  }
}

// The tiles of ScanKernel (and of SegmentedReduceKernel's scan), in tile
// order, with the in-order look-back. load(i) gives element i's value (called
// once per element, in index order, and for a tile before any of its emits:
// in place is safe); pad fills the last tile past n; emit(i, value, before,
// after) gets each element's running value before and after combining it.
// carry: plain scans only (tile 0's aggregate and running get it in front).
// n > 0. Returns L(last tile).
template <typename V, typename F, typename Load, typename Emit>
V RunTiles(uint64_t n, int items, F op, const V& neutral, const V& pad, const V* carry,
           Load&& load, Emit&& emit) {
  const uint64_t tile_items = static_cast<uint64_t>(kGpuScanThreads) * items;
  const uint64_t num_tiles = (n + tile_items - 1) / tile_items;
  std::vector<V> values(tile_items);
  std::array<V, kGpuScanThreads> thread_prefix;
  V lookback{};  // L(t - 1) while tile t runs
  for (uint64_t tile = 0; tile < num_tiles; ++tile) {
    const uint64_t begin = tile * tile_items;
    const uint64_t valid = n - begin < tile_items ? n - begin : tile_items;
    for (uint64_t k = 0; k < valid; ++k) values[k] = load(begin + k);
    for (uint64_t k = valid; k < tile_items; ++k) values[k] = pad;  // WarpLoadBlocked's fill
    V tile_total;
    BlockScanTile(values.data(), items, op, neutral, thread_prefix, tile_total);
    const bool has_carry = carry != nullptr && tile == 0;
    // Tile 0 publishes carry op tile_total as its P.
    if (has_carry) tile_total = op(*carry, tile_total);
    const V tile_prefix = lookback;
    lookback = tile == 0 ? tile_total : op(lookback, tile_total);
    for (int t = 0; t < kGpuScanThreads; ++t) {
      const uint64_t first = static_cast<uint64_t>(t) * items;
      if (first >= valid) break;
      V running = thread_prefix[t];
      if (tile > 0) running = op(tile_prefix, running);
      if (has_carry) running = op(*carry, running);
      for (uint64_t k = first; k < first + items && k < valid; ++k) {
        const V before = running;
        running = op(running, values[k]);
        emit(begin + k, values[k], before, running);
      }
    }
  }
  return lookback;
}

template <typename T, Op kOp>
void Scan(absl::Span<const T> in, absl::Span<T> out, bool exclusive, std::optional<T> carry_in,
          T* carry_out) {
  const uint64_t n = in.size();
  if (n == 0) {  // ScanEmptyCarryKernel
    if (carry_out != nullptr) *carry_out = carry_in ? *carry_in : Identity<T>(kOp);
    return;
  }
  const T* data = in.data();
  T* result = out.data();
  const bool has_carry = carry_in.has_value();
  const T carry = has_carry ? *carry_in : T{};
  const T last = RunTiles<T>(
      n, kGpuScanItemsPerThread<T, false>, BaseOp<T, kOp>{}, Neutral<T, kOp>(),
      Neutral<T, kOp>(), has_carry ? &carry : nullptr, [data](uint64_t i) { return data[i]; },
      [&](uint64_t i, const T&, const T& before, const T& after) {
        if (exclusive) {
          result[i] = i == 0 && !has_carry ? Identity<T>(kOp) : before;
        } else {
          result[i] = after;
        }
      });
  if (carry_out != nullptr) *carry_out = last;
}

// Head flags in index order (BlockMarkHeads: a head where a segment starts
// below n; several starts at one position make one head).
class Heads {
 public:
  explicit Heads(absl::Span<const uint64_t> starts) : starts_(starts) {}
  // Call with i = 0, 1, 2, ...
  uint32_t At(uint64_t i) {
    while (next_ < starts_.size() && starts_[next_] < i) ++next_;
    return next_ < starts_.size() && starts_[next_] == i ? 1 : 0;
  }

 private:
  absl::Span<const uint64_t> starts_;
  size_t next_ = 0;
};

template <typename T, Op kOp>
void SegmentedScan(absl::Span<const T> in, absl::Span<T> out,
                   absl::Span<const uint64_t> starts, bool exclusive) {
  using V = GpuFlagged<T>;
  const uint64_t n = in.size();
  if (n == 0) return;
  assert(starts[0] == 0);
  const T* data = in.data();
  T* result = out.data();
  Heads heads(starts);
  const V neutral{0, Neutral<T, kOp>()};
  RunTiles<V>(
      n, kGpuScanItemsPerThread<T, true>, SegOp<T, kOp>{}, neutral, neutral, nullptr,
      [&](uint64_t i) { return V{heads.At(i), data[i]}; },
      [&](uint64_t i, const V& value, const V& before, const V& after) {
        if (exclusive) {
          result[i] = value.head ? Identity<T>(kOp) : before.value;
        } else {
          result[i] = after.value;
        }
      });
}

// reduce.cu WarpPerSegmentReduceKernel: lane l folds elements begin + l,
// begin + l + 32, ... in order from NeutralValue (Neutral); then
// WarpSuffixReduce (at each delta lane i with i + delta < 32 takes
// op(its value, lane i + delta's value before this step); going up from
// lane 0 reads lane i + delta before it is updated); lane 0's value.
template <typename T, Op kOp>
T WarpSegmentReduce(const T* data, uint64_t begin, uint64_t end) {
  if (begin == end) return Identity<T>(kOp);  // WriteEmpty
  const BaseOp<T, kOp> op;
  std::array<T, kGpuWarpThreads> lane;
  lane.fill(Neutral<T, kOp>());
  for (uint64_t i = begin; i < end; ++i) {
    T& acc = lane[(i - begin) % kGpuWarpThreads];
    acc = op(acc, data[i]);
  }
  for (int delta = 1; delta < kGpuWarpThreads; delta *= 2) {
    for (int l = 0; l + delta < kGpuWarpThreads; ++l) lane[l] = op(lane[l], lane[l + delta]);
  }
  return lane[0];
}

// block.cuh BlockReduce of one value per thread: WarpSuffixReduce in each
// warp (lane 0's value), then thread 0 folds warp 0's with warps 1..7's.
template <typename T, Op kOp>
T BlockReduce(std::array<T, kGpuReduceThreads>& values) {
  const BaseOp<T, kOp> op;
  std::array<T, kWarpsPerBlock> warp_results;
  for (int w = 0; w < kWarpsPerBlock; ++w) {
    T* lane = values.data() + w * kGpuWarpThreads;
    for (int delta = 1; delta < kGpuWarpThreads; delta *= 2) {
      for (int l = 0; l + delta < kGpuWarpThreads; ++l) lane[l] = op(lane[l], lane[l + delta]);
    }
    warp_results[w] = lane[0];
  }
  T value = warp_results[0];
  for (int w = 1; w < kWarpsPerBlock; ++w) value = op(value, warp_results[w]);
  return value;
}

// reduce.cu ReduceKernel / LaunchReduce (non-ARG ops).
template <typename T, Op kOp>
T Reduce(absl::Span<const T> in) {
  const uint64_t n = in.size();
  if (n == 0) return Identity<T>(kOp);  // WriteEmpty
  constexpr int kItems = kGpuReduceItemsPerThread<T>;
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  constexpr uint64_t kTileItems = static_cast<uint64_t>(kGpuReduceThreads) * kItems;
  const BaseOp<T, kOp> op;
  const T* data = in.data();
  const uint64_t grid = GpuReduceGrid(DTypeOf<T>(), n);
  const uint64_t full_tiles = n / kTileItems;
  const uint64_t block_stride = grid * kGpuReduceThreads;
  std::vector<T> partials(grid);
  std::array<T, kGpuReduceThreads> acc;
  for (uint64_t block = 0; block < grid; ++block) {
    acc.fill(Neutral<T, kOp>());
    for (uint64_t tile = block; tile < full_tiles; tile += grid) {
      // Thread t folds x[k * kVec + v] = in[tile_begin + (k * 256 + t) * kVec
      // + v], k then v ascending; visited here in memory order, which keeps
      // each thread's order.
      const T* x = data + tile * kTileItems;
      for (int k = 0; k < kItems / kVec; ++k) {
        for (int t = 0; t < kGpuReduceThreads; ++t) {
          for (int v = 0; v < kVec; ++v) {
            acc[t] = op(acc[t], x[(k * kGpuReduceThreads + t) * kVec + v]);
          }
        }
      }
    }
    // The partial last tile, spread over all blocks.
    for (uint64_t i = full_tiles * kTileItems + block * kGpuReduceThreads; i < n;
         i += block_stride) {
      for (int t = 0; t < kGpuReduceThreads && i + t < n; ++t) acc[t] = op(acc[t], data[i + t]);
    }
    partials[block] = BlockReduce<T, kOp>(acc);
  }
  if (grid == 1) return partials[0];
  // The last block: thread t folds partials t, t + 256, ... from Neutral.
  acc.fill(Neutral<T, kOp>());
  for (uint64_t b = 0; b < grid; ++b) {
    acc[b % kGpuReduceThreads] = op(acc[b % kGpuReduceThreads], partials[b]);
  }
  return BlockReduce<T, kOp>(acc);
}

template <typename T, Op kOp>
void SegmentedReduce(absl::Span<const T> in, absl::Span<const uint64_t> starts,
                     absl::Span<T> values_out) {
  using V = GpuFlagged<T>;
  if (starts.size() <= 1) {  // gpu::SegmentedReduce: num_segments <= 1 is Reduce
    assert(values_out.size() == 1);
    values_out[0] = Reduce<T, kOp>(in);
    return;
  }
  const uint64_t n = in.size();
  const uint64_t num_segments = starts.size();
  assert(values_out.size() == num_segments);
  assert(starts[0] == 0);
  const T* data = in.data();
  auto end_of = [&](uint64_t s) { return s + 1 < num_segments ? starts[s + 1] : n; };
  if (GpuReduceTakesWarpPath(n, num_segments)) {
    for (uint64_t s = 0; s < num_segments; ++s) {
      values_out[s] = WarpSegmentReduce<T, kOp>(data, starts[s], end_of(s));
    }
    return;
  }
  // SegmentedReduceKernel: the segmented scan (its own items per thread;
  // WarpLoadBlocked pads with Identity, BlockExclusiveScan's neutral is
  // (0, NeutralValue)); segment s gets the inclusive value at its last
  // element, an empty one Identity.
  uint64_t next = 0;  // the next segment whose result is still to come
  auto skip_empty = [&] {
    while (next < num_segments && starts[next] == end_of(next)) {
      values_out[next++] = Identity<T>(kOp);
    }
  };
  skip_empty();
  Heads heads(starts);
  RunTiles<V>(
      n, kGpuSegmentedReduceItemsPerThread<T>, SegOp<T, kOp>{}, V{0, Neutral<T, kOp>()},
      V{0, Identity<T>(kOp)}, nullptr, [&](uint64_t i) { return V{heads.At(i), data[i]}; },
      [&](uint64_t i, const V&, const V&, const V& after) {
        if (next < num_segments && i + 1 == end_of(next)) {
          values_out[next++] = after.value;
          skip_empty();
        }
      });
  assert(next == num_segments);
}

}  // namespace

uint64_t GpuScanTileItems(DType dtype, bool segmented) {
  return VisitDType(dtype, [segmented](auto zero) -> uint64_t {
    using T = decltype(zero);
    return static_cast<uint64_t>(kGpuScanThreads) *
           (segmented ? kGpuScanItemsPerThread<T, true> : kGpuScanItemsPerThread<T, false>);
  });
}

uint64_t GpuReduceGrid(DType dtype, uint64_t n) {
  const uint64_t size = DTypeSize(dtype);
  if (n * size <= kGpuReduceSingleBlockMaxBytes) return 1;
  const uint64_t tile = static_cast<uint64_t>(kGpuReduceThreads) * (kGpuReduceInputBytesPerThread / size);
  const uint64_t tiles = (n + tile - 1) / tile;
  return tiles < kGpuReduceFixedGrid ? tiles : kGpuReduceFixedGrid;
}

uint64_t GpuSegmentedReduceTileItems(DType dtype) {
  return VisitDType(dtype, [](auto zero) -> uint64_t {
    using T = decltype(zero);
    return static_cast<uint64_t>(kGpuReduceThreads) * kGpuSegmentedReduceItemsPerThread<T>;
  });
}

template <typename T>
void GpuOrderScan(absl::Span<const T> in, absl::Span<T> out, Op op, bool exclusive,
                  std::optional<T> carry_in, T* carry_out) {
  assert(out.size() == in.size());
  WithOp(op, [&](auto op_tag) {
    Scan<T, decltype(op_tag)::value>(in, out, exclusive, carry_in, carry_out);
  });
}

template <typename T>
void GpuOrderSegmentedScan(absl::Span<const T> in, absl::Span<T> out,
                           absl::Span<const uint64_t> segment_starts, Op op, bool exclusive) {
  assert(out.size() == in.size());
  if (segment_starts.empty()) {
    GpuOrderScan<T>(in, out, op, exclusive);
    return;
  }
  WithOp(op, [&](auto op_tag) {
    SegmentedScan<T, decltype(op_tag)::value>(in, out, segment_starts, exclusive);
  });
}

template <typename T>
T GpuOrderReduce(absl::Span<const T> in, Op op) {
  T result{};
  WithOp(op, [&](auto op_tag) { result = Reduce<T, decltype(op_tag)::value>(in); });
  return result;
}

template <typename T>
void GpuOrderSegmentedReduce(absl::Span<const T> in, absl::Span<const uint64_t> segment_starts,
                             Op op, absl::Span<T> values_out) {
  WithOp(op, [&](auto op_tag) {
    SegmentedReduce<T, decltype(op_tag)::value>(in, segment_starts, values_out);
  });
}

#define PRIMSERVE_GPU_ORDER_INSTANTIATE(T)                                                   \
  template void GpuOrderScan<T>(absl::Span<const T>, absl::Span<T>, Op, bool,               \
                                std::optional<T>, T*);                                      \
  template void GpuOrderSegmentedScan<T>(absl::Span<const T>, absl::Span<T>,                \
                                         absl::Span<const uint64_t>, Op, bool);             \
  template void GpuOrderSegmentedReduce<T>(absl::Span<const T>, absl::Span<const uint64_t>, \
                                           Op, absl::Span<T>);                              \
  template T GpuOrderReduce<T>(absl::Span<const T>, Op);
PRIMSERVE_GPU_ORDER_INSTANTIATE(int32_t)
PRIMSERVE_GPU_ORDER_INSTANTIATE(int64_t)
PRIMSERVE_GPU_ORDER_INSTANTIATE(uint32_t)
PRIMSERVE_GPU_ORDER_INSTANTIATE(uint64_t)
PRIMSERVE_GPU_ORDER_INSTANTIATE(float)
PRIMSERVE_GPU_ORDER_INSTANTIATE(double)
#undef PRIMSERVE_GPU_ORDER_INSTANTIATE

}  // namespace primserve::reference
