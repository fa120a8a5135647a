// The sort's host side for one key width, payload width and onesweep policy:
// plans from the segment sizes which segments one block sorts in shared
// memory and which take the global passes, lays out their temp storage and
// enqueues the launches. sort.cu dispatches to it with the tuned policy;
// kernels/bench/sort_variants.cu with others.
#ifndef PRIMSERVE_KERNELS_DETAIL_RADIX_SORT_CUH_
#define PRIMSERVE_KERNELS_DETAIL_RADIX_SORT_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/detail/device_info.cuh"
#include "kernels/detail/dispatch.cuh"
#include "kernels/detail/radix_block_sort.cuh"
#include "kernels/detail/radix_histogram.cuh"
#include "kernels/detail/radix_key.cuh"
#include "kernels/detail/radix_onesweep.cuh"
#include "kernels/detail/radix_warp_sort.cuh"
#include "kernels/detail/tuning_sort.cuh"

namespace primserve::gpu::detail {

inline constexpr size_t kTempAlign = 256;

// Carves the temp storage into aligned pieces, or only sums their sizes.
class TempCarver {
 public:
  explicit TempCarver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* Take(size_t count) {
    T* at = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += AlignUp(count * sizeof(T), kTempAlign);
    return at;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

template <typename Smem, typename Kernel>
inline int SetSharedBytes(Kernel kernel) {
  return static_cast<int>(cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Smem::kBytes)));
}

// The sort of one key type and payload width, planned from the segment
// sizes: which segments the global passes take, and their temp storage.
template <typename U, typename P,
          typename Policy = SortPolicy<sizeof(U), std::is_same_v<P, NoPayload> ? 0 : sizeof(P)>>
class RadixSorter {
 public:
  using Codec = RadixCodec<U>;
  static constexpr bool kHasPayload = !std::is_same_v<P, NoPayload>;
  static constexpr int kPasses = Codec::kPasses;
  static constexpr uint64_t kPortionItems =
      kPortionMaxItems / Policy::kTileItems * Policy::kTileItems;
  using BlockSmem = BlockSortSmem<kSortBlockThreads, kSortBlockKeysPerThread, U, P>;
  using WarpSmem = WarpSortSmem<kWarpSortKeysPerLane, U, P>;
  using OnesweepShared = OnesweepSmem<Policy, U, P>;

  RadixSorter(const U* keys_in, U* keys_out, const P* payload_in, P* payload_out, bool iota,
              uint64_t n, Codec codec, const uint64_t* h_starts, uint64_t num_segments)
      : keys_in_(keys_in), keys_out_(keys_out), payload_in_(payload_in),
        payload_out_(payload_out), iota_(iota), n_(n), codec_(codec), h_starts_(h_starts),
        num_segments_(num_segments),
        warp_items_(num_segments > 0 ? kWarpSortItems : 0) {
    const uint64_t segments = num_segments == 0 ? 1 : num_segments;
    for (uint64_t s = 0; s < segments; ++s) {
      const uint64_t begin = num_segments == 0 ? 0 : h_starts[s];
      const uint64_t end = s + 1 < num_segments ? h_starts[s + 1] : n;
      if (end - begin > static_cast<uint64_t>(kSortBlockItems)) {
        large_.push_back({begin, end - begin});
        largest_ = std::max(largest_, end - begin);
      } else if (end - begin > static_cast<uint64_t>(warp_items_)) {
        any_small_ = true;
      } else if (end - begin > 0) {
        any_short_ = true;
      }
    }
  }

