#include "server/shm/system_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace primserve::shm {
namespace {

absl::Status OsError(absl::string_view what, const std::string& key, int error) {
  return absl::FailedPreconditionError(
      absl::StrFormat("%s shared-memory object %s: %s", what, key, std::strerror(error)));
}

// The object's size now, or why it cannot be known.
absl::StatusOr<uint64_t> ObjectSize(int fd, const std::string& key) {
  struct stat st;
  if (fstat(fd, &st) != 0) return OsError("cannot stat", key, errno);
  return static_cast<uint64_t>(st.st_size);
}

absl::Status CheckHolds(uint64_t object_size, const std::string& key, uint64_t offset,
                        uint64_t byte_size) {
  if (object_size >= offset + byte_size) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "shared-memory object %s has %d bytes; the region needs [%d, %d)", key, object_size, offset,
      offset + byte_size));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SystemRegion>> SystemRegion::Map(const std::string& key,
                                                              uint64_t offset,
                                                              uint64_t byte_size) {
  if (key.empty()) return absl::InvalidArgumentError("key is empty: name a shm object");
  if (byte_size == 0) return absl::InvalidArgumentError("byte_size is 0: a region holds bytes");
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t max = static_cast<uint64_t>(std::numeric_limits<off_t>::max());
  if (offset > max || byte_size > max - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "offset %d + byte_size %d is past the largest file offset", offset, byte_size));
  }
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) return OsError("cannot open", key, errno);
  absl::StatusOr<uint64_t> object_size = ObjectSize(fd, key);
  absl::Status holds = object_size.ok() ? CheckHolds(*object_size, key, offset, byte_size)
                                        : object_size.status();
  if (!holds.ok()) {
    close(fd);
    return holds;
  }
  // mmap's offset must be page-aligned: map from the page holding `offset`.
  const uint64_t start = offset / page * page;
  const size_t mapping_size = offset - start + byte_size;
  void* mapping = mmap(nullptr, mapping_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                       static_cast<off_t>(start));
  if (mapping == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return OsError("cannot map", key, error);
  }
  absl::StatusOr<std::unique_ptr<FaultGuard>> guard = FaultGuard::Guard(mapping, mapping_size);
  if (!guard.ok()) {
    munmap(mapping, mapping_size);
    close(fd);
    return guard.status();
  }
  return std::unique_ptr<SystemRegion>(
      new SystemRegion(key, offset, byte_size, fd, mapping, mapping_size, *std::move(guard)));
}

SystemRegion::SystemRegion(std::string key, uint64_t offset, uint64_t size, int fd, void* mapping,
                           size_t mapping_size, std::unique_ptr<FaultGuard> guard)
    : key_(std::move(key)),
      offset_(offset),
      size_(size),
      fd_(fd),
      mapping_(mapping),
      mapping_size_(mapping_size),
      data_(static_cast<char*>(mapping) + (mapping_size - size)),
      guard_(std::move(guard)) {}

SystemRegion::~SystemRegion() {
  guard_.reset();  // before the range can be mapped again for something else
  munmap(mapping_, mapping_size_);
  close(fd_);
}

absl::Status SystemRegion::CheckObjectSize() const {
  if (guard_->faulted()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "shared-memory object %s was truncated while a request used it; unregister the region "
        "and register it again",
        key_));
  }
  absl::StatusOr<uint64_t> object_size = ObjectSize(fd_, key_);
  if (!object_size.ok()) return object_size.status();
  return CheckHolds(*object_size, key_, offset_, size_);
}

}  // namespace primserve::shm
