#include "server/server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace primserve {

PrimServer::PrimServer(std::unique_ptr<ExecutionBackend> backend, const ServerOptions& options)
    : backend_(std::move(backend)),
      batcher_(options.batcher, backend_.get()),
      service_(&batcher_, options.limits) {}

absl::StatusOr<std::unique_ptr<PrimServer>> PrimServer::Start(
    const ServerOptions& options, std::unique_ptr<ExecutionBackend> backend) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<PrimServer> server(new PrimServer(std::move(backend), options));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &server->port_);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(-1);
  builder.RegisterService(&server->service_);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.address));
  }
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  return server;
}

PrimServer::~PrimServer() { Shutdown(absl::ZeroDuration()); }

void PrimServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  server_->GetHealthCheckService()->SetServingStatus(false);
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  batcher_.Shutdown();
}

}  // namespace primserve
