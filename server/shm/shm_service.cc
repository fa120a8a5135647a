#include "server/shm/shm_service.h"

#include <string>
#include <vector>

namespace primserve::shm {
namespace {

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                 const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status.ok() ? grpc::Status::OK
                              : grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                                             std::string(status.message())));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* SharedMemoryService::RegisterSystem(
    grpc::CallbackServerContext* context, const v1::RegisterSystemRequest* request,
    v1::RegisterResponse*) {
  return Answer(context, registry_->RegisterSystem(request->name(), request->key(),
                                                   request->offset(), request->byte_size()));
}

grpc::ServerUnaryReactor* SharedMemoryService::RegisterCuda(
    grpc::CallbackServerContext* context, const v1::RegisterCudaRequest* request,
    v1::RegisterResponse*) {
  return Answer(context, registry_->RegisterCuda(request->name(), request->raw_handle(),
                                                 request->device_id(), request->byte_size()));
}

grpc::ServerUnaryReactor* SharedMemoryService::Unregister(grpc::CallbackServerContext* context,
                                                          const v1::UnregisterRequest* request,
                                                          v1::UnregisterResponse*) {
  return Answer(context, registry_->Unregister(request->name()));
}

grpc::ServerUnaryReactor* SharedMemoryService::Status(
    grpc::CallbackServerContext* context, const v1::SharedMemoryStatusRequest* request,
    v1::SharedMemoryStatusResponse* response) {
  absl::StatusOr<std::vector<RegionInfo>> regions = registry_->List(request->name());
  if (!regions.ok()) return Answer(context, regions.status());
  for (const RegionInfo& info : *regions) {
    v1::RegionStatus* region = response->add_regions();
    region->set_name(info.name);
    region->set_kind(info.kind);
    region->set_key(info.key);
    region->set_offset(info.offset);
    region->set_byte_size(info.byte_size);
    region->set_requests_in_flight(info.requests_in_flight);
    region->set_device_id(info.device);
  }
  return Answer(context, absl::OkStatus());
}

}  // namespace primserve::shm
