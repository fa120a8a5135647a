// Mapped shared memory that cannot kill the server: a client may truncate
// its object while a request reads or writes the mapping, and touching a
// page past the object's end raises SIGBUS. While a range is guarded, a
// SIGBUS inside it puts a private zero page in place of the faulting one (the
// access then completes, on zeros) and marks the range faulted; the request
// using it sees faulted() and fails alone (FAILED_PRECONDITION). A SIGBUS
// anywhere else goes to the handler that was there before.
#ifndef PRIMSERVE_SERVER_SHM_FAULT_GUARD_H_
#define PRIMSERVE_SERVER_SHM_FAULT_GUARD_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"

namespace primserve::shm {

class FaultGuard final {
 public:
  // Guards the mapping [begin, begin + size) (page-aligned begin) until
  // destroyed; installs the process's SIGBUS handler on first use.
  // RESOURCE_EXHAUSTED when kMaxGuarded ranges are guarded already;
  // INTERNAL if the handler cannot be installed.
  static absl::StatusOr<std::unique_ptr<FaultGuard>> Guard(void* begin, size_t size);
  ~FaultGuard();
  FaultGuard(const FaultGuard&) = delete;
  FaultGuard& operator=(const FaultGuard&) = delete;

  // Whether an access to the range has faulted since it was guarded: its
  // pages no longer all show the object (some are private zeros), for good.
  bool faulted() const;

  // Ranges guarded at once (a fixed table the handler reads without locks).
  static constexpr int kMaxGuarded = 4096;

 private:
  explicit FaultGuard(int slot) : slot_(slot) {}
  const int slot_;
};

}  // namespace primserve::shm

#endif  // PRIMSERVE_SERVER_SHM_FAULT_GUARD_H_
