#include "server/shm/registry.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#define PRIMSERVE_SHM_RETURN_IF_ERROR(expr)  \
  do {                                        \
    if (absl::Status s_ = (expr); !s_.ok()) { \
      return s_;                              \
    }                                         \
  } while (0)

namespace primserve::shm {
namespace {

absl::Status Unknown(absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("no shared-memory region named '", name,
                                          "' is registered"));
}

}  // namespace

Entry::Entry(std::string name, std::unique_ptr<SystemRegion> region, std::shared_ptr<Usage> usage,
             ExecutionBackend* pinned_by)
    : name_(std::move(name)),
      system_(std::move(region)),
      data_(system_->data()),
      size_(system_->size()),
      device_(-1),
      usage_(std::move(usage)),
      pinned_by_(pinned_by) {}

Entry::Entry(std::string name, char* data, uint64_t size, int device,
             std::shared_ptr<Usage> usage, ExecutionBackend* opened_by)
    : name_(std::move(name)),
      data_(data),
      size_(size),
      device_(device),
      usage_(std::move(usage)),
      opened_by_(opened_by) {}

Entry::~Entry() {
  if (pinned_by_ != nullptr) pinned_by_->UnpinHostMemory(data_);
  if (opened_by_ != nullptr) opened_by_->CloseIpcMemory(data_);
  absl::MutexLock lock(&usage_->mu);
  --usage_->regions;
  usage_->bytes -= size_;
}

Lease::Lease(std::shared_ptr<Entry> entry) : entry_(std::move(entry)) {
  ++entry_->leases();
  entry_->last_used() = absl::ToUnixNanos(absl::Now());
}

Lease::~Lease() {
  if (entry_ == nullptr) return;
  // The idle time counts from the end of the last request that used it.
  entry_->last_used() = absl::ToUnixNanos(absl::Now());
  --entry_->leases();
}

absl::StatusOr<char*> Lease::Range(uint64_t offset, uint64_t byte_size, size_t element_size,
                                   absl::string_view field) const {
  const uint64_t size = entry_->size();
  if (offset > size || byte_size > size - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: offset %d + byte_size %d is past the end of region '%s' (%d bytes)", field, offset,
        byte_size, name(), size));
  }
  if (byte_size % element_size != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.byte_size %d is not a multiple of the %d-byte element", field, byte_size,
        element_size));
  }
  char* data = entry_->data() + offset;
  if (offset % element_size != 0 || reinterpret_cast<uintptr_t>(data) % element_size != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.offset %d is not aligned to the %d-byte element (region '%s' starts at byte %d of "
        "its object)",
        field, offset, element_size, name(),
        entry_->system() != nullptr ? entry_->system()->offset() : 0));
  }
  return data;
}

absl::Status Lease::CheckObjectSize() const {
  if (entry_->system() == nullptr) return absl::OkStatus();
  absl::Status holds = entry_->system()->CheckObjectSize();
  if (holds.ok()) return holds;
  return absl::FailedPreconditionError(absl::StrCat("region '", name(), "': ", holds.message()));
}

absl::Status Lease::Write(char* to, const char* from, size_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  if (entry_->opened_by() != nullptr) return entry_->opened_by()->CopyToIpcMemory(to, from, bytes);
  std::memcpy(to, from, bytes);
  return absl::OkStatus();
}

Registry::Registry(const RegistryOptions& options, ExecutionBackend* backend)
    : options_(options),
      backend_(backend),
      sweeper_(options_.idle, [this] { DropIdle(); }) {}

void Registry::DropIdle() {
  // Unmapped after the lock, as Unregister does.
  std::vector<std::shared_ptr<Entry>> gone;
  {
    const int64_t now = absl::ToUnixNanos(absl::Now());
    absl::MutexLock lock(&mu_);
    for (auto it = regions_.begin(); it != regions_.end();) {
      Entry& entry = *it->second;
      if (entry.leases() == 0 &&
          absl::Nanoseconds(now - entry.last_used().load()) >= options_.idle) {
        gone.push_back(std::move(it->second));
        it = regions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (!options_.dropped_idle) return;
  for (const std::shared_ptr<Entry>& entry : gone) options_.dropped_idle(entry->name());
}

absl::Status Registry::CheckRoom(const std::string& name, uint64_t byte_size) const {
  if (regions_.contains(name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("a shared-memory region named '", name, "' is already registered"));
  }
  absl::MutexLock usage_lock(&usage_->mu);
  if (usage_->regions + 1 > options_.max_regions) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%d shared-memory regions are mapped, the server's limit "
        "(--max_shared_memory_regions); unregister one first",
        usage_->regions));
  }
  if (byte_size > options_.max_bytes || usage_->bytes > options_.max_bytes - byte_size) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%d more bytes of shared memory would pass the server's limit of %d "
        "(--max_shared_memory_bytes; %d mapped)",
        byte_size, options_.max_bytes, usage_->bytes));
  }
  return absl::OkStatus();
}

