// The targets of a run (the primitive's, Echo's) and the requests added to
// them, each with the Check of its responses; with --shm or --cuda_shm, the
// region that holds the requests' arrays.
#ifndef PRIMSERVE_CLIENT_LOADGEN_WORKLOAD_H_
#define PRIMSERVE_CLIENT_LOADGEN_WORKLOAD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "client/loadgen/options.h"
#include "client/loadgen/stream_target.h"
#include "client/loadgen/target.h"
#include "client/shm_placement.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"

namespace primserve {

class Workload {
 public:
  // Makes the targets `options` asks for, their calls on `channels`.
  Workload(const Options& options, const std::vector<std::shared_ptr<grpc::Channel>>& channels);

  bool verify() const { return verify_; }
  // Null when the mode does not call it.
  const Target* primitive() const { return primitive_.get(); }
  const Target* echo() const { return echo_.get(); }
  uint64_t first_request_bytes() const { return first_request_bytes_; }
  uint64_t first_response_bytes() const { return first_response_bytes_; }
  // The bytes of region the requests added take (--shm, --cuda_shm).
  uint64_t placed_bytes() const { return placed_bytes_; }
  // The shared-memory region's bytes; 0 when the arrays go inline.
  uint64_t region_bytes() const { return region_ == nullptr ? 0 : region_->size(); }

  // With --shm or --cuda_shm: writes the inputs of every request added into
  // `region` (registered, of at least placed_bytes()), points their outputs
  // there and hands them to the targets.
  absl::Status Place(std::unique_ptr<PlacementRegion> region);

  // Adds a request, the reference's response to it, and a check of the
  // responses (empty unless verify()). Its echo asks for as many bytes back
  // as the response has.
  template <typename Response>
  void Add(const google::protobuf::Message& request, const Response& expected,
           std::function<bool(const Response&)> check) {
    CheckOf check_of;
    if (verify_) {
      check_of = [check = std::move(check)](const PlacementRegion* region) {
        return Parsed<Response>([region, check](const Response& response) {
          if (region == nullptr) return check(response);
          Response answer = response;
          return ReadBack(&answer, *region).ok() && check(answer);
        });
      };
    }
    AddChecked(request, expected, std::move(check_of));
  }

 private:
  // The Check of a request's responses, given the region its placed outputs
  // are read back from (null: inline). Empty when nothing is verified.
  using CheckOf = std::function<Check(const PlacementRegion* region)>;

  void AddChecked(const google::protobuf::Message& request,
                  const google::protobuf::Message& expected, CheckOf check_of);
  // `request`'s pieces to EchoStream, each asking back its share (by
  // elements) of the `response_bytes` the primitive answers with.
  void AddEchoStream(const google::protobuf::Message& request, uint64_t response_bytes);
  // Keeps `request` until Place() puts it in the region.
  void AddPlaced(const google::protobuf::Message& request,
                 const google::protobuf::Message& expected, CheckOf check_of);

  const bool verify_;
  const Placement placement_;
  const bool in_place_;
  // Declared before the targets, so it outlives their calls.
  std::unique_ptr<PlacementRegion> region_;
  uint64_t placed_bytes_ = 0;
  std::vector<std::function<absl::Status(PlacementRegion&, uint64_t*)>> pending_;
  const uint64_t stream_piece_bytes_;
  std::unique_ptr<Target> primitive_;
  std::unique_ptr<Target> echo_;
  StreamTarget* echo_stream_ = nullptr;  // echo_, when it streams
  uint64_t first_request_bytes_ = 0;
  uint64_t first_response_bytes_ = 0;
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_WORKLOAD_H_
