// CUB equivalents of primserve's scan/reduce entry points (same type-erased,
// two-phase signatures, same semantics through the same functors), plus
// device-side helpers for tests and benchmarks. Test/bench only: plain C++
// header, implemented in gpu_baseline.cu.
#ifndef PRIMSERVE_KERNELS_GPU_BASELINE_H_
#define PRIMSERVE_KERNELS_GPU_BASELINE_H_

#include <cstddef>
#include <cstdint>

#include "core/primitives.h"

struct CUstream_st;

namespace primserve::baseline {

// cub::DeviceScan::{Inclusive,Exclusive}Scan with primserve's Combine.
int CubScan(void* temp, size_t* temp_bytes, const void* d_in, void* d_out, uint64_t n,
            DType dtype, Op op, bool exclusive, CUstream_st* stream);

// cub::DeviceReduce::Reduce with primserve's Combine (SUM/PROD/MIN/MAX), or
// cub::DeviceReduce::ArgMin/ArgMax (CUB's own NaN handling: timing only).
int CubReduce(void* temp, size_t* temp_bytes, const void* d_in, uint64_t n, DType dtype, Op op,
              void* d_value_out, int64_t* d_index_out, CUstream_st* stream);

// cub::DeviceSegmentedReduce::Reduce (SUM/PROD/MIN/MAX; ARG ops return
// cudaErrorInvalidValue). Segment starts as in kernels/reduce.h (num_segments > 0).
int CubSegmentedReduce(void* temp, size_t* temp_bytes, const void* d_in, uint64_t n,
                       const uint64_t* d_segment_starts, uint64_t num_segments, DType dtype,
                       Op op, void* d_values_out, CUstream_st* stream);

// Fills n int32 values with a hash of (index, seed) in [0, 1 << bits).
int FillRandomInt32(int32_t* d_out, uint64_t n, uint64_t seed, int bits, CUstream_st* stream);

// Number of 4-byte words that differ between a and b (synchronous).
int CountMismatchedWords(const void* d_a, const void* d_b, uint64_t words,
                         uint64_t* mismatches);

}  // namespace primserve::baseline

#endif  // PRIMSERVE_KERNELS_GPU_BASELINE_H_
