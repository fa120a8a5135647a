// Device memory of resident buffers, from each device's stream-ordered pool.
// cudaMalloc and cudaFree wait for every kernel on the device: with them, a
// request writing its output into a buffer (a new allocation, and the free
// of the buffer it replaces) waited for every other request's work, which
// serialized requests on buffers and cost a 2^28-element scan into a buffer
// about four times its kernel. From the pool an allocation takes
// microseconds, and a free waits, on a stream of its own, only for the work
// that may still read the memory.
#ifndef PRIMSERVE_SERVER_CUDA_RESIDENT_MEMORY_H_
#define PRIMSERVE_SERVER_CUDA_RESIDENT_MEMORY_H_

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace primserve::cuda {

class ResidentMemory final {
 public:
  // For `devices`, each with the streams (`fences[device]`) whose queued
  // work may read or write resident memory: a free waits for what they hold
  // at the time. Every device's pool becomes readable from its peers where
  // the hardware allows, for copies between buffers on different devices.
  static absl::StatusOr<std::unique_ptr<ResidentMemory>> Create(
      const std::map<int, std::vector<cudaStream_t>>& fences);
  // Waits for every free queued.
  ~ResidentMemory();
  ResidentMemory(const ResidentMemory&) = delete;
  ResidentMemory& operator=(const ResidentMemory&) = delete;

  // `bytes` (at least one) on `device`, usable from any stream on return;
  // zeroed if asked (memory from the pool may hold another buffer's bytes).
  absl::StatusOr<char*> Allocate(int device, size_t bytes, bool zeroed);
  // Gives `data` back to `device`'s pool once the work queued so far on the
  // fence streams is done; returns without waiting for it.
  void Free(int device, char* data);

 private:
  struct Device {
    cudaStream_t allocations = nullptr;
    cudaStream_t frees = nullptr;
    // One event per fence stream, recorded there and waited for by `frees`.
    std::vector<cudaStream_t> fences;
    std::vector<cudaEvent_t> fenced;
  };
  ResidentMemory() = default;

  absl::Mutex mu_;
  std::map<int, Device> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_RESIDENT_MEMORY_H_
