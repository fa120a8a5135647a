#include "client/client.h"

#include <utility>

#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"

namespace primserve {
namespace {

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

grpc::ChannelArguments UnlimitedMessageSizes() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return args;
}

}  // namespace

std::shared_ptr<grpc::Channel> PrimitivesClient::Connect(const std::string& address) {
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   UnlimitedMessageSizes());
}

std::shared_ptr<grpc::Channel> PrimitivesClient::ConnectTls(const std::string& address,
                                                            const std::string& ca_pem,
                                                            const std::string& client_cert_pem,
                                                            const std::string& client_key_pem) {
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ca_pem;
  tls.pem_cert_chain = client_cert_pem;
  tls.pem_private_key = client_key_pem;
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(tls), UnlimitedMessageSizes());
}

PrimitivesClient::PrimitivesClient(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout)
    : channel_(std::move(channel)), stub_(v1::Primitives::NewStub(channel_)), timeout_(timeout) {}

bool PrimitivesClient::IsServing() {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  return health->Check(&context, request, &response).ok() &&
         response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

#define PRIMSERVE_DEFINE_CALL(Rpc)                                                       \
  absl::StatusOr<v1::Rpc##Response> PrimitivesClient::Call(const v1::Rpc##Request& request) { \
    grpc::ClientContext context;                                                         \
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));                    \
    v1::Rpc##Response response;                                                          \
    grpc::Status status = stub_->Rpc(&context, request, &response);                      \
    if (!status.ok()) return ToAbsl(status);                                             \
    return response;                                                                     \
  }

PRIMSERVE_DEFINE_CALL(Scan)
PRIMSERVE_DEFINE_CALL(Reduce)
PRIMSERVE_DEFINE_CALL(Select)
PRIMSERVE_DEFINE_CALL(Unique)
PRIMSERVE_DEFINE_CALL(RunLengthEncode)
PRIMSERVE_DEFINE_CALL(ReduceByKey)
PRIMSERVE_DEFINE_CALL(AggregateByKey)

#undef PRIMSERVE_DEFINE_CALL

}  // namespace primserve
