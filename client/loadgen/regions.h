// The registered region that --shm or --cuda_shm puts the requests' arrays
// in. Two builds: regions.cc (primload, CPU-only) and cuda_regions.cc
// (primload_cuda, which links the CUDA runtime for CUDA IPC regions).
#ifndef PRIMSERVE_CLIENT_LOADGEN_REGIONS_H_
#define PRIMSERVE_CLIENT_LOADGEN_REGIONS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/loadgen/options.h"
#include "client/shm_placement.h"
#include "grpcpp/channel.h"

namespace primserve {

// Whether this build places arrays in device memory (--cuda_shm).
bool CanPlaceInCuda();

// A region of `bytes` of the kind `placement` names (not kInline),
// registered on `channel` under `name`; `cuda_device`: the GPU of a CUDA one.
absl::StatusOr<std::unique_ptr<PlacementRegion>> CreateRegion(
    Placement placement, const std::shared_ptr<grpc::Channel>& channel, const std::string& name,
    uint64_t bytes, int cuda_device);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_REGIONS_H_
