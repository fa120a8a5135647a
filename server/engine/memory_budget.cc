#include "server/engine/memory_budget.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace primserve {

MemoryBudget::MemoryBudget(std::map<int, uint64_t> total_per_device) {
  absl::MutexLock lock(&mu_);
  for (const auto& [device, total] : total_per_device) devices_[device].total = total;
}

absl::Status MemoryBudget::Acquire(int device, uint64_t bytes, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto found = devices_.find(device);
  if (found == devices_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("no memory budget for CUDA device ", device));
  }
  Device& budget = found->second;
  if (bytes > budget.total) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the request needs ", bytes, " bytes of device memory; the budget of CUDA ",
                     "device ", device, " is ", budget.total, " (--gpu_memory_budget_bytes)"));
  }
  auto fits = [&budget, bytes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return budget.in_use + bytes <= budget.total;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&fits), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat("the deadline passed while waiting for ", bytes,
                     " bytes of device memory on CUDA device ", device, " (", budget.in_use,
                     " of ", budget.total, " in use)"));
  }
  budget.in_use += bytes;
  return absl::OkStatus();
}

void MemoryBudget::Release(int device, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  devices_.at(device).in_use -= bytes;
}

uint64_t MemoryBudget::total(int device) const {
  absl::MutexLock lock(&mu_);
  auto found = devices_.find(device);
  return found == devices_.end() ? 0 : found->second.total;
}

uint64_t MemoryBudget::in_use(int device) const {
  absl::MutexLock lock(&mu_);
  auto found = devices_.find(device);
  return found == devices_.end() ? 0 : found->second.in_use;
}

}  // namespace primserve
