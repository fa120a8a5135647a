// Which served CUDA device runs the next batch: the one with the least work
// queued or running on it (bytes of the batches it holds, then their count),
// ties taken in turn so that idle devices share the first requests; a device
// out of service (a sticky error) is never picked. Plain C++: no CUDA, so the
// policy is tested on any machine.
#ifndef PRIMSERVE_SERVER_CUDA_DEVICE_PICKER_H_
#define PRIMSERVE_SERVER_CUDA_DEVICE_PICKER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace primserve::cuda {

class DevicePicker final {
 public:
  // The served devices (CUDA ordinals, each once), all in service.
  explicit DevicePicker(std::vector<int> devices);

  // Picks the least loaded device in service and counts a batch of `bytes`
  // on it until Finish; -1 when none is in service.
  int Claim(uint64_t bytes);
  // Counts a batch of `bytes` on `device` (a batch that must run there: its
  // memory is on it); false, counting nothing, when `device` is not served
  // or out of service.
  bool ClaimOn(int device, uint64_t bytes);
  // The batch counted by Claim or ClaimOn is done.
  void Finish(int device, uint64_t bytes);

  // Takes `device` out of service for good.
  void MarkDown(int device);
  bool up(int device) const;
  // Bytes and batches counted on `device` now.
  uint64_t bytes(int device) const;
  uint64_t batches(int device) const;

 private:
  struct Load {
    int device = 0;
    bool up = true;
    uint64_t bytes = 0;
    uint64_t batches = 0;
  };
  // The entry of `device`, or null.
  Load* Find(int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Load* Find(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<Load> loads_ ABSL_GUARDED_BY(mu_);
  // Where the search for the least loaded starts: advanced past each pick,
  // so equal loads are taken in turn.
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_DEVICE_PICKER_H_
