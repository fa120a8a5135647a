#include "kernels/gpu_baseline.h"

#include <cuda_runtime.h>

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "kernels/detail/dispatch.cuh"
#include "kernels/detail/operators.cuh"

namespace primserve::baseline {
namespace {

using detail::CombineOp;

template <typename F>
int VisitTypeAndCombineOp(DType dtype, Op op, F&& f) {
  if (!detail::IsValidDType(dtype)) return cudaErrorInvalidValue;
  return VisitDType(dtype, [&](auto type_tag) {
    return detail::VisitOp(op, [&](auto op_tag) { return f(type_tag, op_tag); });
  });
}

// End offset of segment s: the next start, or n for the last segment.
struct SegmentEnd {
  const uint64_t* starts;
  uint64_t num_segments;
  uint64_t n;
  __host__ __device__ uint64_t operator()(uint64_t s) const {
    return s + 1 < num_segments ? starts[s + 1] : n;
  }
};

__global__ void FillRandomKernel(int32_t* out, uint64_t n, uint64_t seed, uint32_t mask) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint64_t z = i + seed * 0x9e3779b97f4a7c15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    out[i] = static_cast<int32_t>(static_cast<uint32_t>(z ^ (z >> 31)) & mask);
  }
}

__global__ void CountMismatchKernel(const uint32_t* a, const uint32_t* b, uint64_t n,
                                    unsigned long long* count) {
  unsigned long long local = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    local += a[i] != b[i];
  }
  if (local) atomicAdd(count, local);
}

}  // namespace

int CubScan(void* temp, size_t* temp_bytes, const void* d_in, void* d_out, uint64_t n,
            DType dtype, Op op, bool exclusive, CUstream_st* stream) {
  return VisitTypeAndCombineOp(dtype, op, [&](auto type_tag, auto op_tag) -> int {
    using T = decltype(type_tag);
    constexpr Op kOp = decltype(op_tag)::value;
    if constexpr (kOp == Op::kArgMin || kOp == Op::kArgMax) {
      return cudaErrorInvalidValue;
    } else {
      const T* in = static_cast<const T*>(d_in);
      T* out = static_cast<T*>(d_out);
      const int64_t items = static_cast<int64_t>(n);
      return exclusive ? cub::DeviceScan::ExclusiveScan(temp, *temp_bytes, in, out,
                                                        CombineOp<T, kOp>{}, Identity<T>(kOp),
                                                        items, stream)
                       : cub::DeviceScan::InclusiveScan(temp, *temp_bytes, in, out,
                                                        CombineOp<T, kOp>{}, items, stream);
    }
  });
}

int CubReduce(void* temp, size_t* temp_bytes, const void* d_in, uint64_t n, DType dtype, Op op,
              void* d_value_out, int64_t* d_index_out, CUstream_st* stream) {
  return VisitTypeAndCombineOp(dtype, op, [&](auto type_tag, auto op_tag) -> int {
    using T = decltype(type_tag);
    constexpr Op kOp = decltype(op_tag)::value;
    const T* in = static_cast<const T*>(d_in);
    T* out = static_cast<T*>(d_value_out);
    const int64_t items = static_cast<int64_t>(n);
    if constexpr (kOp == Op::kArgMin) {
      return cub::DeviceReduce::ArgMin(temp, *temp_bytes, in, out, d_index_out, items, stream);
    } else if constexpr (kOp == Op::kArgMax) {
      return cub::DeviceReduce::ArgMax(temp, *temp_bytes, in, out, d_index_out, items, stream);
    } else {
      return cub::DeviceReduce::Reduce(temp, *temp_bytes, in, out, items, CombineOp<T, kOp>{},
                                       Identity<T>(kOp), stream);
    }
  });
}

int CubSegmentedReduce(void* temp, size_t* temp_bytes, const void* d_in, uint64_t n,
                       const uint64_t* d_segment_starts, uint64_t num_segments, DType dtype,
                       Op op, void* d_values_out, CUstream_st* stream) {
  return VisitTypeAndCombineOp(dtype, op, [&](auto type_tag, auto op_tag) -> int {
    using T = decltype(type_tag);
    constexpr Op kOp = decltype(op_tag)::value;
    if constexpr (kOp == Op::kArgMin || kOp == Op::kArgMax) {
      return cudaErrorInvalidValue;
    } else {
      auto ends = thrust::make_transform_iterator(thrust::counting_iterator<uint64_t>(0),
                                                  SegmentEnd{d_segment_starts, num_segments, n});
      return cub::DeviceSegmentedReduce::Reduce(
          temp, *temp_bytes, static_cast<const T*>(d_in), static_cast<T*>(d_values_out),
          static_cast<int64_t>(num_segments), d_segment_starts, ends, CombineOp<T, kOp>{},
          Identity<T>(kOp), stream);
    }
  });
}

int FillRandomInt32(int32_t* d_out, uint64_t n, uint64_t seed, int bits, CUstream_st* stream) {
  const uint32_t mask = bits >= 32 ? 0xffffffffu : (1u << bits) - 1;
  FillRandomKernel<<<1024, 256, 0, stream>>>(d_out, n, seed, mask);
  return cudaGetLastError();
}

int CountMismatchedWords(const void* d_a, const void* d_b, uint64_t words,
                         uint64_t* mismatches) {
  unsigned long long* d_count = nullptr;
  cudaError_t err = cudaMalloc(&d_count, sizeof(*d_count));
  if (err != cudaSuccess) return err;
  unsigned long long count = 0;
  if ((err = cudaMemset(d_count, 0, sizeof(*d_count))) == cudaSuccess) {
    CountMismatchKernel<<<2048, 256>>>(static_cast<const uint32_t*>(d_a),
                                       static_cast<const uint32_t*>(d_b), words, d_count);
    if ((err = cudaGetLastError()) == cudaSuccess) {
      err = cudaMemcpy(&count, d_count, sizeof(count), cudaMemcpyDeviceToHost);
    }
  }
  cudaFree(d_count);
  *mismatches = count;
  return err;
}

}  // namespace primserve::baseline
