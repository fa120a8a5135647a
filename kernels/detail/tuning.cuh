// Tuning constants of the scan and reduce kernels, in one place. The numbers
// are for Hopper (sm_90) and serve sm_80 well enough; per-architecture values
// go here, selected on __CUDA_ARCH__ or the device's compute capability.
#ifndef PRIMSERVE_KERNELS_DETAIL_TUNING_CUH_
#define PRIMSERVE_KERNELS_DETAIL_TUNING_CUH_

#include <cstddef>
#include <cstdint>

namespace primserve::detail {

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
template <typename T, typename V = T>
inline constexpr int kItemsPerThread = [] {
  constexpr int vec = 16 / static_cast<int>(sizeof(T));
  constexpr int by_input = kBytesPerThread / static_cast<int>(sizeof(T));
  constexpr int by_value =
      kScanValueBytesPerThread / static_cast<int>(sizeof(V)) / vec * vec;
  constexpr int items = by_input < by_value ? by_input : by_value;
  return items < vec ? vec : items;
}();

template <typename T, typename V = T>
inline constexpr int kTileItems = kBlockThreads * kItemsPerThread<T, V>;

// Polling back-off of the look-back: the first wait is short, later ones
// double up to the cap, so that spinning warps leave L2 bandwidth to the
// tiles still loading their input.
inline constexpr unsigned kLookbackFirstSleepNs = 32;
inline constexpr unsigned kLookbackMaxSleepNs = 512;

// Reduce: resident blocks per SM of the grid-stride kernel, and the input
// size up to which one block does the whole reduction (one launch, no
// counter reset: lowest latency for small requests).
inline constexpr int kReduceBlocksPerSm = 4;
inline constexpr int kReduceSingleBlockMaxBytes = 64 * 1024;

// SegmentedReduce: up to this average segment length one warp reduces each
// segment; longer segments go through the balanced segmented-scan pass.
inline constexpr uint64_t kWarpPerSegmentMaxAverage = 4096;

}  // namespace primserve::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_TUNING_CUH_
