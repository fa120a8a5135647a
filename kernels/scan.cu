// Single-pass scans (plain, with carry, and segmented) with decoupled
// look-back: each element is read once and written once (~2n bytes). The
// kernel is in detail/scan_kernel.cuh; the tuned policy in detail/tuning.cuh.
#include "kernels/scan.h"

#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/detail/dispatch.cuh"
#include "kernels/detail/scan_kernel.cuh"
#include "kernels/detail/tuning.cuh"

namespace primserve::gpu {
namespace {

using namespace detail;

template <bool kSegmented>
int DispatchScan(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
                 uint64_t n, const uint64_t* starts, uint64_t num_segments, DType dtype,
                 Op op, bool exclusive, const void* carry_in, void* carry_out,
                 CUstream_st* stream, const uint64_t* count = nullptr) {
  if (temp_bytes == nullptr || !IsValidDType(dtype) || !IsCombineOp(op)) {
    return cudaErrorInvalidValue;
  }
  if (temp_storage != nullptr && n > 0 && (d_in == nullptr || d_out == nullptr)) {
    return cudaErrorInvalidValue;
  }
  return VisitDType(dtype, [&](auto type_tag) {
    using T = decltype(type_tag);
    return VisitOp(op, [&](auto op_tag) -> int {
      constexpr Op kOp = decltype(op_tag)::value;
      if constexpr (kOp == Op::kArgMin || kOp == Op::kArgMax) {
        return cudaErrorInvalidValue;
      } else {
        return LaunchScan<T, kOp, kSegmented, DefaultScanPolicy>(
            temp_storage, temp_bytes, static_cast<const T*>(d_in), static_cast<T*>(d_out), n,
            starts, num_segments, exclusive, static_cast<const T*>(carry_in),
            static_cast<T*>(carry_out), stream, count);
      }
    });
  });
}

}  // namespace

int Scan(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out, uint64_t n,
         DType dtype, Op op, bool exclusive, CUstream_st* stream) {
  return DispatchScan<false>(temp_storage, temp_bytes, d_in, d_out, n, nullptr, 0, dtype, op,
                             exclusive, nullptr, nullptr, stream);
}

int ScanWithCarry(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
                  uint64_t n, DType dtype, Op op, bool exclusive, const void* d_carry_in,
                  void* d_carry_out, CUstream_st* stream) {
  return DispatchScan<false>(temp_storage, temp_bytes, d_in, d_out, n, nullptr, 0, dtype, op,
                             exclusive, d_carry_in, d_carry_out, stream);
}

int ScanCounted(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
                uint64_t max_n, const uint64_t* d_count, DType dtype, Op op, bool exclusive,
                CUstream_st* stream) {
  if (temp_storage != nullptr && d_count == nullptr) return cudaErrorInvalidValue;
  return DispatchScan<false>(temp_storage, temp_bytes, d_in, d_out, max_n, nullptr, 0, dtype, op,
                             exclusive, nullptr, nullptr, stream, d_count);
}

uint64_t ScanTileItems(DType dtype, bool segmented) {
  if (!IsValidDType(dtype)) return 0;
  return static_cast<uint64_t>(VisitDType(dtype, [&](auto type_tag) -> int {
    using T = decltype(type_tag);
    return segmented ? ScanConfig<T, Op::kSum, true, DefaultScanPolicy>::kTileItems
                     : ScanConfig<T, Op::kSum, false, DefaultScanPolicy>::kTileItems;
  }));
}

int SegmentedScan(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
                  uint64_t n, const uint64_t* d_segment_starts, uint64_t num_segments,
                  DType dtype, Op op, bool exclusive, CUstream_st* stream) {
  if (num_segments == 0) {
    return Scan(temp_storage, temp_bytes, d_in, d_out, n, dtype, op, exclusive, stream);
  }
  if (temp_storage != nullptr && d_segment_starts == nullptr) return cudaErrorInvalidValue;
  return DispatchScan<true>(temp_storage, temp_bytes, d_in, d_out, n, d_segment_starts,
                            num_segments, dtype, op, exclusive, nullptr, nullptr, stream);
}

int WidenedScan(void* temp_storage, size_t* temp_bytes, const void* d_in, void* d_out,
                uint64_t n, const uint64_t* d_segment_starts, uint64_t num_segments,
                DType dtype, DType accumulator, Op op, bool exclusive, CUstream_st* stream) {
  if (temp_bytes == nullptr) return cudaErrorInvalidValue;
  if (temp_storage != nullptr &&
      ((n > 0 && (d_in == nullptr || d_out == nullptr)) ||
       (num_segments > 0 && d_segment_starts == nullptr))) {
    return cudaErrorInvalidValue;
  }
  return VisitWidening(dtype, accumulator, op, [&](auto type_tag, auto wide_tag, auto op_tag) {
    using T = decltype(type_tag);
    using A = decltype(wide_tag);
    constexpr Op kOp = decltype(op_tag)::value;
    const T* in = static_cast<const T*>(d_in);
    A* out = static_cast<A*>(d_out);
    if (num_segments == 0) {
      return LaunchScan<T, kOp, false, DefaultScanPolicy, false, A>(
          temp_storage, temp_bytes, in, out, n, nullptr, 0, exclusive, nullptr, nullptr, stream);
    }
    return LaunchScan<T, kOp, true, DefaultScanPolicy, false, A>(
        temp_storage, temp_bytes, in, out, n, d_segment_starts, num_segments, exclusive, nullptr,
        nullptr, stream);
  });
}

}  // namespace primserve::gpu
