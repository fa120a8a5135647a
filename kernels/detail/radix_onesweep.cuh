// One digit pass of the onesweep radix sort (Adinets and Merrill, "Onesweep: A
// Faster Least Significant Digit Radix Sort for GPUs", 2022): each tile ranks
// its keys by the pass's digit, publishes its count of every digit and finds,
// by decoupled look-back over the earlier tiles' counts of the same digit
// (one thread per digit), where its keys of that digit go. No separate scan
// pass: the histogram pass (radix_histogram.cuh) gave each digit's start.
//
// Look-back status: one 32-bit word per (tile, digit), 0 until published,
// then kAggregateFlag | the tile's count or kPrefixFlag | the count of the
// digit in this tile and all earlier ones of the portion (< 2^30: portions
// are at most tuning_sort.cuh kPortionMaxItems keys). Value and flag share
// the word, so one relaxed store publishes both. Tiles take their index from
// an atomic counter in the order blocks start, so every tile waited for has
// started and the look-back cannot deadlock. The words and the counter are
// zeroed before every launch.
#ifndef PRIMSERVE_KERNELS_DETAIL_RADIX_ONESWEEP_CUH_
#define PRIMSERVE_KERNELS_DETAIL_RADIX_ONESWEEP_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/detail/radix_key.cuh"
#include "kernels/detail/radix_rank.cuh"
#include "kernels/detail/tuning_sort.cuh"

