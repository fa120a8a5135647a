// Puts a request's arrays in a registered region instead of in the message:
// what primctl --shm and primload --shm/--cuda_shm do. Inputs are written to
// the region and named by Array.shm; outputs get room there through the
// request's output_location; ReadBack copies placed outputs of a response
// back into its arrays' data, so the caller prints or checks it as an inline
// answer. Generic over every request and response (protobuf reflection).
#ifndef PRIMSERVE_CLIENT_SHM_PLACEMENT_H_
#define PRIMSERVE_CLIENT_SHM_PLACEMENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/shared_memory_region.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {

// A registered region, system or CUDA, as the placement sees it.
class PlacementRegion {
 public:
  virtual ~PlacementRegion() = default;
  virtual const std::string& name() const = 0;
  virtual uint64_t size() const = 0;
  // Copies into and out of [offset, offset + bytes) of the region.
  virtual absl::Status Write(uint64_t offset, absl::string_view bytes) = 0;
  virtual absl::Status Read(uint64_t offset, uint64_t bytes, std::string* to) const = 0;
};

// A fresh POSIX shared-memory region of `bytes` (SharedMemoryRegion::Create,
// whose errors it returns) registered on `channel` under `name`, as a
// PlacementRegion. Until the process ends, SIGINT and SIGTERM remove its shm
// object before they take their default action, so an interrupted tool
// leaves nothing in /dev/shm: one such region at a time.
absl::StatusOr<std::unique_ptr<PlacementRegion>> CreateSystemPlacementRegion(
    std::shared_ptr<grpc::Channel> channel, std::string name, uint64_t bytes);

// Where placed arrays start: every offset is a multiple of this.
inline constexpr uint64_t kPlacementAlignment = 64;

inline uint64_t AlignPlacement(uint64_t bytes) {
  return (bytes + kPlacementAlignment - 1) / kPlacementAlignment * kPlacementAlignment;
}

// Room for each output, by OutputLocation field name (values, indices,
// lengths, keys); a zero entry is not placed (that output comes back inline).
using OutputRoom = std::map<std::string, uint64_t>;

// The room `expected` (a response to the request) takes: each Array's data
// size, under its OutputLocation name (a Scan's `output` is `values`).
OutputRoom RoomOf(const google::protobuf::Message& expected);

// The room each output of `request` may take before its answer is known:
// the most that answer can hold (primctl --shm).
OutputRoom RoomFor(const v1::ScanRequest& request);
OutputRoom RoomFor(const v1::ReduceRequest& request);
OutputRoom RoomFor(const v1::SelectRequest& request);
OutputRoom RoomFor(const v1::UniqueRequest& request);
OutputRoom RoomFor(const v1::RunLengthEncodeRequest& request);
OutputRoom RoomFor(const v1::ReduceByKeyRequest& request);
OutputRoom RoomFor(const v1::AggregateByKeyRequest& request);
OutputRoom RoomFor(const v1::SortRequest& request);

// The region bytes PlaceRequest takes for `request` with `room` (inputs'
// data and outputs, each aligned; an in-place scan's output takes none).
uint64_t PlacedBytes(const google::protobuf::Message& request, const OutputRoom& room,
                     bool in_place);

// Writes each non-empty input Array of `request` into `region` from
// `*cursor` on, replaces its data with a ref there, and points the request's
// output_location at room for each output in `room`; advances `*cursor`.
// `in_place`: a Scan's output goes over its input (`room` is then ignored).
absl::Status PlaceRequest(google::protobuf::Message* request, const OutputRoom& room,
                          bool in_place, PlacementRegion& region, uint64_t* cursor);

// Replaces the `shm` of each Array of `response` with the bytes it names,
// read from `region` (FAILED_PRECONDITION for a ref to another region).
absl::Status ReadBack(google::protobuf::Message* response, const PlacementRegion& region);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_SHM_PLACEMENT_H_
