#include "server/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/scan.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/device_scan.h"
#include "server/cuda/footprint.h"
#include "server/cuda/io.h"
#include "server/cuda/lane.h"
#include "server/cuda/resident_memory.h"
#include "server/cuda/runners.h"

namespace primserve {
namespace {

using cuda::Lane;
using cuda::Results;

template <typename Kind>
std::vector<const Kind*> OperationsOf(absl::Span<Task* const> tasks) {
  std::vector<const Kind*> ops;
  ops.reserve(tasks.size());
  for (Task* task : tasks) ops.push_back(&std::get<Kind>(task->operation));
  return ops;
}

// A batch's wait for memory ends at its latest deadline: no task fails
// before its own deadline has passed.
absl::Time LatestDeadline(absl::Span<Task* const> tasks) {
  absl::Time latest = absl::InfinitePast();
  for (const Task* task : tasks) latest = std::max(latest, task->deadline);
  return latest;
}

// A whole-batch runner's results, or its one error for every task.
Results Batched(size_t tasks, absl::StatusOr<Results> results) {
  if (!results.ok()) return Results(tasks, results.status());
  return *std::move(results);
}

// Where a batch of these tasks may put its answers: a batch of one task, the
// task's answer buffers (Task::answers); a fused batch, none.
const AnswerAllocator* AnswersOf(absl::Span<Task* const> tasks) {
  return tasks.size() == 1 && tasks.front()->answers ? &tasks.front()->answers : nullptr;
}

// Runs each task alone, one after another on the lane, each with its own
// deadline and answer buffers.
template <typename Kind, typename RunOne>
Results RunEach(absl::Span<Task* const> tasks, RunOne run_one) {
  Results results;
  for (Task* task : tasks) {
    results.push_back(
        run_one(std::get<Kind>(task->operation), task->deadline, AnswersOf({task})));
  }
  return results;
}

// Runs the tasks' operations as one batch through `run_batch`, except those
// that read or write a CUDA region (cuda::TouchesDevice): each of those runs
// alone, as a batch of one with its own deadline, so that its kernels read
// and write the region where it lies. Answers keep the tasks' order.
template <typename Kind, typename RunBatch>
Results RunDeviceOnesAlone(absl::Span<Task* const> tasks, absl::Time deadline,
                           RunBatch run_batch) {
  std::vector<const Kind*> ops = OperationsOf<Kind>(tasks);
  std::vector<const Kind*> host_ops;
  for (const Kind* op : ops) {
    if (!cuda::TouchesDevice(*op)) host_ops.push_back(op);
  }
  if (host_ops.size() == ops.size()) {
    return Batched(tasks.size(), run_batch(ops, deadline, AnswersOf(tasks)));
  }
  Results host_results = host_ops.empty()
                             ? Results{}
                             : Batched(host_ops.size(), run_batch(host_ops, deadline, nullptr));
  Results results;
  size_t next_host = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (cuda::TouchesDevice(*ops[i])) {
      const Kind* const alone[] = {ops[i]};
      results.push_back(std::move(
          Batched(1, run_batch(alone, tasks[i]->deadline, AnswersOf({tasks[i]}))).front()));
    } else {
      results.push_back(std::move(host_results[next_host++]));
    }
  }
  return results;
}

}  // namespace