  // Lays out the temp storage (base == nullptr: sizes only); returns its bytes.
  size_t Carve(void* base) {
    TempCarver carve(base);
    if (num_segments_ > 0 && (any_small_ || any_short_)) {
      d_starts_ = carve.Take<uint64_t>(num_segments_);
    }
    if (largest_ > 0) {
      alt_keys_ = carve.Take<U>(largest_);
      if constexpr (kHasPayload) alt_payload_ = carve.Take<P>(largest_);
      portions_ = CeilDiv(largest_, kPortionItems);
      counts_ = carve.Take<uint32_t>(portions_ * kPasses * kRadixDigits);
      // Per pass: the first portion's offsets, and the next portion's
      // (written by the portion before it; two slots used in turn).
      offsets_ = carve.Take<uint64_t>(kPasses * 2 * kRadixDigits);
      const uint64_t tiles = CeilDiv(std::min(largest_, kPortionItems), Policy::kTileItems);
      status_words_ = 4 + tiles * kRadixDigits;  // the tile counter, padded, then the words
      status_ = carve.Take<uint32_t>(status_words_);
    }
    return std::max(carve.used(), kMinTempBytes);
  }

  int Run(cudaStream_t stream) {
    if ((any_small_ || any_short_) && num_segments_ > 0) {
      if (cudaError_t e = cudaMemcpyAsync(d_starts_, h_starts_, num_segments_ * sizeof(uint64_t),
                                          cudaMemcpyHostToDevice, stream)) {
        return e;
      }
    }
    if (any_short_) {
      if (int e = LaunchWarpSort(stream)) return e;
    }
    if (any_small_) {
      if (int e = LaunchBlockSort(stream)) return e;
    }
    for (const Segment& segment : large_) {
      if (int e = RunGlobalPasses(segment, stream)) return e;
    }
    return 0;
  }

 private:
  struct Segment {
    uint64_t begin;
    uint64_t count;
  };

