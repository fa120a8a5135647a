#include "server/server.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpc/support/log.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace primserve {
namespace {

absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat("cannot open the ", what, " file ", path));
  }
  std::string pem(std::istreambuf_iterator<char>(file), {});
  if (pem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the ", what, " file ", path, " is empty"));
  }
  return pem;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const ServerOptions& options) {
  if (options.tls_cert_path.empty() != options.tls_key_path.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and its private key");
  }
  if (options.tls_cert_path.empty()) {
    if (!options.tls_client_ca_path.empty()) {
      return absl::InvalidArgumentError("a client CA (mutual TLS) needs TLS: set a certificate");
    }
    return grpc::InsecureServerCredentials();
  }
  absl::StatusOr<std::string> cert = ReadPemFile(options.tls_cert_path, "TLS certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile(options.tls_key_path, "TLS private key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions tls(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  tls.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  if (!options.tls_client_ca_path.empty()) {
    absl::StatusOr<std::string> ca = ReadPemFile(options.tls_client_ca_path, "TLS client CA");
    if (!ca.ok()) return ca.status();
    tls.pem_root_certs = *std::move(ca);
    tls.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(tls);
}

// Loading libgrpc++_reflection registers its plugin with every ServerBuilder
// of the process. This option decides for one server: it drops that plugin
// and adds one back only when reflection is on.
class ReflectionOption final : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool enabled) : enabled_(enabled) {}

  void UpdateArguments(grpc::ChannelArguments*) override {}

  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    auto reflection = std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>();
    const std::string name = reflection->name();
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [&name](const auto& plugin) { return plugin->name() == name; }),
                   plugins->end());
    if (enabled_) plugins->push_back(std::move(reflection));
  }

 private:
  const bool enabled_;
};

// The gauges of the pinned pool named `pool`, or none without metrics.
HostPoolGauges HostPoolOf(Metrics* metrics, const std::string& pool) {
  return metrics != nullptr ? metrics->PinnedHostPool(pool) : HostPoolGauges{};
}

// Where clients reach this instance unless --advertise_address says: the
// host it listens on, or this host's name when it listens on every address;
// and the port it got.
std::string DefaultLocation(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0) std::snprintf(name, sizeof(name), "localhost");
    host = name;
  }
  return absl::StrCat(host, ":", port);
}

// The buffer limits with the default share of the backend's memory filled
// in (the default location is set once the port is known: see Start).
buffers::Limits BufferLimitsOf(const ServerOptions& options, const ExecutionBackend& backend) {
  buffers::Limits limits = options.buffer_limits;
  if (limits.max_bytes == 0) limits.max_bytes = buffers::DefaultMaxBytes(backend);
  return limits;
}

// The request limits with what the backend can answer.
RequestLimits RequestLimitsOf(const ServerOptions& options, const ExecutionBackend& backend) {
  RequestLimits limits = options.limits;
  limits.wide_accumulators = backend.WidensAccumulators();
  return limits;
}

// The Primitives service over `admission` and what else the server holds.
template <typename Service>
std::unique_ptr<Service> PrimitivesOf(const ServerOptions& options, Scheduler* admission,
                                      const ExecutionBackend& backend,
                                      const shm::Registry* shared_memory,
                                      PinnedPayloads* pinned_payloads,
                                      PinnedPayloads* pinned_answers, wire::CopyPool* copies,
                                      buffers::Registry* buffers) {
  return std::make_unique<Service>(
      admission, RequestLimitsOf(options, backend), options.metrics, options.caller_header,
      shared_memory, &backend,
      pinned_payloads != nullptr ? pinned_payloads->Allocator() : nullptr,
      pinned_answers != nullptr ? pinned_answers->Answers() : nullptr, copies, buffers);
}

