// CUB calls of the compaction family in cub_baseline.h.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <cub/device/device_histogram.cuh>
#include <cub/device/device_partition.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_select.cuh>
#include <cuda/functional>
#include <cuda/std/functional>
#include <type_traits>

#include "core/primitives.h"
#include "kernels/testing/cub_baseline.h"

namespace primserve::gpu::testing {
namespace {

template <typename T>
struct LessThan {
  T operand;
  __host__ __device__ bool operator()(const T& x) const { return x < operand; }
};

template <typename T>
struct GreaterThan {
  T operand;
  __host__ __device__ bool operator()(const T& x) const { return x > operand; }
};

// Any predicate kind, switching on the kind per element.
template <typename T>
struct AnyPredicate {
  Predicate<T> pred;
  __host__ __device__ bool operator()(const T& x) const { return pred(x); }
};

// ReduceByKey's ops other than SUM, switching on the op per pair.
template <typename T>
struct AnyCombine {
  Op op;
  __host__ __device__ T operator()(const T& a, const T& b) const { return Combine(op, a, b); }
};

template <typename T>
Predicate<T> ToPredicate(const SelectKeep& keep) {
  Predicate<T> p;
  p.kind = keep.kind;
  std::memcpy(&p.operand, keep.operand, sizeof(T));
  std::memcpy(&p.upper, keep.upper, sizeof(T));
  return p;
}

// Calls f(n) with n as CUB's count type.
template <typename F>
int WithCount(uint64_t n, CubCount count, F&& f) {
  if (count == CubCount::kInt32) {
    if (n > INT_MAX) return cudaErrorInvalidValue;
    return f(static_cast<int>(n));
  }
  return f(static_cast<int64_t>(n));
}

// Calls f(U{}) with the unsigned type of dtype's width (elements compared or
// moved by their bits).
template <typename F>
int VisitBits(DType dtype, F&& f) {
  return DTypeSize(dtype) == 4 ? f(uint32_t{}) : f(uint64_t{});
}

// Calls f(functor) with the plainest functor for keep's predicate over T.
template <typename T, typename F>
int VisitPredicate(const SelectKeep& keep, F&& f) {
  const Predicate<T> pred = ToPredicate<T>(keep);
  if (keep.kind == PredicateKind::kLt) return f(LessThan<T>{pred.operand});
  if (keep.kind == PredicateKind::kGt) return f(GreaterThan<T>{pred.operand});
  return f(AnyPredicate<T>{pred});
}

template <bool kPartition>
int SelectOrPartitionIf(void* temp, size_t* temp_bytes, const void* d_in, DType dtype,
                        uint64_t n, const SelectKeep& keep, void* d_out, uint64_t* d_num,
                        CubCount count, cudaStream_t stream) {
  return VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(d_in);
    T* out = static_cast<T*>(d_out);
    return VisitPredicate<T>(keep, [&](auto functor) {
      return WithCount(n, count, [&](auto items) -> int {
        if constexpr (kPartition) {
          return cub::DevicePartition::If(temp, *temp_bytes, in, out, d_num, items, functor,
                                          stream);
        } else {
          return cub::DeviceSelect::If(temp, *temp_bytes, in, out, d_num, items, functor,
                                       stream);
        }
      });
    });
  });
}

template <bool kPartition>
int SelectOrPartitionFlagged(void* temp, size_t* temp_bytes, const void* d_in, DType dtype,
                             const uint8_t* d_flags, uint64_t n, void* d_out, uint64_t* d_num,
                             CubCount count, cudaStream_t stream) {
  return VisitBits(dtype, [&](auto tag) {
    using U = decltype(tag);
    const U* in = static_cast<const U*>(d_in);
    U* out = static_cast<U*>(d_out);
    return WithCount(n, count, [&](auto items) -> int {
      if constexpr (kPartition) {
        return cub::DevicePartition::Flagged(temp, *temp_bytes, in, d_flags, out, d_num, items,
                                             stream);
      } else {
        return cub::DeviceSelect::Flagged(temp, *temp_bytes, in, d_flags, out, d_num, items,
                                          stream);
      }
    });
  });
}

}  // namespace

int CubSelectIf(void* temp, size_t* temp_bytes, const void* d_in, DType dtype, uint64_t n,
                const SelectKeep& keep, void* d_out, uint64_t* d_num, CubCount count,
                CUstream_st* stream) {
  return SelectOrPartitionIf<false>(temp, temp_bytes, d_in, dtype, n, keep, d_out, d_num,
                                    count, stream);
}

