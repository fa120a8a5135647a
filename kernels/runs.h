// The run family on the GPU: primitives with one output per run of bit-equal
// consecutive elements (or keys). Unique is a mode of the compaction pass
// (kernels/select.cu); RunLengthEncode and ReduceByKey share one fused pass
// over runs (kernels/runs.cu). Conventions (host-facing C++, void* device
// pointers, cudaError_t as int, two-phase temporary storage, counts written
// to device memory as uint64) are those of kernels/select.h.
#ifndef PRIMSERVE_KERNELS_RUNS_H_
#define PRIMSERVE_KERNELS_RUNS_H_

#include <cstddef>
#include <cstdint>

#include "core/primitives.h"

struct CUstream_st;

namespace primserve::gpu {

// Unique: drops consecutive duplicates (bit-pattern equality: 0.0 and -0.0
// differ, identical NaNs are one). d_out gets the first element of each run;
// *d_num_unique (device uint64) their number. d_out == d_in is allowed (an
// element's output position is never above its own, see Select).
int Unique(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_in,
           DType dtype, uint64_t n, void* d_out, uint64_t* d_num_unique,
           CUstream_st* stream);

// RunLengthEncode: runs of bit-equal consecutive elements; d_values_out gets
// each run's value, d_lengths_out (int64) its length, *d_num_runs (device
// uint64) the number of runs. Not in place.
int RunLengthEncode(void* d_temp_storage, size_t* temp_storage_bytes,
                    const void* d_in, DType dtype, uint64_t n,
                    void* d_values_out, int64_t* d_lengths_out,
                    uint64_t* d_num_runs, CUstream_st* stream);

// ReduceByKey: for each run of bit-equal consecutive keys, the key and op
// (SUM, PROD, MIN, MAX) over its values. Integer results are exact (wrapping);
// float SUM/PROD are combined in a different order from the reference's left
// fold, so they agree within rounding, but in an order fixed by the input:
// the same bits on every run. MIN/MAX exact with NaN propagation.
// Not in place.
int ReduceByKey(void* d_temp_storage, size_t* temp_storage_bytes,
                const void* d_keys, DType key_dtype, const void* d_values,
                DType value_dtype, uint64_t n, Op op, void* d_keys_out,
                void* d_values_out, uint64_t* d_num_runs, CUstream_st* stream);

// As ReduceByKey, except that float SUM/PROD runs spanning tiles combine the
// tiles in whatever order the look-back meets them (the bits may change from
// run to run), which is faster: measured on an H100, float32 1.4x and
// float64 1.7x at 2^28 (kernels/results/h100-2026-11-25-reproducible/).
int ReduceByKeyUnordered(void* d_temp_storage, size_t* temp_storage_bytes,
                         const void* d_keys, DType key_dtype, const void* d_values,
                         DType value_dtype, uint64_t n, Op op, void* d_keys_out,
                         void* d_values_out, uint64_t* d_num_runs, CUstream_st* stream);

}  // namespace primserve::gpu

#endif  // PRIMSERVE_KERNELS_RUNS_H_
