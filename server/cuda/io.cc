#include "server/cuda/io.h"

#include <cuda_runtime.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace primserve::cuda {

namespace {

struct DeviceRange {
  size_t bytes = 0;
  int device = 0;
};

// Ranges by start; read by every HostInput::Append once one exists.
struct DeviceRanges {
  std::atomic<size_t> count{0};
  absl::Mutex mu;
  std::map<const char*, DeviceRange> ranges ABSL_GUARDED_BY(mu);
};

DeviceRanges& Ranges() {
  static DeviceRanges* ranges = new DeviceRanges;
  return *ranges;
}

}  // namespace

RegionCopies& RegionCopyCounters() {
  static RegionCopies* counters = new RegionCopies;
  return *counters;
}

namespace {

bool OnDevice(absl::string_view bytes) { return DeviceOf(bytes.data(), bytes.size()) >= 0; }
bool OnDevice(const OutputPlace& place) {
  return place.data != nullptr && DeviceOf(place.data, place.room) >= 0;
}
bool AnyPlaceOnDevice(const OutputPlaces& places) {
  return OnDevice(places.values) || OnDevice(places.indices) || OnDevice(places.lengths) ||
         OnDevice(places.keys);
}

}  // namespace

bool TouchesDevice(const ReduceOperation& op) {
  return OnDevice(op.input.bytes) || AnyPlaceOnDevice(op.places);
}

bool TouchesDevice(const SelectOperation& op) {
  return OnDevice(op.input.bytes) || (op.flags && OnDevice(op.flags->bytes)) ||
         AnyPlaceOnDevice(op.places);
}

void AddDeviceRange(const char* data, size_t bytes, int device) {
  DeviceRanges& r = Ranges();
  absl::MutexLock lock(&r.mu);
  r.ranges[data] = DeviceRange{bytes, device};
  r.count.store(r.ranges.size());
}

void RemoveDeviceRange(const char* data) {
  DeviceRanges& r = Ranges();
  absl::MutexLock lock(&r.mu);
  r.ranges.erase(data);
  r.count.store(r.ranges.size());
}

int DeviceOf(const char* data, size_t bytes) {
  DeviceRanges& r = Ranges();
  if (r.count.load(std::memory_order_relaxed) == 0 || data == nullptr) return -1;
  absl::MutexLock lock(&r.mu);
  auto it = r.ranges.upper_bound(data);
  if (it == r.ranges.begin()) return -1;
  --it;
  const size_t offset = static_cast<size_t>(data - it->first);
  if (offset > it->second.bytes || bytes > it->second.bytes - offset) return -1;
  return it->second.device;
}

void HostInput::StageTo(char* to) const {
  for (const Piece& piece : pieces_) {
    if (!piece.bytes.empty() && !piece.on_device) {
      std::memcpy(to, piece.bytes.data(), piece.bytes.size());
    }
    to += piece.bytes.size();
  }
}

const char* HostInput::Pinned() const {
  // Below this, asking the driver costs more than the copy it could save.
  constexpr size_t kMinBytes = size_t{1} << 20;
  if (pieces_.size() != 1 || pieces_[0].on_device || size_ < kMinBytes ||
      !IsPinned(pieces_[0].bytes.data())) {
    return nullptr;
  }
  return pieces_[0].bytes.data();
}

int HostInput::CopyDevicePieces(char* to, cudaStream_t stream) const {
  for (const Piece& piece : pieces_) {
    if (piece.on_device && !piece.bytes.empty()) {
      // Default: unified addressing finds each side's device (a region on
      // another device than the lane's is copied peer to peer).
      const cudaError_t copied = cudaMemcpyAsync(to, piece.bytes.data(), piece.bytes.size(),
                                                 cudaMemcpyDefault, stream);
      if (copied != cudaSuccess) return copied;
      RegionCopyCounters().input_bytes += piece.bytes.size();
    }
    to += piece.bytes.size();
  }
  return cudaSuccess;
}

HostOutput::HostOutput(size_t expected_bytes) {
  bytes_.reserve(expected_bytes);
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const auto start = reinterpret_cast<uintptr_t>(bytes_.data());
  const uintptr_t begin = (start + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (start + expected_bytes) & ~(kHugePage - 1);
  // Advice only: where it is refused, the pages are ordinary ones.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

bool IsPinned(const void* data) {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, data) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it for the lanes
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

HostArray ToHostArray(DType dtype, const char* staged, size_t bytes) {
  HostOutput out(bytes);
  out.Accept(staged, bytes);
  return HostArray{dtype, std::move(out).Take()};
}

}  // namespace primserve::cuda