  int LaunchWarpSort(cudaStream_t stream) {
    auto kernel = WarpSortKernel<kWarpSortThreads, kWarpSortKeysPerLane, U, P>;
    constexpr int kWarps = kWarpSortThreads / kWarpThreads;
    constexpr size_t kBytes = kWarps * WarpSmem::kWarpBytes;
    if (int e = static_cast<int>(cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes)))) {
      return e;
    }
    const uint64_t segments = num_segments_ == 0 ? 1 : num_segments_;
    const unsigned grid =
        static_cast<unsigned>(std::min<uint64_t>(CeilDiv(segments, kWarps), 1u << 20));
    kernel<<<grid, kWarpSortThreads, kBytes, stream>>>(keys_in_, keys_out_, payload_in_,
                                                       payload_out_, iota_, d_starts_,
                                                       num_segments_, n_, codec_);
    return static_cast<int>(cudaGetLastError());
  }

  int LaunchBlockSort(cudaStream_t stream) {
    auto kernel = BlockSortKernel<kSortBlockThreads, kSortBlockKeysPerThread, U, P>;
    if (int e = SetSharedBytes<BlockSmem>(kernel)) return e;
    const uint64_t segments = num_segments_ == 0 ? 1 : num_segments_;
    const unsigned grid = static_cast<unsigned>(std::min<uint64_t>(segments, 1u << 20));
    kernel<<<grid, kSortBlockThreads, BlockSmem::kBytes, stream>>>(
        keys_in_, keys_out_, payload_in_, payload_out_, iota_, d_starts_, num_segments_, n_,
        codec_, static_cast<uint32_t>(warp_items_));
    return static_cast<int>(cudaGetLastError());
  }

  // The histogram pass, then kPasses onesweep passes over segment's keys:
  // pass p writes the output when kPasses - 1 - p is even, else the
  // temporary copy, so the last pass lands in the output and the first reads
  // only the input (in place works).
  int RunGlobalPasses(const Segment& segment, cudaStream_t stream) {
    const uint64_t begin = segment.begin;
    const uint64_t count = segment.count;
    const int num_portions = static_cast<int>(CeilDiv(count, kPortionItems));
    const U* keys_in = keys_in_ + begin;
    U* keys_out = keys_out_ + begin;
    const P* payload_in = kHasPayload && !iota_ ? payload_in_ + begin : nullptr;
    P* payload_out = kHasPayload ? payload_out_ + begin : nullptr;

    const size_t count_bytes = static_cast<size_t>(num_portions) * kPasses * kRadixDigits * 4;
    if (cudaError_t e = cudaMemsetAsync(counts_, 0, count_bytes, stream)) return e;
    int sms = 0;
    if (int e = MultiprocessorCount(&sms)) return e;
    const uint64_t per_portion = std::min(count, kPortionItems);
    const uint64_t hist_blocks = std::max<uint64_t>(
        1, std::min<uint64_t>(static_cast<uint64_t>(sms) * kHistogramBlocksPerSm,
                              CeilDiv(per_portion, kHistogramThreads * 16)));
    RadixHistogramKernel<U><<<dim3(static_cast<unsigned>(hist_blocks), num_portions),
                              kHistogramThreads, 0, stream>>>(keys_in, count, kPortionItems,
                                                              codec_, counts_);
    if (cudaError_t e = cudaGetLastError()) return e;
    RadixOffsetsKernel<kPasses><<<kPasses, kRadixDigits, 0, stream>>>(
        counts_, num_portions, offsets_, 2 * kRadixDigits);
    if (cudaError_t e = cudaGetLastError()) return e;

    auto kernel = OnesweepKernel<Policy, U, P>;
    if (int e = SetSharedBytes<OnesweepShared>(kernel)) return e;
    for (int pass = 0; pass < kPasses; ++pass) {
      const bool to_output = (kPasses - 1 - pass) % 2 == 0;
      const U* src_keys = pass == 0 ? keys_in : (to_output ? alt_keys_ : keys_out);
      U* dst_keys = to_output ? keys_out : alt_keys_;
      const P* src_payload = pass == 0 ? payload_in : (to_output ? alt_payload_ : payload_out);
      P* dst_payload = to_output ? payload_out : alt_payload_;
      for (int q = 0; q < num_portions; ++q) {
        const uint64_t portion_begin = static_cast<uint64_t>(q) * kPortionItems;
        const uint64_t portion_count = std::min(kPortionItems, count - portion_begin);
        if (cudaError_t e = cudaMemsetAsync(status_, 0, status_words_ * 4, stream)) return e;
        const unsigned tiles = static_cast<unsigned>(CeilDiv(portion_count, Policy::kTileItems));
        kernel<<<tiles, Policy::kThreads, OnesweepShared::kBytes, stream>>>(
            src_keys + portion_begin, dst_keys,
            src_payload ? src_payload + portion_begin : nullptr, dst_payload,
            kHasPayload && iota_ && pass == 0, begin + portion_begin, portion_count, pass,
            codec_, offsets_ + (pass * 2 + q % 2) * kRadixDigits,
            num_portions > 1 ? offsets_ + (pass * 2 + (q + 1) % 2) * kRadixDigits : nullptr,
            status_ + 4, status_);
        if (cudaError_t e = cudaGetLastError()) return e;
      }
    }
    return 0;
  }

  const U* keys_in_;
  U* keys_out_;
  const P* payload_in_;
  P* payload_out_;
  bool iota_;
  uint64_t n_;
  Codec codec_;
  const uint64_t* h_starts_;
  uint64_t num_segments_;
  std::vector<Segment> large_;
  uint64_t largest_ = 0;
  // Segments of at most warp_items_ keys go to the warp sort: only a
  // segmented sort's (a lone array that short is the block sort's, one launch).
  uint64_t warp_items_ = 0;
  bool any_small_ = false;
  bool any_short_ = false;
  uint64_t* d_starts_ = nullptr;
  U* alt_keys_ = nullptr;
  P* alt_payload_ = nullptr;
  uint64_t portions_ = 0;
  uint32_t* counts_ = nullptr;
  uint64_t* offsets_ = nullptr;
  uint64_t status_words_ = 0;
  uint32_t* status_ = nullptr;
};

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_RADIX_SORT_CUH_