absl::Status Registry::RegisterSystem(const std::string& name, const std::string& key,
                                      uint64_t offset, uint64_t byte_size) {
  if (name.empty()) return absl::InvalidArgumentError("name is empty: a region needs a name");
  absl::MutexLock lock(&mu_);
  PRIMSERVE_SHM_RETURN_IF_ERROR(CheckRoom(name, byte_size));
  absl::StatusOr<std::unique_ptr<SystemRegion>> region =
      SystemRegion::Map(key, offset, byte_size);
  if (!region.ok()) return region.status();
  {
    absl::MutexLock usage_lock(&usage_->mu);
    ++usage_->regions;
    usage_->bytes += byte_size;
  }
  // Unpinned memory still serves, through the backend's staging copies.
  const bool pinned =
      backend_ != nullptr && backend_->PinHostMemory((*region)->data(), (*region)->size()).ok();
  regions_[name] = std::make_shared<Entry>(name, *std::move(region), usage_,
                                           pinned ? backend_ : nullptr);
  return absl::OkStatus();
}

absl::Status Registry::RegisterCuda(const std::string& name, absl::string_view raw_handle,
                                    int device, uint64_t byte_size) {
  if (name.empty()) return absl::InvalidArgumentError("name is empty: a region needs a name");
  if (raw_handle.size() != kCudaIpcHandleBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "raw_handle has %d bytes; a cudaIpcMemHandle_t has %d", raw_handle.size(),
        kCudaIpcHandleBytes));
  }
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("device_id ", device, " is negative"));
  }
  if (byte_size == 0) return absl::InvalidArgumentError("byte_size is 0: a region needs a byte");
  if (backend_ == nullptr) {
    return absl::FailedPreconditionError("this server has no backend to open CUDA memory with");
  }
  absl::MutexLock lock(&mu_);
  PRIMSERVE_SHM_RETURN_IF_ERROR(CheckRoom(name, byte_size));
  absl::StatusOr<char*> data = backend_->OpenIpcMemory(raw_handle, device, byte_size);
  if (!data.ok()) return data.status();
  {
    absl::MutexLock usage_lock(&usage_->mu);
    ++usage_->regions;
    usage_->bytes += byte_size;
  }
  regions_[name] = std::make_shared<Entry>(name, *data, byte_size, device, usage_, backend_);
  return absl::OkStatus();
}

absl::Status Registry::Unregister(const std::string& name) {
  // Entries leave the map under the lock and are unmapped after it (those
  // leased, when their last lease goes).
  absl::btree_map<std::string, std::shared_ptr<Entry>> gone;
  absl::MutexLock lock(&mu_);
  if (name.empty()) {
    gone.swap(regions_);
    return absl::OkStatus();
  }
  auto it = regions_.find(name);
  if (it == regions_.end()) return Unknown(name);
  gone.insert(regions_.extract(it));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RegionInfo>> Registry::List(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  std::vector<RegionInfo> list;
  for (const auto& [region_name, entry] : regions_) {
    if (!name.empty() && region_name != name) continue;
    const SystemRegion* system = entry->system();
    list.push_back(RegionInfo{region_name, system != nullptr ? "system" : "cuda",
                              system != nullptr ? system->key() : "",
                              system != nullptr ? system->offset() : 0, entry->size(),
                              entry->leases().load(), entry->device()});
  }
  if (!name.empty() && list.empty()) return Unknown(name);
  return list;
}

absl::StatusOr<Lease> Registry::Acquire(absl::string_view name) const {
  std::shared_ptr<Entry> entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(name);
    if (it == regions_.end()) return Unknown(name);
    entry = it->second;
  }
  Lease lease(std::move(entry));
  if (absl::Status holds = lease.CheckObjectSize(); !holds.ok()) return holds;
  return lease;
}

}  // namespace primserve::shm
