// The arithmetic of staging: where each slice of one allocation goes, and how
// a batch of requests lies end to end. Plain C++ (no CUDA), so it is tested
// without a GPU.
#ifndef PRIMSERVE_SERVER_CUDA_STAGING_H_
#define PRIMSERVE_SERVER_CUDA_STAGING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace primserve::cuda {

// Every slice starts at a multiple of this: enough for any element type and
// for the copy engines' best rate.
inline constexpr size_t kAlignment = 256;

inline constexpr size_t AlignUp(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// Slices of one allocation, each aligned for any element type. An allocation
// of size() bytes holds every slice added: sizes come from the same Layout
// that places the slices.
class Layout final {
 public:
  // Places `bytes` after the slices so far; returns its offset.
  size_t Add(size_t bytes) {
    const size_t offset = size_;
    size_ = AlignUp(size_ + bytes);
    return offset;
  }
  // Bytes the allocation needs (never 0, so that it always exists).
  size_t size() const { return size_ > kAlignment ? size_ : kAlignment; }

 private:
  size_t size_ = 0;
};

// Requests laid end to end in one buffer, with the segment starts of the
// whole: each request contributes its own segments (or one) shifted by its
// offset, so a segmented kernel computes every request's answer at once.
struct Concatenation {
  std::vector<uint64_t> offsets;        // element offset of each request
  std::vector<uint64_t> first_segment;  // each request's first segment
  std::vector<uint64_t> segment_starts;
  uint64_t total = 0;

  // Adds a request of `n` elements with its segment starts (none: one
  // segment).
  void Append(uint64_t n, absl::Span<const uint64_t> segments);
  // Segments of request `request`.
  uint64_t segments_of(size_t request) const;
};

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_STAGING_H_
