// See device_helpers.h.
#include "kernels/testing/device_helpers.h"

#include <cuda_runtime.h>

#include <cstdint>

#include <cub/device/device_scan.cuh>

#include "core/primitives.h"

namespace primserve::gpu::testing {
namespace {

constexpr int kBlocks = 2048;
constexpr int kThreads = 256;

__device__ __host__ inline uint32_t Hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__device__ inline uint64_t GlobalThread() {
  return blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
}
__device__ inline uint64_t GridStride() { return static_cast<uint64_t>(gridDim.x) * blockDim.x; }

__global__ void FillRandomKernel(int32_t* out, uint64_t n, uint64_t seed, uint32_t mask) {
  for (uint64_t i = GlobalThread(); i < n; i += GridStride()) {
    uint64_t z = i + seed * 0x9e3779b97f4a7c15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    out[i] = static_cast<int32_t>(static_cast<uint32_t>(z ^ (z >> 31)) & mask);
  }
}

__global__ void CountMismatchKernel(const uint32_t* a, const uint32_t* b, uint64_t n,
                                    unsigned long long* count) {
  unsigned long long local = 0;
  for (uint64_t i = GlobalThread(); i < n; i += GridStride()) local += a[i] != b[i];
  if (local) atomicAdd(count, local);
}

template <typename T>
__global__ void FillRunsKernel(T* d, uint64_t n, int run_len) {
  for (uint64_t i = GlobalThread(); i < n; i += GridStride()) d[i] = static_cast<T>(i / run_len);
}

// Run heads: 1 with probability head_threshold / 2^32.
__global__ void FillHeadsKernel(uint32_t* heads, uint64_t n, uint64_t seed,
                                uint64_t head_threshold) {
  for (uint64_t i = GlobalThread(); i < n; i += GridStride()) {
    heads[i] = Hash32(i ^ (seed << 40)) < head_threshold ? 1u : 0u;
  }
}

template <typename T>
__global__ void RunIdsToBitsKernel(const uint32_t* ids, T* d, uint64_t n) {
  for (uint64_t i = GlobalThread(); i < n; i += GridStride()) {
    d[i] = static_cast<T>(0x40000000ull + ids[i]);
  }
}

__global__ void CountWidenedMismatchKernel(const int64_t* a, const int32_t* b, uint64_t n,
                                           unsigned long long* count) {
  unsigned long long local = 0;
  for (uint64_t i = GlobalThread(); i < n; i += GridStride()) local += a[i] != b[i];
  if (local) atomicAdd(count, local);
}

template <typename F>
__global__ void CountFarApartKernel(const F* a, const F* b, uint64_t n, double rel_tol,
                                    unsigned long long* count) {
  unsigned long long local = 0;
  for (uint64_t i = GlobalThread(); i < n; i += GridStride()) {
    const double d = fabs(double(a[i]) - double(b[i]));
    local += !(d <= rel_tol * fabs(double(b[i])) + 1e-300);
  }
  if (local) atomicAdd(count, local);
}

__global__ void FillHashedKernel(int32_t* values, uint8_t* flags, uint64_t n, uint32_t salt) {
  for (uint64_t i = GlobalThread(); i < n; i += GridStride()) {
    values[i] = static_cast<int32_t>(Hash32(i));
    flags[i] = static_cast<uint8_t>(Hash32(i ^ (static_cast<uint64_t>(salt) << 40)) & 1u);
  }
}

__global__ void CountFlagsKernel(const uint8_t* flags, uint64_t n, unsigned long long* count) {
  unsigned long long c = 0;
  for (uint64_t i = GlobalThread(); i < n; i += GridStride()) c += flags[i] != 0;
  if (c) atomicAdd(count, c);
}

__global__ void CheckHashedKernel(const int32_t* values, const int64_t* indices, uint64_t count,
                                  const uint8_t* flags, unsigned long long* bad) {
  unsigned long long b = 0;
  for (uint64_t r = GlobalThread(); r < count; r += GridStride()) {
    const int64_t i = indices[r];
    bool ok = i >= 0 && flags[i] != 0 &&
              values[r] == static_cast<int32_t>(Hash32(static_cast<uint64_t>(i)));
    if (r > 0) ok = ok && indices[r - 1] < i;
    b += ok ? 0 : 1;
  }
  if (b) atomicAdd(bad, b);
}

// Runs launch(d_counter) with a zeroed device counter and copies it to *out.
template <typename Launch>
int CountOnDevice(Launch launch, uint64_t* out) {
  unsigned long long* d_count = nullptr;
  cudaError_t err = cudaMalloc(&d_count, sizeof(*d_count));
  if (err != cudaSuccess) return err;
  unsigned long long count = 0;
  if ((err = cudaMemset(d_count, 0, sizeof(*d_count))) == cudaSuccess) {
    launch(d_count);
    if ((err = cudaGetLastError()) == cudaSuccess) {
      err = cudaMemcpy(&count, d_count, sizeof(count), cudaMemcpyDeviceToHost);
    }
  }
  const cudaError_t free_err = cudaFree(d_count);
  *out = count;
  return err != cudaSuccess ? err : free_err;
}

// Calls f(U{}) with the unsigned type of dtype's width.
template <typename F>
int VisitBitsOf(DType dtype, F&& f) {
  return DTypeSize(dtype) == 4 ? f(uint32_t{}) : f(uint64_t{});
}

}  // namespace

int FillRandomInt32(int32_t* d_out, uint64_t n, uint64_t seed, int bits, CUstream_st* stream) {
  const uint32_t mask = bits >= 32 ? 0xffffffffu : (1u << bits) - 1;
  FillRandomKernel<<<kBlocks, kThreads, 0, stream>>>(d_out, n, seed, mask);
  return cudaGetLastError();
}

int CountMismatchedWords(const void* d_a, const void* d_b, uint64_t words, uint64_t* mismatches) {
  return CountOnDevice(
      [&](unsigned long long* d_count) {
        CountMismatchKernel<<<kBlocks, kThreads>>>(static_cast<const uint32_t*>(d_a),
                                                   static_cast<const uint32_t*>(d_b), words,
                                                   d_count);
      },
      mismatches);
}

int FillRuns(void* d, DType dtype, uint64_t n, int run_len, CUstream_st* stream) {
  return VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    FillRunsKernel<T><<<kBlocks, kThreads, 0, stream>>>(static_cast<T*>(d), n, run_len);
    return static_cast<int>(cudaGetLastError());
  });
}

