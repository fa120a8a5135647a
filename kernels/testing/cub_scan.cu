// CUB scans of cub_baseline.h.
#include <cuda_runtime.h>

#include <climits>
#include <cub/device/device_scan.cuh>
#include <cuda/functional>
#include <cuda/std/functional>

#include "core/primitives.h"
#include "kernels/testing/cub_baseline.h"

namespace primserve::gpu::testing {
namespace {

template <typename T, typename N>
cudaError_t Scan(void* temp, size_t& bytes, const T* in, T* out, N n, Op op, bool exclusive,
                 cudaStream_t stream) {
  switch (op) {
    case Op::kSum:
      return exclusive ? cub::DeviceScan::ExclusiveSum(temp, bytes, in, out, n, stream)
                       : cub::DeviceScan::InclusiveSum(temp, bytes, in, out, n, stream);
    case Op::kMin:
      return exclusive ? cub::DeviceScan::ExclusiveScan(temp, bytes, in, out, cuda::minimum<>{},
                                                        Identity<T>(op), n, stream)
                       : cub::DeviceScan::InclusiveScan(temp, bytes, in, out, cuda::minimum<>{},
                                                        n, stream);
    case Op::kMax:
      return exclusive ? cub::DeviceScan::ExclusiveScan(temp, bytes, in, out, cuda::maximum<>{},
                                                        Identity<T>(op), n, stream)
                       : cub::DeviceScan::InclusiveScan(temp, bytes, in, out, cuda::maximum<>{},
                                                        n, stream);
    case Op::kProd:
      return exclusive
                 ? cub::DeviceScan::ExclusiveScan(temp, bytes, in, out,
                                                  cuda::std::multiplies<>{}, Identity<T>(op), n,
                                                  stream)
                 : cub::DeviceScan::InclusiveScan(temp, bytes, in, out,
                                                  cuda::std::multiplies<>{}, n, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

CubCount CountFor(uint64_t n) { return n <= INT_MAX ? CubCount::kInt32 : CubCount::kInt64; }

const char* CubCountName(CubCount count) {
  return count == CubCount::kInt32 ? "int" : "int64";
}

int CubScan(void* temp, size_t* temp_bytes, const void* d_in, void* d_out, uint64_t n,
            DType dtype, Op op, bool exclusive, CubCount count, CUstream_st* stream) {
  if (count == CubCount::kInt32 && n > INT_MAX) return cudaErrorInvalidValue;
  return VisitDType(dtype, [&](auto tag) -> int {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(d_in);
    T* out = static_cast<T*>(d_out);
    return count == CubCount::kInt32
               ? Scan(temp, *temp_bytes, in, out, static_cast<int>(n), op, exclusive, stream)
               : Scan(temp, *temp_bytes, in, out, static_cast<int64_t>(n), op, exclusive, stream);
  });
}

const char* CubScanCall(Op op, bool exclusive) {
  switch (op) {
    case Op::kSum: return exclusive ? "DeviceScan::ExclusiveSum" : "DeviceScan::InclusiveSum";
    case Op::kMin:
      return exclusive ? "DeviceScan::ExclusiveScan(cuda::minimum)"
                       : "DeviceScan::InclusiveScan(cuda::minimum)";
    case Op::kMax:
      return exclusive ? "DeviceScan::ExclusiveScan(cuda::maximum)"
                       : "DeviceScan::InclusiveScan(cuda::maximum)";
    case Op::kProd:
      return exclusive ? "DeviceScan::ExclusiveScan(multiplies)"
                       : "DeviceScan::InclusiveScan(multiplies)";
    default: return "none";
  }
}

}  // namespace primserve::gpu::testing
