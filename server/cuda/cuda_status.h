// CUDA error codes as absl::Status: which errors end the context, and the
// status code a caller gets for each.
#ifndef PRIMSERVE_SERVER_CUDA_CUDA_STATUS_H_
#define PRIMSERVE_SERVER_CUDA_CUDA_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace primserve::cuda {

// True for errors after which the CUDA context is unusable until the process
// restarts (illegal address, trap, ECC...).
bool IsSticky(int cuda_error);

// OK for cudaSuccess; RESOURCE_EXHAUSTED for out-of-memory, UNAVAILABLE for a
// sticky error (the device is gone for this process), INTERNAL for anything
// else. The message names `what` and the error.
absl::Status CudaStatus(int cuda_error, absl::string_view what);

}  // namespace primserve::cuda

// Returns the CUDA call's error as a status from the enclosing function.
#define PRIMSERVE_RETURN_IF_CUDA_ERROR(expr)                                             \
  do {                                                                                   \
    if (absl::Status cuda_status = ::primserve::cuda::CudaStatus((expr), #expr);         \
        !cuda_status.ok())                                                               \
      return cuda_status;                                                                \
  } while (0)

// Returns the status from the enclosing function when it is not OK.
#define PRIMSERVE_RETURN_IF_ERROR(expr)                          \
  do {                                                           \
    if (absl::Status status_ = (expr); !status_.ok()) return status_; \
  } while (0)

#endif  // PRIMSERVE_SERVER_CUDA_CUDA_STATUS_H_
