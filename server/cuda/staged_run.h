// The one skeleton every runner follows: plan the inputs, outputs and scratch
// of a batch, then stage the inputs and copy them in, launch, copy the
// outputs back and read them from staging. Device memory and host staging are
// both sized by the Layouts that place their slices, so no slice can lie
// outside its allocation.
#ifndef PRIMSERVE_SERVER_CUDA_STAGED_RUN_H_
#define PRIMSERVE_SERVER_CUDA_STAGED_RUN_H_

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/cuda/io.h"
#include "server/cuda/lane.h"
#include "server/cuda/staging.h"

namespace primserve::cuda {

class StagedRun final {
 public:
  // A slice of the batch's device memory and, for inputs and outputs, its
  // room in host staging.
  struct Slice {
    size_t device = 0;
    size_t staged = 0;
  };

  // A batch on `lane`; a wait for device memory ends at `deadline`.
  StagedRun(Lane& lane, absl::Time deadline) : lane_(lane), deadline_(deadline) {}

  // Planning, before Start(). `source` must live until Start() returns.
  Slice Input(const InputSource& source);
  // Room for up to `max_bytes` of answer, on the device and in staging.
  Slice Output(size_t max_bytes);
  // Device memory only (temporary storage).
  Slice Scratch(size_t bytes);

  // Takes staging and device memory, stages every input (one in pinned
  // memory is copied from where it is) and queues its copy to the device;
  // then the kernels may be launched.
  absl::Status Start();

  template <typename T = void>
  T* device(const Slice& slice) const {
    return block_->at<T>(slice.device);
  }
  // Checks a launch's result and marks the end of the kernels.
  absl::Status Launched(int cuda_error);
  // Queues the first `bytes` of `slice` back into its staging (an input's
  // own staging for a kernel that works in place).
  absl::Status CopyBack(const Slice& slice, size_t bytes);
  // Waits for everything queued; then staged() holds what was copied back.
  absl::Status Finish();

  const char* staged(const Slice& slice) const { return staging_ + slice.staged; }
  template <typename T>
  const T* staged_as(const Slice& slice) const {
    return reinterpret_cast<const T*>(staged(slice));
  }

 private:
  Lane& lane_;
  const absl::Time deadline_;
  Layout device_layout_;
  // Inputs and outputs share staging: stream order puts every copy out after
  // every copy in.
  Layout staged_inputs_;
  Layout staged_outputs_;
  std::vector<std::pair<const InputSource*, Slice>> inputs_;
  std::optional<DeviceBlock> block_;
  char* staging_ = nullptr;
};

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_STAGED_RUN_H_
