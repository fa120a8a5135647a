// The execution-backend interface: the bottom layer, under the scheduler.
#ifndef PRIMSERVE_SERVER_BACKEND_H_
#define PRIMSERVE_SERVER_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/task.h"

namespace primserve {

class ExecutionBackend {
 public:
  virtual ~ExecutionBackend() = default;

  // "cpu", "cuda", ... for logs and metrics.
  virtual std::string name() const = 0;

  // What it runs on, for logs and the build-info metric: the devices' names
  // for a GPU backend; the name where there is nothing more to say.
  virtual std::string description() const { return name(); }

  // Runs a batch of tasks whose operations share one BatchKey (a backend may
  // fuse them into one launch) and completes every task's `done` before
  // returning. Called from several scheduler threads at once.
  virtual void Execute(std::vector<std::unique_ptr<Task>> batch) = 0;

  // OK while the backend can serve; otherwise why not (e.g. a sticky CUDA
  // error). The server reports it through the gRPC health service.
  virtual absl::Status Health() const { return absl::OkStatus(); }

  // Host memory that stays mapped a long time (a shared-memory region): a
  // backend that copies to a device may page-lock it, so that its copies go
  // straight between that memory and the device. An error leaves the memory
  // usable as it is. Whatever was pinned is unpinned, by its start, before it
  // is unmapped.
  virtual absl::Status PinHostMemory(void* data, size_t bytes) { return absl::OkStatus(); }
  virtual void UnpinHostMemory(void* data) {}
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_BACKEND_H_
