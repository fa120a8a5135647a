// Device memory a lane keeps from one batch to the next, counted in the
// device's budget while kept: work that fits takes it with no allocation, no
// stream-ordered free and no host callback to give the budget back. It grows
// by doubling up to a limit; a larger need is not served here (the caller
// takes a DeviceBlock).
#ifndef PRIMSERVE_SERVER_CUDA_DEVICE_ARENA_H_
#define PRIMSERVE_SERVER_CUDA_DEVICE_ARENA_H_

#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/cuda/fault_hooks.h"
#include "server/engine/memory_budget.h"

namespace primserve::cuda {

class DeviceArena final {
 public:
  // Memory on `device`, at least `floor` bytes once taken (few small
  // batches then grow it), at most `limit`; `budget` is not owned.
  DeviceArena(int device, size_t floor, size_t limit, MemoryBudget* budget)
      : device_(device), floor_(floor), limit_(limit), budget_(budget) {}
  // Frees the memory: whatever used it must be over (the lane drained).
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // `bytes` of the kept memory, or null when `bytes` is over the limit.
  // Growing waits for `stream` (work queued earlier may still use the old
  // memory), frees the old, then waits for the budget until `deadline` and
  // allocates; `faults` (null: none) may fail that allocation. Valid until
  // the next call; only for work on `stream`.
  absl::StatusOr<void*> Get(size_t bytes, cudaStream_t stream, absl::Time deadline,
                            FaultHooks* faults);
  size_t bytes() const { return bytes_; }
  size_t limit() const { return limit_; }

 private:
  const int device_;
  const size_t floor_;
  const size_t limit_;
  MemoryBudget* const budget_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_DEVICE_ARENA_H_
