#include "client/client.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "grpc/grpc.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/stub_options.h"
#include "grpcpp/support/sync_stream.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"

namespace primserve {
namespace {

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// Writes the messages `next` gives while answers are read and handed to
// `on_answer` (the server reads only a few pieces ahead of the answers read
// here, so writing and reading go on side by side); a failed answer cancels
// the call.
template <typename W, typename R>
absl::Status Drive(grpc::ClientReaderWriter<W, R>& stream, grpc::ClientContext& context,
                   const std::function<bool(W*)>& next,
                   const std::function<absl::Status(const R&)>& on_answer) {
  std::thread writer([&] {
    W message;
    while (next(&message)) {
      if (!stream.Write(message)) break;
      message.Clear();
    }
    stream.WritesDone();
  });
  absl::Status answers_ok;
  R answer;
  while (stream.Read(&answer)) {
    if (!answers_ok.ok()) continue;
    answers_ok = on_answer(answer);
    if (!answers_ok.ok()) context.TryCancel();
  }
  writer.join();
  const grpc::Status status = stream.Finish();
  if (!answers_ok.ok()) return answers_ok;
  return ToAbsl(status);
}

// "0.05s": the service config's duration format.
std::string JsonDuration(absl::Duration duration) {
  return absl::StrFormat("%.3fs", absl::ToDoubleSeconds(duration));
}

// "/primserve.v1.Primitives/Scan": the method path gRPC calls go to.
std::string MethodPath(absl::string_view rpc) {
  return absl::StrCat("/", v1::Primitives::service_full_name(), "/", rpc);
}

}  // namespace

grpc::ChannelArguments PrimitivesClient::ChannelArgs(const ConnectOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetServiceConfigJSON(PrimitivesClient::ServiceConfig(options));
  args.SetInt(GRPC_ARG_PER_RPC_RETRY_BUFFER_SIZE, options.retry_buffer_bytes);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.max_reconnect_backoff)));
  if (options.channel_index != 0) args.SetInt("primserve.channel_index", options.channel_index);
  return args;
}

std::string PrimitivesClient::ServiceConfig(const ConnectOptions& options) {
  std::string config = absl::StrFormat(R"({"loadBalancingConfig": [{"%s": {}}])",
                                       options.load_balancing);
  // An empty service name: the server's overall status, which primserve sets.
  if (options.health_check) {
    absl::StrAppend(&config, R"(, "healthCheckConfig": {"serviceName": ""})");
  }
  if (options.max_attempts > 1) {
    absl::StrAppendFormat(
        &config,
        R"(, "methodConfig": [{"name": [{"service": "%s"}, {"service": "primserve.v1.Echo"}], )"
        R"("retryPolicy": {"maxAttempts": %d, "initialBackoff": "%s", "maxBackoff": "%s", )"
        R"("backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"]}}])",
        v1::Primitives::service_full_name(), options.max_attempts,
        JsonDuration(options.initial_backoff), JsonDuration(options.max_backoff));
  }
  return config + "}";
}

std::shared_ptr<grpc::Channel> PrimitivesClient::Connect(const std::string& target,
                                                         const ConnectOptions& options) {
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   ChannelArgs(options));
}

std::shared_ptr<grpc::Channel> PrimitivesClient::ConnectTls(const std::string& target,
                                                            const std::string& ca_pem,
                                                            const std::string& client_cert_pem,
                                                            const std::string& client_key_pem,
                                                            const ConnectOptions& options) {
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ca_pem;
  tls.pem_cert_chain = client_cert_pem;
  tls.pem_private_key = client_key_pem;
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(tls), ChannelArgs(options));
}

PrimitivesClient::PrimitivesClient(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout)
    : channel_(std::move(channel)),
      stub_(v1::Primitives::NewStub(channel_)),
      timeout_(timeout) {}

std::shared_ptr<BufferRoutes> PrimitivesClient::Routes(const std::string& target,
                                                       std::shared_ptr<grpc::Channel> home,
                                                       const ConnectOptions& options) {
  return std::make_shared<BufferRoutes>(
      target, std::move(home), [options](const std::string& location, int index) {
        ConnectOptions own = options;
        own.channel_index = index;
        return Connect(location, own);
      });
}

