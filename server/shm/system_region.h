// A mapped range of a POSIX shared-memory object (shm_open + mmap), the
// memory behind a "system" region of the SharedMemory service.
#ifndef PRIMSERVE_SERVER_SHM_SYSTEM_REGION_H_
#define PRIMSERVE_SERVER_SHM_SYSTEM_REGION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/shm/fault_guard.h"

namespace primserve::shm {

class SystemRegion final {
 public:
  // Opens `key` read-write and maps [offset, offset + byte_size) of it,
  // shared with the object's other users. INVALID_ARGUMENT for an empty key
  // or range, or one that overflows; FAILED_PRECONDITION, with the OS's
  // message, when the object cannot be opened or mapped or ends before
  // offset + byte_size.
  static absl::StatusOr<std::unique_ptr<SystemRegion>> Map(const std::string& key, uint64_t offset,
                                                          uint64_t byte_size);
  ~SystemRegion();  // unmaps and closes
  SystemRegion(const SystemRegion&) = delete;
  SystemRegion& operator=(const SystemRegion&) = delete;

  // The range's first byte; the mapping starts at the page holding it.
  char* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& key() const { return key_; }
  uint64_t offset() const { return offset_; }

  // FAILED_PRECONDITION if the object no longer holds the whole range (its
  // owner truncated it), or if it was truncated while a request used the
  // mapping (FaultGuard: that request read or wrote zeros instead; the
  // region stays refused until registered again). Every request checks
  // before it uses the region, and again before it answers.
  absl::Status CheckObjectSize() const;

 private:
  SystemRegion(std::string key, uint64_t offset, uint64_t size, int fd, void* mapping,
               size_t mapping_size, std::unique_ptr<FaultGuard> guard);

  const std::string key_;
  const uint64_t offset_;
  const uint64_t size_;
  const int fd_;  // kept open for CheckObjectSize's fstat
  void* const mapping_;
  const size_t mapping_size_;
  char* const data_;
  std::unique_ptr<FaultGuard> guard_;  // over the whole mapping
};

}  // namespace primserve::shm

#endif  // PRIMSERVE_SERVER_SHM_SYSTEM_REGION_H_