int VisibleCudaDevices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the error; no device is an answer, not a failure
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const CudaBackendOptions& options) {
  std::vector<int> devices = options.devices;
  const int visible = VisibleCudaDevices();
  if (devices.empty()) {
    for (int d = 0; d < visible; ++d) devices.push_back(d);
  }
  if (devices.empty()) return absl::FailedPreconditionError("no CUDA device is visible");
  std::vector<std::string> names;
  std::map<int, uint64_t> budgets;
  for (int device : devices) {
    if (device < 0 || device >= visible) {
      return absl::InvalidArgumentError(
          absl::StrCat("CUDA device ", device, " is not visible (", visible, " visible)"));
    }
    if (budgets.count(device) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("CUDA device ", device, " is listed twice"));
    }
    cudaDeviceProp properties;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&properties, device));
    names.push_back(properties.name);
    budgets[device] = options.memory_budget_bytes != 0 ? options.memory_budget_bytes
                                                       : properties.totalGlobalMem / 100 * 85;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaSetDevice(device));
    // Keep freed blocks in the pool, so steady traffic never calls cudaMalloc.
    cudaMemPool_t pool;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t keep_everything = UINT64_MAX;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
  }
  auto budget = std::make_unique<MemoryBudget>(std::move(budgets));
  std::map<int, std::unique_ptr<cuda::LanePool>> pools;
  for (int device : devices) {
    std::vector<std::unique_ptr<Lane>> lanes;
    for (int s = 0; s < std::max(1, options.streams_per_device); ++s) {
      absl::StatusOr<std::unique_ptr<Lane>> lane =
          Lane::Create(device, options.pinned_bytes_per_lane, budget.get(), options.faults);
      if (!lane.ok()) return lane.status();
      lanes.push_back(*std::move(lane));
    }
    pools[device] = std::make_unique<cuda::LanePool>(std::move(lanes));
    if (options.metrics != nullptr) options.metrics->SetDeviceUp(device, true);
  }
  // Resident memory may be read by whatever any lane's streams hold.
  std::map<int, std::vector<cudaStream_t>> fences;
  for (const auto& [device, pool] : pools) {
    for (const std::unique_ptr<Lane>& lane : pool->lanes()) {
      fences[device].insert(fences[device].end(), {lane->stream(), lane->pipeline().copy_in,
                                                   lane->pipeline().copy_out});
    }
  }
  absl::StatusOr<std::unique_ptr<cuda::ResidentMemory>> resident =
      cuda::ResidentMemory::Create(fences);
  if (!resident.ok()) return resident.status();
  return std::unique_ptr<CudaBackend>(
      new CudaBackend(std::move(budget), std::move(pools), *std::move(resident),
                      absl::StrJoin(names, ", "), options.metrics));
}

namespace {

std::vector<int> KeysOf(const std::map<int, std::unique_ptr<cuda::LanePool>>& pools) {
  std::vector<int> keys;
  for (const auto& [device, pool] : pools) keys.push_back(device);
  return keys;
}

}  // namespace

CudaBackend::CudaBackend(std::unique_ptr<MemoryBudget> budget,
                         std::map<int, std::unique_ptr<cuda::LanePool>> pools,
                         std::unique_ptr<cuda::ResidentMemory> resident, std::string device_names,
                         Metrics* metrics)
    : device_names_(std::move(device_names)),
      metrics_(metrics),
      picker_(KeysOf(pools)),
      budget_(std::move(budget)),
      pools_(std::move(pools)),
      resident_(std::move(resident)) {
  if (metrics_ != nullptr) staging_gauges_ = metrics_->PinnedHostPool("lane_staging");
  absl::MutexLock lock(&health_mu_);
  for (const auto& [device, pool] : pools_) health_[device] = absl::OkStatus();
}

// The lanes drain as they are destroyed, before the budget they release into.
CudaBackend::~CudaBackend() = default;

absl::Status CudaBackend::Health() const {
  absl::MutexLock lock(&health_mu_);
  std::vector<std::string> lost;
  for (const auto& [device, health] : health_) {
    if (health.ok()) return absl::OkStatus();
    lost.push_back(std::string(health.message()));
  }
  return absl::UnavailableError(absl::StrJoin(lost, "; "));
}

std::vector<std::pair<int, absl::Status>> CudaBackend::DeviceHealth() const {
  absl::MutexLock lock(&health_mu_);
  return {health_.begin(), health_.end()};
}

absl::Status CudaBackend::HealthOf(int device) const {
  absl::MutexLock lock(&health_mu_);
  auto it = health_.find(device);
  if (it == health_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", device, " is not a device this server runs on"));
  }
  return it->second;
}

absl::Status CudaBackend::PinHostMemory(void* data, size_t bytes) {
  absl::Status pinned =
      cuda::CudaStatus(cudaHostRegister(data, bytes, cudaHostRegisterPortable), "cudaHostRegister");
  if (!pinned.ok()) cudaGetLastError();  // not sticky: clear it for the lanes
  return pinned;
}

void CudaBackend::UnpinHostMemory(void* data) {
  if (cudaHostUnregister(data) != cudaSuccess) cudaGetLastError();
}

