// An execution backend for tests that need a request held in flight: the CPU
// backend, except that batches of one RPC wait until the test releases them.
#ifndef PRIMSERVE_TESTS_HOLDING_BACKEND_H_
#define PRIMSERVE_TESTS_HOLDING_BACKEND_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "core/rpc.h"
#include "server/cpu/cpu_backend.h"
#include "server/engine/backend.h"

namespace primserve {

class HoldingBackend final : public ExecutionBackend {
 public:
  explicit HoldingBackend(Rpc held) : held_(held) {}
  std::string name() const override { return "holding"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override {
    if (RpcOf(batch.front()->operation) == held_) {
      if (!arrived_once_.exchange(true)) arrived_.Notify();
      release_.WaitForNotification();
    }
    cpu_.Execute(std::move(batch));
  }
  // Notified when the first held batch arrives; the test notifies release_.
  absl::Notification arrived_, release_;

 private:
  const Rpc held_;
  std::atomic<bool> arrived_once_{false};
  CpuBackend cpu_;
};

}  // namespace primserve

#endif  // PRIMSERVE_TESTS_HOLDING_BACKEND_H_