PrimitivesClient PrimitivesClient::Into(const v1::OutputBuffers& outputs) const {
  PrimitivesClient into(channel_, timeout_);
  into.routes_ = routes_;
  into.outputs_ = outputs;
  into.stream_above_bytes_ = stream_above_bytes_;
  into.stream_piece_bytes_ = stream_piece_bytes_;
  into.reproducible_ = reproducible_;
  return into;
}

absl::StatusOr<PrimitivesClient::Route> PrimitivesClient::RouteOf(
    const google::protobuf::Message& request) {
  Route route{channel_, "", {}};
  if (routes_ == nullptr) return route;
  route.buffers = BuffersOf(request);
  if (route.buffers.empty()) return route;
  absl::StatusOr<std::string> location = routes_->LocationFor(route.buffers);
  if (!location.ok()) return location.status();
  route.location = *location;
  route.channel = routes_->ChannelTo(route.location);
  return route;
}

absl::Status PrimitivesClient::Routed(const Route& route, absl::Status status) {
  if (route.location.empty()) return status;
  if (!status.ok()) {
    const NamedBuffers& named = route.buffers;
    return BufferRoutes::Routed(
        std::move(status), named.inputs.empty() ? named.outputs[0] : named.inputs[0],
        route.location);
  }
  for (const std::string& name : route.buffers.outputs) routes_->Remember(name, route.location);
  return status;
}

bool PrimitivesClient::Payloads::Lookup(absl::string_view token, absl::string_view* bytes) const {
  uint64_t index;
  if (token.size() != sizeof(index)) return false;
  std::memcpy(&index, token.data(), sizeof(index));
  if (index >= bytes_.size()) return false;
  *bytes = bytes_[index];
  return true;
}

grpc::ByteBuffer PrimitivesClient::Payloads::Frame(google::protobuf::Message* request) const {
  return wire::Frame(request, [this](absl::string_view token, absl::string_view* bytes) {
    return Lookup(token, bytes);
  });
}

absl::Status PrimitivesClient::ParseAnswer(const grpc::ByteBuffer& buffer,
                                           google::protobuf::Message* answer,
                                           wire::ReceivedMessage* received) {
  if (absl::Status s = received->Parse(buffer, answer); !s.ok()) {
    return absl::InternalError(
        absl::StrCat("the server's answer is not a valid ", answer->GetTypeName()));
  }
  return absl::OkStatus();
}

absl::Status PrimitivesClient::CallFramed(absl::string_view rpc,
                                          google::protobuf::Message* request,
                                          const Payloads& payloads,
                                          google::protobuf::Message* response,
                                          wire::ReceivedMessage* received) {
  const std::string method = MethodPath(rpc);
  if (StoresOutputs()) {
    const google::protobuf::FieldDescriptor* field =
        request->GetDescriptor()->FindFieldByName("output_buffers");
    if (field == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(rpc, " takes no output_buffers"));
    }
    request->GetReflection()->MutableMessage(request, field)->CopyFrom(outputs_);
  }
  absl::StatusOr<Route> route = RouteOf(*request);
  if (!route.ok()) return route.status();
  grpc::GenericStub routed(route->channel);
  // Slices over the caller's arrays: valid until this returns, after the
  // call (and any retry of it, which resends these slices) is done.
  const grpc::ByteBuffer sent = payloads.Frame(request);
  grpc::ByteBuffer answer;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  absl::Notification done;
  grpc::Status status;
  routed.UnaryCall(&context, method, grpc::StubOptions(), &sent, &answer,
                      [&](grpc::Status s) {
                        status = std::move(s);
                        done.Notify();
                      });
  done.WaitForNotification();
  if (absl::Status s = Routed(*route, ToAbsl(status)); !s.ok()) return s;
  return ParseAnswer(answer, response, received);
}

