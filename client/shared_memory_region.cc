#include "client/shared_memory_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"

namespace primserve {
namespace {

absl::Status OsError(absl::string_view what, const std::string& key) {
  return absl::FailedPreconditionError(absl::StrCat(what, " ", key, ": ", std::strerror(errno)));
}

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Create(
    std::shared_ptr<grpc::Channel> channel, std::string name, uint64_t byte_size) {
  if (byte_size == 0) return absl::InvalidArgumentError("a region needs at least one byte");
  static std::atomic<uint64_t> created{0};
  const std::string key = absl::StrCat("/primserve-client-", getpid(), "-", created++);
  const int fd = shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return OsError("shm_open", key);
  if (ftruncate(fd, static_cast<off_t>(byte_size)) != 0) {
    absl::Status error = OsError("ftruncate", key);
    close(fd);
    shm_unlink(key.c_str());
    return error;
  }
  void* data = mmap(nullptr, byte_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the object
  if (data == MAP_FAILED) {
    absl::Status error = OsError("mmap", key);
    shm_unlink(key.c_str());
    return error;
  }
  // Owned from here: the destructor unmaps and unlinks whatever happens next.
  std::unique_ptr<SharedMemoryRegion> region(
      new SharedMemoryRegion(channel, std::move(name), key, static_cast<char*>(data), byte_size));
  v1::RegisterSystemRequest request;
  request.set_name(region->name_);
  request.set_key(key);
  request.set_byte_size(byte_size);
  v1::RegisterResponse response;
  grpc::ClientContext context;
  const grpc::Status registered =
      v1::SharedMemory::NewStub(channel)->RegisterSystem(&context, request, &response);
  if (!registered.ok()) {
    region->registered_ = false;
    return FromGrpc(registered);
  }
  return region;
}

SharedMemoryRegion::SharedMemoryRegion(std::shared_ptr<grpc::Channel> channel, std::string name,
                                       std::string key, char* data, uint64_t size)
    : channel_(std::move(channel)),
      name_(std::move(name)),
      key_(std::move(key)),
      data_(data),
      size_(size) {}

SharedMemoryRegion::~SharedMemoryRegion() {
  if (registered_) UnregisterRegion(channel_, name_);
  munmap(data_, size_);
  shm_unlink(key_.c_str());
}

absl::StatusOr<v1::SharedMemoryRef> SharedMemoryRegion::Ref(const void* at, uint64_t bytes) const {
  const uintptr_t start = reinterpret_cast<uintptr_t>(at);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data_);
  if (start < begin || start - begin > size_ || bytes > size_ - (start - begin)) {
    return absl::InvalidArgumentError(
        absl::StrCat(bytes, " bytes are not inside region '", name_, "'"));
  }
  v1::SharedMemoryRef ref;
  ref.set_region(name_);
  ref.set_offset(start - begin);
  ref.set_byte_size(bytes);
  return ref;
}

absl::Status SharedMemoryRegion::CallScan(const v1::ScanRequest& request) {
  v1::ScanResponse response;
  grpc::ClientContext context;
  return FromGrpc(v1::Primitives::NewStub(channel_)->Scan(&context, request, &response));
}

void UnregisterRegion(const std::shared_ptr<grpc::Channel>& channel, const std::string& name) {
  v1::UnregisterRequest request;
  request.set_name(name);
  v1::UnregisterResponse response;
  grpc::ClientContext context;
  v1::SharedMemory::NewStub(channel)->Unregister(&context, request, &response);
}

}  // namespace primserve
