#include "server/cuda/device_arena.h"

#include <algorithm>

#include "server/cuda/cuda_status.h"
#include "server/cuda/staging.h"

namespace primserve::cuda {

DeviceArena::~DeviceArena() {
  if (data_ == nullptr) return;
  // An error here has no one left to tell; the bytes are not counted on.
  if (cudaFree(data_) != cudaSuccess) cudaGetLastError();
  budget_->Release(device_, bytes_);
}

absl::StatusOr<void*> DeviceArena::Get(size_t bytes, cudaStream_t stream, absl::Time deadline,
                                       FaultHooks* faults) {
  if (bytes > limit_) return nullptr;
  if (data_ != nullptr && bytes <= bytes_) return data_;
  const size_t grown = std::min(limit_, AlignUp(std::max({bytes, bytes_ * 2, floor_})));
  if (data_ != nullptr) {
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream));
    const cudaError_t freed = cudaFree(data_);
    budget_->Release(device_, bytes_);
    data_ = nullptr;
    bytes_ = 0;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(freed);
  }
  if (absl::Status s = budget_->Acquire(device_, grown, deadline); !s.ok()) return s;
  const cudaError_t allocated = faults != nullptr && faults->FailAllocation()
                                    ? cudaErrorMemoryAllocation
                                    : cudaMalloc(&data_, grown);
  if (absl::Status s = CudaStatus(allocated, "cudaMalloc"); !s.ok()) {
    data_ = nullptr;
    budget_->Release(device_, grown);
    return s;
  }
  bytes_ = grown;
  return data_;
}

}  // namespace primserve::cuda