absl::Status PrimitivesClient::StreamFramed(
    absl::string_view rpc, const std::function<bool(grpc::ByteBuffer*)>& next,
    const std::function<absl::Status(const grpc::ByteBuffer&)>& on_answer) {
  const std::string method = MethodPath(rpc);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  // What the generated stub's streaming calls do, over ByteBuffers.
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel_.get(),
          grpc::internal::RpcMethod(method.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING),
          &context));
  return Drive(*stream, context, next, on_answer);
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> PrimitivesClient::Health(
    const std::string& service) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health->Check(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  return response.status();
}

bool PrimitivesClient::IsServing() {
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> health = Health();
  return health.ok() && *health == grpc::health::v1::HealthCheckResponse::SERVING;
}

#define PRIMSERVE_DEFINE_CALL(Rpc)                                                       \
  absl::StatusOr<v1::Rpc##Response> PrimitivesClient::Call(const v1::Rpc##Request& request) { \
    absl::StatusOr<Route> route = RouteOf(request);                                      \
    if (!route.ok()) return route.status();                                              \
    std::unique_ptr<v1::Primitives::Stub> routed;                                        \
    if (!route->location.empty()) routed = v1::Primitives::NewStub(route->channel);      \
    grpc::ClientContext context;                                                         \
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));                    \
    v1::Rpc##Response response;                                                          \
    const grpc::Status status =                                                          \
        (routed != nullptr ? routed : stub_)->Rpc(&context, request, &response);          \
    if (absl::Status s = Routed(*route, ToAbsl(status)); !s.ok()) return s;              \
    return response;                                                                     \
  }

PRIMSERVE_DEFINE_CALL(Scan)
PRIMSERVE_DEFINE_CALL(Reduce)
PRIMSERVE_DEFINE_CALL(Select)
PRIMSERVE_DEFINE_CALL(Unique)
PRIMSERVE_DEFINE_CALL(RunLengthEncode)
PRIMSERVE_DEFINE_CALL(ReduceByKey)
PRIMSERVE_DEFINE_CALL(AggregateByKey)
PRIMSERVE_DEFINE_CALL(Sort)
PRIMSERVE_DEFINE_CALL(Gather)
PRIMSERVE_DEFINE_CALL(Pipeline)

#undef PRIMSERVE_DEFINE_CALL

template <typename Request, typename Response>
absl::Status PrimitivesClient::Stream(
    std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> (v1::Primitives::Stub::*method)(
        grpc::ClientContext*),
    const std::function<bool(Request*)>& next,
    const std::function<absl::Status(const Response&)>& on_answer) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  auto stream = ((*stub_).*method)(&context);
  return Drive(*stream, context, next, on_answer);
}

absl::Status PrimitivesClient::CallStream(
    const std::function<bool(v1::ScanRequest*)>& next,
    const std::function<absl::Status(const v1::ScanResponse&)>& on_answer) {
  return Stream(&v1::Primitives::Stub::ScanStream, next, on_answer);
}

absl::Status PrimitivesClient::CallStream(
    const std::function<bool(v1::SelectRequest*)>& next,
    const std::function<absl::Status(const v1::SelectResponse&)>& on_answer) {
  return Stream(&v1::Primitives::Stub::SelectStream, next, on_answer);
}

absl::Status PrimitivesClient::CallStream(
    const std::function<bool(v1::UniqueRequest*)>& next,
    const std::function<absl::Status(const v1::UniqueResponse&)>& on_answer) {
  return Stream(&v1::Primitives::Stub::UniqueStream, next, on_answer);
}

absl::Status PrimitivesClient::CallStream(
    const std::function<bool(v1::RunLengthEncodeRequest*)>& next,
    const std::function<absl::Status(const v1::RunLengthEncodeResponse&)>& on_answer) {
  return Stream(&v1::Primitives::Stub::RunLengthEncodeStream, next, on_answer);
}

absl::Status PrimitivesClient::CallStream(
    const std::function<bool(v1::ReduceByKeyRequest*)>& next,
    const std::function<absl::Status(const v1::ReduceByKeyResponse&)>& on_answer) {
  return Stream(&v1::Primitives::Stub::ReduceByKeyStream, next, on_answer);
}

}  // namespace primserve
