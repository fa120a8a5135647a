// Test/benchmark helpers for the compaction family, compiled by nvcc in
// compaction_test_util.cu; this header is plain C++ (g++). CUB as a second
// oracle beside the CPU reference, and device-side generators/checkers for
// inputs too large to check on the host. Every function returns a
// cudaError_t value as int (0 = success) and synchronizes nothing unless it
// says so.
#ifndef PRIMSERVE_KERNELS_COMPACTION_TEST_UTIL_H_
#define PRIMSERVE_KERNELS_COMPACTION_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>

#include "core/primitives.h"
#include "kernels/select.h"

struct CUstream_st;

namespace primserve::gpu::testing {

// CUB runs. Each allocates its own temp storage with cudaMalloc, runs on the
// legacy default stream and synchronizes. Counts go to a device uint64.
// cub::DeviceSelect::If with Predicate<T> (keep.d_flags ignored).
int CubSelectIf(const void* d_in, DType dtype, uint64_t n, const SelectKeep& keep,
                void* d_out, uint64_t* d_num);
// cub::DeviceSelect::Flagged (flags uint8).
int CubSelectFlagged(const void* d_in, DType dtype, const uint8_t* d_flags,
                     uint64_t n, void* d_out, uint64_t* d_num);
// cub::DevicePartition::Flagged: kept, then rejected in REVERSE order.
int CubPartitionFlagged(const void* d_in, DType dtype, const uint8_t* d_flags,
                        uint64_t n, void* d_out, uint64_t* d_num);
int CubUnique(const void* d_in, DType dtype, uint64_t n, void* d_out,
              uint64_t* d_num);
int CubRunLengthEncode(const void* d_in, DType dtype, uint64_t n,
                       void* d_values_out, int64_t* d_lengths_out,
                       uint64_t* d_num);
// cub::DeviceReduce::ReduceByKey; op SUM/PROD/MIN/MAX with Combine semantics.
int CubReduceByKey(const void* d_keys, DType key_dtype, const void* d_values,
                   DType value_dtype, uint64_t n, Op op, void* d_keys_out,
                   void* d_values_out, uint64_t* d_num);
// cub::DeviceHistogram::HistogramEven over int32 keys, bins [0, num_bins):
// the count of each key, as int32.
int CubHistogram(const int32_t* d_keys, uint64_t n, int num_bins,
                 int32_t* d_counts);

// Timed CUB calls for the benchmark: same as above but with caller-given
// temp storage (size query when d_temp is null) and a stream, no sync.
int CubSelectIfTimed(void* d_temp, size_t* temp_bytes, const void* d_in,
                     DType dtype, uint64_t n, const SelectKeep& keep, void* d_out,
                     uint64_t* d_num, CUstream_st* stream);
int CubPartitionIfTimed(void* d_temp, size_t* temp_bytes, const void* d_in,
                        DType dtype, uint64_t n, const SelectKeep& keep,
                        void* d_out, uint64_t* d_num, CUstream_st* stream);
int CubUniqueTimed(void* d_temp, size_t* temp_bytes, const void* d_in,
                   DType dtype, uint64_t n, void* d_out, uint64_t* d_num,
                   CUstream_st* stream);
int CubRunLengthEncodeTimed(void* d_temp, size_t* temp_bytes, const void* d_in,
                            DType dtype, uint64_t n, void* d_values_out,
                            int64_t* d_lengths_out, uint64_t* d_num,
                            CUstream_st* stream);
int CubReduceByKeyTimed(void* d_temp, size_t* temp_bytes, const void* d_keys,
                        DType key_dtype, const void* d_values, DType value_dtype,
                        uint64_t n, Op op, void* d_keys_out, void* d_values_out,
                        uint64_t* d_num, CUstream_st* stream);
int CubHistogramTimed(void* d_temp, size_t* temp_bytes, const int32_t* d_keys,
                      uint64_t n, int num_bins, int32_t* d_counts,
                      CUstream_st* stream);

// Big-input check (n > 2^31): fills d_values[i] = Hash32(i) and
// d_flags[i] = Hash32(i ^ salt) & 1 on the device.
int FillHashed(int32_t* d_values, uint8_t* d_flags, uint64_t n, uint32_t salt);
// Counts flags set (device), synchronizes, returns it in *count.
int CountFlags(const uint8_t* d_flags, uint64_t n, uint64_t* count);
// Checks a flagged Select's output against FillHashed's data: the indices
// strictly increase, each is flagged, each value is Hash32(index). Writes the
// number of bad positions in *bad (synchronizes).
int CheckHashedSelect(const int32_t* d_values_out, const int64_t* d_indices_out,
                      uint64_t count, const uint8_t* d_flags, uint64_t* bad);

// Benchmark inputs with runs: d[i] = (i / run_len) as a value of dtype.
int FillRuns(void* d, DType dtype, uint64_t n, int run_len);

}  // namespace primserve::gpu::testing

#endif  // PRIMSERVE_KERNELS_COMPACTION_TEST_UTIL_H_
