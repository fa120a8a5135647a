// primload_cuda's regions: POSIX shared memory, or device memory registered
// by CUDA IPC.
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/cuda_memory_region.h"
#include "client/loadgen/regions.h"

namespace primserve {
namespace {

// A CudaMemoryRegion as a PlacementRegion; owns it.
class CudaPlacementRegion final : public PlacementRegion {
 public:
  explicit CudaPlacementRegion(std::unique_ptr<CudaMemoryRegion> region)
      : region_(std::move(region)) {}
  const std::string& name() const override { return region_->name(); }
  uint64_t size() const override { return region_->size(); }
  absl::Status Write(uint64_t offset, absl::string_view bytes) override {
    return region_->Write(offset, bytes.data(), bytes.size());
  }
  absl::Status Read(uint64_t offset, uint64_t bytes, std::string* to) const override {
    to->resize(bytes);
    return region_->Read(offset, to->data(), bytes);
  }

 private:
  const std::unique_ptr<CudaMemoryRegion> region_;
};

}  // namespace

bool CanPlaceInCuda() { return true; }

absl::StatusOr<std::unique_ptr<PlacementRegion>> CreateRegion(
    Placement placement, const std::shared_ptr<grpc::Channel>& channel, const std::string& name,
    uint64_t bytes, int cuda_device) {
  if (placement == Placement::kSystem) return CreateSystemPlacementRegion(channel, name, bytes);
  absl::StatusOr<std::unique_ptr<CudaMemoryRegion>> region =
      CudaMemoryRegion::Create(channel, name, bytes, cuda_device);
  if (!region.ok()) return region.status();
  return std::unique_ptr<PlacementRegion>(new CudaPlacementRegion(*std::move(region)));
}

}  // namespace primserve
