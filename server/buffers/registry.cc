#include "server/buffers/registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace primserve::buffers {

// What the storage in existence holds, against the byte quotas: shared by
// the registry and every storage, so that storage outliving its name (held
// by a request) still counts until it is freed.
class Usage final {
 public:
  Usage(const Limits& limits, Metrics* metrics) : limits_(limits), metrics_(metrics) {}

  // Counts `bytes` for `owner` if both quotas have room; else
  // RESOURCE_EXHAUSTED, with the flag that has none in `*limit`.
  absl::Status Reserve(const std::string& owner, uint64_t bytes, int device,
                       absl::string_view* limit) {
    absl::MutexLock lock(&mu_);
    if (bytes > limits_.max_bytes || total_ > limits_.max_bytes - bytes) {
      *limit = "max_buffer_bytes";
      return absl::ResourceExhaustedError(absl::StrFormat(
          "a buffer of %d bytes does not fit --max_buffer_bytes=%d (%d bytes in use by all "
          "buffers)",
          bytes, limits_.max_bytes, total_));
    }
    uint64_t& mine = per_owner_[owner];
    if (bytes > limits_.max_bytes_per_caller || mine > limits_.max_bytes_per_caller - bytes) {
      *limit = "max_buffer_bytes_per_caller";
      const uint64_t in_use = mine;
      if (mine == 0) per_owner_.erase(owner);
      return absl::ResourceExhaustedError(absl::StrFormat(
          "a buffer of %d bytes does not fit --max_buffer_bytes_per_caller=%d (%d bytes in use "
          "by this caller's buffers)",
          bytes, limits_.max_bytes_per_caller, in_use));
    }
    mine += bytes;
    total_ += bytes;
    Count(device, static_cast<int64_t>(bytes), 1);
    return absl::OkStatus();
  }

  // Takes a reservation back (the storage is gone, or was never made).
  void Release(const std::string& owner, uint64_t bytes, int device) {
    absl::MutexLock lock(&mu_);
    auto it = per_owner_.find(owner);
    if (it != per_owner_.end()) {
      it->second -= std::min(it->second, bytes);
      if (it->second == 0) per_owner_.erase(it);
    }
    total_ -= std::min(total_, bytes);
    Count(device, -static_cast<int64_t>(bytes), -1);
  }

  // A reservation made before the device was known moves to it.
  void MoveDevice(uint64_t bytes, int from, int to) {
    if (from == to) return;
    absl::MutexLock lock(&mu_);
    Count(from, -static_cast<int64_t>(bytes), -1);
    Count(to, static_cast<int64_t>(bytes), 1);
  }

  uint64_t Of(const std::string& owner) const {
    absl::MutexLock lock(&mu_);
    auto it = per_owner_.find(owner);
    return it == per_owner_.end() ? 0 : it->second;
  }

 private:
  void Count(int device, int64_t bytes, int64_t count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto& [device_bytes, device_count] = per_device_[device];
    device_bytes += bytes;
    device_count += count;
    if (metrics_ != nullptr) {
      metrics_->SetBufferUsage(device, static_cast<uint64_t>(device_bytes),
                               static_cast<uint64_t>(device_count));
    }
  }

  const Limits limits_;
  Metrics* const metrics_;
  mutable absl::Mutex mu_;
  uint64_t total_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, uint64_t> per_owner_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, std::pair<int64_t, int64_t>> per_device_ ABSL_GUARDED_BY(mu_);
};

namespace {

// Where a reservation counts before the backend says which device.
constexpr int kDeviceUnknown = -1;

absl::Status NotFound(absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("no buffer named ", name,
                                          " (never created by this caller, freed, or dropped "
                                          "after --buffer_idle_seconds without use)"));
}

bool NameCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

}  // namespace

uint64_t DefaultMaxBytes(const ExecutionBackend& backend) {
  return backend.ResidentCapacity() / 2;
}

absl::Status CheckName(absl::string_view name, absl::string_view field) {
  if (name.empty() || name.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " has ", name.size(), " characters; a buffer name has 1 to 128 of [A-Za-z0-9._-]"));
  }
  for (char c : name) {
    if (!NameCharacter(c)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s holds the character 0x%02x; a buffer name has 1 to 128 of [A-Za-z0-9._-]", field,
          static_cast<unsigned char>(c)));
    }
  }
  return absl::OkStatus();
}

