// CUB reductions of cub_baseline.h.
#include <cuda_runtime.h>

#include <climits>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda/functional>
#include <cuda/std/functional>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "core/primitives.h"
#include "kernels/testing/cub_baseline.h"

namespace primserve::gpu::testing {
namespace {

template <typename T, typename N>
cudaError_t Reduce(void* temp, size_t& bytes, const T* in, T* out, int64_t* index_out, N n,
                   Op op, cudaStream_t stream) {
  switch (op) {
    case Op::kSum: return cub::DeviceReduce::Sum(temp, bytes, in, out, n, stream);
    // Min/Max are Reduce with cuda::minimum/maximum and numeric_limits<T>::max()
    // / lowest() as the initial value; the same kernels with primserve's
    // identity (+-inf for floats) give the same answer for empty input.
    case Op::kMin:
      return cub::DeviceReduce::Reduce(temp, bytes, in, out, n, cuda::minimum<>{},
                                       Identity<T>(op), stream);
    case Op::kMax:
      return cub::DeviceReduce::Reduce(temp, bytes, in, out, n, cuda::maximum<>{},
                                       Identity<T>(op), stream);
    case Op::kProd:
      return cub::DeviceReduce::Reduce(temp, bytes, in, out, n, cuda::std::multiplies<>{},
                                       Identity<T>(op), stream);
    case Op::kArgMin:
      return cub::DeviceReduce::ArgMin(temp, bytes, in, out, index_out,
                                       static_cast<int64_t>(n), stream);
    case Op::kArgMax:
      return cub::DeviceReduce::ArgMax(temp, bytes, in, out, index_out,
                                       static_cast<int64_t>(n), stream);
  }
  return cudaErrorInvalidValue;
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

}  // namespace

int CubReduce(void* temp, size_t* temp_bytes, const void* d_in, uint64_t n, DType dtype, Op op,
              void* d_value_out, int64_t* d_index_out, CubCount count, CUstream_st* stream) {
  if (count == CubCount::kInt32 && n > INT_MAX) return cudaErrorInvalidValue;
  return VisitDType(dtype, [&](auto tag) -> int {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(d_in);
    T* out = static_cast<T*>(d_value_out);
    return count == CubCount::kInt32
               ? Reduce(temp, *temp_bytes, in, out, d_index_out, static_cast<int>(n), op, stream)
               : Reduce(temp, *temp_bytes, in, out, d_index_out, static_cast<int64_t>(n), op,
                        stream);
  });
}

const char* CubReduceCall(Op op) {
  switch (op) {
    case Op::kSum: return "DeviceReduce::Sum";
    case Op::kMin: return "DeviceReduce::Reduce(cuda::minimum) (=Min)";
    case Op::kMax: return "DeviceReduce::Reduce(cuda::maximum) (=Max)";
    case Op::kProd: return "DeviceReduce::Reduce(multiplies)";
    case Op::kArgMin: return "DeviceReduce::ArgMin";
    case Op::kArgMax: return "DeviceReduce::ArgMax";
  }
  return "none";
}

int CubSegmentedReduce(void* temp, size_t* temp_bytes, const void* d_in, uint64_t n,
                       const uint64_t* d_segment_starts, uint64_t num_segments, DType dtype,
                       Op op, void* d_values_out, CUstream_st* stream) {
  return VisitDType(dtype, [&](auto tag) -> int {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(d_in);
    T* out = static_cast<T*>(d_values_out);
    const auto ends = thrust::make_transform_iterator(
        thrust::counting_iterator<uint64_t>(0), SegmentEnd{d_segment_starts, num_segments, n});
    const int64_t segments = static_cast<int64_t>(num_segments);
    switch (op) {
      case Op::kSum:
        return cub::DeviceSegmentedReduce::Sum(temp, *temp_bytes, in, out, segments,
                                               d_segment_starts, ends, stream);
      case Op::kMin:  // as DeviceSegmentedReduce::Min, with primserve's identity
        return cub::DeviceSegmentedReduce::Reduce(temp, *temp_bytes, in, out, segments,
                                                  d_segment_starts, ends, cuda::minimum<>{},
                                                  Identity<T>(op), stream);
      case Op::kMax:
        return cub::DeviceSegmentedReduce::Reduce(temp, *temp_bytes, in, out, segments,
                                                  d_segment_starts, ends, cuda::maximum<>{},
                                                  Identity<T>(op), stream);
      case Op::kProd:
        return cub::DeviceSegmentedReduce::Reduce(temp, *temp_bytes, in, out, segments,
                                                  d_segment_starts, ends,
                                                  cuda::std::multiplies<>{}, Identity<T>(op),
                                                  stream);
      default:
        return cudaErrorInvalidValue;
    }
  });
}

const char* CubSegmentedReduceCall(Op op) {
  switch (op) {
    case Op::kSum: return "DeviceSegmentedReduce::Sum";
    case Op::kMin: return "DeviceSegmentedReduce::Reduce(cuda::minimum)";
    case Op::kMax: return "DeviceSegmentedReduce::Reduce(cuda::maximum)";
    case Op::kProd: return "DeviceSegmentedReduce::Reduce(multiplies)";
    default: return "none";
  }
}

}  // namespace primserve::gpu::testing