int CubPartitionIf(void* temp, size_t* temp_bytes, const void* d_in, DType dtype, uint64_t n,
                   const SelectKeep& keep, void* d_out, uint64_t* d_num, CubCount count,
                   CUstream_st* stream) {
  return SelectOrPartitionIf<true>(temp, temp_bytes, d_in, dtype, n, keep, d_out, d_num, count,
                                   stream);
}

int CubSelectFlagged(void* temp, size_t* temp_bytes, const void* d_in, DType dtype,
                     const uint8_t* d_flags, uint64_t n, void* d_out, uint64_t* d_num,
                     CubCount count, CUstream_st* stream) {
  return SelectOrPartitionFlagged<false>(temp, temp_bytes, d_in, dtype, d_flags, n, d_out,
                                         d_num, count, stream);
}

int CubPartitionFlagged(void* temp, size_t* temp_bytes, const void* d_in, DType dtype,
                        const uint8_t* d_flags, uint64_t n, void* d_out, uint64_t* d_num,
                        CubCount count, CUstream_st* stream) {
  return SelectOrPartitionFlagged<true>(temp, temp_bytes, d_in, dtype, d_flags, n, d_out,
                                        d_num, count, stream);
}

int CubUnique(void* temp, size_t* temp_bytes, const void* d_in, DType dtype, uint64_t n,
              void* d_out, uint64_t* d_num, CubCount count, CUstream_st* stream) {
  return VisitBits(dtype, [&](auto tag) {
    using U = decltype(tag);
    return WithCount(n, count, [&](auto items) -> int {
      return cub::DeviceSelect::Unique(temp, *temp_bytes, static_cast<const U*>(d_in),
                                       static_cast<U*>(d_out), d_num, items, stream);
    });
  });
}

int CubRunLengthEncode(void* temp, size_t* temp_bytes, const void* d_in, DType dtype,
                       uint64_t n, void* d_values_out, int64_t* d_lengths_out, uint64_t* d_num,
                       CubCount count, CUstream_st* stream) {
  return VisitBits(dtype, [&](auto tag) {
    using U = decltype(tag);
    return WithCount(n, count, [&](auto items) -> int {
      return cub::DeviceRunLengthEncode::Encode(temp, *temp_bytes, static_cast<const U*>(d_in),
                                                static_cast<U*>(d_values_out), d_lengths_out,
                                                d_num, items, stream);
    });
  });
}

int CubRunLengthEncodeInt32(void* temp, size_t* temp_bytes, const void* d_in, DType dtype,
                            uint64_t n, void* d_values_out, int32_t* d_lengths_out,
                            uint64_t* d_num, CubCount count, CUstream_st* stream) {
  if (n > INT_MAX) return cudaErrorInvalidValue;
  return VisitBits(dtype, [&](auto tag) {
    using U = decltype(tag);
    return WithCount(n, count, [&](auto items) -> int {
      return cub::DeviceRunLengthEncode::Encode(temp, *temp_bytes, static_cast<const U*>(d_in),
                                                static_cast<U*>(d_values_out), d_lengths_out,
                                                d_num, items, stream);
    });
  });
}

int CubReduceByKey(void* temp, size_t* temp_bytes, const void* d_keys, DType key_dtype,
                   const void* d_values, DType value_dtype, uint64_t n, Op op, void* d_keys_out,
                   void* d_values_out, uint64_t* d_num, CubCount count, CUstream_st* stream) {
  return VisitBits(key_dtype, [&](auto key_tag) {
    using K = decltype(key_tag);
    return VisitDType(value_dtype, [&](auto value_tag) {
      using V = decltype(value_tag);
      const K* keys = static_cast<const K*>(d_keys);
      K* keys_out = static_cast<K*>(d_keys_out);
      const V* values = static_cast<const V*>(d_values);
      V* values_out = static_cast<V*>(d_values_out);
      return WithCount(n, count, [&](auto items) -> int {
        if (op == Op::kSum) {
          return cub::DeviceReduce::ReduceByKey(temp, *temp_bytes, keys, keys_out, values,
                                                values_out, d_num, cuda::std::plus<>{}, items,
                                                stream);
        }
        return cub::DeviceReduce::ReduceByKey(temp, *temp_bytes, keys, keys_out, values,
                                              values_out, d_num, AnyCombine<V>{op}, items,
                                              stream);
      });
    });
  });
}

int CubHistogram(void* temp, size_t* temp_bytes, const int32_t* d_keys, uint64_t n,
                 int num_bins, int32_t* d_counts, CubCount count, CUstream_st* stream) {
  return WithCount(n, count, [&](auto items) -> int {
    return cub::DeviceHistogram::HistogramEven(temp, *temp_bytes, d_keys, d_counts,
                                               num_bins + 1, 0, num_bins, items, stream);
  });
}

}  // namespace primserve::gpu::testing
