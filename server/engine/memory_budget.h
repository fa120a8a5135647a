// Device bytes in use against a budget per device, so that concurrent large
// requests wait for memory instead of failing to allocate, and a wait ends at
// the request's deadline.
#ifndef PRIMSERVE_SERVER_ENGINE_MEMORY_BUDGET_H_
#define PRIMSERVE_SERVER_ENGINE_MEMORY_BUDGET_H_

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace primserve {

class MemoryBudget final {
 public:
  // Bytes each device (by CUDA ordinal) may have in use at once.
  explicit MemoryBudget(std::map<int, uint64_t> total_per_device);

  // Waits until `bytes` fit beside what is in use on `device`, then counts
  // them. RESOURCE_EXHAUSTED at once if they exceed the device's whole budget;
  // DEADLINE_EXCEEDED if they do not fit by `deadline`; INVALID_ARGUMENT for a
  // device without a budget.
  absl::Status Acquire(int device, uint64_t bytes, absl::Time deadline = absl::InfiniteFuture());
  void Release(int device, uint64_t bytes);

  // 0 for a device without a budget.
  uint64_t total(int device) const;
  uint64_t in_use(int device) const;

 private:
  struct Device {
    uint64_t total = 0;
    uint64_t in_use = 0;
  };
  mutable absl::Mutex mu_;
  // Keys fixed at construction; counts change under mu_.
  std::map<int, Device> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_MEMORY_BUDGET_H_
