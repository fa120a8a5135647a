// One block sorts a whole segment of up to kThreads * kItems keys in shared
// memory, every digit pass there (rank, stage in sorted order, reload
// striped), writing only the result: the sort of small inputs (one launch,
// no histogram pass) and of small segments (one block each).
#ifndef PRIMSERVE_KERNELS_DETAIL_RADIX_BLOCK_SORT_CUH_
#define PRIMSERVE_KERNELS_DETAIL_RADIX_BLOCK_SORT_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/detail/radix_key.cuh"
#include "kernels/detail/radix_onesweep.cuh"
#include "kernels/detail/radix_rank.cuh"

namespace primserve::gpu::detail {

template <int kThreads, int kItems, typename U, typename P>
struct BlockSortSmem {
  using Rank = BlockRadixRank<kThreads, kItems>;
  static constexpr bool kHasPayload = !std::is_same_v<P, NoPayload>;
  static constexpr int kTileItems = kThreads * kItems;
  static constexpr size_t kKeysOffset = AlignUp(sizeof(typename Rank::Storage), 16);
  static constexpr size_t kPayloadOffset = kKeysOffset + AlignUp(kTileItems * sizeof(U), 16);
  static constexpr size_t kBytes = kPayloadOffset + (kHasPayload ? kTileItems * sizeof(P) : 0);
};

// Segments [starts[s], starts[s + 1] or n) for s in [0, num_segments), a
// grid-stride loop of blocks over them (num_segments == 0: one segment
// [0, n)); segments longer than kThreads * kItems are left to the global
// passes, those of at most `shorter_elsewhere` keys to the warp sort
// (radix_warp_sort.cuh). iota (8-byte P): the payload is each key's index in
// the array.
template <int kThreads, int kItems, typename U, typename P>
__global__ void __launch_bounds__(kThreads)
    BlockSortKernel(const U* __restrict__ keys_in, U* keys_out, const P* payload_in,
                    P* payload_out, bool iota, const uint64_t* __restrict__ starts,
                    uint64_t num_segments, uint64_t n, RadixCodec<U> codec,
                    uint32_t shorter_elsewhere) {
  using Smem = BlockSortSmem<kThreads, kItems, U, P>;
  using Rank = typename Smem::Rank;
  constexpr int kTileItems = Smem::kTileItems;
  extern __shared__ __align__(16) unsigned char smem[];
  Rank rank{*reinterpret_cast<typename Rank::Storage*>(smem)};
  U* staged_keys = reinterpret_cast<U*>(smem + Smem::kKeysOffset);
  P* staged_payload = reinterpret_cast<P*>(smem + Smem::kPayloadOffset);
  const uint64_t segments = num_segments == 0 ? 1 : num_segments;
  for (uint64_t s = blockIdx.x; s < segments; s += gridDim.x) {
    const uint64_t begin = num_segments == 0 ? 0 : starts[s];
    const uint64_t end = s + 1 < num_segments ? starts[s + 1] : n;
    if (end - begin > kTileItems || end - begin <= shorter_elsewhere) continue;
    const uint32_t count = static_cast<uint32_t>(end - begin);
    U key[kItems];
    uint32_t digit[kItems];
    uint32_t r[kItems];
    [[maybe_unused]] P payload[kItems];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const uint32_t p = StripedPosition<kItems>(j);
      if (p < count) {
        key[j] = keys_in[begin + p];
        if constexpr (Smem::kHasPayload) {
          payload[j] = iota ? static_cast<P>(begin + p) : payload_in[begin + p];
        }
      }
    }
    for (int pass = 0; pass < RadixCodec<U>::kPasses; ++pass) {
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        // Keys past the end: the last digit (radix_rank.cuh), never staged.
        digit[j] = StripedPosition<kItems>(j) < count ? codec.Digit(key[j], pass)
                                                     : kRadixDigits - 1;
      }
      rank.Rank(digit, r);
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        if (StripedPosition<kItems>(j) < count) {
          staged_keys[r[j]] = key[j];
          if constexpr (Smem::kHasPayload) staged_payload[r[j]] = payload[j];
        }
      }
      __syncthreads();
      if (pass + 1 == RadixCodec<U>::kPasses) break;
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        const uint32_t p = StripedPosition<kItems>(j);
        if (p < count) {
          key[j] = staged_keys[p];
          if constexpr (Smem::kHasPayload) payload[j] = staged_payload[p];
        }
      }
      // The next pass's Rank() starts with a barrier before any staging write.
    }
    for (uint32_t p = threadIdx.x; p < count; p += kThreads) {
      keys_out[begin + p] = staged_keys[p];
      if constexpr (Smem::kHasPayload) payload_out[begin + p] = staged_payload[p];
    }
    __syncthreads();
  }
}

// values_out[i] = values_in[indices[i]]: the values of a sort that also gives
// indices (sorted with the indices as payload).
template <typename V>
__global__ void GatherKernel(const V* __restrict__ values_in, const int64_t* __restrict__ indices,
                             V* __restrict__ values_out, uint64_t n) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    values_out[i] = values_in[indices[i]];
  }
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_RADIX_BLOCK_SORT_CUH_
