// Host-side helpers of the type-erased entry points: argument checks and
// the runtime DType/Op -> template dispatch.
#ifndef PRIMSERVE_KERNELS_DETAIL_DISPATCH_CUH_
#define PRIMSERVE_KERNELS_DETAIL_DISPATCH_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "core/primitives.h"

namespace primserve::gpu::detail {

inline bool IsValidDType(DType dtype) {
  return static_cast<int>(dtype) >= static_cast<int>(DType::kInt32) &&
         static_cast<int>(dtype) <= static_cast<int>(DType::kFloat64);
}

inline bool IsCombineOp(Op op) {
  return op == Op::kSum || op == Op::kProd || op == Op::kMin || op == Op::kMax;
}

inline bool IsArgOp(Op op) { return op == Op::kArgMin || op == Op::kArgMax; }

// Calls f(std::integral_constant<Op, kOp>{}) for a valid op; else an error.
template <typename F>
int VisitOp(Op op, F&& f) {
  switch (op) {
    case Op::kSum: return f(std::integral_constant<Op, Op::kSum>{});
    case Op::kProd: return f(std::integral_constant<Op, Op::kProd>{});
    case Op::kMin: return f(std::integral_constant<Op, Op::kMin>{});
    case Op::kMax: return f(std::integral_constant<Op, Op::kMax>{});
    case Op::kArgMin: return f(std::integral_constant<Op, Op::kArgMin>{});
    case Op::kArgMax: return f(std::integral_constant<Op, Op::kArgMax>{});
  }
  return cudaErrorInvalidValue;
}

// Calls f(T{}, A{}, std::integral_constant<Op, kOp>{}) for an accumulation
// of a `dtype` input in the wider `accumulator` with SUM or PROD (int32 into
// int64, uint32 into uint64, float into double, as numpy's sum(dtype=));
// cudaErrorInvalidValue for any other pair or op.
template <typename F>
int VisitWidening(DType dtype, DType accumulator, Op op, F&& f) {
  auto with_op = [&](auto input, auto wide) -> int {
    if (op == Op::kSum) return f(input, wide, std::integral_constant<Op, Op::kSum>{});
    if (op == Op::kProd) return f(input, wide, std::integral_constant<Op, Op::kProd>{});
    return cudaErrorInvalidValue;
  };
  if (dtype == DType::kInt32 && accumulator == DType::kInt64) return with_op(int32_t{}, int64_t{});
  if (dtype == DType::kUint32 && accumulator == DType::kUint64) {
    return with_op(uint32_t{}, uint64_t{});
  }
  if (dtype == DType::kFloat32 && accumulator == DType::kFloat64) return with_op(float{}, double{});
  return cudaErrorInvalidValue;
}

inline int64_t CeilDiv(uint64_t n, uint64_t d) { return static_cast<int64_t>((n + d - 1) / d); }

// Temp storage is never reported as 0 bytes, so the second phase of the
// two-phase protocol always gets a non-null pointer.
inline constexpr size_t kMinTempBytes = 16;

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_DISPATCH_CUH_
