// ReduceByKey (kernels/runs.h): the entry points and the dispatch over
// dtypes, offset width and op; the kernel is detail/runs_kernel.cuh's, under
// DefaultRunsPolicy (tuning.cuh). RunLengthEncode runs on the select kernel
// (select.cu).
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/primitives.h"
#include "kernels/detail/runs_kernel.cuh"
#include "kernels/detail/tuning.cuh"
#include "kernels/runs.h"

namespace primserve::gpu {
namespace {

using detail::DefaultRunsPolicy;

// Picks the offset type (uint32 below 2^32 items) and the op, and handles
// the size query and n == 0.
template <typename KB, typename V>
int DispatchRuns(void* d_temp, size_t* temp_bytes, const void* keys, const void* values,
                 uint64_t n, Op op, void* keys_out, void* values_out, uint64_t* num_runs,
                 bool in_order, cudaStream_t stream) {
  const bool small = n < (1ull << 32);
  const size_t need = small ? detail::RunsTempBytes<DefaultRunsPolicy, KB, uint32_t, V>(n)
                            : detail::RunsTempBytes<DefaultRunsPolicy, KB, uint64_t, V>(n);
  if (d_temp == nullptr) {
    *temp_bytes = need;
    return 0;
  }
  if (*temp_bytes < need) return static_cast<int>(cudaErrorInvalidValue);
  if (reinterpret_cast<uintptr_t>(d_temp) % 16 != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  if (n == 0) {
    if (num_runs != nullptr) {
      PRIMSERVE_CUDA_TRY(cudaMemsetAsync(num_runs, 0, sizeof(uint64_t), stream));
    }
    return 0;
  }
  auto run = [&](auto op_tag) {
    constexpr Op kOp = decltype(op_tag)::value;
    if (small) {
      return detail::RunRuns<DefaultRunsPolicy, KB, V, uint32_t, kOp>(
          d_temp, keys, values, n, keys_out, values_out, num_runs, in_order, stream);
    }
    return detail::RunRuns<DefaultRunsPolicy, KB, V, uint64_t, kOp>(
        d_temp, keys, values, n, keys_out, values_out, num_runs, in_order, stream);
  };
  switch (op) {
    case Op::kSum: return run(std::integral_constant<Op, Op::kSum>{});
    case Op::kProd: return run(std::integral_constant<Op, Op::kProd>{});
    case Op::kMin: return run(std::integral_constant<Op, Op::kMin>{});
    default: return run(std::integral_constant<Op, Op::kMax>{});
  }
}

bool ValidDType(DType d) {
  return static_cast<int>(d) >= 1 && static_cast<int>(d) <= 6;
}

int DispatchReduceByKey(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_keys,
                        DType key_dtype, const void* d_values, DType value_dtype, uint64_t n,
                        Op op, void* d_keys_out, void* d_values_out, uint64_t* d_num_runs,
                        bool in_order, CUstream_st* stream) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (temp_storage_bytes == nullptr || !ValidDType(key_dtype) ||
      !ValidDType(value_dtype)) {
    return kInvalid;
  }
  if (op != Op::kSum && op != Op::kProd && op != Op::kMin && op != Op::kMax) {
    return kInvalid;
  }
  if (d_temp_storage != nullptr && n > 0 &&
      (d_keys == nullptr || d_values == nullptr || d_keys_out == nullptr ||
       d_values_out == nullptr)) {
    return kInvalid;
  }
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  return VisitDType(value_dtype, [&](auto tag) {
    using V = decltype(tag);
    if (DTypeSize(key_dtype) == 4) {
      return DispatchRuns<uint32_t, V>(d_temp_storage, temp_storage_bytes, d_keys, d_values, n,
                                       op, d_keys_out, d_values_out, d_num_runs, in_order, s);
    }
    return DispatchRuns<uint64_t, V>(d_temp_storage, temp_storage_bytes, d_keys, d_values, n, op,
                                     d_keys_out, d_values_out, d_num_runs, in_order, s);
  });
}

}  // namespace

int ReduceByKey(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_keys,
                DType key_dtype, const void* d_values, DType value_dtype, uint64_t n, Op op,
                void* d_keys_out, void* d_values_out, uint64_t* d_num_runs, CUstream_st* stream) {
  return DispatchReduceByKey(d_temp_storage, temp_storage_bytes, d_keys, key_dtype, d_values,
                             value_dtype, n, op, d_keys_out, d_values_out, d_num_runs, true,
                             stream);
}

int ReduceByKeyUnordered(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_keys,
                         DType key_dtype, const void* d_values, DType value_dtype, uint64_t n,
                         Op op, void* d_keys_out, void* d_values_out, uint64_t* d_num_runs,
                         CUstream_st* stream) {
  return DispatchReduceByKey(d_temp_storage, temp_storage_bytes, d_keys, key_dtype, d_values,
                             value_dtype, n, op, d_keys_out, d_values_out, d_num_runs, false,
                             stream);
}

}  // namespace primserve::gpu
