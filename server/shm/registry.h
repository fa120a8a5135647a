// The named shared-memory regions clients have registered, and the leases
// requests hold on them.
//
// A region is reference-counted: a request takes a Lease when it resolves a
// ref and drops it once its answer is written. Unregister takes the name away
// at once (later requests get NOT_FOUND) but the mapping stays until the last
// lease on it is dropped: unregistering a region in use waits for the
// requests using it, it never refuses, and never pulls memory from under
// them. A region counts against the limits until it is unmapped.
#ifndef PRIMSERVE_SERVER_SHM_REGISTRY_H_
#define PRIMSERVE_SERVER_SHM_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/backend.h"
#include "server/engine/idle_sweeper.h"
#include "server/shm/system_region.h"

namespace primserve::shm {

struct RegistryOptions {
  // Most regions mapped at once (--max_shared_memory_regions); more are
  // RESOURCE_EXHAUSTED. Each holds a file descriptor and a mapping.
  uint64_t max_regions = 64;
  // Most bytes of all mapped regions together (--max_shared_memory_bytes);
  // more are RESOURCE_EXHAUSTED. The pages are the shm objects', not the
  // server's, but they are address space the server maps.
  uint64_t max_bytes = uint64_t{64} << 30;
  // A region that no request has used for this long is unregistered
  // (--shared_memory_idle_seconds): its client most likely exited without
  // unregistering it, and it counts against the limits. Infinite: never.
  absl::Duration idle = absl::Hours(1);
  // Told the name of each region so dropped (the server logs it and counts
  // it in a metric); may be empty.
  std::function<void(const std::string& name)> dropped_idle;
};

// One region as Status lists it.
struct RegionInfo {
  std::string name;
  std::string kind;  // "system" or "cuda"
  std::string key;   // empty for a CUDA region
  uint64_t offset = 0;
  uint64_t byte_size = 0;
  uint64_t requests_in_flight = 0;
  int device = -1;  // a CUDA region's device; -1 for a system region
};

// The bytes of a cudaIpcMemHandle_t (CUDA_IPC_HANDLE_SIZE).
inline constexpr size_t kCudaIpcHandleBytes = 64;

// What the registered regions use together, shared with the regions so that
// one unmapped after the registry is gone still gives its share back.
struct Usage {
  absl::Mutex mu;
  uint64_t regions ABSL_GUARDED_BY(mu) = 0;
  uint64_t bytes ABSL_GUARDED_BY(mu) = 0;
};

// A registered region's memory, alive while it is registered or leased:
// a mapped range of a shm object (system), or device memory a backend opened
// from a CUDA IPC handle (cuda).
class Entry final {
 public:
  // A system region. `pinned_by`: the backend that pinned its memory, or null.
  Entry(std::string name, std::unique_ptr<SystemRegion> region, std::shared_ptr<Usage> usage,
        ExecutionBackend* pinned_by);
  // A CUDA region of `size` bytes at `data` on `device`, which `opened_by`
  // opened (and closes when the entry goes).
  Entry(std::string name, char* data, uint64_t size, int device, std::shared_ptr<Usage> usage,
        ExecutionBackend* opened_by);
  ~Entry();  // unpins and unmaps (or closes), and gives its share of the limits back

  const std::string& name() const { return name_; }
  char* data() const { return data_; }
  uint64_t size() const { return size_; }
  // -1 for a system region (host memory); else the CUDA device its memory is on.
  int device() const { return device_; }
  // Null for a CUDA region.
  const SystemRegion* system() const { return system_.get(); }
  // The backend that opened a CUDA region (for copies into it).
  ExecutionBackend* opened_by() const { return opened_by_; }
  std::atomic<uint64_t>& leases() { return leases_; }
  // When a request last took or let go of a lease on it (or it was
  // registered), in absl::ToUnixNanos.
  std::atomic<int64_t>& last_used() { return last_used_; }