Storage::Storage(ExecutionBackend* backend, char* data, uint64_t bytes, int device,
                 std::shared_ptr<Usage> usage, std::string owner)
    : backend_(backend),
      data_(data),
      bytes_(bytes),
      device_(device),
      usage_(std::move(usage)),
      owner_(std::move(owner)) {}

Storage::~Storage() {
  backend_->FreeResident(data_, bytes_);
  usage_->Release(owner_, bytes_, device_);
}

absl::Status Storage::Write(uint64_t offset, const char* from, size_t n) const {
  return backend_->WriteResident(data_ + offset, from, n);
}

absl::Status Storage::Read(uint64_t offset, size_t n, char* to) const {
  return backend_->ReadResident(to, data_ + offset, n);
}

absl::Status Storage::CopyFrom(const Storage& from, size_t n) const {
  return backend_->CopyResident(data_, from.data_, n);
}

Registry::Registry(const Limits& limits, ExecutionBackend* backend, Metrics* metrics)
    : limits_(limits),
      backend_(backend),
      metrics_(metrics),
      usage_(std::make_shared<Usage>(limits, metrics)),
      location_(limits.location),
      // Idle buffers are refused as soon as they expire (Get checks); the
      // sweeper gives their memory back when no request comes to find them.
      sweeper_(limits_.idle, [this] { DropIdle(); }) {}

absl::Status Registry::Refuse(absl::string_view limit, const std::string& message) {
  if (metrics_ != nullptr) metrics_->BufferQuotaRefused(limit);
  return absl::ResourceExhaustedError(message);
}

absl::Status Registry::TooMany() {
  return Refuse("max_buffers_per_caller",
                absl::StrCat("this caller holds ", limits_.max_buffers_per_caller,
                             " buffers, --max_buffers_per_caller=", limits_.max_buffers_per_caller,
                             "; Free one first"));
}

bool Registry::Expired(const Buffer& buffer, absl::Time now) const {
  return limits_.idle != absl::InfiniteDuration() && now - buffer.last_used >= limits_.idle;
}

Info Registry::InfoOf(const std::string& name, const Buffer& buffer, absl::Time now) const {
  Info info;
  info.name = name;
  info.dtype = buffer.contents.dtype;
  info.length = buffer.contents.length;
  info.device = buffer.contents.storage->device();
  if (limits_.idle != absl::InfiniteDuration()) {
    info.expires_in_seconds =
        std::max(0.0, absl::ToDoubleSeconds(limits_.idle - (now - buffer.last_used)));
  }
  return info;
}

absl::StatusOr<std::shared_ptr<Storage>> Registry::Allocate(const std::string& owner,
                                                            uint64_t bytes, int near,
                                                            bool count_refusal) {
  return Take(owner, bytes, near, count_refusal, /*zeroed=*/false);
}

absl::StatusOr<std::shared_ptr<Storage>> Registry::Take(const std::string& owner, uint64_t bytes,
                                                        int near, bool count_refusal,
                                                        bool zeroed) {
  absl::string_view limit;
  if (absl::Status room = usage_->Reserve(owner, bytes, kDeviceUnknown, &limit); !room.ok()) {
    if (!count_refusal) return room;
    return Refuse(limit, std::string(room.message()));
  }
  int device = near;
  absl::StatusOr<char*> data = backend_->AllocateResident(bytes, &device, zeroed);
  if (!data.ok()) {
    usage_->Release(owner, bytes, kDeviceUnknown);
    return data.status();
  }
  usage_->MoveDevice(bytes, kDeviceUnknown, device);
  return std::make_shared<Storage>(backend_, *data, bytes, device, usage_, owner);
}

std::string Registry::location() const {
  absl::MutexLock lock(&location_mu_);
  return location_;
}

void Registry::SetLocation(std::string location) {
  absl::MutexLock lock(&location_mu_);
  location_ = std::move(location);
}

