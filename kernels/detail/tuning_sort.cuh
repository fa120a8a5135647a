// Tuning constants of the radix sort (sort.cu, radix_*.cuh), apart from the
// other kernels' (tuning.cuh). Numbers for Hopper (sm_90); see the reasons
// beside each and the measurements in kernels/BENCHMARKS.md.
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

// 4-byte keys: 256 threads x 16 keys (4096-key tiles): 16 KB of keys and up to
// 32 KB of 8-byte values staged, 3-4 tiles resident per SM.
// 8-byte keys: 256 x 12 (3072-key tiles), the same staging bytes order.
template <int kKeyBytes>
using SortPolicy = OnesweepPolicy<256, kKeyBytes == 4 ? 16 : 12, 2>;

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