int FillRandomRuns(void* d, DType dtype, uint64_t n, double mean_run, uint64_t seed) {
  if (mean_run < 1 || n >= (1ull << 32)) return cudaErrorInvalidValue;
  uint32_t* ids = nullptr;
  void* temp = nullptr;
  size_t temp_bytes = 0;
  cudaError_t err = cudaMalloc(&ids, n * sizeof(uint32_t));
  if (err != cudaSuccess) return err;
  const uint64_t threshold = static_cast<uint64_t>(4294967296.0 / mean_run);
  FillHeadsKernel<<<kBlocks, kThreads>>>(ids, n, seed, threshold);
  err = cudaGetLastError();
  if (err == cudaSuccess) err = cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, ids, ids, n);
  if (err == cudaSuccess) err = cudaMalloc(&temp, temp_bytes);
  if (err == cudaSuccess) err = cub::DeviceScan::InclusiveSum(temp, temp_bytes, ids, ids, n);
  if (err == cudaSuccess) {
    err = static_cast<cudaError_t>(VisitBitsOf(dtype, [&](auto tag) {
      using U = decltype(tag);
      RunIdsToBitsKernel<U><<<kBlocks, kThreads>>>(ids, static_cast<U*>(d), n);
      return static_cast<int>(cudaGetLastError());
    }));
  }
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  const cudaError_t free_ids = cudaFree(ids);
  const cudaError_t free_temp = temp != nullptr ? cudaFree(temp) : cudaSuccess;
  if (err != cudaSuccess) return err;
  return free_ids != cudaSuccess ? free_ids : free_temp;
}

int CountMismatchedWidened(const int64_t* d_a, const int32_t* d_b, uint64_t n,
                           uint64_t* mismatches) {
  return CountOnDevice(
      [&](unsigned long long* d_count) {
        CountWidenedMismatchKernel<<<kBlocks, kThreads>>>(d_a, d_b, n, d_count);
      },
      mismatches);
}

int CountFarApart(const void* d_a, const void* d_b, DType dtype, uint64_t n, double rel_tol,
                  uint64_t* far) {
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64) return cudaErrorInvalidValue;
  return CountOnDevice(
      [&](unsigned long long* d_count) {
        if (dtype == DType::kFloat32) {
          CountFarApartKernel<float><<<kBlocks, kThreads>>>(
              static_cast<const float*>(d_a), static_cast<const float*>(d_b), n, rel_tol,
              d_count);
        } else {
          CountFarApartKernel<double><<<kBlocks, kThreads>>>(
              static_cast<const double*>(d_a), static_cast<const double*>(d_b), n, rel_tol,
              d_count);
        }
      },
      far);
}

int FillHashed(int32_t* d_values, uint8_t* d_flags, uint64_t n, uint32_t salt) {
  FillHashedKernel<<<kBlocks, kThreads>>>(d_values, d_flags, n, salt);
  return cudaGetLastError();
}

int CountFlags(const uint8_t* d_flags, uint64_t n, uint64_t* count) {
  return CountOnDevice(
      [&](unsigned long long* d_count) {
        CountFlagsKernel<<<kBlocks, kThreads>>>(d_flags, n, d_count);
      },
      count);
}

int CheckHashedSelect(const int32_t* d_values_out, const int64_t* d_indices_out, uint64_t count,
                      const uint8_t* d_flags, uint64_t* bad) {
  return CountOnDevice(
      [&](unsigned long long* d_bad) {
        CheckHashedKernel<<<kBlocks, kThreads>>>(d_values_out, d_indices_out, count, d_flags,
                                                 d_bad);
      },
      bad);
}

}  // namespace primserve::gpu::testing