absl::StatusOr<Info> Registry::Create(const std::string& owner, const std::string& name,
                                      DType dtype, uint64_t length) {
  if (absl::Status named = CheckName(name, "name"); !named.ok()) return named;
  const uint64_t element_size = DTypeSize(dtype);
  if (length > UINT64_MAX / element_size) {
    return absl::InvalidArgumentError(absl::StrCat("length ", length, " overflows"));
  }
  {
    // Refused before anything is allocated; Install checks again (a Create
    // of the same name may race this one).
    absl::MutexLock lock(&mu_);
    auto it = owners_.find(owner);
    if (it != owners_.end()) {
      auto found = it->second.find(name);
      if (found != it->second.end() && !Expired(found->second, absl::Now())) {
        return absl::AlreadyExistsError(absl::StrCat("this caller already holds a buffer named ",
                                                     name, "; Free it or pick another name"));
      }
      if (found == it->second.end() && it->second.size() >= limits_.max_buffers_per_caller) {
        return TooMany();
      }
    }
  }
  absl::StatusOr<std::shared_ptr<Storage>> storage =
      Take(owner, length * element_size, /*near=*/-1, /*count_refusal=*/true, /*zeroed=*/true);
  if (!storage.ok()) return storage.status();
  Contents contents{dtype, length, *std::move(storage)};
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  Owned& owned = owners_[owner];
  auto [it, inserted] = owned.try_emplace(name, Buffer{contents, now});
  if (!inserted) {
    if (!Expired(it->second, now)) {
      return absl::AlreadyExistsError(absl::StrCat("this caller already holds a buffer named ",
                                                   name, "; Free it or pick another name"));
    }
    it->second = Buffer{contents, now};
  }
  return InfoOf(name, it->second, now);
}

absl::StatusOr<Contents> Registry::Get(const std::string& owner, absl::string_view name) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  auto it = owners_.find(owner);
  if (it != owners_.end()) {
    auto found = it->second.find(name);
    if (found != it->second.end() && !Expired(found->second, now)) {
      found->second.last_used = now;
      return found->second.contents;
    }
  }
  return NotFound(name);
}

absl::Status Registry::Install(const std::string& owner, const std::string& name,
                               Contents contents) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  Owned& owned = owners_[owner];
  auto it = owned.find(name);
  if (it == owned.end()) {
    if (owned.size() >= limits_.max_buffers_per_caller) {
      if (owned.empty()) owners_.erase(owner);
      return TooMany();
    }
    owned.emplace(name, Buffer{std::move(contents), now});
  } else {
    it->second = Buffer{std::move(contents), now};
  }
  return absl::OkStatus();
}

absl::Status Registry::Free(const std::string& owner, absl::string_view name) {
  std::shared_ptr<const Storage> released;  // freed outside the lock
  {
    absl::MutexLock lock(&mu_);
    auto it = owners_.find(owner);
    if (it == owners_.end()) return NotFound(name);
    auto found = it->second.find(name);
    if (found == it->second.end() || Expired(found->second, absl::Now())) return NotFound(name);
    released = std::move(found->second.contents.storage);
    it->second.erase(found);
    if (it->second.empty()) owners_.erase(it);
  }
  return absl::OkStatus();
}

std::vector<Info> Registry::List(const std::string& owner) {
  const absl::Time now = absl::Now();
  std::vector<Info> infos;
  absl::MutexLock lock(&mu_);
  auto it = owners_.find(owner);
  if (it == owners_.end()) return infos;
  for (const auto& [name, buffer] : it->second) {
    if (!Expired(buffer, now)) infos.push_back(InfoOf(name, buffer, now));
  }
  return infos;
}

uint64_t Registry::BytesUsed(const std::string& owner) const { return usage_->Of(owner); }

uint64_t Registry::BytesLimit() const {
  return std::min(limits_.max_bytes, limits_.max_bytes_per_caller);
}

void Registry::RecordWritten(uint64_t bytes) {
  if (metrics_ != nullptr) metrics_->BufferBytesMoved("written", bytes);
}

void Registry::RecordRead(uint64_t bytes) {
  if (metrics_ != nullptr) metrics_->BufferBytesMoved("read", bytes);
}

void Registry::DropIdle() {
  std::vector<std::shared_ptr<const Storage>> released;  // freed outside the lock
  {
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    for (auto owner = owners_.begin(); owner != owners_.end();) {
      Owned& owned = owner->second;
      for (auto it = owned.begin(); it != owned.end();) {
        if (Expired(it->second, now)) {
          released.push_back(std::move(it->second.contents.storage));
          it = owned.erase(it);
        } else {
          ++it;
        }
      }
      if (owned.empty()) {
        owners_.erase(owner++);
      } else {
        ++owner;
      }
    }
  }
  if (metrics_ != nullptr && !released.empty()) metrics_->BuffersDroppedIdle(released.size());
}

}  // namespace primserve::buffers
