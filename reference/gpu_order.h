// The GPU kernels' association order, on the CPU (issue 18, reproducible
// mode). For float SUM and PROD the bits of a scan or reduction depend on how
// the combines are associated; these functions do, combine for combine, what
// the CUDA kernels do, so that the CPU backend in reproducible mode and the
// GPU give the same bits. They are plain C++ (no CUDA) and mirror:
//
//   GpuOrderScan            gpu::Scan / gpu::ScanWithCarry
//                           (kernels/detail/scan_kernel.cuh ScanKernel, plain,
//                           V = T, DefaultScanPolicy)
//   GpuOrderSegmentedScan   gpu::SegmentedScan (ScanKernel, segmented,
//                           V = Flagged<T>, SegmentedOp; empty starts: gpu::Scan)
//   GpuOrderReduce          gpu::Reduce (kernels/reduce.cu ReduceKernel with
//                           the fixed grid of float SUM/PROD)
//   GpuOrderSegmentedReduce gpu::SegmentedReduce (0 or 1 segment: gpu::Reduce;
//                           more: LaunchSegmentedReduce's warp-per-segment
//                           kernel or its segmented-scan kernel, chosen as it
//                           chooses)
//
// each for one launch over exactly the given input (tiles start at in[0]).
// A request batched with others into one launch, or split at chunk
// boundaries that are not multiples of GpuScanTileItems, gets other bits:
// keeping a reproducible request's launches shaped like this is the caller's
// side of the contract.
//
// The order, per tile of kGpuScanThreads threads x items per thread (the
// tile size is GpuScanTileItems):
//  - thread t of a tile holds items [t * items, (t + 1) * items) of the tile
//    (WarpLoadBlocked), items past n padded with Neutral (float SUM: -0.0,
//    PROD: 1; SegmentedReduce pads with Identity, which only reaches values
//    nobody reads);
//  - thread_total = left fold of its items from its first item;
//  - BlockExclusiveScan (block.cuh): Kogge-Stone WarpInclusiveScan over the
//    32 thread totals of a warp (delta = 1, 2, 4, 8, 16: lane i >= delta
//    takes op(lane i - delta, lane i)), in_warp = lane - 1's inclusive value
//    (lane 0: neutral), warp_prefix = left fold of the earlier warps'
//    aggregates (warp 0: neutral), tile_total = left fold of all 8,
//    thread_prefix = op(warp_prefix, in_warp), always combined, also with
//    the neutral;
//  - the look-back (lookback.cuh WarpLookbackInOrder, for float SUM/PROD):
//    tile t's prefix is L(t - 1), L(0) = A_0, L(t) = op(L(t - 1), A_t),
//    A_t = tile t's tile_total (tile 0's has the carry in front);
//  - running = op(L(t - 1), thread_prefix) for t > 0 (with a carry c, tile
//    0's is op(c, thread_prefix)), then per item running = op(running, x)
//    (inclusive output: after; exclusive: before, with Identity at element
//    0 without a carry, at each segment head when segmented).
// A segmented scan is the same over Flagged values (head, value) with
// SegmentedOp: b.head ? b : (a.head, a.value op b.value).
//
// Exactness: every combine is core/primitives.h Combine (what the kernels'
// CombineOp calls), done in T: float in float (FLT_EVAL_METHOD 0, SSE on
// x86-64), no FMA (SUM only adds and PROD only multiplies, so there is
// nothing to contract; gpu_order.cc is also built with -ffp-contract=off),
// no fast-math (checked at compile time), subnormals kept on both sides (the
// nvcc flags in bazel/cuda.bzl have no -ftz / --use_fast_math, so nvcc
// keeps IEEE subnormals and round-to-nearest for a lone add or multiply).
// Not emulated: NaN payloads and signs. x86 propagates an input NaN's payload
// and makes 0xffc00000 (negative) for inf - inf; the GPU gives its
// canonical NaN. Compare NaN as NaN (GpuOrderSameBits does).
//
// Written while the lead changes the look-back; details I was unsure of are
// marked UNSURE in gpu_order.cc.
#ifndef PRIMSERVE_REFERENCE_GPU_ORDER_H_
#define PRIMSERVE_REFERENCE_GPU_ORDER_H_

