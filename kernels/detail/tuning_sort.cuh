// Tuning constants of the radix sort (sort.cu, radix_*.cuh), apart from the
// other kernels' (tuning.cuh). Numbers for Hopper (sm_90); see the reasons
// beside each and the measurements in perf/runs/2026-11-28-h200-kernels-sort/table.md.
#ifndef PRIMSERVE_KERNELS_DETAIL_TUNING_SORT_CUH_
#define PRIMSERVE_KERNELS_DETAIL_TUNING_SORT_CUH_

#include <cstdint>

namespace primserve::gpu::detail {

// Digit width: 8 bits. 256 bins are one per thread of a 256-thread block (the
// per-digit look-back needs one thread per digit), and 4 passes for 4-byte
// keys, 8 for 8-byte; 11-bit digits would save a pass of 4-byte keys but need
// 2048 counters per warp in shared memory, which halves the resident tiles.
inline constexpr int kRadixBits = 8;
inline constexpr int kRadixDigits = 1 << kRadixBits;

// A onesweep tile: threads per block and keys per thread. The rank step keeps
// one 257-counter histogram per warp (8 KB at 8 warps) and the scatter
// stages the tile's keys and values in shared memory, so a tile of
// kThreads * kItems keys costs (key + value bytes) per key of shared memory.
template <int kThreads_, int kItems_, int kMinBlocksPerSm_>
struct OnesweepPolicy {
  static constexpr int kThreads = kThreads_;
  static constexpr int kItems = kItems_;
  static constexpr int kTileItems = kThreads_ * kItems_;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;
  static_assert(kThreads_ >= kRadixDigits && kThreads_ % 32 == 0,
                "one thread per digit in the look-back");
};

// 4-byte keys: 256 threads x 16 keys (4096-key tiles) and 3 blocks per SM
// asked of the compiler (an 85-register cap); 8-byte keys: 256 x 8 (2048-key
// tiles), 3 blocks. The ranking and the look-back are latency-bound, so
// resident tiles matter most: measured on an H200 (perf/NOTES.md,
// 2026-11-28), before early counts, 256x16 with 2 blocks per SM sorted 2^28
// uint32 keys in 16.9 ms, with 3 in 12.7 ms; 256x20 (2 blocks) 13.6,
// 384x16 and 512x12 (1 block) 14.9 and 14.5; uint64 keys 256x8 (3 blocks)
// 32.2 ms, 256x12 (2) 33.0, 256x16 (1) 34.1.
template <int kKeyBytes>
using SortPolicy = OnesweepPolicy<256, kKeyBytes == 4 ? 16 : 8, 3>;

// The histogram pass: threads per block, and blocks per SM in its grid
// (enough loads in flight to stream the keys at full bandwidth).
inline constexpr int kHistogramThreads = 256;
inline constexpr int kHistogramBlocksPerSm = 4;

// The block sort (small n, small segments): one block of kSortBlockThreads
// sorts up to kSortBlockItems keys, all passes in shared memory.
inline constexpr int kSortBlockThreads = 256;
inline constexpr int kSortBlockKeysPerThread = 16;
inline constexpr int kSortBlockItems = kSortBlockThreads * kSortBlockKeysPerThread;

// Keys per portion: the look-back's 32-bit status words keep 30 bits of
// count, so larger inputs go through the passes in portions of fewer keys,
// each with its own histogram (64-bit offsets across portions).
inline constexpr uint64_t kPortionMaxItems = (uint64_t{1} << 30) - 1;

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_TUNING_SORT_CUH_
