// One logical Multiplex session of the C++ client: requests sent at once on
// Multiplex streams, their answers handed back in the order the requests
// were sent. With routes (PrimitivesClient::RouteBuffers: a target naming
// several instances), a request naming buffers goes on a stream to the
// instance holding them, opened on first use, so one session may use
// buffers of every instance; requests naming none go on one stream to the
// client's channel. Each stream answers in any order; answers are matched
// to their requests by id.
//
//   primserve::MultiplexSession session(client);
//   v1::MultiplexRequest request;
//   *request.mutable_pipeline() = builder.request();
//   absl::StatusOr<size_t> index = session.Send(std::move(request));
//   ...
//   std::vector<absl::StatusOr<v1::MultiplexResponse>> answers = session.Finish();
//   // answers[*index] is that pipeline's
#ifndef PRIMSERVE_CLIENT_MULTIPLEX_SESSION_H_
#define PRIMSERVE_CLIENT_MULTIPLEX_SESSION_H_

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/buffer_routes.h"
#include "client/client.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"

namespace primserve {

class MultiplexSession final {
 public:
  // Streams on `client`'s channel and routes, each with the client's
  // timeout as its deadline (the whole session's).
  explicit MultiplexSession(const PrimitivesClient& client);
  // Finishes the session if Finish was not called.
  ~MultiplexSession();

  MultiplexSession(const MultiplexSession&) = delete;
  MultiplexSession& operator=(const MultiplexSession&) = delete;

  // Sends `request` (its id is the session's to set) and returns its index
  // in Finish()'s answers. Nothing is sent, and no index taken, for a
  // request naming buffers of two instances (INVALID_ARGUMENT naming both)
  // or a buffer no instance holds (NOT_FOUND), or after Finish
  // (FAILED_PRECONDITION). Thread-safe.
  absl::StatusOr<size_t> Send(v1::MultiplexRequest request);

  // Ends the streams and waits for every answer: one per request sent, in
  // the order sent; each the response, or the status it was refused with.
  // A stream that failed answers its unanswered requests with its status;
  // where that is UNAVAILABLE from the instance holding a buffer the
  // request names, NOT_FOUND saying that instance went away. Called again,
  // it has nothing more to answer (an empty vector).
  std::vector<absl::StatusOr<v1::MultiplexResponse>> Finish();

 private:
  // One Multiplex call, opened once (outside the session's lock: reaching
  // a new instance may take a while): requests written under `write_mu`,
  // answers read by `reader`.
  struct Stream {
    std::string location;  // empty: the client's channel
    absl::once_flag opened;
    grpc::ClientContext context;
    std::unique_ptr<v1::Primitives::Stub> stub;
    std::unique_ptr<grpc::ClientReaderWriter<v1::MultiplexRequest, v1::MultiplexResponse>> call;
    std::thread reader;
    absl::Mutex write_mu;
    bool writable ABSL_GUARDED_BY(write_mu) = true;  // false once a write failed or WritesDone
    absl::Status broken;  // under the session's mu_: an answer no request on it has
  };
  // A request sent: its stream and the buffers it names.
  struct Sent {
    Stream* stream;
    NamedBuffers buffers;
  };

  // The stream to `location` (empty: the client's channel), made on first
  // use; Open opens it, once.
  Stream* StreamTo(const std::string& location) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Open(Stream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads `stream`'s answers until it ends, each into its request's place.
  void Read(Stream* stream);
  // `status` for request `index` on a routed stream: an instance gone is
  // NOT_FOUND saying so.
  absl::Status Routed(size_t index, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<grpc::Channel> channel_;
  const std::shared_ptr<BufferRoutes> routes_;
  const absl::Duration timeout_;

  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int sending_ ABSL_GUARDED_BY(mu_) = 0;  // Sends between taking an index and writing
  std::map<std::string, std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<Sent> sent_ ABSL_GUARDED_BY(mu_);
  std::vector<std::optional<absl::StatusOr<v1::MultiplexResponse>>> answers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_MULTIPLEX_SESSION_H_
