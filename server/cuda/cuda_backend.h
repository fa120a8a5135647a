// The CUDA execution backend over one or more devices. Each device has its
// pool of lanes (a stream with its staging, several per device), its
// device-memory budget under which large requests queue rather than fail, and
// its health. A sticky CUDA error ends CUDA in the whole process (measured:
// see NoteFailure), so it takes every device out of service; health names the
// device it was seen on. A batch runs on one device: the one holding its
// requests' memory (resident buffers, CUDA IPC), else the least loaded
// (device_picker.h). Stage times, memory and per-device counters go to the
// metrics. A batch of same-kind requests runs as one segmented launch
// (runners.h).
//
// Plain C++ header: no CUDA types, so the server builds with g++.
#ifndef PRIMSERVE_SERVER_CUDA_CUDA_BACKEND_H_
#define PRIMSERVE_SERVER_CUDA_CUDA_BACKEND_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/cuda/bounce.h"
#include "server/cuda/device_picker.h"
#include "server/cuda/fault_hooks.h"
#include "server/engine/backend.h"
#include "server/engine/memory_budget.h"
#include "server/engine/metrics.h"

namespace primserve {

namespace cuda {
class Lane;
class LanePool;
class ResidentMemory;
}  // namespace cuda

// Number of CUDA devices visible to this process (0 when there is no driver
// or no device). Initializes the CUDA runtime.
int VisibleCudaDevices();

struct CudaBackendOptions {
  // Devices to serve; empty means every visible device.
  std::vector<int> devices;
  // Streams (concurrent batches) per device.
  int streams_per_device = 4;
  // Device memory all batches on one device may hold at once; 0 means 85% of
  // that device's memory. A batch needing more than is free waits, until its
  // deadline.
  uint64_t memory_budget_bytes = 0;
  // Pinned host memory each lane keeps for staging. A batch that needs more
  // stages through ordinary memory, given back when it ends. Large scans
  // pipeline through pinned staging only when 96 MiB fit.
  size_t pinned_bytes_per_lane = size_t{128} << 20;
  // Stage times and GPU memory go here; not owned; null records nothing.
  Metrics* metrics = nullptr;
  // Tests only: faults to inject; not owned; null injects none.
  cuda::FaultHooks* faults = nullptr;
};

class CudaBackend final : public ExecutionBackend {
 public:
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  // The served devices' names ("NVIDIA H100 80GB HBM3", comma-separated).
  std::string description() const override { return device_names_; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override;
  // OK while one device serves; once none does, UNAVAILABLE naming each
  // device and the error that took it out of service.
  absl::Status Health() const override;
  // Each served device and its own health (UNAVAILABLE naming the sticky
  // error that took it out of service).
  std::vector<std::pair<int, absl::Status>> DeviceHealth() const override;
  // gpu::ScanTileItems(dtype, false).
  uint64_t ReproducibleScanGranule(DType dtype) const override;
  // Scans and reductions into a wider accumulator: gpu::WidenedScan and
  // gpu::WidenedReduce.
  bool WidensAccumulators() const override { return true; }
  // cudaHostRegister (portable: for every device's lanes) / cudaHostUnregister.
  absl::Status PinHostMemory(void* data, size_t bytes) override;
  void UnpinHostMemory(void* data) override;
  bool PinsHostMemory() const override { return true; }
  // Large scans' inputs are copied chunk by chunk as the pipeline goes
  // (cuda/runners.h kPipelinedScanMinBytes).
  size_t MinPendingInputBytes() const override;
  // cudaIpcOpenMemHandle on `device` (one this backend serves), checked
  // against the allocation's size; the range is recorded (cuda/io.h
  // AddDeviceRange) so that requests naming it run on it in place.
  absl::StatusOr<char*> OpenIpcMemory(absl::string_view raw_handle, int device,
                                      uint64_t bytes) override;
  void CloseIpcMemory(char* data) override;
  absl::Status CopyToIpcMemory(char* to, const char* from, size_t bytes) override;
  // Resident buffers: from the stream-ordered pool (cuda/resident_memory.h)
  // of the device asked for in `*device` while it serves and has room, else
  // of the device in service with the most budget left, counted in its
  // memory budget at once (no wait: RESOURCE_EXHAUSTED when it does not fit
  // now), and recorded (cuda/io.h AddDeviceRange) so that requests naming it
  // read and write it in place.
  absl::StatusOr<char*> AllocateResident(uint64_t bytes, int* device, bool zeroed) override;
  void FreeResident(char* data, uint64_t bytes) override;
  // Through pinned bounce chunks on a stream of the buffer's device
  // (cuda/bounce.h), or a plain cudaMemcpy when all are in use.
  absl::Status WriteResident(char* to, const char* from, size_t bytes) override;
  absl::Status ReadResident(char* to, const char* from, size_t bytes) override;
  absl::Status CopyResident(char* to, const char* from, size_t bytes) override;
  // The served devices' budgets together.
  uint64_t ResidentCapacity() const override;

  const std::string& device_names() const { return device_names_; }

 private:
  CudaBackend(std::unique_ptr<MemoryBudget> budget,
              std::map<int, std::unique_ptr<cuda::LanePool>> pools,
              std::unique_ptr<cuda::ResidentMemory> resident, std::string device_names,
              Metrics* metrics);

  // Runs `batch` (its tasks' memory on `home`, or -1: host memory alone) on
  // one device: `home`, else the least loaded in service. `bytes`: the
  // batch's inputs.
  void ExecuteOn(int home, uint64_t bytes, std::vector<std::unique_ptr<Task>> batch);
  // Runs the batch on `lane`; one result per task, in order.
  std::vector<absl::StatusOr<Result>> Run(cuda::Lane& lane, absl::Span<Task* const> tasks);
  // Stage times and device counters of the batch of `requests` (`bytes` of
  // inputs) just run on `lane`, and the device's memory.
  void Record(cuda::Lane& lane, Rpc rpc, size_t requests, uint64_t bytes);
  // Records a sticky CUDA error seen on `device`: every device goes out of
  // service (never picked again; requests refused with the reason).
  void NoteFailure(int device, const absl::Status& status);
  // The health of a served `device`.
  absl::Status HealthOf(int device) const;

  // Declared before the lanes: the pools' threads record into them until the
  // pools are destroyed.
  const std::string device_names_;
  Metrics* const metrics_;
  cuda::DevicePicker picker_;
  mutable absl::Mutex health_mu_;
  // Every served device, OK while it serves.
  std::map<int, absl::Status> health_ ABSL_GUARDED_BY(health_mu_);

  // Lanes release device memory into it until they are destroyed.
  const std::unique_ptr<MemoryBudget> budget_;
  // Each served device's lanes.
  const std::map<int, std::unique_ptr<cuda::LanePool>> pools_;
  // primserve_pinned_host_bytes{pool="lane_staging"}: the pinned staging
  // every lane keeps (it grows to --cuda_pinned_bytes_per_lane and stays).
  HostPoolGauges staging_gauges_;
  std::atomic<uint64_t> staging_pinned_{0};
  // Resident buffers' memory; its frees wait for the lanes' streams.
  const std::unique_ptr<cuda::ResidentMemory> resident_;
  // Buffers' Write and Read: 8 at once (4 striped Puts or Gets and more)
  // through 2 x 2 MiB of pinned memory each.
  cuda::BouncePool bounce_{8, size_t{2} << 20};
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_CUDA_CUDA_BACKEND_H_
