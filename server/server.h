// Assembles a running primserve: the gRPC server with the Primitives, health
// and reflection services, over a batcher over an execution backend. Used by
// main() and by the tests, which start it on an ephemeral loopback port.
#ifndef PRIMSERVE_SERVER_SERVER_H_
#define PRIMSERVE_SERVER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/backend.h"
#include "server/batcher.h"
#include "server/convert.h"
#include "server/service.h"

namespace primserve {

struct ServerOptions {
  // host:port to listen on; port 0 picks a free one (see PrimServer::port()).
  std::string address = "0.0.0.0:50051";
  // gRPC refuses larger messages before reading them (RESOURCE_EXHAUSTED).
  int max_receive_message_bytes = 2147483647;
  RequestLimits limits;
  BatcherOptions batcher;
};

class PrimServer final {
 public:
  static absl::StatusOr<std::unique_ptr<PrimServer>> Start(
      const ServerOptions& options, std::unique_ptr<ExecutionBackend> backend);
  ~PrimServer();  // Shutdown(absl::ZeroDuration())

  int port() const { return port_; }
  const ExecutionBackend& backend() const { return *backend_; }

  // Health goes NOT_SERVING and new calls are refused; calls in flight get up
  // to `grace` to finish before they are cancelled; then the batcher drains.
  void Shutdown(absl::Duration grace);

 private:
  PrimServer(std::unique_ptr<ExecutionBackend> backend, const ServerOptions& options);

  std::unique_ptr<ExecutionBackend> backend_;
  Batcher batcher_;
  PrimitivesService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_SERVER_H_
