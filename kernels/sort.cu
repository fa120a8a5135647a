// LSD radix sort: small inputs and segments by one block in shared memory
// (radix_block_sort.cuh), larger ones by a histogram pass over all digits
// (radix_histogram.cuh) and one onesweep pass per digit (radix_onesweep.cuh),
// ping-ponging between the output and a temporary copy. Tuning in
// detail/tuning_sort.cuh.
#include "kernels/sort.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "kernels/detail/device_info.cuh"
#include "kernels/detail/dispatch.cuh"
#include "kernels/detail/radix_block_sort.cuh"
#include "kernels/detail/radix_histogram.cuh"
#include "kernels/detail/radix_key.cuh"
#include "kernels/detail/radix_onesweep.cuh"
#include "kernels/detail/tuning_sort.cuh"

namespace primserve::gpu {
namespace {

using namespace detail;

constexpr size_t kTempAlign = 256;

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
int SetSharedBytes(Kernel kernel) {
  return static_cast<int>(cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Smem::kBytes)));
}

// The sort of one key type and payload width, planned from the segment
// sizes: which segments the global passes take, and their temp storage.
template <typename U, typename P>
class RadixSorter {
 public:
  using Policy = SortPolicy<sizeof(U)>;
  using Codec = RadixCodec<U>;
  static constexpr bool kHasPayload = !std::is_same_v<P, NoPayload>;
  static constexpr int kPasses = Codec::kPasses;
  static constexpr uint64_t kPortionItems =
      kPortionMaxItems / Policy::kTileItems * Policy::kTileItems;
  using BlockSmem = BlockSortSmem<kSortBlockThreads, kSortBlockKeysPerThread, U, P>;
  using OnesweepShared = OnesweepSmem<Policy, U, P>;

  RadixSorter(const U* keys_in, U* keys_out, const P* payload_in, P* payload_out, bool iota,
              uint64_t n, Codec codec, const uint64_t* h_starts, uint64_t num_segments)
      : keys_in_(keys_in), keys_out_(keys_out), payload_in_(payload_in),
        payload_out_(payload_out), iota_(iota), n_(n), codec_(codec), h_starts_(h_starts),
        num_segments_(num_segments) {
    const uint64_t segments = num_segments == 0 ? 1 : num_segments;
    for (uint64_t s = 0; s < segments; ++s) {
      const uint64_t begin = num_segments == 0 ? 0 : h_starts[s];
      const uint64_t end = s + 1 < num_segments ? h_starts[s + 1] : n;
      if (end - begin > static_cast<uint64_t>(kSortBlockItems)) {
        large_.push_back({begin, end - begin});
        largest_ = std::max(largest_, end - begin);
      } else if (end - begin > 0) {
        any_small_ = true;
      }
    }
  }

  // Lays out the temp storage (base == nullptr: sizes only); returns its bytes.
  size_t Carve(void* base) {
    TempCarver carve(base);
    if (num_segments_ > 0 && any_small_) d_starts_ = carve.Take<uint64_t>(num_segments_);
    if (largest_ > 0) {
      alt_keys_ = carve.Take<U>(largest_);
      if constexpr (kHasPayload) alt_payload_ = carve.Take<P>(largest_);
      portions_ = CeilDiv(largest_, kPortionItems);
      counts_ = carve.Take<uint32_t>(portions_ * kPasses * kRadixDigits);
      offsets_ = carve.Take<uint64_t>(portions_ * kPasses * kRadixDigits);
      const uint64_t tiles = CeilDiv(std::min(largest_, kPortionItems), Policy::kTileItems);
      status_words_ = 4 + tiles * kRadixDigits;  // the tile counter, padded, then the words
      status_ = carve.Take<uint32_t>(status_words_);
    }
    return std::max(carve.used(), kMinTempBytes);
  }

