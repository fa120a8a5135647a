// Assembles a running primserve: the gRPC server with the Primitives and
// health services and (optionally) Echo and reflection, over fair admission
// over a batcher over an execution backend.
// Used by main() and by the tests, which start it on an ephemeral loopback
// port.
#ifndef PRIMSERVE_SERVER_SERVER_H_
#define PRIMSERVE_SERVER_SERVER_H_

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/buffers/buffers_service.h"
#include "server/buffers/registry.h"
#include "server/engine/admission.h"
#include "server/engine/backend.h"
#include "server/engine/batcher.h"
#include "server/engine/metrics.h"
#include "server/engine/pinned_payloads.h"
#include "server/rpc/completion_queue_unary.h"
#include "server/rpc/echo_service.h"
#include "server/rpc/request_limits.h"
#include "server/rpc/service.h"
#include "server/shm/registry.h"
#include "server/shm/shm_service.h"
#include "wire/parallel_copy.h"

namespace primserve {

// "name=value,name=value" (integer values) as ServerOptions::grpc_channel_args;
// INVALID_ARGUMENT naming the entry that is not one.
absl::StatusOr<std::map<std::string, int>> ParseChannelArgs(absl::string_view text);

struct ServerOptions {
  // host:port to listen on; port 0 picks a free one (see PrimServer::port()).
  std::string address = "0.0.0.0:50051";
  // Also listen on this Unix domain socket (a path; empty: none), with the
  // same credentials, for clients on the same host ("unix:PATH" targets):
  // no TCP stack between them and the server.
  std::string unix_socket;
  // gRPC refuses larger messages before reading them (RESOURCE_EXHAUSTED).
  int max_receive_message_bytes = 2147483647;
  // HTTP/2 limits of gRPC itself, per connection: streams open at once (more
  // are refused with REFUSED_STREAM) and the size of a request's metadata.
  // See the README's "Exposure and lockdown" for what they do not stop.
  int max_concurrent_streams = 100;
  int max_metadata_bytes = 16 * 1024;
  // gRPC's bandwidth-delay probe, which grows each stream's receive window to
  // several MiB: bytes a stalled stream holds that no admission bound sees
  // (60 never-read streams of one caller: +0.9 to +1.8 GB). Off, each stream
  // holds at most its 64 KiB initial window beyond what admission counts.
  bool bdp_probe = false;
  // Integer gRPC channel arguments, set after every setting above (e.g.
  // "grpc.http2.max_frame_size"): transport settings to measure without a
  // rebuild (ParseChannelArgs reads them from --grpc_channel_args).
  std::map<std::string, int> grpc_channel_args;
  // Request limits, and limits.reproducible_floats (--reproducible_floats,
  // off by default): every request reproducible, not only those asking.
  RequestLimits limits;
  // Per-caller fairness and bounds on cost in flight, before the batcher.
  AdmissionOptions admission;
  // When set (e.g. "x-forwarded-for"), admission tells callers apart by this
  // request header instead of the connection's address: behind a proxy that
  // sets it (deploy/haproxy.cfg does), every connection comes from the proxy.
  // Trust it only when clients cannot reach primserve but through the proxy.
  std::string caller_header;
  BatcherOptions batcher;
  // Which of gRPC's APIs serves the unary Primitives RPCs: callback methods,
  // or completion queues each drained by a thread of its own
  // (server/rpc/completion_queue_unary.h). Multiplex, the streams and the
  // other services are callback methods either way.
  enum class RpcApi { kCallback, kCompletionQueue };
  RpcApi rpc_api = RpcApi::kCallback;
  // With kCompletionQueue, how many queues (and threads); 0: one per core.
  int completion_queues = 0;
  // Where the transport and the batcher record; not owned, outlives the
  // server. Null records nothing. (The backend gets it from its creator.)
  Metrics* metrics = nullptr;
  // TLS: PEM files of the server's certificate chain and its private key;
  // both empty serves plaintext. With a client CA file, clients must present
  // a certificate that CA signed (mutual TLS).
  std::string tls_cert_path;
  std::string tls_key_path;
  std::string tls_client_ca_path;
  // Serve gRPC server reflection, which describes the whole API to any
  // caller. Health is served either way: probes need it.
  bool reflection = true;
  // Serve the Echo service (a transport probe for load tests). Off by
  // default: it does no work, so it is the cheapest way to make the server
  // hold memory. Its answers are bounded by limits.max_response_bytes.
  bool echo = false;
  // Page-locked host memory kept for large request payloads, where the
  // backend copies to a GPU (server/engine/pinned_payloads.h): a request's arrays go
  // from gRPC's buffers into it and from it to the device. 0: none.
  size_t pinned_payload_bytes = size_t{1} << 30;
  // The same for large inline answers (unary, streamed and multiplexed): the
  // backend copies an answer from the device into it and gRPC sends it from
  // there, after which it is reused (Task::answers). 0: none (answers go
  // through strings).
  size_t pinned_answer_bytes = size_t{1} << 30;
  // Threads that copy each large request array out of gRPC's receive
  // buffers (into pinned memory, or the heap), the receiving thread among
  // them: a fixed pool shared by every request (wire::CopyPool). 0 or 1:
  // the receiving thread alone. 8: perf/runs/2026-11-26-h200-input-copy.
  int input_copy_threads = 8;
  // Serve the SharedMemory service, and let unary and Multiplex requests
  // name registered regions (Array.shm, output_location). Off by default:
  // any caller could then make the server open and write the shm objects
  // its user can (see the README's "Exposure and lockdown"). Off, refs in
  // requests are FAILED_PRECONDITION.
  bool shared_memory = false;
  shm::RegistryOptions shared_memory_limits;
  // Resident buffers (the Buffers service, Array.buffer, output_buffers),
  // always served. limits.max_bytes 0: buffers::DefaultMaxBytes (half the
  // backend's resident capacity). limits.location empty: this instance's
  // host name and port (--advertise_address).
  buffers::Limits buffer_limits;
};

// "callback" or "completion_queue" as ServerOptions::rpc_api;
// INVALID_ARGUMENT saying what else it may be.
absl::StatusOr<ServerOptions::RpcApi> ParseRpcApi(absl::string_view text);

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
  FairAdmission admission_;  // in front of batcher_
  // Outlives the services that use it; null without options.shared_memory.
  std::unique_ptr<shm::Registry> shared_memory_;
  std::unique_ptr<shm::SharedMemoryService> shared_memory_service_;
  // Outlives the services that use it; its storage lives on in tasks the
  // backend (destroyed last) still holds.
  std::unique_ptr<buffers::Registry> buffers_;
  std::unique_ptr<buffers::BuffersService> buffers_service_;
  // Null unless the backend pins host memory and options.pinned_payload_bytes
  // is not 0; outlives the service that allocates from it.
  std::unique_ptr<PinnedPayloads> pinned_payloads_;
  // Likewise for options.pinned_answer_bytes.
  std::unique_ptr<PinnedPayloads> pinned_answers_;
  wire::CopyPool input_copies_;  // outlives the service that copies with it
  // The Primitives service of options.rpc_api: one of the two is set.
  std::unique_ptr<PrimitivesService> callback_service_;
  std::unique_ptr<QueuedPrimitivesService> queued_service_;
  EchoService echo_service_;  // no work: measures the transport; served when options.echo
  // With queued_service_: its unary calls' queues, which outlive server_.
  std::unique_ptr<CompletionQueueUnary> queued_unary_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
  // Mirrors the backend's Health() into the gRPC health service, and each
  // device's DeviceHealth() into the service "primserve.device.N".
  absl::Notification stop_health_watch_;
  std::thread health_watch_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_SERVER_H_
