#include "server/cuda/staging.h"

namespace primserve::cuda {

void Concatenation::Append(uint64_t n, absl::Span<const uint64_t> segments) {
  offsets.push_back(total);
  first_segment.push_back(segment_starts.size());
  if (segments.empty()) {
    segment_starts.push_back(total);
  } else {
    for (uint64_t start : segments) segment_starts.push_back(total + start);
  }
  total += n;
}

uint64_t Concatenation::segments_of(size_t request) const {
  const uint64_t end =
      request + 1 < first_segment.size() ? first_segment[request + 1] : segment_starts.size();
  return end - first_segment[request];
}

}  // namespace primserve::cuda
