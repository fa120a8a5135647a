// The Echo service: answers at once with a payload of the requested size and
// does nothing else, so a load test can tell the transport's cost from the
// primitives' (see proto/primserve/v1/echo.proto). A few request bytes can ask
// for a large answer, so the server registers it only on request
// (ServerOptions::echo, --enable_echo) and bounds the answer like a
// primitive's.
#ifndef PRIMSERVE_SERVER_RPC_ECHO_SERVICE_H_
#define PRIMSERVE_SERVER_RPC_ECHO_SERVICE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"

#include "proto/primserve/v1/echo.grpc.pb.h"

namespace primserve {

// Over raw buffers, as the Primitives service's unary RPCs (wire/): the
// answer's payload is sent from the request's own received bytes.
class EchoService final
    : public v1::Echo::WithRawCallbackMethod_Echo<
          v1::Echo::WithRawCallbackMethod_EchoStream<v1::Echo::Service>> {
 public:
  // Answers larger than max_response_bytes (and than a protobuf message can
  // hold) get RESOURCE_EXHAUSTED.
  explicit EchoService(uint64_t max_response_bytes) : max_response_bytes_(max_response_bytes) {}

  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* EchoStream(
      grpc::CallbackServerContext* context) override;

  // The answer to one EchoRequest's bytes, or why there is none.
  absl::StatusOr<grpc::ByteBuffer> Answer(const grpc::ByteBuffer& request) const;

 private:
  const uint64_t max_response_bytes_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_ECHO_SERVICE_H_
