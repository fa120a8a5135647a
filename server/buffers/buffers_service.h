// The Buffers gRPC service: Create, Write (client stream), Read (server
// stream), Free and List over the registry, each call in the namespace of
// its caller (owner.h).
#ifndef PRIMSERVE_SERVER_BUFFERS_BUFFERS_SERVICE_H_
#define PRIMSERVE_SERVER_BUFFERS_BUFFERS_SERVICE_H_

#include <string>

#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/buffers/registry.h"

namespace primserve::buffers {

class BuffersService final : public v1::Buffers::CallbackService {
 public:
  // `registry` (not owned) outlives the service; `caller_header`: see OwnerOf.
  BuffersService(Registry* registry, std::string caller_header)
      : registry_(registry), caller_header_(std::move(caller_header)) {}

  // Read's pieces when the request leaves piece_bytes 0: a message a gRPC
  // client with the default 4 MiB receive limit takes.
  static constexpr uint64_t kDefaultPieceBytes = uint64_t{2} << 20;

  grpc::ServerUnaryReactor* Create(grpc::CallbackServerContext* context,
                                   const v1::CreateBufferRequest* request,
                                   v1::BufferInfo* response) override;
  grpc::ServerReadReactor<v1::WriteBufferRequest>* Write(
      grpc::CallbackServerContext* context, v1::WriteBufferResponse* response) override;
  grpc::ServerWriteReactor<v1::ReadBufferResponse>* Read(
      grpc::CallbackServerContext* context, const v1::ReadBufferRequest* request) override;
  grpc::ServerUnaryReactor* Free(grpc::CallbackServerContext* context,
                                 const v1::FreeBufferRequest* request,
                                 v1::FreeBufferResponse* response) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const v1::ListBuffersRequest* request,
                                 v1::ListBuffersResponse* response) override;

 private:
  Registry* const registry_;
  const std::string caller_header_;
};

}  // namespace primserve::buffers

#endif  // PRIMSERVE_SERVER_BUFFERS_BUFFERS_SERVICE_H_
