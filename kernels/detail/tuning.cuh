// Tuning constants of every kernel (scan, reduce, the compaction family,
// aggregate), in one place. The numbers
// are for Hopper (sm_90) and serve sm_80 well enough; per-architecture values
// go here, selected on __CUDA_ARCH__ or the device's compute capability.
#ifndef PRIMSERVE_KERNELS_DETAIL_TUNING_CUH_
#define PRIMSERVE_KERNELS_DETAIL_TUNING_CUH_

#include <cstddef>
#include <cstdint>

namespace primserve::gpu::detail {

// Threads of every scan/reduce block: 8 warps.
inline constexpr int kBlockThreads = 256;

// Bytes of input each thread loads per tile: four 16-byte vectors keep enough
// loads in flight to saturate HBM3 with ~4 resident blocks per SM.
inline constexpr int kBytesPerThread = 64;

// Register budget (bytes) for the scan's per-thread values: larger scan value
// types (segment flags, (value, index) pairs) get fewer items per thread.
inline constexpr int kScanValueBytesPerThread = 128;

// Items each thread owns in a tile: a multiple of the 16-byte vector width of
// the input type T, bounded by the register budget of the scan value type V.
template <typename T, typename V, int kInputBytes, int kValueBytes>
inline constexpr int kItemsPerThreadFor = [] {
  constexpr int vec = 16 / static_cast<int>(sizeof(T));
  constexpr int by_input = kInputBytes / static_cast<int>(sizeof(T));
  constexpr int by_value = kValueBytes / static_cast<int>(sizeof(V)) / vec * vec;
  constexpr int items = by_input < by_value ? by_input : by_value;
  return items < vec ? vec : items;
}();

template <typename T, typename V = T>
inline constexpr int kItemsPerThread =
    kItemsPerThreadFor<T, V, kBytesPerThread, kScanValueBytesPerThread>;

template <typename T, typename V = T>
inline constexpr int kTileItems = kBlockThreads * kItemsPerThread<T, V>;

// Polling back-off of the look-back: the first wait is short, later ones
// double up to the cap, so that spinning warps leave L2 bandwidth to the
// tiles still loading their input.
inline constexpr unsigned kLookbackFirstSleepNs = 32;
inline constexpr unsigned kLookbackMaxSleepNs = 512;

// Look-back window: each lane of the looking-back warp reads this many
// consecutive tile slots per round trip, so one L2 round trip covers
// 32 * kLookbackSlotsPerLane predecessors. Measured on an H200 (perf/NOTES.md):
// wider windows (2, 4, 8) were slower, most likely from the extra polling
// traffic on the few hot status lines, so the paper's 32-slot window stays.
inline constexpr int kLookbackSlotsPerLane = 1;
inline constexpr bool kLookbackWaitAll = true;

// A look-back configuration (lookback.cuh takes one as a template argument;
// the default is the tuned one above).
// kWaitAll: a window is combined only once none of its slots is X (the
// paper's rule); otherwise only the slots after its last P must be non-X.
// kFixedOrder: ops whose bits depend on the association (float SUM/PROD)
// combine tile aggregates in tile order (lookback.cuh: reproducible
// results); false keeps the timing-dependent tree, for the benchmark's
// comparison only.
// In launches of at least kDelayMinTiles tiles (large inputs):
//   kInitialDelayNs: after publishing A, the looking-back warp sleeps this
//   long before its first poll (CUB's "L2 write latency" delay); 0: none.
//   kPollNs: a fixed sleep between polls instead of the kFirstSleepNs..
//   kMaxSleepNs doubling; 0: the doubling (smaller launches always double).
// kRelaxed: packed status words are read and written with ld/st.relaxed.gpu
// instead of volatile (system-scope) accesses.
// kNearestFirst: before reading its first window, the warp polls only the
// nearest predecessor's slot (one lane) until it is no longer X.
// kDelayMinTiles: the launch size (tiles) from which the delays above apply.
// Launches of fewer tiles never sleep before their first poll (small
// inputs: every tile is resident at once; CUB's threshold is 500 blocks).
inline constexpr int64_t kLookbackDelayMinTiles = 512;
template <int kSlotsPerLane_ = kLookbackSlotsPerLane,
          unsigned kFirstSleepNs_ = kLookbackFirstSleepNs,
          unsigned kMaxSleepNs_ = kLookbackMaxSleepNs, bool kWaitAll_ = kLookbackWaitAll,
          bool kFixedOrder_ = true, unsigned kInitialDelayNs_ = 0, bool kRelaxed_ = false,
          unsigned kPollNs_ = 0, bool kNearestFirst_ = false,
          int64_t kDelayMinTiles_ = kLookbackDelayMinTiles>
struct LookbackPolicy {
  static constexpr int kSlotsPerLane = kSlotsPerLane_;
  static constexpr unsigned kFirstSleepNs = kFirstSleepNs_;
  static constexpr unsigned kMaxSleepNs = kMaxSleepNs_;
  static constexpr bool kWaitAll = kWaitAll_;
  static constexpr bool kFixedOrder = kFixedOrder_;
  static constexpr unsigned kInitialDelayNs = kInitialDelayNs_;
  static constexpr bool kRelaxed = kRelaxed_;
  static constexpr unsigned kPollNs = kPollNs_;
  static constexpr bool kNearestFirst = kNearestFirst_;
  static constexpr int64_t kDelayMinTiles = kDelayMinTiles_;
};
using DefaultLookbackPolicy = LookbackPolicy<>;

// Scan tiles: threads per block, input bytes per thread (a multiple of 16),
// register budget for the scanned values, the minimum resident blocks per
// SM asked of the compiler (__launch_bounds__; caps registers), and the
// look-back.
// kBlockIdxOrder: tile = blockIdx.x instead of an index from the atomic
// counter (see scan_kernel.cuh).
template <int kThreads_, int kBytesPerThread_, int kValueBytesPerThread_, int kMinBlocksPerSm_,
          typename Lookback_ = DefaultLookbackPolicy, bool kBlockIdxOrder_ = false>
struct ScanPolicy {
  static constexpr int kThreads = kThreads_;
  static constexpr int kBytesPerThread = kBytesPerThread_;
  static constexpr int kValueBytesPerThread = kValueBytesPerThread_;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;
  using Lookback = Lookback_;
  static constexpr bool kBlockIdxOrder = kBlockIdxOrder_;
};
// The scan's look-back (issue 13, perf/NOTES.md, measured on an H100):
// in launches of >= kLookbackDelayMinTiles tiles the looking-back warp
// sleeps 1500 ns after publishing A, then polls every 800 ns (CUB's
// fixed-delay scheme; its sm_90 tunings use about 1.1-1.3 us then
// 0.6-0.7 us). The polling of hundreds of resident look-back warps was
// what slowed the scan: 2^28 int32 910 -> 835 us, float32 905 -> 832,
// and 2000/1000 ns was no faster. Smaller launches keep the 8..64 ns
// doubling (a 1.5 us sleep is most of a 2^20 scan).
using ScanLookbackPolicy = LookbackPolicy<1, 8, 64, true, true, 1500, false, 800>;
// The scan's policy: 256 threads, 128 input bytes per thread (8192-item
// tiles for 4-byte values, 4096 for 8-byte: half as many look-backs as 16
// 4-byte items, ~17% faster at 2^28 on an H200), and 4 blocks per SM asked
// of the compiler: a 64-register cap, which the 4-byte scans meet anyway
// and which takes the 8-byte ones from 70 (SUM) and 90 (MAX) registers, 3
// and 2 blocks per SM, to 4 without spills (int64 SUM 1790 -> 1657 us at
// 2^28 by itself, int64 MAX 2040 -> 1616 with the look-back above).
using DefaultScanPolicy = ScanPolicy<256, 128, 128, 4, ScanLookbackPolicy>;

// Reduce: resident blocks per SM of the grid-stride kernel, and the input
// size up to which one block does the whole reduction (one launch, no
// counter reset: lowest latency for small requests).
inline constexpr int kReduceBlocksPerSm = 4;
// Reduce's grid for float SUM/PROD, whose bits depend on it: fixed, so that
// every GPU gives the same bits (and the CPU can follow: reference/gpu_order.h);
// kReduceBlocksPerSm on each of the 132 SMs of an H100 or H200 SXM.
inline constexpr int kFixedOrderReduceGrid = 132 * kReduceBlocksPerSm;
inline constexpr int kReduceSingleBlockMaxBytes = 64 * 1024;

// SegmentedReduce: up to this average segment length one warp reduces each
// segment; longer segments go through the balanced segmented-scan pass.
inline constexpr uint64_t kWarpPerSegmentMaxAverage = 4096;
// Elements each lane of a warp-per-segment reduce folds per iteration.
inline constexpr int kWarpSegmentUnroll = 8;

// Threads of the small kernels that reset tile status slots and counters.
inline constexpr int kInitBlockThreads = 256;

// Compaction family (Select, Partition, Unique, RLE, ReduceByKey, segmented
// Select): threads per block.
inline constexpr int kCompactBlock = 256;
inline constexpr int kCompactWarps = kCompactBlock / 32;

// Look-back of the compaction kernels: the paper's 32-tile window (one slot
// per lane). Measured on an H200 (perf/NOTES.md): 4, 8 and 16 slots per lane
// made select_if50 int32 2^28 1.26x, 2.1x and 5x slower, RLE and ReduceByKey
// likewise: the extra polling loads on the hot status lines cost more than
// the round trips they save. Polling as the scan's (ScanLookbackPolicy), in
// launches of >= 512 tiles: sleep 1.5 us after publishing the count, then
// poll every 0.8 us; smaller launches keep the 32..512 ns doubling.
// Measured on an H100 (perf/NOTES.md, 2026-11-26): select 2^28 int32
// 801 -> 750 us, unique 685 -> 627, partition 1594 -> 1363 (with its
// smaller blocks); 0.7 / 0.35 us was 2-4% slower for these.
using CompactLookback = LookbackPolicy<1, 32, 512, true, true, 1500, false, 800>;
// ReduceByKey (4096- or 2048-item tiles, shorter-lived): 0.7 us, then
// every 0.35 us (1-5% faster than 1.5 / 0.8 at 2^24-2^28 on the H100;
// CUB's one 1 us wait then 32..512 ns doubling was 0-2% slower on the H200),
// from 2048 tiles (2^23 4-byte, 2^22 8-byte items): at 512 tiles (2^20
// 8-byte items) the sleeps made RLE, then on this kernel, 15% slower.
using RunsLookback = LookbackPolicy<1, 32, 512, true, true, 700, false, 350, false, 2048>;

// Select/Partition/Unique: 16-byte vectors per thread. 8 gives 32 KB tiles
// (8192 4-byte or 4096 8-byte items); measured on an H200, 16 KB tiles were
// 1.23x slower (2026-11-21), and 24, 28, 48 and 64 KB tiles (8, 7, 4 and 3
// blocks per SM) 1-15% slower at 2^28 (2026-11-26, perf/NOTES.md).
inline constexpr int kSelectNumVec = 8;
// Select/Partition/Unique: resident blocks per SM asked of the compiler
// (__launch_bounds__; 6 caps registers at 40, no spills). Shared memory
// allows 6 blocks of 32 KB tiles.
inline constexpr int kSelectMinBlocksPerSm = 6;

// ReduceByKey tiles: items per thread when keys and values are both 4 bytes
// (kItems4) and otherwise (kItems8), the resident blocks per SM asked of the
// compiler for each (__launch_bounds__: caps registers), and the look-back.
// kLocalFirst: where the association of the run aggregates does not matter
// (integers, MIN/MAX, unordered floats), each tile finds its runs' aggregates
// from a tile-local scan before its look-back, then only corrects the run
// continuing from the previous tile (runs_kernel.cuh).
// A policy is a template argument of detail/runs_kernel.cuh, so
// bench/runs_variants.cu times several in one process.
template <int kItems4_, int kItems8_, int kMinBlocks4_, int kMinBlocks8_, typename Lookback_,
          bool kLocalFirst_ = false>
struct RunsPolicy {
  static constexpr bool kLocalFirst = kLocalFirst_;
  template <typename KB, typename V>
  static constexpr bool kAll4 = sizeof(KB) <= 4 && sizeof(V) <= 4;
  template <typename KB, typename V>
  static constexpr int kItems = kAll4<KB, V> ? kItems4_ : kItems8_;
  template <typename KB, typename V>
  static constexpr int kMinBlocksPerSm = kAll4<KB, V> ? kMinBlocks4_ : kMinBlocks8_;
  using Lookback = Lookback_;
};
// 16 items per thread when keys and values are 4 bytes (4096-item tiles, as
// the scan), else 8; the staging arrays stay at 32 KB either way.
// Blocks per SM: 3 (80 registers, 0-40 bytes of spills, 120 for float
// MIN/MAX values) when keys and values are 4 bytes; without a cap the
// kernels took 140+ registers, one block per SM. With an 8-byte key or
// value, 4 (64 registers, 0-40 bytes of spills): on the H200 at 2^28
// (perf/NOTES.md, fifth round) int64 values 7-9% and unordered float64
// 8-11% faster than at 3, ordered float64 0-4%; 4 blocks of 4-byte rows
// spill 88-120 bytes and ran 4-13% slower. Cooperative cp.async loads
// through the staging arrays (coalesced, swizzled) were 2-8% slower than
// each thread's own 16-byte loads except for ordered float32 (+2-5%).
using DefaultRunsPolicy = RunsPolicy<16, 8, 3, 4, RunsLookback>;

// Segmented Select: items per thread.
inline constexpr int kSegItems = 8;

// AggregateByKey: threads per block, elements per lane per iteration (ILP),
// the shared memory a block may use to privatize per-key results, and the
// most distinct keys for which the warp-aggregated shared path is taken.
inline constexpr int kAggBlock = 256;
inline constexpr int kAggUnroll = 4;
inline constexpr size_t kAggSharedMaxBytes = 48 * 1024;
inline constexpr uint64_t kWarpAggregateMaxSharedKeys = 256;

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_TUNING_CUH_