#include <cstdint>
#include <cstring>
#include <optional>

#include "absl/types/span.h"
#include "core/primitives.h"

namespace primserve::reference {

// ---------------------------------------------------------------- geometry
// Each constant names the kernel constant it mirrors; gpu_order_test.cc
// static_asserts them against kernels/detail/tuning.cuh.

// kernels/detail/warp.cuh kWarpThreads.
inline constexpr int kGpuWarpThreads = 32;
// ScanKernel: DefaultScanPolicy = ScanPolicy<256, 128, 128, ...>
// (tuning.cuh): kThreads, kBytesPerThread, kValueBytesPerThread.
inline constexpr int kGpuScanThreads = 256;
inline constexpr int kGpuScanInputBytesPerThread = 128;
inline constexpr int kGpuScanValueBytesPerThread = 128;
// SegmentedReduceKernel (reduce.cu SegmentedReduceConfig): kBlockThreads,
// kItemsPerThread<T, Flagged<R>> = kItemsPerThreadFor<T, V, kBytesPerThread,
// kScanValueBytesPerThread>.
inline constexpr int kGpuReduceThreads = 256;
inline constexpr int kGpuReduceInputBytesPerThread = 64;
inline constexpr int kGpuReduceValueBytesPerThread = 128;
// tuning.cuh kWarpPerSegmentMaxAverage: SegmentedReduce takes the
// warp-per-segment kernel when n <= this * num_segments.
inline constexpr uint64_t kGpuWarpPerSegmentMaxAverage = 4096;
// ReduceKernel (gpu::Reduce): kBlockThreads threads, kReduceItems<T> =
// kBytesPerThread / sizeof(T) items per thread per tile, one block up to
// kReduceSingleBlockMaxBytes of input, else min(tiles, the grid) blocks with
// the grid kFixedOrderReduceGrid (132 SMs x 4) for float SUM/PROD. Other
// ops get a grid from the device's SM count, which changes nothing but NaN
// payloads for them.
inline constexpr uint64_t kGpuReduceSingleBlockMaxBytes = 64 * 1024;
inline constexpr int kGpuReduceFixedGrid = 132 * 4;
template <typename T>
inline constexpr int kGpuReduceItemsPerThread = kGpuReduceInputBytesPerThread / sizeof(T);

// operators.cuh Flagged<V>: the segmented scan's value (same layout).
template <typename T>
struct GpuFlagged {
  uint32_t head;
  T value;
};

// tuning.cuh kItemsPerThreadFor<T, V, kInputBytes, kValueBytes>, as a
// function of the sizes: a multiple of T's 16-byte vector, bounded by the
// input bytes and by the value budget.
constexpr int GpuItemsPerThreadFor(int t_bytes, int v_bytes, int input_bytes, int value_bytes) {
  const int vec = 16 / t_bytes;
  const int by_input = input_bytes / t_bytes;
  const int by_value = value_bytes / v_bytes / vec * vec;
  const int items = by_input < by_value ? by_input : by_value;
  return items < vec ? vec : items;
}

// Items per thread of ScanKernel (plain: V = T; segmented: V = Flagged<T>).
template <typename T, bool kSegmented>
inline constexpr int kGpuScanItemsPerThread = GpuItemsPerThreadFor(
    sizeof(T), kSegmented ? sizeof(GpuFlagged<T>) : sizeof(T), kGpuScanInputBytesPerThread,
    kGpuScanValueBytesPerThread);
// Items per thread of SegmentedReduceKernel (V = Flagged<T>; SUM..MAX).
template <typename T>
inline constexpr int kGpuSegmentedReduceItemsPerThread =
    GpuItemsPerThreadFor(sizeof(T), sizeof(GpuFlagged<T>), kGpuReduceInputBytesPerThread,
                         kGpuReduceValueBytesPerThread);

static_assert(kGpuScanItemsPerThread<float, false> == 32);
static_assert(kGpuScanItemsPerThread<double, false> == 16);
static_assert(kGpuScanItemsPerThread<float, true> == 16);
static_assert(kGpuScanItemsPerThread<double, true> == 8);
static_assert(kGpuSegmentedReduceItemsPerThread<float> == 16);
static_assert(kGpuSegmentedReduceItemsPerThread<double> == 8);

// Items per tile of ScanKernel for dtype (plain or segmented): float32 8192
// / 4096, float64 4096 / 2048 (the 4- and 8-byte integers alike). A plain
// scan cut into chunks of a multiple of this, carried with carry_in /
// carry_out, gives the bits of one scan. Must equal gpu::ScanTileItems
// (kernels/scan.h), which says the same for the CUDA side.
uint64_t GpuScanTileItems(DType dtype, bool segmented);

// Items per tile of SegmentedReduceKernel's scan path for dtype.
uint64_t GpuSegmentedReduceTileItems(DType dtype);

// Whether gpu::SegmentedReduce over n elements and num_segments (>= 2)
// segments takes the warp-per-segment kernel (else the segmented scan).
constexpr bool GpuReduceTakesWarpPath(uint64_t n, uint64_t num_segments) {
  return n <= kGpuWarpPerSegmentMaxAverage * num_segments;
}

// Blocks of gpu::Reduce's launch for n elements of dtype (float SUM/PROD).
uint64_t GpuReduceGrid(DType dtype, uint64_t n);

// ------------------------------------------------------------- emulations
// T: int32_t, int64_t, uint32_t, uint64_t, float or double (instantiated in
// gpu_order.cc); op: SUM, PROD, MIN or MAX (integers and MIN/MAX give the
// plain reference's answer anyway; float SUM/PROD are the point). `out` has
// in.size() elements and may be `in` itself.

// gpu::ScanWithCarry (gpu::Scan without carry_in and carry_out). carry_in
// is combined in front of the first input (an exclusive scan starts with
// it); *carry_out (if not null) gets L(last tile): carry_in op the tile
// aggregates, left to right; n == 0: carry_in, or Identity(op).
template <typename T>
void GpuOrderScan(absl::Span<const T> in, absl::Span<T> out, Op op, bool exclusive,
                  std::optional<T> carry_in = std::nullopt, T* carry_out = nullptr);

// gpu::SegmentedScan. segment_starts validated as in reference.h (first 0,
// non-decreasing, <= n); empty: gpu::Scan's order (GpuOrderScan), as
// gpu::SegmentedScan with num_segments == 0 does. Note that one start {0}
// is NOT the same as none: it takes the segmented kernel's geometry.
template <typename T>
void GpuOrderSegmentedScan(absl::Span<const T> in, absl::Span<T> out,
                           absl::Span<const uint64_t> segment_starts, Op op, bool exclusive);

// gpu::Reduce: each block folds its tiles (tile b, b + grid, ...) per
// thread in order from Neutral (thread t of a tile: items (k * 256 + t) *
// vec + v, k then v ascending), then the partial last tile element by
// element (stride grid * 256), then BlockReduce (WarpSuffixReduce per warp,
// then warp 0 op warp 1 op ... op warp 7); with several blocks the last one
// folds the partials (thread t: partials t, t + 256, ... from Neutral) and
// BlockReduces them. n == 0: Identity(op).
template <typename T>
T GpuOrderReduce(absl::Span<const T> in, Op op);

// gpu::SegmentedReduce: values_out[s] = segment s's result (Identity(op)
// when empty). No segment or one (the server passes {0} for a reduce
// without segments): gpu::Reduce (GpuOrderReduce). values_out has
// max(1, segment_starts.size()) elements.
template <typename T>
void GpuOrderSegmentedReduce(absl::Span<const T> in, absl::Span<const uint64_t> segment_starts,
                             Op op, absl::Span<T> values_out);

// The same bits, except that any two NaNs match (NaN payloads and signs are
// not emulated, see above). Integers: ==.
template <typename T>
bool GpuOrderSameBits(T a, T b) {
  if constexpr (sizeof(T) == 4) {
    if (IsNan(a) && IsNan(b)) return true;
    uint32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    return x == y;
  } else {
    if (IsNan(a) && IsNan(b)) return true;
    uint64_t x, y;
    std::memcpy(&x, &a, 8);
    std::memcpy(&y, &b, 8);
    return x == y;
  }
}

}  // namespace primserve::reference

#endif  // PRIMSERVE_REFERENCE_GPU_ORDER_H_