int QueuesOf(const ServerOptions& options) {
  if (options.completion_queues > 0) return options.completion_queues;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace

PrimServer::PrimServer(std::unique_ptr<ExecutionBackend> backend, const ServerOptions& options)
    : backend_(std::move(backend)),
      batcher_(options.batcher, backend_.get(), options.metrics),
      admission_(options.admission, &batcher_, options.metrics),
      shared_memory_(options.shared_memory
                         ? std::make_unique<shm::Registry>(options.shared_memory_limits, backend_.get())
                         : nullptr),
      shared_memory_service_(shared_memory_ != nullptr
                                 ? std::make_unique<shm::SharedMemoryService>(shared_memory_.get())
                                 : nullptr),
      buffers_(std::make_unique<buffers::Registry>(BufferLimitsOf(options, *backend_),
                                                   backend_.get(), options.metrics)),
      buffers_service_(
          std::make_unique<buffers::BuffersService>(buffers_.get(), options.caller_header)),
      pinned_payloads_(backend_->PinsHostMemory() && options.pinned_payload_bytes > 0
                           ? std::make_unique<PinnedPayloads>(
                                 backend_.get(), options.pinned_payload_bytes,
                                 HostPoolOf(options.metrics, "payloads"))
                           : nullptr),
      pinned_answers_(backend_->PinsHostMemory() && options.pinned_answer_bytes > 0
                          ? std::make_unique<PinnedPayloads>(
                                backend_.get(), options.pinned_answer_bytes,
                                HostPoolOf(options.metrics, "answers"))
                          : nullptr),
      input_copies_(options.input_copy_threads),
      echo_service_(options.limits.max_response_bytes) {
  if (options.rpc_api == ServerOptions::RpcApi::kCompletionQueue) {
    queued_service_ = PrimitivesOf<QueuedPrimitivesService>(
        options, &admission_, *backend_, shared_memory_.get(), pinned_payloads_.get(),
        pinned_answers_.get(), &input_copies_, buffers_.get());
  } else {
    callback_service_ = PrimitivesOf<PrimitivesService>(
        options, &admission_, *backend_, shared_memory_.get(), pinned_payloads_.get(),
        pinned_answers_.get(), &input_copies_, buffers_.get());
  }
}

absl::StatusOr<std::map<std::string, int>> ParseChannelArgs(absl::string_view text) {
  std::map<std::string, int> args;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> name_value =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    int value = 0;
    if (name_value.first.empty() || !absl::SimpleAtoi(name_value.second, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gRPC channel argument '", entry, "' is not name=integer (e.g. grpc.http2.bdp_probe=0)"));
    }
    args[std::string(name_value.first)] = value;
  }
  return args;
}

absl::StatusOr<ServerOptions::RpcApi> ParseRpcApi(absl::string_view text) {
  if (text == "callback") return ServerOptions::RpcApi::kCallback;
  if (text == "completion_queue") return ServerOptions::RpcApi::kCompletionQueue;
  return absl::InvalidArgumentError(
      absl::StrCat("RPC API '", text, "' is neither callback nor completion_queue"));
}

absl::StatusOr<std::unique_ptr<PrimServer>> PrimServer::Start(
    const ServerOptions& options, std::unique_ptr<ExecutionBackend> backend) {
  grpc::EnableDefaultHealthCheckService(true);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials(options);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<PrimServer> server(new PrimServer(std::move(backend), options));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, *credentials, &server->port_);
  if (!options.unix_socket.empty()) {
    builder.AddListeningPort(absl::StrCat("unix:", options.unix_socket), *credentials);
  }
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(-1);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, options.max_metadata_bytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, options.bdp_probe ? 1 : 0);
  // gRPC 1.51 inflates a compressed message whole before it checks the
  // receive limit: a 500 KB gzip of zeros costs 500 MB. Refuse compressed
  // requests instead (UNIMPLEMENTED); arrays of numbers gain little from it.
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  for (const auto& [name, value] : options.grpc_channel_args) {
    builder.AddChannelArgument(name, value);
  }
  builder.SetOption(std::make_unique<ReflectionOption>(options.reflection));
  if (server->queued_service_ != nullptr) {
    builder.RegisterService(server->queued_service_.get());
    server->queued_unary_ = std::make_unique<CompletionQueueUnary>(
        server->queued_service_.get(), &builder, QueuesOf(options));
  } else {
    builder.RegisterService(server->callback_service_.get());
  }
  if (options.echo) builder.RegisterService(&server->echo_service_);
  if (server->shared_memory_service_ != nullptr) {
    builder.RegisterService(server->shared_memory_service_.get());
  }
  builder.RegisterService(server->buffers_service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.address,
                     options.unix_socket.empty() ? "" : " and unix:", options.unix_socket));
  }
  if (server->queued_unary_ != nullptr) server->queued_unary_->Start();
  // Port 0 picks a port only now; no caller can have reached it before.
  if (options.buffer_limits.location.empty()) {
    server->buffers_->SetLocation(DefaultLocation(options.address, server->port_));
  }
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  PrimServer* watched = server.get();
  // Each device's health is a service of its own ("primserve.device.N"); the
  // server ("") is SERVING while the backend as a whole serves.
  auto mirror_devices = [watched] {
    for (const auto& [device, health] : watched->backend_->DeviceHealth()) {
      watched->server_->GetHealthCheckService()->SetServingStatus(
          absl::StrCat("primserve.device.", device), health.ok());
    }
  };
  mirror_devices();
  server->health_watch_ = std::thread([watched, mirror_devices] {
    bool serving = true;
    while (!watched->stop_health_watch_.WaitForNotificationWithTimeout(absl::Seconds(1))) {
      mirror_devices();
      const absl::Status health = watched->backend_->Health();
      if (serving && !health.ok()) {
        gpr_log(GPR_ERROR, "health: NOT_SERVING: %s", health.ToString().c_str());
        watched->server_->GetHealthCheckService()->SetServingStatus(false);
        serving = false;
      }
    }
  });
  return server;
}

PrimServer::~PrimServer() { Shutdown(absl::ZeroDuration()); }

void PrimServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  stop_health_watch_.Notify();
  // A server whose Start failed has no gRPC server and no health watch.
  if (health_watch_.joinable()) health_watch_.join();
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(false);
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  }
  admission_.Shutdown();
  batcher_.Shutdown();
  // No call can come any more: the queues wait for the last answers, then
  // stop.
  if (queued_unary_ != nullptr) queued_unary_->Shutdown();
}

}  // namespace primserve
