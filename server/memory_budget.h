// A process-wide count of device bytes in use against a budget, so that
// concurrent large requests wait for memory instead of failing to allocate.
#ifndef PRIMSERVE_SERVER_MEMORY_BUDGET_H_
#define PRIMSERVE_SERVER_MEMORY_BUDGET_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace primserve {

class MemoryBudget final {
 public:
  explicit MemoryBudget(uint64_t total_bytes) : total_(total_bytes) {}

  // Waits until `bytes` fit beside what is in use, then counts them;
  // RESOURCE_EXHAUSTED at once if they exceed the whole budget.
  absl::Status Acquire(uint64_t bytes);
  void Release(uint64_t bytes);

  uint64_t total() const { return total_; }
  uint64_t in_use() const;

 private:
  const uint64_t total_;
  mutable absl::Mutex mu_;
  uint64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_MEMORY_BUDGET_H_
