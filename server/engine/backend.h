// The execution-backend interface: the bottom layer, under the scheduler.
#ifndef PRIMSERVE_SERVER_ENGINE_BACKEND_H_
#define PRIMSERVE_SERVER_ENGINE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/engine/task.h"

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
  // A backend over several devices: each device (by ordinal) and its own
  // health, which the server reports as the gRPC health service
  // "primserve.device.N" (the server itself stays SERVING while Health() is
  // OK). Empty: no devices to tell apart.
  virtual std::vector<std::pair<int, absl::Status>> DeviceHealth() const { return {}; }

  // Elements per tile of the backend's unsegmented scan for `dtype`: a
  // reproducible float SUM/PROD ScanStream hands it operations that start at
  // multiples of this (the stream's earlier elements come in as the
  // operation's carry_in), which then give the bits of one scan of the whole.
  // 0: any cut gives those bits (a sequential scan).
  virtual uint64_t ReproducibleScanGranule(DType dtype) const { return 0; }
  // Whether ScanOperation::accumulator and ReduceOperation::accumulator are
  // honoured (else the RPC layer refuses such requests).
  virtual bool WidensAccumulators() const { return false; }

  // Host memory that stays mapped a long time (a shared-memory region): a
  // backend that copies to a device may page-lock it, so that its copies go
  // straight between that memory and the device. An error leaves the memory
  // usable as it is. Whatever was pinned is unpinned, by its start, before it
  // is unmapped.
  virtual absl::Status PinHostMemory(void* data, size_t bytes) { return absl::OkStatus(); }
  virtual void UnpinHostMemory(void* data) {}
  // Whether PinHostMemory does anything: host buffers this backend reads
  // often are worth pinning (see server/engine/pinned_payloads.h).
  virtual bool PinsHostMemory() const { return false; }
  // Scan inputs of at least this many bytes may reach Execute still in
  // gRPC's receive buffers (ArrayView::pending), to be copied range by range
  // as the backend goes; 0: none may.
  virtual size_t MinPendingInputBytes() const { return 0; }

  // Device memory another process exported (a CUDA shared-memory region):
  // opens the cudaIpcMemHandle_t in `raw_handle` (its 64 bytes) on `device`
  // and returns where the first of `bytes` bytes is in this process, which
  // Execute may then meet in an operation's ArrayViews and output places:
  // a backend that opens handles must read and write those on the device.
  // INVALID_ARGUMENT for a device it does not serve or `bytes` past the
  // allocation; FAILED_PRECONDITION, with the CUDA message, for a handle it
  // cannot open, and for a backend without a GPU (this default).
  virtual absl::StatusOr<char*> OpenIpcMemory(absl::string_view raw_handle, int device,
                                              uint64_t bytes) {
    return absl::FailedPreconditionError(
        "the " + name() +
        " backend has no GPU to open CUDA IPC memory on: CUDA regions need a server with "
        "--backend=cuda (system regions work on every backend)");
  }
  // Closes what OpenIpcMemory opened, once no request uses it.
  virtual void CloseIpcMemory(char* data) {}
  // Copies `bytes` of host memory into memory OpenIpcMemory opened (an
  // answer computed on the host side delivered into a CUDA region), and
  // waits for the copy.
  virtual absl::Status CopyToIpcMemory(char* to, const char* from, size_t bytes) {
    return absl::FailedPreconditionError("this backend opens no CUDA IPC memory");
  }

  // Memory where resident buffers live between requests (server/buffers/):
  // `bytes` bytes, 64-byte aligned, zeroed if asked (else they may hold an
  // earlier buffer's bytes: for outputs that overwrite all they expose), and
  // in `*device` the CUDA device
  // holding them (-1: host memory). On entry `*device` is the device the
  // caller would like (a request's output beside its input; -1: none),
  // which a backend over several devices takes while it has room. This default: host memory, for a
  // backend that computes on the host. A GPU backend gives device memory
  // counted in that device's memory budget, which Execute then meets in
  // operations' ArrayViews and output places and reads and writes in place.
  // RESOURCE_EXHAUSTED when there is no room.
  virtual absl::StatusOr<char*> AllocateResident(uint64_t bytes, int* device, bool zeroed);
  // Gives back what AllocateResident gave (same `bytes`), once nothing uses it.
  virtual void FreeResident(char* data, uint64_t bytes);
  // Copies host memory into resident memory and back, waiting for the copy.
  virtual absl::Status WriteResident(char* to, const char* from, size_t bytes);
  virtual absl::Status ReadResident(char* to, const char* from, size_t bytes);
  // Copies resident memory to resident memory (device to device, or peer to
  // peer), waiting for the copy.
  virtual absl::Status CopyResident(char* to, const char* from, size_t bytes);
  // The most resident memory could hold: the devices' memory budgets, or
  // the host's physical memory (the default). --max_buffer_bytes defaults
  // to a share of it.
  virtual uint64_t ResidentCapacity() const;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_BACKEND_H_
