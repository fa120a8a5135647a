// Device-side helpers of the GPU tests and the benchmark: generators and
// checkers for inputs too large to build or check on the host, and a runner
// for two-phase calls. Implemented in device_helpers.cu; plain C++ header.
// Functions return a cudaError_t as int (0 = success).
#ifndef PRIMSERVE_KERNELS_TESTING_DEVICE_HELPERS_H_
#define PRIMSERVE_KERNELS_TESTING_DEVICE_HELPERS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/primitives.h"

namespace primserve::gpu::testing {

// Runs a two-phase call f(temp, &temp_bytes) (size query, then the call)
// with temp storage from cudaMalloc, on the legacy default stream, and waits.
template <typename F>
int RunTwoPhase(F&& f) {
  size_t bytes = 0;
  if (int err = f(nullptr, &bytes)) return err;
  void* temp = nullptr;
  if (cudaError_t err = cudaMalloc(&temp, bytes < 16 ? 16 : bytes)) return err;
  int err = f(temp, &bytes);
  if (err == 0) err = cudaDeviceSynchronize();
  cudaFree(temp);
  return err;
}

// Fills n int32 values with a hash of (index, seed) in [0, 1 << bits).
int FillRandomInt32(int32_t* d_out, uint64_t n, uint64_t seed, int bits, CUstream_st* stream);

// Number of 4-byte words that differ between a and b (synchronous).
int CountMismatchedWords(const void* d_a, const void* d_b, uint64_t words, uint64_t* mismatches);

// Inputs with runs: d[i] = (i / run_len) as a value of dtype.
int FillRuns(void* d, DType dtype, uint64_t n, int run_len, CUstream_st* stream);

// Inputs with runs of random length (geometric, mean mean_run >= 1): a run
// starts at i with probability 1 / mean_run, and d[i] holds the bits of
// 0x40000000 + its run's index (float inputs stay finite and normal). Uses
// 4 * n bytes of device scratch, freed before it returns.
int FillRandomRuns(void* d, DType dtype, uint64_t n, double mean_run, uint64_t seed);

// Number of positions where int64 a and int32 b differ (synchronous): our
// int64 run lengths against CUB's int32 ones.
int CountMismatchedWidened(const int64_t* d_a, const int32_t* d_b, uint64_t n,
                           uint64_t* mismatches);

// Number of positions where float values a and b (dtype float32 or float64)
// differ by more than rel_tol relative to b (synchronous): sums in two
// association orders.
int CountFarApart(const void* d_a, const void* d_b, DType dtype, uint64_t n, double rel_tol,
                  uint64_t* far);

// Big-input Select check (n > 2^31): fills d_values[i] = Hash32(i) and
// d_flags[i] = Hash32(i ^ salt) & 1 on the device.
int FillHashed(int32_t* d_values, uint8_t* d_flags, uint64_t n, uint32_t salt);
// Counts the flags set, synchronously, into *count.
int CountFlags(const uint8_t* d_flags, uint64_t n, uint64_t* count);
// Checks a flagged Select's output against FillHashed's data: the indices
// strictly increase, each is flagged, each value is Hash32(index). Writes the
// number of bad positions in *bad (synchronous).
int CheckHashedSelect(const int32_t* d_values_out, const int64_t* d_indices_out, uint64_t count,
                      const uint8_t* d_flags, uint64_t* bad);

}  // namespace primserve::gpu::testing

#endif  // PRIMSERVE_KERNELS_TESTING_DEVICE_HELPERS_H_
