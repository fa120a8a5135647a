// LSD radix sort: short segments by one warp in shared memory
// (radix_warp_sort.cuh), small inputs and segments by one block there
// (radix_block_sort.cuh), larger ones by a histogram pass over all digits
// (radix_histogram.cuh) and one onesweep pass per digit (radix_onesweep.cuh),
// ping-ponging between the output and a temporary copy. Tuning in
// detail/tuning_sort.cuh.
#include "kernels/sort.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/detail/device_info.cuh"
#include "kernels/detail/dispatch.cuh"
#include "kernels/detail/radix_block_sort.cuh"
#include "kernels/detail/radix_key.cuh"
#include "kernels/detail/radix_sort.cuh"

namespace primserve::gpu {
namespace {

using namespace detail;

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
  const bool has_values = payload.has_values;
  const bool has_indices = payload.has_indices;
  if (has_values && !IsValidDType(payload.value_dtype)) return cudaErrorInvalidValue;
  if (num_segments > 0 && h_starts == nullptr) return cudaErrorInvalidValue;
  if (temp_storage != nullptr && n > 0 &&
      (d_keys_in == nullptr || d_keys_out == nullptr ||
       (has_values && (payload.d_values_in == nullptr || payload.d_values_out == nullptr)) ||
       (has_indices && payload.d_indices_out == nullptr))) {
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
