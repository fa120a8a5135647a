#include "server/shm/registry.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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
      region_(std::move(region)),
      usage_(std::move(usage)),
      pinned_by_(pinned_by) {}

Entry::~Entry() {
  if (pinned_by_ != nullptr) pinned_by_->UnpinHostMemory(region_->data());
  absl::MutexLock lock(&usage_->mu);
  --usage_->regions;
  usage_->bytes -= region_->size();
}

Lease::Lease(std::shared_ptr<Entry> entry) : entry_(std::move(entry)) { ++entry_->leases(); }

Lease::~Lease() {
  if (entry_ != nullptr) --entry_->leases();
}

absl::StatusOr<char*> Lease::Range(uint64_t offset, uint64_t byte_size, size_t element_size,
                                   absl::string_view field) const {
  const uint64_t size = entry_->region().size();
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
  char* data = entry_->region().data() + offset;
  if (offset % element_size != 0 || reinterpret_cast<uintptr_t>(data) % element_size != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.offset %d is not aligned to the %d-byte element (region '%s' starts at byte %d of "
        "its object)",
        field, offset, element_size, name(), entry_->region().offset()));
  }
  return data;
}

absl::Status Lease::CheckObjectSize() const {
  absl::Status holds = entry_->region().CheckObjectSize();
  if (holds.ok()) return holds;
  return absl::FailedPreconditionError(absl::StrCat("region '", name(), "': ", holds.message()));
}

Registry::Registry(const RegistryOptions& options, ExecutionBackend* backend)
    : options_(options), backend_(backend) {}

absl::Status Registry::RegisterSystem(const std::string& name, const std::string& key,
                                      uint64_t offset, uint64_t byte_size) {
  if (name.empty()) return absl::InvalidArgumentError("name is empty: a region needs a name");
  absl::MutexLock lock(&mu_);
  if (regions_.contains(name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("a shared-memory region named '", name, "' is already registered"));
  }
  {
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
  }
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
    list.push_back(RegionInfo{region_name, "system", entry->region().key(),
                              entry->region().offset(), entry->region().size(),
                              entry->leases().load()});
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