 private:
  const std::string name_;
  const std::unique_ptr<SystemRegion> system_;
  char* const data_;
  const uint64_t size_;
  const int device_;
  const std::shared_ptr<Usage> usage_;
  ExecutionBackend* const pinned_by_ = nullptr;
  ExecutionBackend* const opened_by_ = nullptr;
  std::atomic<uint64_t> leases_{0};
  std::atomic<int64_t> last_used_{absl::ToUnixNanos(absl::Now())};
};

// A request's hold on one region: the region stays mapped while it lives.
class Lease final {
 public:
  explicit Lease(std::shared_ptr<Entry> entry);
  ~Lease();
  Lease(Lease&& other) noexcept = default;
  Lease& operator=(Lease&&) = delete;
  Lease(const Lease&) = delete;

  const std::string& name() const { return entry_->name(); }
  uint64_t size() const { return entry_->size(); }
  // -1 for host memory (a system region), else the device of a CUDA region.
  int device() const { return entry_->device(); }

  // The bytes [offset, offset + byte_size) of the region, for an array of
  // elements of `element_size` bytes. INVALID_ARGUMENT, naming `field`,
  // unless the range lies inside the region, holds whole elements and starts
  // element-aligned in memory.
  absl::StatusOr<char*> Range(uint64_t offset, uint64_t byte_size, size_t element_size,
                              absl::string_view field) const;
  // FAILED_PRECONDITION, naming the region, if its object was truncated (a
  // CUDA region has no object: always OK).
  absl::Status CheckObjectSize() const;
  // Writes `bytes` from host memory at `from` to `to`, a place in this
  // region: a memcpy for a system region, a copy to the device for a CUDA one.
  absl::Status Write(char* to, const char* from, size_t bytes) const;

 private:
  std::shared_ptr<Entry> entry_;  // null once moved from
};

class Registry final {
 public:
  // Regions are pinned by `backend` (ExecutionBackend::PinHostMemory) while
  // mapped, when it is not null; it must outlive every region.
  explicit Registry(const RegistryOptions& options, ExecutionBackend* backend = nullptr);
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Maps [offset, offset + byte_size) of the shm object `key` under `name`
  // (see SystemRegion::Map for its errors). ALREADY_EXISTS for a name taken,
  // RESOURCE_EXHAUSTED past the limits, INVALID_ARGUMENT for an empty name.
  absl::Status RegisterSystem(const std::string& name, const std::string& key, uint64_t offset,
                              uint64_t byte_size);
  // Opens device memory another process exported (`raw_handle`, the 64
  // bytes of a cudaIpcMemHandle_t) on `device` through the backend
  // (ExecutionBackend::OpenIpcMemory, whose errors it returns), as `name`.
  // INVALID_ARGUMENT for an empty name, a zero byte_size, a handle of
  // another size or a negative device; ALREADY_EXISTS for a name taken;
  // RESOURCE_EXHAUSTED past the limits; FAILED_PRECONDITION without a
  // backend that opens CUDA memory.
  absl::Status RegisterCuda(const std::string& name, absl::string_view raw_handle, int device,
                            uint64_t byte_size);
  // Takes the name away (every name for ""); NOT_FOUND for an unknown one.
  absl::Status Unregister(const std::string& name);
  // The region of that name, or all ("") by name; NOT_FOUND for an unknown one.
  absl::StatusOr<std::vector<RegionInfo>> List(const std::string& name) const;
  // A lease on the named region: NOT_FOUND for an unknown name,
  // FAILED_PRECONDITION if its object has been truncated below the region.
  absl::StatusOr<Lease> Acquire(absl::string_view name) const;

 private:
  // ALREADY_EXISTS for a name taken, RESOURCE_EXHAUSTED past the limits with
  // `byte_size` more.
  absl::Status CheckRoom(const std::string& name, uint64_t byte_size) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Unregisters every region unused (no lease) for options_.idle.
  void DropIdle();

  const RegistryOptions options_;
  ExecutionBackend* const backend_;
  const std::shared_ptr<Usage> usage_ = std::make_shared<Usage>();
  mutable absl::Mutex mu_;
  absl::btree_map<std::string, std::shared_ptr<Entry>> regions_ ABSL_GUARDED_BY(mu_);
  IdleSweeper sweeper_;  // runs DropIdle; last, so that it stops first
};

}  // namespace primserve::shm

#endif  // PRIMSERVE_SERVER_SHM_REGISTRY_H_