namespace {

// cuMemGetAddressRange through the runtime's driver entry points (the server
// links no libcuda): the allocation holding `data`, or false if unknown.
bool AllocationOf(const char* data, uintptr_t* base, size_t* size) {
  using GetAddressRange = int (*)(unsigned long long*, size_t*, unsigned long long);
  static GetAddressRange get_range = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<GetAddressRange>(nullptr);
    }
    return reinterpret_cast<GetAddressRange>(fn);
  }();
  if (get_range == nullptr) return false;
  unsigned long long start = 0;
  if (get_range(&start, size, reinterpret_cast<uintptr_t>(data)) != 0) return false;
  *base = start;
  return true;
}

}  // namespace

absl::StatusOr<char*> CudaBackend::OpenIpcMemory(absl::string_view raw_handle, int device,
                                                 uint64_t bytes) {
  if (pools_.count(device) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_id ", device, " is not a device this server runs on (it serves ",
                     device_names_, ")"));
  }
  cudaIpcMemHandle_t handle;
  static_assert(sizeof(handle) == 64, "a cudaIpcMemHandle_t is 64 bytes (RegisterCudaRequest)");
  if (raw_handle.size() != sizeof(handle)) {
    return absl::InvalidArgumentError(absl::StrCat("raw_handle has ", raw_handle.size(),
                                                   " bytes; a cudaIpcMemHandle_t has 64"));
  }
  std::memcpy(&handle, raw_handle.data(), sizeof(handle));
  PRIMSERVE_RETURN_IF_ERROR(cuda::CudaStatus(cudaSetDevice(device), "cudaSetDevice"));
  void* data = nullptr;
  const cudaError_t opened =
      cudaIpcOpenMemHandle(&data, handle, cudaIpcMemLazyEnablePeerAccess);
  if (opened != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it for the lanes
    return absl::FailedPreconditionError(absl::StrCat(
        "cudaIpcOpenMemHandle on device ", device, " failed: ", cudaGetErrorName(opened), ": ",
        cudaGetErrorString(opened),
        " (the handle must come from cudaIpcGetMemHandle in another process, on memory it "
        "still holds)"));
  }
  uintptr_t base = 0;
  size_t allocation = 0;
  const char* start = static_cast<const char*>(data);
  if (AllocationOf(start, &base, &allocation)) {
    const uint64_t room = allocation - (reinterpret_cast<uintptr_t>(start) - base);
    if (bytes > room) {
      if (cudaIpcCloseMemHandle(data) != cudaSuccess) cudaGetLastError();
      return absl::InvalidArgumentError(absl::StrCat(
          "byte_size ", bytes, " is past the end of the exported allocation (", room,
          " bytes)"));
    }
  }
  cuda::AddDeviceRange(start, bytes, device);
  return static_cast<char*>(data);
}

void CudaBackend::CloseIpcMemory(char* data) {
  const int device = cuda::DeviceOf(data, 1);
  cuda::RemoveDeviceRange(data);
  if (device >= 0 && cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
  if (cudaIpcCloseMemHandle(data) != cudaSuccess) cudaGetLastError();
}

absl::Status CudaBackend::CopyToIpcMemory(char* to, const char* from, size_t bytes) {
  absl::Status copied =
      cuda::CudaStatus(cudaMemcpy(to, from, bytes, cudaMemcpyDefault), "cudaMemcpy");
  if (!copied.ok()) cudaGetLastError();
  cuda::RegionCopyCounters().output_bytes += bytes;
  return copied;
}

absl::StatusOr<char*> CudaBackend::AllocateResident(uint64_t bytes, int* device, bool zeroed) {
  int best = -1;
  uint64_t best_room = 0;
  for (const auto& [d, pool] : pools_) {
    if (!picker_.up(d)) continue;
    const uint64_t total = budget_->total(d);
    const uint64_t in_use = std::min(total, budget_->in_use(d));
    const uint64_t room = total - in_use;
    if (best < 0 || room > best_room) {
      best = d;
      best_room = room;
    }
    // The device asked for wins while the buffer fits there.
    if (d == *device && room >= bytes) {
      best = d;
      best_room = room;
      break;
    }
  }
  if (best < 0) return Health();
  if (absl::Status counted = budget_->Acquire(best, bytes, absl::Now()); !counted.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a buffer of ", bytes, " bytes does not fit in device ", best, "'s memory budget now (",
        best_room, " bytes free of --gpu_memory_budget_bytes): ", counted.message()));
  }
  // An empty buffer still needs an address of its own.
  const size_t allocated = std::max<uint64_t>(bytes, 1);
  absl::StatusOr<char*> data = resident_->Allocate(best, allocated, zeroed);
  if (!data.ok()) {
    budget_->Release(best, bytes);
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate a buffer of ", bytes, " bytes on device ", best, ": ", data.status().message()));
  }
  cuda::AddDeviceRange(*data, allocated, best);
  *device = best;
  return *data;
}

