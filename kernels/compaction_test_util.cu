// See compaction_test_util.h.
#include "kernels/compaction_test_util.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <cub/cub.cuh>

#include "core/primitives.h"

namespace primserve::gpu::testing {
namespace {

template <typename T>
using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <typename T>
struct PredOp {
  Predicate<T> pred;
  __host__ __device__ bool operator()(const T& x) const { return pred(x); }
};

template <typename T>
struct CombineOp {
  Op op;
  __host__ __device__ T operator()(const T& a, const T& b) const {
    return Combine(op, a, b);
  }
};

template <typename T>
Predicate<T> ToPred(const SelectKeep& keep) {
  Predicate<T> p;
  p.kind = keep.kind;
  memcpy(&p.operand, keep.operand, sizeof(T));
  memcpy(&p.upper, keep.upper, sizeof(T));
  return p;
}

// Runs f(d_temp, bytes) twice (size query, then the call) with a cudaMalloc'd
// temp, synchronizes.
template <typename F>
int WithTemp(F f) {
  size_t bytes = 0;
  if (cudaError_t e = f(nullptr, bytes)) return e;
  void* temp = nullptr;
  if (cudaError_t e = cudaMalloc(&temp, bytes < 16 ? 16 : bytes)) return e;
  cudaError_t e = f(temp, bytes);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  cudaFree(temp);
  return e;
}

template <typename F>
int BySize(DType dtype, F f) {
  if (DTypeSize(dtype) == 4) return f(uint32_t{});
  return f(uint64_t{});
}

__device__ __host__ inline uint32_t Hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void FillHashedKernel(int32_t* values, uint8_t* flags, uint64_t n,
                                 uint32_t salt) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
       i < n; i += stride) {
    values[i] = static_cast<int32_t>(Hash32(i));
    flags[i] = static_cast<uint8_t>(Hash32(i ^ (static_cast<uint64_t>(salt) << 40)) & 1u);
  }
}

__global__ void CountFlagsKernel(const uint8_t* flags, uint64_t n,
                                 unsigned long long* count) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  unsigned long long c = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
       i < n; i += stride) {
    c += flags[i] != 0;
  }
  atomicAdd(count, c);
}

__global__ void CheckHashedKernel(const int32_t* values, const int64_t* indices,
                                  uint64_t count, const uint8_t* flags,
                                  unsigned long long* bad) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  unsigned long long b = 0;
  for (uint64_t r = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
       r < count; r += stride) {
    const int64_t i = indices[r];
    bool ok = i >= 0 && flags[i] != 0 &&
              values[r] == static_cast<int32_t>(Hash32(static_cast<uint64_t>(i)));
    if (r > 0) ok = ok && indices[r - 1] < i;
    b += ok ? 0 : 1;
  }
  atomicAdd(bad, b);
}

}  // namespace

int CubSelectIf(const void* d_in, DType dtype, uint64_t n, const SelectKeep& keep,
                void* d_out, uint64_t* d_num) {
  return VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    PredOp<T> op{ToPred<T>(keep)};
    return WithTemp([&](void* t, size_t& b) {
      return cub::DeviceSelect::If(t, b, static_cast<const T*>(d_in),
                                   static_cast<T*>(d_out), d_num,
                                   static_cast<int64_t>(n), op);
    });
  });
}

int CubSelectFlagged(const void* d_in, DType dtype, const uint8_t* d_flags,
                     uint64_t n, void* d_out, uint64_t* d_num) {
  return BySize(dtype, [&](auto tag) {
    using T = decltype(tag);
    return WithTemp([&](void* t, size_t& b) {
      return cub::DeviceSelect::Flagged(t, b, static_cast<const T*>(d_in), d_flags,
                                        static_cast<T*>(d_out), d_num,
                                        static_cast<int64_t>(n));
    });
  });
}

