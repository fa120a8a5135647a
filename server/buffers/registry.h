// Resident buffers: named arrays that stay on the server between requests,
// in the memory the backend gives (device memory on the CUDA backend), owned
// by the caller that made them, within quotas, dropped when idle too long.
//
// A buffer's contents are a refcounted Storage: a request (or a Write or
// Read) holds the storage it resolved until it ends, so Free, expiry or a
// replacement only takes the name away; the memory goes when the last
// holder lets go, and counts in the quotas until then.
#ifndef PRIMSERVE_SERVER_BUFFERS_REGISTRY_H_
#define PRIMSERVE_SERVER_BUFFERS_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/primitives.h"
#include "server/engine/backend.h"
#include "server/engine/idle_sweeper.h"
#include "server/engine/metrics.h"

namespace primserve::buffers {

struct Limits {
  // Bytes of all buffers together (--max_buffer_bytes).
  uint64_t max_bytes = uint64_t{1} << 30;
  // Bytes of one caller's buffers (--max_buffer_bytes_per_caller).
  uint64_t max_bytes_per_caller = uint64_t{1} << 30;
  // Named buffers one caller holds (--max_buffers_per_caller).
  uint64_t max_buffers_per_caller = 1024;
  // A buffer unused this long is dropped (--buffer_idle_seconds); infinite:
  // never.
  absl::Duration idle = absl::Hours(1);
  // BufferInfo.location: the instance's --advertise_address.
  std::string location;
};

// --max_buffer_bytes when not given: half of what the backend's resident
// memory can hold (the devices' budgets, or the host's memory), leaving the
// other half to the requests' own working memory.
uint64_t DefaultMaxBytes(const ExecutionBackend& backend);

// The rules for names: 1 to 128 characters of [A-Za-z0-9._-]. `field`
// names the request field in the INVALID_ARGUMENT message.
absl::Status CheckName(absl::string_view name, absl::string_view field);

class Usage;

// The memory of one buffer's contents; freed, and its bytes given back to
// the quotas, when the last holder lets go.
class Storage final {
 public:
  Storage(ExecutionBackend* backend, char* data, uint64_t bytes, int device,
          std::shared_ptr<Usage> usage, std::string owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  char* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }
  // The CUDA device holding it; -1: host memory.
  int device() const { return device_; }
  // Copies host bytes in at `offset` (bytes) and out again; the ranges are
  // the caller's to check.
  absl::Status Write(uint64_t offset, const char* from, size_t n) const;
  absl::Status Read(uint64_t offset, size_t n, char* to) const;
  // Copies the first `n` bytes of `from` (of the same backend) to its start,
  // where they lie (device to device on a GPU).
  absl::Status CopyFrom(const Storage& from, size_t n) const;

 private:
  ExecutionBackend* const backend_;
  char* const data_;
  const uint64_t bytes_;
  const int device_;
  const std::shared_ptr<Usage> usage_;
  const std::string owner_;
};

// A buffer as one request sees it: what it holds, kept alive by the request.
struct Contents {
  DType dtype = DType::kInt32;
  uint64_t length = 0;  // elements
  std::shared_ptr<const Storage> storage;
};

// One buffer as List gives it.
struct Info {
  std::string name;
  DType dtype = DType::kInt32;
  uint64_t length = 0;
  int device = -1;
  // Seconds until it is dropped for idleness; 0 when buffers never are.
  double expires_in_seconds = 0;
};

class Registry final {
 public:
  // Memory comes from `backend` (not owned; outlives every storage);
  // `metrics` (may be null) gets the usage, transfers and refusals.
  Registry(const Limits& limits, ExecutionBackend* backend, Metrics* metrics);
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  const Limits& limits() const { return limits_; }
  // BufferInfo.location: limits().location until SetLocation (a server
  // listening on port 0 learns its port only once it listens).
  std::string location() const;
  void SetLocation(std::string location);

  // A new buffer of `length` zeroed elements. ALREADY_EXISTS for a name
  // `owner` holds, RESOURCE_EXHAUSTED past a quota (nothing allocated),
  // INVALID_ARGUMENT for a bad name.
  absl::StatusOr<Info> Create(const std::string& owner, const std::string& name, DType dtype,
                              uint64_t length);
  // What `owner`'s buffer `name` holds now (its use restarts the idle
  // count). NOT_FOUND for a name the owner holds no buffer by.
  absl::StatusOr<Contents> Get(const std::string& owner, absl::string_view name);
  // Memory for an output of `bytes` that `owner` will Install, on device
  // `near` while it has room (-1: wherever the backend likes), not zeroed:
  // the request overwrites every byte the buffer's length exposes.
  // RESOURCE_EXHAUSTED, naming the limit, past a byte quota (counted in the
  // refusals' metric unless `count_refusal` is false: an attempt the caller
  // does without).
  absl::StatusOr<std::shared_ptr<Storage>> Allocate(const std::string& owner, uint64_t bytes,
                                                    int near = -1, bool count_refusal = true);
  // Names `contents` `name` for `owner`, replacing the buffer of that name
  // if there is one (whose holders keep the old contents).
  // RESOURCE_EXHAUSTED past --max_buffers_per_caller for a new name.
  absl::Status Install(const std::string& owner, const std::string& name, Contents contents);
  // Takes the name away; NOT_FOUND if `owner` holds none by it.
  absl::Status Free(const std::string& owner, absl::string_view name);
  // `owner`'s buffers by name.
  std::vector<Info> List(const std::string& owner);
  // Bytes `owner`'s storage holds, and its quota (the smaller of the
  // per-caller and the total limit).
  uint64_t BytesUsed(const std::string& owner) const;
  uint64_t BytesLimit() const;

  // Counts bytes moved by Write and Read RPCs.
  void RecordWritten(uint64_t bytes);
  void RecordRead(uint64_t bytes);

  // Drops every buffer idle for limits().idle or longer (the sweeper
  // calls it; tests too).
  void DropIdle();

 private:
  struct Buffer {
    Contents contents;
    absl::Time last_used;
  };
  using Owned = absl::btree_map<std::string, Buffer, std::less<>>;

  Info InfoOf(const std::string& name, const Buffer& buffer, absl::Time now) const;
  bool Expired(const Buffer& buffer, absl::Time now) const;
  // RESOURCE_EXHAUSTED naming the limit, counting the refusal.
  absl::Status Refuse(absl::string_view limit, const std::string& message);
  // Refuse for --max_buffers_per_caller.
  absl::Status TooMany();
  // Allocate, zeroed if asked.
  absl::StatusOr<std::shared_ptr<Storage>> Take(const std::string& owner, uint64_t bytes, int near,
                                                bool count_refusal, bool zeroed);

  const Limits limits_;
  ExecutionBackend* const backend_;
  Metrics* const metrics_;
  const std::shared_ptr<Usage> usage_;

  mutable absl::Mutex location_mu_;
  std::string location_ ABSL_GUARDED_BY(location_mu_);

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Owned> owners_ ABSL_GUARDED_BY(mu_);
  IdleSweeper sweeper_;  // runs DropIdle; last, so that it stops first
};

}  // namespace primserve::buffers

#endif  // PRIMSERVE_SERVER_BUFFERS_REGISTRY_H_
