// Tuning constants of the radix sort (sort.cu, radix_*.cuh), apart from the
// other kernels' (tuning.cuh). Numbers for Hopper (sm_90); see the reasons
// beside each and the measurements in perf/runs/2026-11-28-h200-sort/.
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

// Tiles by key and payload bytes (payload 0: keys only; 8: 8-byte values or
// the argsort's indices). The ranking and the look-back are latency-bound,
// so resident warps matter most, then tile size (the per-tile scans and the
// look-back amortized over more keys). Measured on an H200 at 2^28
// (perf/NOTES.md, 2026-11-28, after the ballot match; ours/CUB time):
// uint32 keys 256x16 with 4 blocks per SM (a 64-register cap) 0.89x, with 3
// 0.79x, 384x20 (2) 0.88x, 512x12 (2) 0.80x; uint32 pairs 384x20 (2) 0.88x,
// 256x16 (3 or 4) 0.79-0.80x; uint64 keys 384x12 (1) 0.84x, 256x12 (2)
// 0.82x, 256x8 (3) 0.74x; uint64 pairs 256x16 (2) 0.81x, 384x12 (1) 0.60x.
// 8-byte payloads under 4-byte keys take the 8-byte keys' pairs tile
// (the same registers per key).
template <int kKeyBytes, int kPayloadBytes>
struct SortPolicyFor;
template <>
struct SortPolicyFor<4, 0> {
  using type = OnesweepPolicy<256, 16, 4>;
};
template <>
struct SortPolicyFor<4, 4> {
  using type = OnesweepPolicy<384, 20, 2>;
};
template <>
struct SortPolicyFor<4, 8> {
  using type = OnesweepPolicy<256, 16, 2>;
};
template <>
struct SortPolicyFor<8, 0> {
  using type = OnesweepPolicy<384, 12, 1>;
};
template <int kPayloadBytes>
struct SortPolicyFor<8, kPayloadBytes> {
  using type = OnesweepPolicy<256, 16, 2>;
};
template <int kKeyBytes, int kPayloadBytes>
using SortPolicy = typename SortPolicyFor<kKeyBytes, kPayloadBytes>::type;

// The histogram pass: threads per block, and blocks per SM in its grid
// (enough loads in flight to stream the keys at full bandwidth).
inline constexpr int kHistogramThreads = 256;
inline constexpr int kHistogramBlocksPerSm = 4;

// The block sort (small n, small segments): one block of kSortBlockThreads
// sorts up to kSortBlockItems keys, all passes in shared memory.
inline constexpr int kSortBlockThreads = 256;
inline constexpr int kSortBlockKeysPerThread = 16;
inline constexpr int kSortBlockItems = kSortBlockThreads * kSortBlockKeysPerThread;

// The warp sort (small segments): one warp sorts a segment of up to
// kWarpSortItems keys in shared memory; kWarpSortThreads / 32 warps a block.
inline constexpr int kWarpSortKeysPerLane = 8;
inline constexpr int kWarpSortItems = 32 * kWarpSortKeysPerLane;
inline constexpr int kWarpSortThreads = 256;

// Keys per portion: the look-back's 32-bit status words keep 30 bits of
// count, so larger inputs go through the passes in portions of fewer keys,
// each with its own histogram (64-bit offsets across portions).
inline constexpr uint64_t kPortionMaxItems = (uint64_t{1} << 30) - 1;

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_TUNING_SORT_CUH_
