#include "server/cuda/cuda_status.h"

#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace primserve::cuda {

bool IsSticky(int cuda_error) {
  switch (static_cast<cudaError_t>(cuda_error)) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
      return true;
    default:
      return false;
  }
}

absl::Status CudaStatus(int cuda_error, absl::string_view what) {
  if (cuda_error == cudaSuccess) return absl::OkStatus();
  const auto error = static_cast<cudaError_t>(cuda_error);
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  if (IsSticky(cuda_error)) return absl::UnavailableError(message);
  return absl::InternalError(message);
}

}  // namespace primserve::cuda
