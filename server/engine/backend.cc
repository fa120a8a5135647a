#include "server/engine/backend.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace primserve {

absl::StatusOr<char*> ExecutionBackend::AllocateResident(uint64_t bytes, int* device,
                                                          bool zeroed) {
  *device = -1;
  // aligned_alloc wants a multiple of the alignment, and a non-zero size
  // for an empty buffer to have an address of its own.
  const uint64_t rounded = (bytes + 63) / 64 * 64 + 64;
  char* data = static_cast<char*>(std::aligned_alloc(64, rounded));
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the host has no ", bytes, " bytes free for a buffer"));
  }
  if (zeroed) std::memset(data, 0, bytes);
  return data;
}

void ExecutionBackend::FreeResident(char* data, uint64_t) { std::free(data); }

absl::Status ExecutionBackend::WriteResident(char* to, const char* from, size_t bytes) {
  if (bytes != 0) std::memcpy(to, from, bytes);
  return absl::OkStatus();
}

absl::Status ExecutionBackend::ReadResident(char* to, const char* from, size_t bytes) {
  if (bytes != 0) std::memcpy(to, from, bytes);
  return absl::OkStatus();
}

absl::Status ExecutionBackend::CopyResident(char* to, const char* from, size_t bytes) {
  if (bytes != 0) std::memcpy(to, from, bytes);
  return absl::OkStatus();
}

uint64_t ExecutionBackend::ResidentCapacity() const {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{1} << 32;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

}  // namespace primserve
