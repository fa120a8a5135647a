// The CUDA execution backend: one CUDA context per device it serves, a pool of
// streams per device ("lanes", each with its pinned staging buffer), device
// memory from stream-ordered pools that keep what they allocate, and a
// process-wide device-memory budget under which large requests queue rather
// than fail. A batch of same-kind requests runs as one segmented launch.
//
// Plain C++ header: no CUDA types, so the server builds with g++.
#ifndef PRIMSERVE_SERVER_CUDA_BACKEND_H_
#define PRIMSERVE_SERVER_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/backend.h"
#include "server/cuda_fault_injector.h"
#include "server/memory_budget.h"
#include "server/metrics.h"

namespace primserve {

// Number of CUDA devices visible to this process (0 when there is no driver
// or no device).
int VisibleCudaDevices();

struct CudaBackendOptions {
  // Devices to serve; empty means every visible device.
  std::vector<int> devices;
  // Streams (concurrent batches) per device.
  int streams_per_device = 4;
  // Device memory all batches together may hold at once; 0 means 85% of the
  // smallest served device's memory. A batch needing more than is free waits.
  uint64_t memory_budget_bytes = 0;
  // Stage times and GPU memory go here; not owned; null records nothing.
  Metrics* metrics = nullptr;
  // Tests only: faults to inject; not owned; null injects none.
  CudaFaultInjector* faults = nullptr;
};

class CudaBackend final : public ExecutionBackend {
 public:
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override;
  absl::Status Health() const override;

  // "NVIDIA H100 80GB HBM3" etc., comma-separated when several.
  const std::string& device_names() const { return device_names_; }

  struct Lane;  // a stream on one device with its pinned staging buffer

 private:
  CudaBackend(std::vector<std::unique_ptr<Lane>> lanes, std::unique_ptr<MemoryBudget> budget,
              std::string device_names, Metrics* metrics, CudaFaultInjector* faults);

  Lane* AcquireLane();
  void ReleaseLane(Lane* lane);
  // Runs the batch on `lane`; one result per task, in order.
  std::vector<absl::StatusOr<Result>> Run(Lane& lane, absl::Span<Task* const> tasks);
  // Stage times of the batch just run on `lane`, and the device's memory.
  void Record(const Lane& lane, absl::Span<Task* const> tasks);
  // Records a sticky CUDA error: health goes NOT_SERVING.
  void NoteFailure(const absl::Status& status);

  std::vector<std::unique_ptr<Lane>> lanes_;
  // Lanes point at it, so it lives apart from them.
  std::unique_ptr<MemoryBudget> budget_;
  const std::string device_names_;
  Metrics* const metrics_;

  absl::Mutex mu_;
  std::vector<Lane*> free_lanes_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex health_mu_;
  absl::Status health_ ABSL_GUARDED_BY(health_mu_);
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_CUDA_BACKEND_H_
