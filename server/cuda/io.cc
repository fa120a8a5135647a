#include "server/cuda/io.h"

#include <cuda_runtime.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>

namespace primserve::cuda {

void HostInput::StageTo(char* to) const {
  for (absl::string_view piece : pieces_) {
    if (!piece.empty()) std::memcpy(to, piece.data(), piece.size());
    to += piece.size();
  }
}

const char* HostInput::Pinned() const {
  // Below this, asking the driver costs more than the copy it could save.
  constexpr size_t kMinBytes = size_t{1} << 20;
  if (pieces_.size() != 1 || size_ < kMinBytes || !IsPinned(pieces_[0].data())) return nullptr;
  return pieces_[0].data();
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
