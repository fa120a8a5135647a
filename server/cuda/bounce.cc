#include "server/cuda/bounce.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/status/statusor.h"
#include "server/cuda/cuda_status.h"

namespace primserve::cuda {

// Two pinned chunks, and on each device it was used on a non-blocking stream
// with an event per chunk (the chunk may be refilled once its event is done).
struct BouncePool::Slot {
  struct OnDevice {
    cudaStream_t stream = nullptr;
    cudaEvent_t done[2] = {nullptr, nullptr};
  };
  char* chunks[2] = {nullptr, nullptr};
  std::map<int, OnDevice> devices;

  ~Slot() {
    for (auto& [device, on] : devices) {
      if (cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
      if (on.stream != nullptr && cudaStreamSynchronize(on.stream) != cudaSuccess) {
        cudaGetLastError();
      }
      for (cudaEvent_t event : on.done) {
        if (event != nullptr && cudaEventDestroy(event) != cudaSuccess) cudaGetLastError();
      }
      if (on.stream != nullptr && cudaStreamDestroy(on.stream) != cudaSuccess) cudaGetLastError();
    }
    for (char* chunk : chunks) {
      if (chunk != nullptr && cudaFreeHost(chunk) != cudaSuccess) cudaGetLastError();
    }
  }

  // The stream and events on `device` (the current device), made on first
  // use; nothing is kept of a failed making.
  absl::StatusOr<OnDevice*> On(int device) {
    if (auto it = devices.find(device); it != devices.end()) return &it->second;
    OnDevice on;
    absl::Status made =
        CudaStatus(cudaStreamCreateWithFlags(&on.stream, cudaStreamNonBlocking), "bounce stream");
    for (cudaEvent_t& event : on.done) {
      if (made.ok()) {
        made = CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "bounce event");
      }
    }
    if (!made.ok()) {
      for (cudaEvent_t event : on.done) {
        if (event != nullptr && cudaEventDestroy(event) != cudaSuccess) cudaGetLastError();
      }
      if (on.stream != nullptr && cudaStreamDestroy(on.stream) != cudaSuccess) cudaGetLastError();
      return made;
    }
    return &devices.emplace(device, on).first->second;
  }

  // After a failed copy: nothing may still be copying from or into the
  // chunks once the slot is free again.
  void Settle(int device) {
    auto it = devices.find(device);
    if (it != devices.end() && cudaStreamSynchronize(it->second.stream) != cudaSuccess) {
      cudaGetLastError();
    }
  }
};

BouncePool::BouncePool(size_t slots, size_t chunk_bytes)
    : max_slots_(slots), chunk_bytes_(chunk_bytes) {}

BouncePool::~BouncePool() = default;

BouncePool::Slot* BouncePool::Take() {
  absl::MutexLock lock(&mu_);
  if (!free_.empty()) {
    Slot* slot = free_.back();
    free_.pop_back();
    return slot;
  }
  if (slots_.size() < max_slots_) {
    auto slot = std::make_unique<Slot>();
    bool pinned = true;
    for (char*& chunk : slot->chunks) {
      pinned = pinned && cudaHostAlloc(reinterpret_cast<void**>(&chunk), chunk_bytes_,
                                       cudaHostAllocPortable) == cudaSuccess;
    }
    if (pinned) {
      slots_.push_back(std::move(slot));
      return slots_.back().get();
    }
    cudaGetLastError();  // no pinned memory now: not sticky, and the copy falls back
  }
  ++fallbacks_;
  return nullptr;
}

void BouncePool::Give(Slot* slot) {
  absl::MutexLock lock(&mu_);
  free_.push_back(slot);
}

size_t BouncePool::fallbacks() const {
  absl::MutexLock lock(&mu_);
  return fallbacks_;
}

absl::Status BouncePool::ToDevice(int device, char* to, const char* from, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaSetDevice(device));
  Slot* slot = Take();
  if (slot == nullptr) {
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpy(to, from, bytes, cudaMemcpyHostToDevice));
    return absl::OkStatus();
  }
  absl::Status copied = [&]() -> absl::Status {
    absl::StatusOr<Slot::OnDevice*> on = slot->On(device);
    if (!on.ok()) return on.status();
    // Chunk i is refilled only once its previous DMA (chunk i - 2's) is done,
    // so that the memcpy of one overlaps the DMA of the other.
    size_t i = 0;
    for (size_t at = 0; at < bytes; at += chunk_bytes_, ++i) {
      const size_t n = std::min(chunk_bytes_, bytes - at);
      char* chunk = slot->chunks[i % 2];
      if (i >= 2) PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventSynchronize((*on)->done[i % 2]));
      std::memcpy(chunk, from + at, n);
      PRIMSERVE_RETURN_IF_CUDA_ERROR(
          cudaMemcpyAsync(to + at, chunk, n, cudaMemcpyHostToDevice, (*on)->stream));
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventRecord((*on)->done[i % 2], (*on)->stream));
    }
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize((*on)->stream));
    return absl::OkStatus();
  }();
  if (!copied.ok()) slot->Settle(device);
  Give(slot);
  return copied;
}

absl::Status BouncePool::ToHost(int device, char* to, const char* from, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaSetDevice(device));
  Slot* slot = Take();
  if (slot == nullptr) {
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpy(to, from, bytes, cudaMemcpyDeviceToHost));
    return absl::OkStatus();
  }
  absl::Status copied = [&]() -> absl::Status {
    absl::StatusOr<Slot::OnDevice*> on = slot->On(device);
    if (!on.ok()) return on.status();
    const auto start = [&](size_t i) -> absl::Status {
      const size_t at = i * chunk_bytes_;
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(slot->chunks[i % 2], from + at,
                                                     std::min(chunk_bytes_, bytes - at),
                                                     cudaMemcpyDeviceToHost, (*on)->stream));
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventRecord((*on)->done[i % 2], (*on)->stream));
      return absl::OkStatus();
    };
    // The DMA of chunk i + 1 runs while chunk i is copied out.
    const size_t chunks = (bytes + chunk_bytes_ - 1) / chunk_bytes_;
    PRIMSERVE_RETURN_IF_ERROR(start(0));
    for (size_t i = 0; i < chunks; ++i) {
      if (i + 1 < chunks) PRIMSERVE_RETURN_IF_ERROR(start(i + 1));
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventSynchronize((*on)->done[i % 2]));
      const size_t at = i * chunk_bytes_;
      std::memcpy(to + at, slot->chunks[i % 2], std::min(chunk_bytes_, bytes - at));
    }
    return absl::OkStatus();
  }();
  if (!copied.ok()) slot->Settle(device);
  Give(slot);
  return copied;
}

}  // namespace primserve::cuda
