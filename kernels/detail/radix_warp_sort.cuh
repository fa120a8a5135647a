// One warp sorts a whole short segment (up to 32 * kItems keys) in shared
// memory, every digit pass there: the segmented sort's small segments, which
// a block (radix_block_sort.cuh) would sort with most of its threads idle
// and a block-wide barrier per step. Each warp of a block takes segments of
// its own (a grid-stride loop over warps); per pass it counts its keys per
// digit (shared atomics into its own histogram), scans the 256 counts into
// digit starts (8 per lane, then across the lanes), ranks its keys by the
// ballot match of radix_rank.cuh and stages them in sorted order.
#ifndef PRIMSERVE_KERNELS_DETAIL_RADIX_WARP_SORT_CUH_
#define PRIMSERVE_KERNELS_DETAIL_RADIX_WARP_SORT_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/detail/radix_key.cuh"
#include "kernels/detail/radix_onesweep.cuh"
#include "kernels/detail/radix_rank.cuh"
#include "kernels/detail/warp.cuh"

namespace primserve::gpu::detail {

// Shared memory of one warp: its digit counters and the staging of its keys
// and values.
template <int kItems, typename U, typename P>
struct WarpSortSmem {
  static constexpr bool kHasPayload = !std::is_same_v<P, NoPayload>;
  static constexpr int kSegmentItems = kWarpThreads * kItems;
  static constexpr size_t kKeysOffset = kRadixDigits * sizeof(uint32_t);
  static constexpr size_t kPayloadOffset = kKeysOffset + AlignUp(kSegmentItems * sizeof(U), 16);
  static constexpr size_t kWarpBytes =
      AlignUp(kPayloadOffset + (kHasPayload ? kSegmentItems * sizeof(P) : 0), 16);
};

// Segments [starts[s], starts[s + 1] or n) of 1 to 32 * kItems keys, for s in
// [0, num_segments) (num_segments == 0: one segment [0, n)); the others are
// left to the block sort and the global passes. iota (8-byte P): the payload
// is each key's index in the array. Launched with kThreads threads and
// kThreads / 32 * WarpSortSmem::kWarpBytes of dynamic shared memory.
template <int kThreads, int kItems, typename U, typename P>
__global__ void __launch_bounds__(kThreads)
    WarpSortKernel(const U* __restrict__ keys_in, U* keys_out, const P* payload_in,
                   P* payload_out, bool iota, const uint64_t* __restrict__ starts,
                   uint64_t num_segments, uint64_t n, RadixCodec<U> codec) {
  using Smem = WarpSortSmem<kItems, U, P>;
  constexpr int kSegmentItems = Smem::kSegmentItems;
  constexpr int kDigitsPerLane = kRadixDigits / kWarpThreads;
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* mine = smem + WarpId() * Smem::kWarpBytes;
  uint32_t* counts = reinterpret_cast<uint32_t*>(mine);
  U* staged_keys = reinterpret_cast<U*>(mine + Smem::kKeysOffset);
  P* staged_payload = reinterpret_cast<P*>(mine + Smem::kPayloadOffset);
  const int lane = LaneId();
  const unsigned lower_or_self = (2u << lane) - 1;
  const uint64_t segments = num_segments == 0 ? 1 : num_segments;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * (kThreads / kWarpThreads);
  for (uint64_t s = static_cast<uint64_t>(blockIdx.x) * (kThreads / kWarpThreads) + WarpId();
       s < segments; s += warps) {
    const uint64_t begin = num_segments == 0 ? 0 : starts[s];
    const uint64_t end = s + 1 < num_segments ? starts[s + 1] : n;
    if (end - begin > kSegmentItems || end == begin) continue;
    const uint32_t count = static_cast<uint32_t>(end - begin);
    U key[kItems];
    [[maybe_unused]] P payload[kItems];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const uint32_t p = j * kWarpThreads + lane;
      if (p < count) {
        key[j] = keys_in[begin + p];
        if constexpr (Smem::kHasPayload) {
          payload[j] = iota ? static_cast<P>(begin + p) : payload_in[begin + p];
        }
      }
    }
    for (int pass = 0; pass < RadixCodec<U>::kPasses; ++pass) {
      // Keys past the end: the last digit (radix_rank.cuh), never staged.
      uint32_t digit[kItems];
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        digit[j] = j * kWarpThreads + lane < count ? codec.Digit(key[j], pass) : kRadixDigits - 1;
      }
#pragma unroll
      for (int k = 0; k < kDigitsPerLane; ++k) counts[lane * kDigitsPerLane + k] = 0;
      __syncwarp();
#pragma unroll
      for (int j = 0; j < kItems; ++j) atomicAdd(&counts[digit[j]], 1u);
      __syncwarp();
      // Digit starts: this lane's 8 digits in turn, after the lanes before.
      uint32_t own[kDigitsPerLane];
      uint32_t total = 0;
#pragma unroll
      for (int k = 0; k < kDigitsPerLane; ++k) {
        own[k] = total;
        total += counts[lane * kDigitsPerLane + k];
      }
      uint32_t inclusive = total;
#pragma unroll
      for (int delta = 1; delta < kWarpThreads; delta *= 2) {
        const uint32_t up = __shfl_up_sync(kFullMask, inclusive, delta);
        if (lane >= delta) inclusive += up;
      }
#pragma unroll
      for (int k = 0; k < kDigitsPerLane; ++k) {
        counts[lane * kDigitsPerLane + k] = inclusive - total + own[k];
      }
      __syncwarp();
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        const unsigned peers = MatchDigit(digit[j]);
        const int leader = kWarpThreads - 1 - __clz(peers);
        const uint32_t below = __popc(peers & lower_or_self);
        uint32_t first = 0;
        if (lane == leader) first = atomicAdd(&counts[digit[j]], below);
        const uint32_t rank = __shfl_sync(kFullMask, first, leader) + below - 1;
        if (j * kWarpThreads + lane < count) {
          staged_keys[rank] = key[j];
          if constexpr (Smem::kHasPayload) staged_payload[rank] = payload[j];
        }
      }
      __syncwarp();
      if (pass + 1 == RadixCodec<U>::kPasses) break;
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        const uint32_t p = j * kWarpThreads + lane;
        if (p < count) {
          key[j] = staged_keys[p];
          if constexpr (Smem::kHasPayload) payload[j] = staged_payload[p];
        }
      }
      // The next pass's counter reset is ordered after these reads by the
      // __syncwarp() before its atomics; the staging writes come after two more.
    }
    for (uint32_t p = lane; p < count; p += kWarpThreads) {
      keys_out[begin + p] = staged_keys[p];
      if constexpr (Smem::kHasPayload) payload_out[begin + p] = staged_payload[p];
    }
    __syncwarp();
  }
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_RADIX_WARP_SORT_CUH_