  int Run(cudaStream_t stream) {
    if (any_small_) {
      if (num_segments_ > 0) {
        if (cudaError_t e = cudaMemcpyAsync(d_starts_, h_starts_, num_segments_ * sizeof(uint64_t),
                                            cudaMemcpyHostToDevice, stream)) {
          return e;
        }
      }
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

  int LaunchBlockSort(cudaStream_t stream) {
    auto kernel = BlockSortKernel<kSortBlockThreads, kSortBlockKeysPerThread, U, P>;
    if (int e = SetSharedBytes<BlockSmem>(kernel)) return e;
    const uint64_t segments = num_segments_ == 0 ? 1 : num_segments_;
    const unsigned grid = static_cast<unsigned>(std::min<uint64_t>(segments, 1u << 20));
    kernel<<<grid, kSortBlockThreads, BlockSmem::kBytes, stream>>>(
        keys_in_, keys_out_, payload_in_, payload_out_, iota_, d_starts_, num_segments_, n_,
        codec_);
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
    RadixOffsetsKernel<kPasses><<<kPasses, kRadixDigits, 0, stream>>>(counts_, num_portions,
                                                                       offsets_);
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
            codec_, offsets_ + (static_cast<uint64_t>(q) * kPasses + pass) * kRadixDigits,
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
  bool any_small_ = false;
  uint64_t* d_starts_ = nullptr;
  U* alt_keys_ = nullptr;
  P* alt_payload_ = nullptr;
  uint64_t portions_ = 0;
  uint32_t* counts_ = nullptr;
  uint64_t* offsets_ = nullptr;
  uint64_t status_words_ = 0;
  uint32_t* status_ = nullptr;
};

size_t DTypeBytes(DType dtype) {
  return dtype == DType::kInt32 || dtype == DType::kUint32 || dtype == DType::kFloat32 ? 4 : 8;
}

// Values with indices: the sort moves the indices, then the values are
// gathered by them (one extra read of each).
template <typename V>
int Gather(const SortPayload& payload, uint64_t n, cudaStream_t stream) {
  if (n == 0) return 0;
  int sms = 0;
  if (int e = MultiprocessorCount(&sms)) return e;
  const uint64_t blocks = std::min<uint64_t>(CeilDiv(n, 256), static_cast<uint64_t>(sms) * 8);
  GatherKernel<V><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      static_cast<const V*>(payload.d_values_in), payload.d_indices_out,
      static_cast<V*>(payload.d_values_out), n);
  return static_cast<int>(cudaGetLastError());
}

template <typename U, typename P>
int SortWith(void* temp_storage, size_t* temp_bytes, const void* d_keys_in, void* d_keys_out,
             uint64_t n, RadixCodec<U> codec, const void* payload_in, void* payload_out,
             bool iota, const uint64_t* h_starts, uint64_t num_segments, cudaStream_t stream) {
  RadixSorter<U, P> sorter(static_cast<const U*>(d_keys_in), static_cast<U*>(d_keys_out),
                           static_cast<const P*>(payload_in), static_cast<P*>(payload_out), iota,
                           n, codec, h_starts, num_segments);
  const size_t bytes = sorter.Carve(nullptr);
  if (temp_storage == nullptr) {
    *temp_bytes = bytes;
    return 0;
  }
  if (*temp_bytes < bytes) return cudaErrorInvalidValue;
  sorter.Carve(temp_storage);
  return n == 0 ? 0 : sorter.Run(stream);
}

int Dispatch(void* temp_storage, size_t* temp_bytes, const void* d_keys_in, void* d_keys_out,
             uint64_t n, DType key_dtype, const uint64_t* h_starts, uint64_t num_segments,
             const SortPayload& payload, bool descending, CUstream_st* stream) {
  if (temp_bytes == nullptr || !IsValidDType(key_dtype)) return cudaErrorInvalidValue;
  const bool has_values = payload.d_values_in != nullptr || payload.d_values_out != nullptr;
  const bool has_indices = payload.d_indices_out != nullptr;
  if (has_values && !IsValidDType(payload.value_dtype)) return cudaErrorInvalidValue;
  if (num_segments > 0 && h_starts == nullptr) return cudaErrorInvalidValue;
  if (temp_storage != nullptr && n > 0 &&
      (d_keys_in == nullptr || d_keys_out == nullptr ||
       (has_values && (payload.d_values_in == nullptr || payload.d_values_out == nullptr)))) {
    return cudaErrorInvalidValue;
  }
  const KeyKind kind = KindOf(key_dtype);
  auto by_payload = [&](auto bits_tag) -> int {
    using U = decltype(bits_tag);
    const RadixCodec<U> codec{kind, descending};
    if (has_indices) {
      const int err = SortWith<U, uint64_t>(temp_storage, temp_bytes, d_keys_in, d_keys_out, n,
                                            codec, nullptr, payload.d_indices_out, true,
                                            h_starts, num_segments, stream);
      if (err || temp_storage == nullptr || !has_values) return err;
      return DTypeBytes(payload.value_dtype) == 4 ? Gather<uint32_t>(payload, n, stream)
                                                  : Gather<uint64_t>(payload, n, stream);
    }
    if (!has_values) {
      return SortWith<U, NoPayload>(temp_storage, temp_bytes, d_keys_in, d_keys_out, n, codec,
                                    nullptr, nullptr, false, h_starts, num_segments, stream);
    }
    return DTypeBytes(payload.value_dtype) == 4
               ? SortWith<U, uint32_t>(temp_storage, temp_bytes, d_keys_in, d_keys_out, n, codec,
                                       payload.d_values_in, payload.d_values_out, false,
                                       h_starts, num_segments, stream)
               : SortWith<U, uint64_t>(temp_storage, temp_bytes, d_keys_in, d_keys_out, n, codec,
                                       payload.d_values_in, payload.d_values_out, false,
                                       h_starts, num_segments, stream);
  };
  return DTypeBytes(key_dtype) == 4 ? by_payload(uint32_t{}) : by_payload(uint64_t{});
}

}  // namespace

int RadixSort(void* temp_storage, size_t* temp_bytes, const void* d_keys_in, void* d_keys_out,
              uint64_t n, DType key_dtype, const SortPayload& payload, bool descending,
              CUstream_st* stream) {
  return Dispatch(temp_storage, temp_bytes, d_keys_in, d_keys_out, n, key_dtype, nullptr, 0,
                  payload, descending, stream);
}

int SegmentedRadixSort(void* temp_storage, size_t* temp_bytes, const void* d_keys_in,
                       void* d_keys_out, uint64_t n, DType key_dtype,
                       const uint64_t* h_segment_starts, uint64_t num_segments,
                       const SortPayload& payload, bool descending, CUstream_st* stream) {
  return Dispatch(temp_storage, temp_bytes, d_keys_in, d_keys_out, n, key_dtype,
                  h_segment_starts, num_segments, payload, descending, stream);
}

}  // namespace primserve::gpu