void CudaBackend::FreeResident(char* data, uint64_t bytes) {
  const int device = cuda::DeviceOf(data, 1);
  cuda::RemoveDeviceRange(data);
  if (device < 0) return;
  resident_->Free(device, data);
  // Counted free at once: what a later batch or buffer takes from the pool
  // waits, on its stream, for the free.
  budget_->Release(device, bytes);
}

absl::Status CudaBackend::WriteResident(char* to, const char* from, size_t bytes) {
  absl::Status copied = bounce_.ToDevice(std::max(0, cuda::DeviceOf(to, bytes)), to, from, bytes);
  if (!copied.ok()) cudaGetLastError();
  return copied;
}

absl::Status CudaBackend::ReadResident(char* to, const char* from, size_t bytes) {
  absl::Status copied = bounce_.ToHost(std::max(0, cuda::DeviceOf(from, bytes)), to, from, bytes);
  if (!copied.ok()) cudaGetLastError();
  return copied;
}

absl::Status CudaBackend::CopyResident(char* to, const char* from, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  absl::Status copied = cuda::CudaStatus(cudaMemcpy(to, from, bytes, cudaMemcpyDefault),
                                         "cudaMemcpy between buffers");
  if (!copied.ok()) cudaGetLastError();
  return copied;
}

uint64_t CudaBackend::ResidentCapacity() const {
  uint64_t total = 0;
  for (const auto& [device, pool] : pools_) total += budget_->total(device);
  return total;
}

size_t CudaBackend::MinPendingInputBytes() const { return cuda::kPipelinedScanMinBytes; }

uint64_t CudaBackend::ReproducibleScanGranule(DType dtype) const {
  return gpu::ScanTileItems(dtype, /*segmented=*/false);
}

void CudaBackend::NoteFailure(int device, const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnavailable) return;
  absl::MutexLock lock(&health_mu_);
  if (!health_[device].ok()) return;
  // A sticky error ends CUDA in the whole process, not on its device alone:
  // on two H200s, a trap on device 1 failed every later call on device 0
  // too, from threads that never used device 1 (device_isolation_probe,
  // perf/README.md). Every device goes out of service at once, so requests
  // are refused with the reason instead of failing one by one; isolating a
  // GPU takes a process of its own (one pod per GPU).
  for (auto& [d, health] : health_) {
    if (!health.ok()) continue;
    health = absl::UnavailableError(
        d == device ? absl::StrCat("CUDA device ", d, " is out of service: ", status.message())
                    : absl::StrCat("CUDA device ", d, " is out of service: a sticky error seen on "
                                   "CUDA device ", device, " ends CUDA in the whole process: ",
                                   status.message()));
    picker_.MarkDown(d);
    if (metrics_ != nullptr) metrics_->SetDeviceUp(d, false);
    std::fprintf(stderr, "%s\n", health.ToString().c_str());
  }
}

