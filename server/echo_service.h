// The Echo service: answers at once with a payload of the requested size and
// does nothing else, so a load test can tell the transport's cost from the
// primitives' (see proto/primserve/v1/echo.proto).
#ifndef PRIMSERVE_SERVER_ECHO_SERVICE_H_
#define PRIMSERVE_SERVER_ECHO_SERVICE_H_

#include "proto/primserve/v1/echo.grpc.pb.h"

namespace primserve {

class EchoService final : public v1::Echo::CallbackService {
 public:
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const v1::EchoRequest* request,
                                 v1::EchoResponse* response) override;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ECHO_SERVICE_H_
