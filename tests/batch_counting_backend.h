// A backend wrapper for tests that must know the batcher really fused
// requests: it counts the batches of more than one task whose key a
// predicate picks, and hands every batch on to the backend under test.
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
  uint64_t ReproducibleScanGranule(DType dtype) const override {
    return inner_->ReproducibleScanGranule(dtype);
  }
  bool WidensAccumulators() const override { return inner_->WidensAccumulators(); }

  // The batches of several tasks counted so far.
  int batches() const { return batches_.load(); }

 private:
  std::unique_ptr<ExecutionBackend> inner_;
  const std::function<bool(const BatchKey&)> counts_;
  std::atomic<int> batches_{0};
};

}  // namespace primserve

#endif  // PRIMSERVE_TESTS_BATCH_COUNTING_BACKEND_H_
