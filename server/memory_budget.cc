#include "server/memory_budget.h"

#include "absl/strings/str_cat.h"

namespace primserve {

absl::Status MemoryBudget::Acquire(uint64_t bytes) {
  if (bytes > total_) {
    return absl::ResourceExhaustedError(absl::StrCat("the request needs ", bytes,
                                                     " bytes of device memory; the budget is ",
                                                     total_, " (--gpu_memory_budget_bytes)"));
  }
  absl::MutexLock lock(&mu_);
  auto fits = [this, bytes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return in_use_ + bytes <= total_;
  };
  mu_.Await(absl::Condition(&fits));
  in_use_ += bytes;
  return absl::OkStatus();
}

void MemoryBudget::Release(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  in_use_ -= bytes;
}

uint64_t MemoryBudget::in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

}  // namespace primserve