std::vector<absl::StatusOr<Result>> CudaBackend::Run(Lane& lane, absl::Span<Task* const> tasks) {
  // A device lost after the batch was given to it.
  if (absl::Status health = HealthOf(lane.device()); !health.ok()) {
    return Results(tasks.size(), health);
  }
  if (absl::Status s = cuda::CudaStatus(cudaSetDevice(lane.device()), "cudaSetDevice"); !s.ok()) {
    return Results(tasks.size(), s);
  }
  const absl::Time deadline = LatestDeadline(tasks);
  switch (RpcOf(tasks.front()->operation)) {
    case Rpc::kScan: {
      // Scans in or out of CUDA regions run alone, in place; the rest as
      // one batch.
      std::vector<const ScanOperation*> ops = OperationsOf<ScanOperation>(tasks);
      std::vector<const ScanOperation*> host_ops;
      for (const ScanOperation* op : ops) {
        if (!cuda::TouchesDevice(*op)) host_ops.push_back(op);
      }
      if (host_ops.size() == ops.size()) {
        return Batched(tasks.size(), cuda::RunScans(lane, ops, deadline, AnswersOf(tasks)));
      }
      Results host_results =
          host_ops.empty()
              ? Results{}
              : Batched(host_ops.size(), cuda::RunScans(lane, host_ops, deadline, nullptr));
      Results results;
      size_t next_host = 0;
      for (size_t i = 0; i < ops.size(); ++i) {
        if (cuda::TouchesDevice(*ops[i])) {
          cuda::FillPendingInputs({ops[i]});
          results.push_back(cuda::RunDeviceScan(lane, *ops[i], tasks[i]->deadline));
        } else {
          results.push_back(std::move(host_results[next_host++]));
        }
      }
      return results;
    }
    // Requests in or out of CUDA regions run alone (the batch's wait for
    // memory still ends at the latest deadline, theirs at their own), the
    // rest as one batch.
    case Rpc::kReduce:
      return RunDeviceOnesAlone<ReduceOperation>(
          tasks, deadline,
          [&](absl::Span<const ReduceOperation* const> ops, absl::Time d,
              const AnswerAllocator* answers) {
            return cuda::RunReduces(lane, ops, d, answers);
          });
    case Rpc::kSelect:
      return RunDeviceOnesAlone<SelectOperation>(
          tasks, deadline,
          [&](absl::Span<const SelectOperation* const> ops, absl::Time d,
              const AnswerAllocator* answers) {
            return cuda::RunSelects(lane, ops, d, answers);
          });
    case Rpc::kUnique:
      return RunEach<UniqueOperation>(
          tasks, [&](const UniqueOperation& op, absl::Time d, const AnswerAllocator* answers) {
            return cuda::RunUnique(lane, op, d, answers);
          });
    case Rpc::kRunLengthEncode:
      return RunEach<RunLengthEncodeOperation>(
          tasks, [&](const RunLengthEncodeOperation& op, absl::Time d,
                     const AnswerAllocator* answers) {
            return cuda::RunRunLengthEncode(lane, op, d, answers);
          });
    case Rpc::kReduceByKey:
      return RunEach<ReduceByKeyOperation>(
          tasks, [&](const ReduceByKeyOperation& op, absl::Time d,
                     const AnswerAllocator* answers) {
            return cuda::RunReduceByKey(lane, op, d, answers);
          });
    case Rpc::kAggregateByKey:
      return RunEach<AggregateByKeyOperation>(
          tasks, [&](const AggregateByKeyOperation& op, absl::Time d,
                     const AnswerAllocator* answers) {
            return cuda::RunAggregateByKey(lane, op, d, answers);
          });
    case Rpc::kSort:
      return RunEach<SortOperation>(
          tasks, [&](const SortOperation& op, absl::Time d, const AnswerAllocator* answers) {
            return cuda::RunSort(lane, op, d, answers);
          });
    case Rpc::kGather:
      return RunEach<GatherOperation>(
          tasks, [&](const GatherOperation& op, absl::Time d, const AnswerAllocator* answers) {
            return cuda::RunGather(lane, op, d, answers);
          });
    case Rpc::kPipeline:
      return RunEach<PipelineOperation>(
          tasks, [&](const PipelineOperation& op, absl::Time d, const AnswerAllocator* answers) {
            // Each step as a batch of one on this lane, through this dispatch.
            const cuda::StepRun run_step = [&](const Operation& step, bool returned)
                -> absl::StatusOr<Result> {
              Task task;
              task.operation = step;
              task.deadline = d;
              if (returned && answers != nullptr) task.answers = *answers;
              Task* const one[] = {&task};
              return std::move(Run(lane, one).front());
            };
            return cuda::RunPipeline(lane, op, d, run_step, metrics_);
          });
  }
  return Results(tasks.size(),
                 absl::InternalError(absl::StrCat("the CUDA backend has no runner for RPC ",
                                                  RpcIndex(RpcOf(tasks.front()->operation)))));
}

