// A backend wrapper for tests that must know the batcher really fused
// requests: it counts the batches of more than one task whose key a
// predicate picks, and hands every batch on to the backend under test. Every
// other call goes to that backend too, so that the server meets it as it is
// (pinning, pending inputs, IPC and resident memory included).
#ifndef PRIMSERVE_TESTS_BATCH_COUNTING_BACKEND_H_
#define PRIMSERVE_TESTS_BATCH_COUNTING_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/engine/backend.h"
#include "server/engine/task.h"

namespace primserve {

class BatchCountingBackend final : public ExecutionBackend {
 public:
  BatchCountingBackend(std::unique_ptr<ExecutionBackend> inner,
                       std::function<bool(const BatchKey&)> counts)
      : inner_(std::move(inner)), counts_(std::move(counts)) {}

  std::string name() const override { return inner_->name(); }
  std::string description() const override { return inner_->description(); }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override {
    if (batch.size() > 1 && counts_(BatchKeyOf(batch.front()->operation))) ++batches_;
    inner_->Execute(std::move(batch));
  }
  absl::Status Health() const override { return inner_->Health(); }
  std::vector<std::pair<int, absl::Status>> DeviceHealth() const override {
    return inner_->DeviceHealth();
  }
  uint64_t ReproducibleScanGranule(DType dtype) const override {
    return inner_->ReproducibleScanGranule(dtype);
  }
  bool WidensAccumulators() const override { return inner_->WidensAccumulators(); }
  absl::Status PinHostMemory(void* data, size_t bytes) override {
    return inner_->PinHostMemory(data, bytes);
  }
  void UnpinHostMemory(void* data) override { inner_->UnpinHostMemory(data); }
  bool PinsHostMemory() const override { return inner_->PinsHostMemory(); }
  size_t MinPendingInputBytes() const override { return inner_->MinPendingInputBytes(); }
  absl::StatusOr<char*> OpenIpcMemory(absl::string_view raw_handle, int device,
                                      uint64_t bytes) override {
    return inner_->OpenIpcMemory(raw_handle, device, bytes);
  }
  void CloseIpcMemory(char* data) override { inner_->CloseIpcMemory(data); }
  absl::Status CopyToIpcMemory(char* to, const char* from, size_t bytes) override {
    return inner_->CopyToIpcMemory(to, from, bytes);
  }
  absl::StatusOr<char*> AllocateResident(uint64_t bytes, int* device, bool zeroed) override {
    return inner_->AllocateResident(bytes, device, zeroed);
  }
  void FreeResident(char* data, uint64_t bytes) override { inner_->FreeResident(data, bytes); }
  absl::Status WriteResident(char* to, const char* from, size_t bytes) override {
    return inner_->WriteResident(to, from, bytes);
  }
  absl::Status ReadResident(char* to, const char* from, size_t bytes) override {
    return inner_->ReadResident(to, from, bytes);
  }
  absl::Status CopyResident(char* to, const char* from, size_t bytes) override {
    return inner_->CopyResident(to, from, bytes);
  }
  uint64_t ResidentCapacity() const override { return inner_->ResidentCapacity(); }

  // The batches of several tasks counted so far.
  int batches() const { return batches_.load(); }

 private:
  std::unique_ptr<ExecutionBackend> inner_;
  const std::function<bool(const BatchKey&)> counts_;
  std::atomic<int> batches_{0};
};

}  // namespace primserve

#endif  // PRIMSERVE_TESTS_BATCH_COUNTING_BACKEND_H_
