#include "server/cuda/resident_memory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/cuda/cuda_status.h"

namespace primserve::cuda {
namespace {

// Lets every peer of `device` that can reach it read and write its pool.
absl::Status ShareWithPeers(int device, const std::map<int, std::vector<cudaStream_t>>& devices) {
  cudaMemPool_t pool;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaDeviceGetDefaultMemPool(&pool, device));
  for (const auto& [peer, unused] : devices) {
    int reachable = 0;
    if (peer == device) continue;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaDeviceCanAccessPeer(&reachable, peer, device));
    if (reachable == 0) continue;
    cudaMemAccessDesc access = {};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = peer;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemPoolSetAccess(pool, &access, 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ResidentMemory>> ResidentMemory::Create(
    const std::map<int, std::vector<cudaStream_t>>& fences) {
  std::unique_ptr<ResidentMemory> memory(new ResidentMemory());
  for (const auto& [device, streams] : fences) {
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaSetDevice(device));
    if (absl::Status shared = ShareWithPeers(device, fences); !shared.ok()) return shared;
    // Owned by `memory` from here, so that an error below destroys them.
    absl::MutexLock lock(&memory->mu_);
    Device& d = memory->devices_[device];
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaStreamCreateWithFlags(&d.allocations, cudaStreamNonBlocking));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&d.frees, cudaStreamNonBlocking));
    for (cudaStream_t stream : streams) {
      cudaEvent_t event;
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      d.fences.push_back(stream);
      d.fenced.push_back(event);
    }
  }
  return memory;
}

ResidentMemory::~ResidentMemory() {
  absl::MutexLock lock(&mu_);
  for (auto& [device, d] : devices_) {
    // Errors here find a device already lost: nothing is left to wait for.
    if (cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
    for (cudaStream_t stream : {d.allocations, d.frees}) {
      if (stream == nullptr) continue;
      if (cudaStreamSynchronize(stream) != cudaSuccess) cudaGetLastError();
      if (cudaStreamDestroy(stream) != cudaSuccess) cudaGetLastError();
    }
    for (cudaEvent_t event : d.fenced) {
      if (cudaEventDestroy(event) != cudaSuccess) cudaGetLastError();
    }
  }
}

absl::StatusOr<char*> ResidentMemory::Allocate(int device, size_t bytes, bool zeroed) {
  cudaStream_t stream;
  {
    absl::MutexLock lock(&mu_);
    auto it = devices_.find(device);
    if (it == devices_.end()) {
      return absl::InternalError(absl::StrCat("CUDA device ", device, " is not served"));
    }
    stream = it->second.allocations;
  }
  PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaSetDevice(device));
  void* data = nullptr;
  absl::Status made = CudaStatus(cudaMallocAsync(&data, bytes, stream), "cudaMallocAsync");
  if (made.ok() && zeroed) made = CudaStatus(cudaMemsetAsync(data, 0, bytes, stream), "cudaMemsetAsync");
  // Other streams may use it only once its allocation (and zeroing) is done.
  if (made.ok()) made = CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  if (!made.ok()) {
    cudaGetLastError();  // an allocation failure is not sticky: clear it for the lanes
    if (data != nullptr && cudaFreeAsync(data, stream) != cudaSuccess) cudaGetLastError();
    return made;
  }
  return static_cast<char*>(data);
}

void ResidentMemory::Free(int device, char* data) {
  absl::MutexLock lock(&mu_);
  auto it = devices_.find(device);
  if (it == devices_.end()) return;
  Device& d = it->second;
  // Errors here come from a device already lost, whose memory goes with it.
  if (cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  for (size_t i = 0; i < d.fences.size(); ++i) {
    if (cudaEventRecord(d.fenced[i], d.fences[i]) != cudaSuccess ||
        cudaStreamWaitEvent(d.frees, d.fenced[i], 0) != cudaSuccess) {
      cudaGetLastError();
    }
  }
  if (cudaFreeAsync(data, d.frees) != cudaSuccess) cudaGetLastError();
}

}  // namespace primserve::cuda
