#include "server/rpc/call_context.h"

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/engine/admission.h"

namespace primserve {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Time DeadlineOf(const grpc::ServerContextBase& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

std::string CallerOf(const grpc::ServerContextBase& context,
                     const std::string& caller_header) {
  if (!caller_header.empty()) {
    const auto& metadata = context.client_metadata();
    if (auto it = metadata.find(caller_header); it != metadata.end()) {
      return absl::StrCat(caller_header, ":", absl::string_view(it->second.data(),
                                                                it->second.size()));
    }
  }
  return PeerKey(context.peer());
}

std::unique_ptr<shm::RequestMemory> RequestMemoryOf(const shm::Registry* registry,
                                                    buffers::Registry* buffers,
                                                    const std::string& owner) {
  // Shared by every request (a Status copy shares its message).
  static const absl::Status* const off =
      new absl::Status(absl::FailedPreconditionError("shared memory is off (--shared_memory)"));
  auto memory = registry != nullptr ? std::make_unique<shm::RequestMemory>(registry)
                                    : std::make_unique<shm::RequestMemory>(*off);
  if (buffers != nullptr) {
    memory->UseBuffers(std::make_unique<buffers::RequestBuffers>(buffers, owner));
  }
  return memory;
}

}  // namespace primserve
