#include "server/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/lane.h"
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

// Runs each task alone, one after another on the lane, each with its own
// deadline.
template <typename Kind, typename RunOne>
Results RunEach(absl::Span<Task* const> tasks, RunOne run_one) {
  Results results;
  for (Task* task : tasks) {
    results.push_back(run_one(std::get<Kind>(task->operation), task->deadline));
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
  std::vector<std::unique_ptr<Lane>> lanes;
  for (int device : devices) {
    for (int s = 0; s < std::max(1, options.streams_per_device); ++s) {
      absl::StatusOr<std::unique_ptr<Lane>> lane =
          Lane::Create(device, options.pinned_bytes_per_lane, budget.get(), options.faults);
      if (!lane.ok()) return lane.status();
      lanes.push_back(*std::move(lane));
    }
  }
  return std::unique_ptr<CudaBackend>(
      new CudaBackend(std::move(budget), std::make_unique<cuda::LanePool>(std::move(lanes)),
                      absl::StrJoin(names, ", "), options.metrics));
}

CudaBackend::CudaBackend(std::unique_ptr<MemoryBudget> budget,
                         std::unique_ptr<cuda::LanePool> lanes, std::string device_names,
                         Metrics* metrics)
    : budget_(std::move(budget)),
      lanes_(std::move(lanes)),
      device_names_(std::move(device_names)),
      metrics_(metrics) {}

// The lanes drain as they are destroyed, before the budget they release into.
CudaBackend::~CudaBackend() = default;

absl::Status CudaBackend::Health() const {
  absl::MutexLock lock(&health_mu_);
  return health_;
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

void CudaBackend::NoteFailure(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnavailable) return;
  absl::MutexLock lock(&health_mu_);
  if (health_.ok()) {
    health_ = status;
    std::fprintf(stderr, "CUDA backend is no longer serving: %s\n", status.ToString().c_str());
  }
}

std::vector<absl::StatusOr<Result>> CudaBackend::Run(Lane& lane, absl::Span<Task* const> tasks) {
  if (absl::Status health = Health(); !health.ok()) return Results(tasks.size(), health);
  if (absl::Status s = cuda::CudaStatus(cudaSetDevice(lane.device()), "cudaSetDevice"); !s.ok()) {
    return Results(tasks.size(), s);
  }
  const absl::Time deadline = LatestDeadline(tasks);
  switch (RpcOf(tasks.front()->operation)) {
    case Rpc::kScan:
      return Batched(tasks.size(),
                     cuda::RunScans(lane, OperationsOf<ScanOperation>(tasks), deadline));
    case Rpc::kReduce:
      return Batched(tasks.size(),
                     cuda::RunReduces(lane, OperationsOf<ReduceOperation>(tasks), deadline));
    case Rpc::kSelect:
      return Batched(tasks.size(),
                     cuda::RunSelects(lane, OperationsOf<SelectOperation>(tasks), deadline));
    case Rpc::kUnique:
      return RunEach<UniqueOperation>(tasks, [&](const UniqueOperation& op, absl::Time d) {
        return cuda::RunUnique(lane, op, d);
      });
    case Rpc::kRunLengthEncode:
      return RunEach<RunLengthEncodeOperation>(
          tasks, [&](const RunLengthEncodeOperation& op, absl::Time d) {
            return cuda::RunRunLengthEncode(lane, op, d);
          });
    case Rpc::kReduceByKey:
      return RunEach<ReduceByKeyOperation>(
          tasks, [&](const ReduceByKeyOperation& op, absl::Time d) {
            return cuda::RunReduceByKey(lane, op, d);
          });
    case Rpc::kAggregateByKey:
      return RunEach<AggregateByKeyOperation>(
          tasks, [&](const AggregateByKeyOperation& op, absl::Time d) {
            return cuda::RunAggregateByKey(lane, op, d);
          });
  }
  return Results(tasks.size(),
                 absl::InternalError(absl::StrCat("the CUDA backend has no runner for RPC ",
                                                  RpcIndex(RpcOf(tasks.front()->operation)))));
}

void CudaBackend::Record(const Lane& lane, absl::Span<Task* const> tasks) {
  const Rpc rpc = RpcOf(tasks.front()->operation);
  const absl::Duration h2d = lane.Between(Lane::kStart, Lane::kInputsIn);
  const absl::Duration kernel = lane.Between(Lane::kInputsIn, Lane::kKernelDone);
  const absl::Duration d2h = lane.Between(Lane::kKernelDone, Lane::kOutputsOut);
  for (size_t i = 0; i < tasks.size(); ++i) {
    metrics_->ObserveStage(rpc, Stage::kH2D, h2d);
    metrics_->ObserveStage(rpc, Stage::kKernel, kernel);
    metrics_->ObserveStage(rpc, Stage::kD2H, d2h);
  }
  cudaMemPool_t pool;
  GpuMemory memory;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaDeviceGetDefaultMemPool(&pool, lane.device()) == cudaSuccess &&
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
  std::vector<Task*> tasks;
  for (const auto& task : batch) tasks.push_back(task.get());
  Lane* lane = lanes_->Acquire();
  Results results = Run(*lane, tasks);
  // A failed call leaves its error as this thread's last error; the next
  // batch's launch checks must not find it there.
  cudaGetLastError();
  if (metrics_ != nullptr) Record(*lane, tasks);
  // Answers already read are complete; a drain that fails says the device
  // failed after them (a sticky error stops serving from here on).
  NoteFailure(lanes_->Release(lane));
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!results[i].ok()) NoteFailure(results[i].status());
    batch[i]->done(std::move(results[i]));
  }
}

}  // namespace primserve