void CudaBackend::Record(Lane& lane, Rpc rpc, size_t requests, uint64_t bytes) {
  // Stage times come from timed batches only (Lane::MarkSampledStart). In
  // the device's kernel time a small timed batch stands for the
  // kTimingPeriod small batches it was sampled from.
  absl::Duration kernel;
  if (lane.timed()) {
    const absl::Duration h2d = lane.Between(Lane::kStart, Lane::kInputsIn);
    kernel = lane.Between(Lane::kInputsIn, Lane::kKernelDone);
    const absl::Duration d2h = lane.Between(Lane::kKernelDone, Lane::kOutputsOut);
    for (size_t i = 0; i < requests; ++i) {
      metrics_->ObserveStage(rpc, Stage::kH2D, h2d);
      metrics_->ObserveStage(rpc, Stage::kKernel, kernel);
      metrics_->ObserveStage(rpc, Stage::kD2H, d2h);
    }
    if (bytes < Lane::kAlwaysTimedBytes) kernel *= Lane::kTimingPeriod;
  }
  metrics_->DeviceBatchDone(lane.device(), requests, bytes, kernel);
  if (const size_t growth = lane.TakePinnedGrowth(); growth != 0) {
    staging_gauges_.pinned->Set(static_cast<double>(staging_pinned_ += growth));
  }
  cudaMemPool_t pool;
  GpuMemory memory;
  size_t free_bytes = 0, total_bytes = 0;
  // cudaMemGetInfo reads the calling thread's device.
  if (cudaSetDevice(lane.device()) == cudaSuccess &&
      cudaDeviceGetDefaultMemPool(&pool, lane.device()) == cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &memory.pool_in_use) ==
          cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &memory.pool_reserved) ==
          cudaSuccess &&
      cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    memory.device_free = free_bytes;
    memory.device_total = total_bytes;
    memory.budget = budget_->total(lane.device());
    metrics_->SetGpuMemory(lane.device(), memory);
  } else {
    cudaGetLastError();  // a gauge left stale is better than a failed request
  }
}

void CudaBackend::Execute(std::vector<std::unique_ptr<Task>> batch) {
  // Tasks whose memory lies on a device run there; the others, together,
  // on the least loaded device. A batch from the batcher is almost always
  // one group.
  std::map<int, std::vector<std::unique_ptr<Task>>> by_home;
  std::map<int, uint64_t> bytes;
  for (auto& task : batch) {
    const cuda::Footprint footprint = cuda::FootprintOf(task->operation);
    bytes[footprint.device] += footprint.bytes;
    by_home[footprint.device].push_back(std::move(task));
  }
  for (auto& [home, tasks] : by_home) ExecuteOn(home, bytes[home], std::move(tasks));
}

void CudaBackend::ExecuteOn(int home, uint64_t bytes, std::vector<std::unique_ptr<Task>> batch) {
  const int device = home >= 0 ? (picker_.ClaimOn(home, bytes) ? home : -1) : picker_.Claim(bytes);
  if (device < 0) {
    // The memory's device is out of service, or every device is.
    const absl::Status refused = home >= 0 ? HealthOf(home) : Health();
    for (auto& task : batch) task->done(refused);
    return;
  }
  std::vector<Task*> tasks;
  for (const auto& task : batch) tasks.push_back(task.get());
  cuda::LanePool& pool = *pools_.at(device);
  Lane* lane = pool.Acquire();
  Results results = Run(*lane, tasks);
  // A failed call leaves its error as this thread's last error; the next
  // batch's launch checks must not find it there.
  cudaGetLastError();
  // Every runner waits for its answers before it returns them, so a batch
  // that succeeded is answered before the lane's metrics are read and its
  // streams drained, both on the lane pool's thread: cudaMemGetInfo and the
  // drain are off the caller's latency, even when the caller is the gRPC
  // thread that must return before its answer goes out. A failed one may
  // have left copies in flight from its requests' memory: it is answered
  // only after the drain. The device counts the batch as its load until
  // the drain.
  const Rpc rpc = RpcOf(tasks.front()->operation);
  const bool all_ok = std::all_of(results.begin(), results.end(),
                                  [](const absl::StatusOr<Result>& r) { return r.ok(); });
  if (all_ok) {
    for (size_t i = 0; i < batch.size(); ++i) batch[i]->done(std::move(results[i]));
    // Answers already read are complete; a drain that fails says the device
    // failed after them (a sticky error takes the device out of service).
    pool.ReleaseLater(lane, [this, lane, device, rpc, bytes,
                             count = tasks.size()](absl::Status drained) {
      if (metrics_ != nullptr) Record(*lane, rpc, count, bytes);
      NoteFailure(device, drained);
      picker_.Finish(device, bytes);
    });
    return;
  }
  if (metrics_ != nullptr) Record(*lane, rpc, tasks.size(), bytes);
  NoteFailure(device, pool.Release(lane));
  picker_.Finish(device, bytes);
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!results[i].ok()) NoteFailure(device, results[i].status());
    batch[i]->done(std::move(results[i]));
  }
}

}  // namespace primserve
