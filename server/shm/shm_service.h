// The SharedMemory gRPC service: clients register, list and unregister the
// regions that requests then name (see registry.h for their lifetime).
#ifndef PRIMSERVE_SERVER_SHM_SHM_SERVICE_H_
#define PRIMSERVE_SERVER_SHM_SHM_SERVICE_H_

#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/shm/registry.h"

namespace primserve::shm {

class SharedMemoryService final : public v1::SharedMemory::CallbackService {
 public:
  explicit SharedMemoryService(Registry* registry) : registry_(registry) {}

  grpc::ServerUnaryReactor* RegisterSystem(grpc::CallbackServerContext* context,
                                           const v1::RegisterSystemRequest* request,
                                           v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* RegisterCuda(grpc::CallbackServerContext* context,
                                         const v1::RegisterCudaRequest* request,
                                         v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Unregister(grpc::CallbackServerContext* context,
                                       const v1::UnregisterRequest* request,
                                       v1::UnregisterResponse* response) override;
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const v1::SharedMemoryStatusRequest* request,
                                   v1::SharedMemoryStatusResponse* response) override;

 private:
  Registry* const registry_;  // not owned
};

}  // namespace primserve::shm

#endif  // PRIMSERVE_SERVER_SHM_SHM_SERVICE_H_
