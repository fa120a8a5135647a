// A target of the load: a method and the requests the run sends it, each
// serialized once, so that a call costs the client a reference to bytes.
// The call forms (unary, Multiplex, streams) implement it.
#ifndef PRIMSERVE_CLIENT_LOADGEN_TARGET_H_
#define PRIMSERVE_CLIENT_LOADGEN_TARGET_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace primserve {

// Whether a serialized response to one request is right.
using Check = std::function<bool(grpc::ByteBuffer response)>;

// The Check of a parsed response.
template <typename Response, typename F>
Check Parsed(F check) {
  return [check = std::move(check)](grpc::ByteBuffer buffer) {
    Response response;
    return grpc::SerializationTraits<Response>::Deserialize(&buffer, &response).ok() &&
           check(response);
  };
}

// How one call went.
struct CallOutcome {
  grpc::Status status;
  uint64_t bytes = 0;     // request + response, when status is OK
  bool verified = false;  // the response was checked
  bool mismatch = false;  // ... and it was wrong
};

// A method and the requests the run sends it.
class Target {
 public:
  virtual ~Target() = default;
  virtual const std::string& name() const = 0;
  virtual size_t num_requests() const = 0;
  // `check` may be empty when no call will be verified.
  virtual void Add(const google::protobuf::Message& request, Check check) = 0;
  // Starts a call of request `index` on channel `channel`; `done` runs once,
  // on a gRPC thread, when it ends. `verify`: check the response.
  virtual void Start(size_t channel, size_t index, bool verify,
                     std::function<void(const CallOutcome&)> done) const = 0;
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_TARGET_H_