int CubPartitionFlagged(const void* d_in, DType dtype, const uint8_t* d_flags,
                        uint64_t n, void* d_out, uint64_t* d_num) {
  return BySize(dtype, [&](auto tag) {
    using T = decltype(tag);
    return WithTemp([&](void* t, size_t& b) {
      return cub::DevicePartition::Flagged(t, b, static_cast<const T*>(d_in),
                                           d_flags, static_cast<T*>(d_out), d_num,
                                           static_cast<int64_t>(n));
    });
  });
}

int CubUnique(const void* d_in, DType dtype, uint64_t n, void* d_out,
              uint64_t* d_num) {
  return BySize(dtype, [&](auto tag) {
    using T = decltype(tag);
    return WithTemp([&](void* t, size_t& b) {
      return cub::DeviceSelect::Unique(t, b, static_cast<const T*>(d_in),
                                       static_cast<T*>(d_out), d_num,
                                       static_cast<int64_t>(n));
    });
  });
}

int CubRunLengthEncode(const void* d_in, DType dtype, uint64_t n,
                       void* d_values_out, int64_t* d_lengths_out,
                       uint64_t* d_num) {
  return BySize(dtype, [&](auto tag) {
    using T = decltype(tag);
    return WithTemp([&](void* t, size_t& b) {
      return cub::DeviceRunLengthEncode::Encode(
          t, b, static_cast<const T*>(d_in), static_cast<T*>(d_values_out),
          d_lengths_out, d_num, static_cast<int>(n));
    });
  });
}

int CubReduceByKey(const void* d_keys, DType key_dtype, const void* d_values,
                   DType value_dtype, uint64_t n, Op op, void* d_keys_out,
                   void* d_values_out, uint64_t* d_num) {
  return BySize(key_dtype, [&](auto ktag) {
    using K = decltype(ktag);
    return VisitDType(value_dtype, [&](auto vtag) {
      using V = decltype(vtag);
      return WithTemp([&](void* t, size_t& b) {
        return cub::DeviceReduce::ReduceByKey(
            t, b, static_cast<const K*>(d_keys), static_cast<K*>(d_keys_out),
            static_cast<const V*>(d_values), static_cast<V*>(d_values_out), d_num,
            CombineOp<V>{op}, static_cast<int64_t>(n));
      });
    });
  });
}

int CubHistogram(const int32_t* d_keys, uint64_t n, int num_bins,
                 int32_t* d_counts) {
  return WithTemp([&](void* t, size_t& b) {
    return cub::DeviceHistogram::HistogramEven(t, b, d_keys, d_counts,
                                               num_bins + 1, 0, num_bins,
                                               static_cast<int64_t>(n));
  });
}

int CubSelectIfTimed(void* d_temp, size_t* temp_bytes, const void* d_in,
                     DType dtype, uint64_t n, const SelectKeep& keep, void* d_out,
                     uint64_t* d_num, CUstream_st* stream) {
  return VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<int>(cub::DeviceSelect::If(
        d_temp, *temp_bytes, static_cast<const T*>(d_in), static_cast<T*>(d_out),
        d_num, static_cast<int64_t>(n), PredOp<T>{ToPred<T>(keep)},
        reinterpret_cast<cudaStream_t>(stream)));
  });
}

int CubPartitionIfTimed(void* d_temp, size_t* temp_bytes, const void* d_in,
                        DType dtype, uint64_t n, const SelectKeep& keep,
                        void* d_out, uint64_t* d_num, CUstream_st* stream) {
  return VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<int>(cub::DevicePartition::If(
        d_temp, *temp_bytes, static_cast<const T*>(d_in), static_cast<T*>(d_out),
        d_num, static_cast<int64_t>(n), PredOp<T>{ToPred<T>(keep)},
        reinterpret_cast<cudaStream_t>(stream)));
  });
}

int CubUniqueTimed(void* d_temp, size_t* temp_bytes, const void* d_in,
                   DType dtype, uint64_t n, void* d_out, uint64_t* d_num,
                   CUstream_st* stream) {
  return BySize(dtype, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<int>(cub::DeviceSelect::Unique(
        d_temp, *temp_bytes, static_cast<const T*>(d_in), static_cast<T*>(d_out),
        d_num, static_cast<int64_t>(n), reinterpret_cast<cudaStream_t>(stream)));
  });
}

