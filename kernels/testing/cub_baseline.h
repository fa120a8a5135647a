// CUB's fastest public call for the work each primserve kernel does: the
// baseline of the GPU tests (a second oracle beside the CPU reference) and of
// the benchmark. Plain C++ header; the calls are compiled by nvcc in
// cub_scan.cu, cub_reduce.cu and cub_compaction.cu.
//
// Every function is two-phase like CUB and kernels/scan.h (temp == nullptr:
// set *temp_bytes and return 0), enqueues on `stream`, returns a cudaError_t
// as int, and takes the type of CUB's item count: kInt32 (valid while n fits
// an int) or kInt64. CUB picks its kernels by that type and either may be the
// faster, so the benchmark times both and keeps the faster.
//
// Where primserve's semantics differ from the nearest CUB call, the *Call()
// name says so; the tests then compare with CUB only where both agree (see
// the notes on each function).
#ifndef PRIMSERVE_KERNELS_TESTING_CUB_BASELINE_H_
#define PRIMSERVE_KERNELS_TESTING_CUB_BASELINE_H_

#include <cstddef>
#include <cstdint>

#include "core/primitives.h"
#include "kernels/runs.h"
#include "kernels/select.h"

struct CUstream_st;

namespace primserve::gpu::testing {

enum class CubCount { kInt32, kInt64 };

// kInt32 when n fits an int, else kInt64.
CubCount CountFor(uint64_t n);
const char* CubCountName(CubCount count);

// SUM: DeviceScan::InclusiveSum / ExclusiveSum. MIN/MAX: InclusiveScan /
// ExclusiveScan with cuda::minimum<> / cuda::maximum<> (a < b ? a : b: NaN
// does not propagate and the zeros' order is the input's, unlike primserve's
// IEEE minimum/maximum; equal on NaN-free input up to the zeros' sign).
// PROD: InclusiveScan / ExclusiveScan with cuda::std::multiplies<>.
int CubScan(void* temp, size_t* temp_bytes, const void* d_in, void* d_out, uint64_t n,
            DType dtype, Op op, bool exclusive, CubCount count, CUstream_st* stream);
const char* CubScanCall(Op op, bool exclusive);

// DeviceReduce::Sum / ArgMin / ArgMax (ArgMin/ArgMax count in int64
// whatever `count` says: CUB 3.0 has no other overload); MIN/MAX:
// DeviceReduce::Reduce with cuda::minimum<>/maximum<> and primserve's
// identity (the kernels of DeviceReduce::Min/Max, whose initial value is
// numeric_limits max/lowest instead of +-inf); PROD: Reduce with
// cuda::std::multiplies<>. MIN/MAX/ARG*: NaN as
// for CubScan. d_index_out (int64) is for ArgMin/ArgMax only.
int CubReduce(void* temp, size_t* temp_bytes, const void* d_in, uint64_t n, DType dtype, Op op,
              void* d_value_out, int64_t* d_index_out, CubCount count, CUstream_st* stream);
const char* CubReduceCall(Op op);

// DeviceSegmentedReduce::Sum; MIN/MAX/PROD through Reduce with the functors
// and identities above; segment
// starts as in kernels/reduce.h (num_segments > 0). ARG ops: cudaErrorInvalidValue.
int CubSegmentedReduce(void* temp, size_t* temp_bytes, const void* d_in, uint64_t n,
                       const uint64_t* d_segment_starts, uint64_t num_segments, DType dtype,
                       Op op, void* d_values_out, CUstream_st* stream);
const char* CubSegmentedReduceCall(Op op);

// DeviceSelect::If / DevicePartition::If with the predicate of `keep` (its
// d_flags ignored): LT and GT as plain one-comparison functors, the other
// kinds through Predicate<T> of core/primitives.h. Same IEEE semantics as
// primserve's Select. Partition: CUB writes the rejected part in REVERSE
// input order. *d_num (device uint64) gets the number kept.
int CubSelectIf(void* temp, size_t* temp_bytes, const void* d_in, DType dtype, uint64_t n,
                const SelectKeep& keep, void* d_out, uint64_t* d_num, CubCount count,
                CUstream_st* stream);
int CubPartitionIf(void* temp, size_t* temp_bytes, const void* d_in, DType dtype, uint64_t n,
                   const SelectKeep& keep, void* d_out, uint64_t* d_num, CubCount count,
                   CUstream_st* stream);
// DeviceSelect::Flagged / DevicePartition::Flagged with uint8 flags.
int CubSelectFlagged(void* temp, size_t* temp_bytes, const void* d_in, DType dtype,
                     const uint8_t* d_flags, uint64_t n, void* d_out, uint64_t* d_num,
                     CubCount count, CUstream_st* stream);
int CubPartitionFlagged(void* temp, size_t* temp_bytes, const void* d_in, DType dtype,
                        const uint8_t* d_flags, uint64_t n, void* d_out, uint64_t* d_num,
                        CubCount count, CUstream_st* stream);
// DeviceSelect::Unique and DeviceRunLengthEncode::Encode over the elements'
// bits (as primserve compares them). Lengths are int64.
int CubUnique(void* temp, size_t* temp_bytes, const void* d_in, DType dtype, uint64_t n,
              void* d_out, uint64_t* d_num, CubCount count, CUstream_st* stream);
int CubRunLengthEncode(void* temp, size_t* temp_bytes, const void* d_in, DType dtype,
                       uint64_t n, void* d_values_out, int64_t* d_lengths_out, uint64_t* d_num,
                       CubCount count, CUstream_st* stream);
// DeviceReduce::ReduceByKey, keys by their bits; SUM with cuda::std::plus<>,
// the other ops through primserve's Combine (same semantics, a switch on the
// op per pair: for the tests, not timed).
int CubReduceByKey(void* temp, size_t* temp_bytes, const void* d_keys, DType key_dtype,
                   const void* d_values, DType value_dtype, uint64_t n, Op op, void* d_keys_out,
                   void* d_values_out, uint64_t* d_num, CubCount count, CUstream_st* stream);
// DeviceHistogram::HistogramEven over int32 keys in [0, num_bins): the count
// of each key (int32), i.e. AggregateByKey SUM of ones.
int CubHistogram(void* temp, size_t* temp_bytes, const int32_t* d_keys, uint64_t n,
                 int num_bins, int32_t* d_counts, CubCount count, CUstream_st* stream);

}  // namespace primserve::gpu::testing

#endif  // PRIMSERVE_KERNELS_TESTING_CUB_BASELINE_H_
