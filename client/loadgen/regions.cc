// primload's regions: POSIX shared memory only.
#include "client/loadgen/regions.h"

#include "absl/status/status.h"

namespace primserve {

bool CanPlaceInCuda() { return false; }

absl::StatusOr<std::unique_ptr<PlacementRegion>> CreateRegion(
    Placement placement, const std::shared_ptr<grpc::Channel>& channel, const std::string& name,
    uint64_t bytes, int /*cuda_device*/) {
  if (placement != Placement::kSystem) {
    return absl::FailedPreconditionError("this primload has no CUDA");
  }
  return CreateSystemPlacementRegion(channel, name, bytes);
}

}  // namespace primserve