int CubRunLengthEncodeTimed(void* d_temp, size_t* temp_bytes, const void* d_in,
                            DType dtype, uint64_t n, void* d_values_out,
                            int64_t* d_lengths_out, uint64_t* d_num,
                            CUstream_st* stream) {
  return BySize(dtype, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<int>(cub::DeviceRunLengthEncode::Encode(
        d_temp, *temp_bytes, static_cast<const T*>(d_in),
        static_cast<T*>(d_values_out), d_lengths_out, d_num, static_cast<int>(n),
        reinterpret_cast<cudaStream_t>(stream)));
  });
}

int CubReduceByKeyTimed(void* d_temp, size_t* temp_bytes, const void* d_keys,
                        DType key_dtype, const void* d_values, DType value_dtype,
                        uint64_t n, Op op, void* d_keys_out, void* d_values_out,
                        uint64_t* d_num, CUstream_st* stream) {
  return BySize(key_dtype, [&](auto ktag) {
    using K = decltype(ktag);
    return VisitDType(value_dtype, [&](auto vtag) {
      using V = decltype(vtag);
      return static_cast<int>(cub::DeviceReduce::ReduceByKey(
          d_temp, *temp_bytes, static_cast<const K*>(d_keys),
          static_cast<K*>(d_keys_out), static_cast<const V*>(d_values),
          static_cast<V*>(d_values_out), d_num, CombineOp<V>{op},
          static_cast<int64_t>(n), reinterpret_cast<cudaStream_t>(stream)));
    });
  });
}

int CubHistogramTimed(void* d_temp, size_t* temp_bytes, const int32_t* d_keys,
                      uint64_t n, int num_bins, int32_t* d_counts,
                      CUstream_st* stream) {
  return static_cast<int>(cub::DeviceHistogram::HistogramEven(
      d_temp, *temp_bytes, d_keys, d_counts, num_bins + 1, 0, num_bins,
      static_cast<int64_t>(n), reinterpret_cast<cudaStream_t>(stream)));
}

template <typename T>
__global__ void FillRunsKernel(T* d, uint64_t n, int run_len) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
       i < n; i += stride) {
    d[i] = static_cast<T>(i / run_len);
  }
}

int FillRuns(void* d, DType dtype, uint64_t n, int run_len) {
  return VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    FillRunsKernel<T><<<2048, 256>>>(static_cast<T*>(d), n, run_len);
    return static_cast<int>(cudaGetLastError());
  });
}

int FillHashed(int32_t* d_values, uint8_t* d_flags, uint64_t n, uint32_t salt) {
  FillHashedKernel<<<2048, 256>>>(d_values, d_flags, n, salt);
  return static_cast<int>(cudaGetLastError());
}

int CountFlags(const uint8_t* d_flags, uint64_t n, uint64_t* count) {
  unsigned long long* d_count = nullptr;
  if (cudaError_t e = cudaMalloc(&d_count, 8)) return e;
  cudaMemset(d_count, 0, 8);
  CountFlagsKernel<<<2048, 256>>>(d_flags, n, d_count);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaMemcpy(count, d_count, 8, cudaMemcpyDeviceToHost);
  cudaFree(d_count);
  return e;
}

int CheckHashedSelect(const int32_t* d_values_out, const int64_t* d_indices_out,
                      uint64_t count, const uint8_t* d_flags, uint64_t* bad) {
  unsigned long long* d_bad = nullptr;
  if (cudaError_t e = cudaMalloc(&d_bad, 8)) return e;
  cudaMemset(d_bad, 0, 8);
  CheckHashedKernel<<<2048, 256>>>(d_values_out, d_indices_out, count, d_flags,
                                   d_bad);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaMemcpy(bad, d_bad, 8, cudaMemcpyDeviceToHost);
  cudaFree(d_bad);
  return e;
}

}  // namespace primserve::gpu::testing