namespace primserve::gpu::detail {

inline constexpr uint32_t kAggregateFlag = 1u << 30;
inline constexpr uint32_t kPrefixFlag = 2u << 30;
inline constexpr uint32_t kCountMask = (1u << 30) - 1;

__device__ __forceinline__ uint32_t LoadStatus(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void StoreStatus(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__host__ __device__ constexpr size_t AlignUp(size_t bytes, size_t to) {
  return (bytes + to - 1) / to * to;
}

// Shared memory of a tile: each digit's output base, the tile index, and a
// region the rank counters use first and the staging of keys and values in
// sorted order after them (a barrier between), as CUB's onesweep does: a
// smaller block leaves room for more resident tiles.
template <typename Policy, typename U, typename P>
struct OnesweepSmem {
  using Rank = BlockRadixRank<Policy::kThreads, Policy::kItems>;
  static constexpr bool kHasPayload = !std::is_same_v<P, NoPayload>;
  static constexpr size_t kBaseOffset = 0;
  static constexpr size_t kTileOffset = kBaseOffset + kRadixDigits * sizeof(int64_t);
  static constexpr size_t kSharedOffset = kTileOffset + 16;
  static constexpr size_t kPayloadOffset =
      kSharedOffset + AlignUp(Policy::kTileItems * sizeof(U), 16);
  static constexpr size_t kStagingEnd =
      kPayloadOffset + (kHasPayload ? Policy::kTileItems * sizeof(P) : 0);
  static constexpr size_t kRankEnd = kSharedOffset + sizeof(typename Rank::Storage);
  static constexpr size_t kBytes = kStagingEnd > kRankEnd ? kStagingEnd : kRankEnd;
};

// One portion of one pass. keys_in / payload_in point at the portion's first
// key; keys_out / payload_out at the whole output (offsets are positions in
// it). offsets: where the portion's first key of each digit goes. A
// pass of several portions chains them: the portion's last tile writes
// offsets_next (nullable) = offsets plus the portion's count of each digit,
// the next portion's offsets (the keys a portion holds in a pass after the
// first are known only once the pass before is done, so no histogram can
// give them). With iota (8-byte P only), the payload of key i of the portion
// is iota_base + i instead of payload_in[i]. Launched with
// OnesweepSmem::kBytes of dynamic shared memory and ceil(count / kTileItems)
// blocks.
template <typename Policy, typename U, typename P>
__global__ void __launch_bounds__(Policy::kThreads, Policy::kMinBlocksPerSm)
    OnesweepKernel(const U* __restrict__ keys_in, U* __restrict__ keys_out,
                   const P* __restrict__ payload_in, P* __restrict__ payload_out, bool iota,
                   uint64_t iota_base, uint64_t count, int pass, RadixCodec<U> codec,
                   const uint64_t* __restrict__ offsets, uint64_t* __restrict__ offsets_next,
                   uint32_t* __restrict__ status,
                   uint32_t* __restrict__ counter) {
  using Smem = OnesweepSmem<Policy, U, P>;
  using Rank = typename Smem::Rank;
  constexpr int kItems = Policy::kItems;
  constexpr int kThreads = Policy::kThreads;
  constexpr int kTileItems = Policy::kTileItems;
  extern __shared__ __align__(16) unsigned char smem[];
  auto& rank_storage = *reinterpret_cast<typename Rank::Storage*>(smem + Smem::kSharedOffset);
  int64_t* dest_base = reinterpret_cast<int64_t*>(smem + Smem::kBaseOffset);
  uint32_t* tile_slot = reinterpret_cast<uint32_t*>(smem + Smem::kTileOffset);
  U* staged_keys = reinterpret_cast<U*>(smem + Smem::kSharedOffset);
  P* staged_payload = reinterpret_cast<P*>(smem + Smem::kPayloadOffset);

  if (threadIdx.x == 0) *tile_slot = atomicAdd(counter, 1u);
  __syncthreads();
  const uint32_t tile = *tile_slot;
  const uint64_t tile_begin = static_cast<uint64_t>(tile) * kTileItems;
  const uint32_t valid = static_cast<uint32_t>(
      count - tile_begin < kTileItems ? count - tile_begin : kTileItems);

  U key[kItems];
  uint32_t digit[kItems];
  [[maybe_unused]] P payload[kItems];
  if (valid == kTileItems) {
#pragma unroll
    for (int j = 0; j < kItems; ++j) key[j] = keys_in[tile_begin + StripedPosition<kItems>(j)];
#pragma unroll
    for (int j = 0; j < kItems; ++j) digit[j] = codec.Digit(key[j], pass);
  } else {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const uint32_t p = StripedPosition<kItems>(j);
      key[j] = p < valid ? keys_in[tile_begin + p] : U{0};
      digit[j] = p < valid ? codec.Digit(key[j], pass) : kRadixDigits - 1;  // radix_rank.cuh
    }
  }
  if constexpr (Smem::kHasPayload) {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const uint32_t p = StripedPosition<kItems>(j);
      if (iota) {
        payload[j] = static_cast<P>(iota_base + tile_begin + p);
      } else if (p < valid) {
        payload[j] = payload_in[tile_begin + p];
      }
    }
  }

  // Early counts (as CUB): the tile's digit counts come out of the warps'
  // histograms and are published before the ranking, so that later tiles'
  // look-backs find them as early as possible.
  Rank rank{rank_storage};
  rank.CountWarps(digit);
  const int d = threadIdx.x;
  // The keys past the end were counted under the last digit.
  const uint32_t tile_count =
      rank.ScanWarps() - (d == kRadixDigits - 1 ? kTileItems - valid : 0);
  uint32_t* my_status = status + static_cast<uint64_t>(tile) * kRadixDigits + d;
  if (d < kRadixDigits) {
    StoreStatus(my_status, (tile == 0 ? kPrefixFlag : kAggregateFlag) | tile_count);
  }
  const uint32_t digit_start = rank.ScanDigits(tile_count);
  uint32_t r[kItems];
  rank.RankKeys(digit, r);
  __syncthreads();  // the staging below overwrites the rank counters
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    if (valid == kTileItems || StripedPosition<kItems>(j) < valid) {
      staged_keys[r[j]] = key[j];
      if constexpr (Smem::kHasPayload) staged_payload[r[j]] = payload[j];
    }
  }
  // The look-back last (as CUB): the earlier tiles had the ranking's time to
  // publish.
  if (d < kRadixDigits) {
    uint32_t before = 0;
    if (tile > 0) {
      const uint32_t* look = my_status;
      for (;;) {
        look -= kRadixDigits;
        uint32_t word;
        do {
          word = LoadStatus(look);
        } while (word == 0);
        before += word & kCountMask;
        if (word & kPrefixFlag) break;
      }
      StoreStatus(my_status, kPrefixFlag | (before + tile_count));
    }
    dest_base[d] = static_cast<int64_t>(offsets[d] + before) - static_cast<int64_t>(digit_start);
    if (offsets_next != nullptr && tile + 1 == gridDim.x) {
      offsets_next[d] = offsets[d] + before + tile_count;
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const uint32_t p = threadIdx.x + k * kThreads;
    if (p < valid) {
      const U out = staged_keys[p];
      const int64_t at = dest_base[codec.Digit(out, pass)] + p;
      keys_out[at] = out;
      if constexpr (Smem::kHasPayload) payload_out[at] = staged_payload[p];
    }
  }
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_RADIX_ONESWEEP_CUH_
