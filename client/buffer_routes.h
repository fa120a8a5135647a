// Where calls that name a resident buffer go when a client spreads its calls
// over several primserve instances (a target naming several servers, or a
// dns:/// name). A buffer lives on one instance, so every call naming it
// (inputs, output_buffers, Write, Read, Free) must reach that one: as in
// Arrow Flight, each buffer has a location (BufferInfo.location, the
// instance's --advertise_address) and the client connects to it there.
//
// PrimitivesClient (RouteBuffers) and BuffersClient share one BufferRoutes:
// what one learns (a Put's location, an output stored on an instance) the
// other uses. Calls that name no buffer keep going to the target as given.
#ifndef PRIMSERVE_CLIENT_BUFFER_ROUTES_H_
#define PRIMSERVE_CLIENT_BUFFER_ROUTES_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"

namespace primserve {

// A ref to elements [offset, offset + length) of resident buffer `name`
// (length 0: to the end), for v1::Array.buffer and the typed calls' inputs.
v1::BufferRef BufferRef(const std::string& name, uint64_t offset = 0, uint64_t length = 0);

// Whether a gRPC target may name several servers: a list
// ("ipv4:10.0.0.1:50051,10.0.0.2:50051") or a DNS name ("dns:///host:port"),
// whose addresses may be several.
bool TargetSpreads(absl::string_view target);

// The servers a target names, each as "host:port": an ipv4:/ipv6: list's
// addresses, a dns: name's addresses now; none for any other target.
std::vector<std::string> TargetAddresses(absl::string_view target);

// The buffers a request names, anywhere in it (a pipeline's steps too): its
// inputs' (Array.buffer) and its outputs' (output_buffers), in field order.
struct NamedBuffers {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  bool empty() const { return inputs.empty() && outputs.empty(); }
};
NamedBuffers BuffersOf(const google::protobuf::Message& request);

class BufferRoutes final {
 public:
  // A channel to the instance at `location`; a distinct `index` gives it a
  // connection of its own (striped transfers use several).
  using Connector =
      std::function<std::shared_ptr<grpc::Channel>(const std::string& location, int index)>;

  // `home`: the channel to `target` as given (calls that name no known
  // buffer, and lookups); each lookup gets `timeout` as its deadline.
  BufferRoutes(const std::string& target, std::shared_ptr<grpc::Channel> home, Connector connect,
               absl::Duration timeout = absl::Seconds(30));

  // The channel `index` to the instance at `location` (made on first use).
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& location, int index = 0);

  void Remember(const std::string& name, const std::string& location);
  void Forget(const std::string& name);

  // The location of buffer `name`: remembered, else asked of every instance
  // this client knows (List on the home channel, on each server the target
  // names and on each location seen). NOT_FOUND when none holds it.
  absl::StatusOr<std::string> Find(const std::string& name);

  // Where a request naming `buffers` goes: its inputs' instance (all on one,
  // else INVALID_ARGUMENT naming both), else an output's that exists, else
  // an instance the home channel picks (its List's location), which then
  // holds the new outputs.
  absl::StatusOr<std::string> LocationFor(const NamedBuffers& buffers);

  // A call's status after it was sent to `location` for buffer `name`:
  // nothing answering there (UNAVAILABLE) is NOT_FOUND saying that the
  // instance holding the buffer went away; anything else is left as it is.
  static absl::Status Routed(absl::Status status, const std::string& name,
                             const std::string& location);

 private:
  // Every buffer the instance behind `channel` holds for this caller, and
  // its location.
  absl::StatusOr<v1::ListBuffersResponse> ListOn(const std::shared_ptr<grpc::Channel>& channel);

  const std::vector<std::string> addresses_;  // the target's servers
  const std::shared_ptr<grpc::Channel> home_;
  const Connector connect_;
  const absl::Duration timeout_;

  absl::Mutex mu_;
  std::map<std::string, std::string> locations_ ABSL_GUARDED_BY(mu_);  // by buffer name
  std::map<std::pair<std::string, int>, std::shared_ptr<grpc::Channel>> channels_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_BUFFER_ROUTES_H_
