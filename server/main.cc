// primserve: GPU parallel primitives behind gRPC.
#include <malloc.h>

#include <csignal>
#include <iostream>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpc/support/log.h"
#include "server/cpu/cpu_backend.h"
#include "server/cuda/cuda_backend.h"
#include "server/engine/metrics.h"
#include "server/server.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on for gRPC.");
ABSL_FLAG(int, port, 50051, "Port to listen on for gRPC (0 picks a free one).");
ABSL_FLAG(std::string, backend, "auto",
          "Execution backend: auto (cuda when a CUDA device is present, else cpu), cuda or cpu.");
ABSL_FLAG(int, cpu_threads, 0,
          "Threads the CPU backend splits one large request over (0: one per core); 1 keeps "
          "each request on one core, for a host shared with other work.");
ABSL_FLAG(int, max_receive_message_bytes, 2147483647,
          "Largest request message gRPC accepts; larger ones get RESOURCE_EXHAUSTED before they "
          "are read.");
ABSL_FLAG(uint64_t, max_request_elements, uint64_t{1} << 31,
          "Most elements in any array of a request (and most AggregateByKey groups); more get "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, max_response_bytes, uint64_t{1} << 30,
          "Largest answer (bytes of array data) a request may ask for, judged from the request "
          "before anything is allocated; larger get RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, max_pipeline_steps, 16,
          "Most steps in one Pipeline request; more get RESOURCE_EXHAUSTED. A pipeline's "
          "intermediates are bounded by --max_buffer_bytes_per_caller.");
ABSL_FLAG(std::string, unix_socket, "",
          "Also serve gRPC on this Unix domain socket path (clients on the same host dial "
          "unix:PATH); empty serves TCP only.");
ABSL_FLAG(std::string, grpc_channel_args, "",
          "Integer gRPC channel arguments for the server, name=value,... (e.g. "
          "grpc.http2.max_frame_size=16777215,grpc.http2.bdp_probe=0), set after every other "
          "setting: transport settings to measure without a rebuild.");
ABSL_FLAG(bool, grpc_bdp_probe, false,
          "gRPC's bandwidth-delay probe, which grows each stream's receive window to several "
          "MiB that no admission bound counts (a client that never reads its streams makes "
          "the server hold them); off, a stream holds at most 64 KiB beyond its admitted "
          "pieces. On only where every client is trusted.");
ABSL_FLAG(uint64_t, multiplex_window, 1024,
          "Requests one Multiplex stream may have sent and not yet had answered; the server "
          "reads no further on that stream until its answers are read.");
ABSL_FLAG(uint64_t, multiplex_window_bytes, uint64_t{64} << 20,
          "Bytes of those requests (as received); the stream reads no further at whichever "
          "bound comes first (one request is read whatever its size).");
ABSL_FLAG(bool, reproducible_floats, false,
          "Every request reproducible: float SUM/PROD give bit-identical answers for the same "
          "request alone, batched with others or streamed in any pieces (same GPU model and "
          "build). Off (the default), only requests that set `reproducible` are, and the others "
          "may fuse into one launch and round differently when batched or streamed.");
ABSL_FLAG(std::string, cuda_devices, "",
          "Comma-separated CUDA devices to serve (e.g. 0,1); empty serves every visible one.");
ABSL_FLAG(int, cuda_streams_per_device, 4, "CUDA streams (concurrent batches) per device.");
ABSL_FLAG(uint64_t, cuda_pinned_bytes_per_lane, uint64_t{128} << 20,
          "Pinned host staging each CUDA stream keeps; a batch needing more stages through "
          "ordinary memory, given back when it ends. Large scans pipeline only from 96 MiB.");
ABSL_FLAG(uint64_t, gpu_memory_budget_bytes, 0,
          "Device memory all requests on one device together may hold; a request that does not "
          "fit waits, until its deadline. 0 means 85% of each served device's memory.");
ABSL_FLAG(std::string, rpc_api, "callback",
          "Which of gRPC's APIs serves the unary Primitives RPCs: callback, or completion_queue "
          "(--completion_queues queues, each drained by a thread of its own, which hands every "
          "task to the batch threads). Multiplex, the "
          "streams and the other services are callback methods either way.");
ABSL_FLAG(int, completion_queues, 0,
          "With --rpc_api=completion_queue: queues (and threads) for the unary calls; 0: one per "
          "core.");
ABSL_FLAG(int, batch_threads, 4, "Threads handing batches to the backend.");
ABSL_FLAG(uint64_t, max_batch_size, 256, "Most requests fused into one batch.");
ABSL_FLAG(uint64_t, max_batch_items, uint64_t{1} << 22, "Most elements in one batch.");
ABSL_FLAG(int64_t, batch_timeout_micros, 200,
          "Longest a batch of small requests gathers while every batch thread is busy (an idle "
          "thread takes requests at once, so this is a ceiling, not a wait); 0 turns batching "
          "off.");
ABSL_FLAG(uint64_t, max_enqueued_tasks, 4096,
          "Requests accepted but not started; beyond it requests get RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, large_request_items, uint64_t{1} << 18,
          "Requests of at least this many elements run alone, unbatched.");
ABSL_FLAG(bool, run_small_requests_inline, true,
          "When no batch runs or waits, a small unary request runs on the gRPC thread that "
          "received it, answered without a hand-off to a batch thread; false: every request goes "
          "through the batch threads. Callback API only: --rpc_api=completion_queue hands every "
          "unary request to the batch threads.");
ABSL_FLAG(uint64_t, max_in_flight_bytes, uint64_t{4} << 30,
          "Admission: cost (request bytes + largest answer) of all requests running at once; "
          "the rest wait, each caller in its own queue, taking turns.");
ABSL_FLAG(uint64_t, max_peer_in_flight_bytes, uint64_t{96} << 20,
          "Admission: cost one caller (client address) may have running at once; its other "
          "requests wait behind each other, not in front of other callers. One request "
          "costing more still runs, alone. Keep it under (batch threads - 1) x a heavy "
          "request's cost, so that one caller cannot hold every batch thread.");
ABSL_FLAG(uint64_t, max_peer_queued_bytes, uint64_t{256} << 20,
          "Admission: bytes of requests one caller may have waiting (unary, streamed and "
          "multiplexed together); a request past it gets RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, max_queued_bytes, uint64_t{1} << 30,
          "Admission: bytes of everyone's requests waiting (streams and Multiplex calls "
          "read a few ahead each); a request that would wait past it gets RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, max_peer_unsent_bytes, uint64_t{512} << 20,
          "Admission: cost of one caller's answers not yet sent (it does not read them); "
          "while over, its new requests get RESOURCE_EXHAUSTED before they run.");
ABSL_FLAG(uint64_t, max_unsent_bytes, uint64_t{2} << 30,
          "Admission: cost of every caller's answers not yet sent; while over, new requests "
          "get RESOURCE_EXHAUSTED before they run.");
ABSL_FLAG(std::string, caller_header, "",
          "Admission: tell callers apart by this request header (e.g. x-forwarded-for, set by "
          "the proxy in front) instead of their address. Only behind a proxy that sets it.");
ABSL_FLAG(uint64_t, max_peer_queued_tasks, 1024,
          "Admission: requests one caller may have waiting; more get RESOURCE_EXHAUSTED.");
ABSL_FLAG(double, shutdown_grace_seconds, 30,
          "On SIGINT/SIGTERM, how long calls in flight get to finish.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve gRPC over TLS (with --tls_key). Empty: plaintext.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificates: with TLS, require client certificates signed by one of them "
          "(mutual TLS).");
ABSL_FLAG(bool, reflection, true,
          "Serve gRPC server reflection, which describes the whole API to any caller. The health "
          "service is served either way (probes need it).");
ABSL_FLAG(bool, enable_echo, false,
          "Serve the Echo service, a transport probe for load tests (primload --mode=echo). "
          "Its answers are bounded by --max_response_bytes.");
ABSL_FLAG(uint64_t, pinned_payload_bytes, uint64_t{1} << 30,
          "Page-locked host memory kept for large request payloads when the backend is CUDA: a "
          "request's arrays go from gRPC's buffers into it and from it straight to the GPU. 0: "
          "none (each goes through the lane's staging).");
ABSL_FLAG(uint64_t, pinned_answer_bytes, uint64_t{1} << 30,
          "Page-locked host memory kept for large answers (unary, streamed and multiplexed) when "
          "the backend is CUDA: an answer goes from the GPU into it and gRPC sends it from "
          "there, with no copy. "
          "Answers that find none free go through ordinary memory. 0: none.");
ABSL_FLAG(int, input_copy_threads, 8,
          "Threads that copy each large request array (4 MiB or more) out of gRPC's receive "
          "buffers, the receiving thread among them: a fixed pool shared by all requests. 0 or "
          "1: the receiving thread alone. 8 copied 5.9x faster than 1 into pinned memory on a "
          "16-core GPU host (perf/runs/2026-11-26-h200-input-copy).");
ABSL_FLAG(bool, shared_memory, false,
          "Serve the SharedMemory service: local clients register POSIX shared-memory objects "
          "and name them in requests instead of sending bytes. Any caller may then make the "
          "server open (read-write) any shm object the server's user can: see the README's "
          "\"Exposure and lockdown\".");
ABSL_FLAG(uint64_t, max_shared_memory_regions, 64,
          "With --shared_memory: most regions mapped at once; more get RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, max_shared_memory_bytes, uint64_t{64} << 30,
          "With --shared_memory: most bytes of all mapped regions together; more get "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(double, shared_memory_idle_seconds, 3600,
          "With --shared_memory: a region no request has used for this long is unregistered "
          "(logged, and counted in primserve_shared_memory_idle_drops_total): its client most "
          "likely exited without unregistering it; 0: never.");
ABSL_FLAG(uint64_t, max_buffer_bytes, 0,
          "Most bytes of all resident buffers together (Buffers service); more get "
          "RESOURCE_EXHAUSTED. 0: half of the backend's memory (CUDA: half the devices' "
          "--gpu_memory_budget_bytes; CPU: half the host's physical memory).");
ABSL_FLAG(uint64_t, max_buffer_bytes_per_caller, uint64_t{16} << 30,
          "Most bytes of one caller's resident buffers (freed ones still in use included).");
ABSL_FLAG(uint64_t, max_buffers_per_caller, 1024,
          "Most resident buffers one caller holds by name.");
ABSL_FLAG(double, buffer_idle_seconds, 3600,
          "A resident buffer no request has named for this long is dropped; 0: never.");
ABSL_FLAG(std::string, advertise_address, "",
          "Where clients reach this instance, given in BufferInfo.location so that calls "
          "naming a buffer go to the instance holding it; empty: --host and the port it "
          "listens on (this host's name when --host is every address).");
ABSL_FLAG(bool, verbose, false,
          "Also log gRPC's own INFO lines (transport setup, pollers) and shutdown details; "
          "without it, primserve logs its start, its address and its stop, and gRPC only errors.");
ABSL_FLAG(std::string, metrics_host, "127.0.0.1",
          "Address to serve Prometheus metrics on (HTTP, path /metrics); loopback by "
          "default, for the edge (deploy/haproxy.cfg) to serve to Prometheus.");
ABSL_FLAG(int, metrics_port, 9464,
          "Port to serve Prometheus metrics on; 0 picks a free one, -1 serves none.");

namespace primserve {
namespace {

// primserve's own lines (backend, address, stop, why it could not start),
// shown at every verbosity; gRPC's INFO lines appear only with --verbose.
void Say(const std::string& line) {
  std::cerr << absl::FormatTime("%Y-%m-%d %H:%M:%E3S ", absl::Now(), absl::UTCTimeZone()) << line
            << std::endl;
}

// primserve_build_info's version label.
constexpr char kVersion[] = "0.1.0";

// Longest the process may take to exit once the server has stopped.
constexpr absl::Duration kTeardownLimit = absl::Seconds(1);
// More copy threads than this only contend for the same memory bandwidth.
constexpr int kMaxInputCopyThreads = 64;

absl::StatusOr<std::vector<int>> ParseDevices(const std::string& list) {
  std::vector<int> devices;
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    int device = 0;
    if (!absl::SimpleAtoi(item, &device)) {
      return absl::InvalidArgumentError(absl::StrCat("--cuda_devices: '", item, "' is not a number"));
    }
    devices.push_back(device);
  }
  return devices;
}

absl::StatusOr<std::unique_ptr<ExecutionBackend>> MakeBackend(const std::string& name,
                                                               Metrics* metrics) {
  if (name != "auto" && name != "cuda" && name != "cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend=", name, " is not one of auto, cuda, cpu"));
  }
  // Asking for the devices initializes the CUDA runtime (a context, driver
  // threads, device memory): not for a CPU server.
  const int visible = name == "cpu" ? 0 : VisibleCudaDevices();
  if (name == "cpu" || (name == "auto" && visible == 0)) {
    Say(absl::StrCat("backend: cpu (",
                     name == "cpu" ? "--backend=cpu" : "no CUDA device is visible", ")"));
    const int threads = absl::GetFlag(FLAGS_cpu_threads);
    if (threads < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cpu_threads=", threads, " is negative; 0 means one per core"));
    }
    return std::unique_ptr<ExecutionBackend>(new CpuBackend(metrics, threads));
  }
  CudaBackendOptions options;
  absl::StatusOr<std::vector<int>> devices = ParseDevices(absl::GetFlag(FLAGS_cuda_devices));
  if (!devices.ok()) return devices.status();
  options.devices = *devices;
  options.streams_per_device = absl::GetFlag(FLAGS_cuda_streams_per_device);
  options.pinned_bytes_per_lane = absl::GetFlag(FLAGS_cuda_pinned_bytes_per_lane);
  options.memory_budget_bytes = absl::GetFlag(FLAGS_gpu_memory_budget_bytes);
  options.metrics = metrics;
  absl::StatusOr<std::unique_ptr<CudaBackend>> cuda = CudaBackend::Create(options);
  if (!cuda.ok()) return cuda.status();
  Say(absl::StrCat("backend: cuda on ", (*cuda)->device_names(), " (", visible, " visible)"));
  return std::unique_ptr<ExecutionBackend>(*std::move(cuda));
}

int Main() {
  // Block the stop signals in every thread; main() waits for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Outlives the server and the backend, which record into it.
  Metrics metrics;
  if (absl::GetFlag(FLAGS_metrics_port) >= 0) {
    const std::string metrics_address =
        absl::StrCat(absl::GetFlag(FLAGS_metrics_host), ":", absl::GetFlag(FLAGS_metrics_port));
    if (absl::Status served = metrics.ServeHttp(metrics_address); !served.ok()) {
      Say(served.ToString());
      return 1;
    }
  }

  absl::StatusOr<std::unique_ptr<ExecutionBackend>> backend =
      MakeBackend(absl::GetFlag(FLAGS_backend), &metrics);
  if (!backend.ok()) {
    Say(backend.status().ToString());
    return 2;
  }
  ServerOptions options;
  options.address = absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_receive_message_bytes);
  options.bdp_probe = absl::GetFlag(FLAGS_grpc_bdp_probe);
  options.unix_socket = absl::GetFlag(FLAGS_unix_socket);
  absl::StatusOr<std::map<std::string, int>> channel_args =
      ParseChannelArgs(absl::GetFlag(FLAGS_grpc_channel_args));
  if (!channel_args.ok()) {
    std::fprintf(stderr, "--grpc_channel_args: %s\n",
                 std::string(channel_args.status().message()).c_str());
    return 2;
  }
  options.grpc_channel_args = *std::move(channel_args);
  options.input_copy_threads = absl::GetFlag(FLAGS_input_copy_threads);
  if (options.input_copy_threads < 0 || options.input_copy_threads > kMaxInputCopyThreads) {
    std::fprintf(stderr, "--input_copy_threads must be 0 to %d\n", kMaxInputCopyThreads);
    return 2;
  }
  options.limits.max_elements = absl::GetFlag(FLAGS_max_request_elements);
  options.limits.max_response_bytes = absl::GetFlag(FLAGS_max_response_bytes);
  options.limits.multiplex_window = absl::GetFlag(FLAGS_multiplex_window);
  options.limits.multiplex_window_bytes = absl::GetFlag(FLAGS_multiplex_window_bytes);
  options.limits.reproducible_floats = absl::GetFlag(FLAGS_reproducible_floats);
  options.limits.max_pipeline_steps = absl::GetFlag(FLAGS_max_pipeline_steps);
  options.limits.max_pipeline_intermediate_bytes =
      absl::GetFlag(FLAGS_max_buffer_bytes_per_caller);
  options.admission.max_in_flight_bytes = absl::GetFlag(FLAGS_max_in_flight_bytes);
  options.admission.max_peer_in_flight_bytes = absl::GetFlag(FLAGS_max_peer_in_flight_bytes);
  options.admission.max_peer_queued_tasks = absl::GetFlag(FLAGS_max_peer_queued_tasks);
  options.admission.max_peer_queued_bytes = absl::GetFlag(FLAGS_max_peer_queued_bytes);
  options.admission.max_queued_bytes = absl::GetFlag(FLAGS_max_queued_bytes);
  options.admission.max_peer_unsent_bytes = absl::GetFlag(FLAGS_max_peer_unsent_bytes);
  options.admission.max_unsent_bytes = absl::GetFlag(FLAGS_max_unsent_bytes);
  options.caller_header = absl::GetFlag(FLAGS_caller_header);
  absl::StatusOr<ServerOptions::RpcApi> rpc_api = ParseRpcApi(absl::GetFlag(FLAGS_rpc_api));
  if (!rpc_api.ok()) {
    std::fprintf(stderr, "--rpc_api: %s\n", std::string(rpc_api.status().message()).c_str());
    return 2;
  }
  options.rpc_api = *rpc_api;
  options.completion_queues = absl::GetFlag(FLAGS_completion_queues);
  if (options.completion_queues < 0) {
    std::fprintf(stderr, "--completion_queues must be 0 (one per core) or more\n");
    return 2;
  }
  options.batcher.num_threads = absl::GetFlag(FLAGS_batch_threads);
  options.batcher.max_batch_size = absl::GetFlag(FLAGS_max_batch_size);
  options.batcher.max_batch_items = absl::GetFlag(FLAGS_max_batch_items);
  options.batcher.batch_timeout_micros = absl::GetFlag(FLAGS_batch_timeout_micros);
  options.batcher.max_enqueued_tasks = absl::GetFlag(FLAGS_max_enqueued_tasks);
  options.batcher.large_request_items = absl::GetFlag(FLAGS_large_request_items);
  options.batcher.run_when_idle = absl::GetFlag(FLAGS_run_small_requests_inline);
  options.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca_path = absl::GetFlag(FLAGS_tls_client_ca);
  options.reflection = absl::GetFlag(FLAGS_reflection);
  options.echo = absl::GetFlag(FLAGS_enable_echo);
  options.pinned_payload_bytes = absl::GetFlag(FLAGS_pinned_payload_bytes);
  options.pinned_answer_bytes = absl::GetFlag(FLAGS_pinned_answer_bytes);
  options.buffer_limits.max_bytes = absl::GetFlag(FLAGS_max_buffer_bytes);
  options.buffer_limits.max_bytes_per_caller = absl::GetFlag(FLAGS_max_buffer_bytes_per_caller);
  options.buffer_limits.max_buffers_per_caller = absl::GetFlag(FLAGS_max_buffers_per_caller);
  const double idle_seconds = absl::GetFlag(FLAGS_buffer_idle_seconds);
  options.buffer_limits.idle =
      idle_seconds > 0 ? absl::Seconds(idle_seconds) : absl::InfiniteDuration();
  options.buffer_limits.location = absl::GetFlag(FLAGS_advertise_address);
  options.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  options.shared_memory_limits.max_regions = absl::GetFlag(FLAGS_max_shared_memory_regions);
  options.shared_memory_limits.max_bytes = absl::GetFlag(FLAGS_max_shared_memory_bytes);
  const double shm_idle_seconds = absl::GetFlag(FLAGS_shared_memory_idle_seconds);
  options.shared_memory_limits.idle =
      shm_idle_seconds > 0 ? absl::Seconds(shm_idle_seconds) : absl::InfiniteDuration();
  options.shared_memory_limits.dropped_idle = [&metrics, shm_idle_seconds](const std::string& name) {
    Say(absl::StrCat("unregistered shared-memory region '", name, "': unused for ",
                     absl::FormatDuration(absl::Seconds(shm_idle_seconds)),
                     " (--shared_memory_idle_seconds)"));
    metrics.SharedMemoryDroppedIdle();
  };
  options.metrics = &metrics;

  const std::string backend_name = (*backend)->name();
  // build_info's device: the GPUs' names, or "cpu".
  metrics.SetBuildInfo(kVersion, backend_name, (*backend)->description());
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, *std::move(backend));
  if (!server.ok()) {
    Say(server.status().ToString());
    return 1;
  }
  const char* transport = options.tls_cert_path.empty()        ? "plaintext"
                          : options.tls_client_ca_path.empty() ? "TLS"
                                                               : "mutual TLS";
  Say(absl::StrCat("primserve listening on ", absl::GetFlag(FLAGS_host), ":", (*server)->port(),
                   " (backend ", backend_name, ", ", transport, ")"));
  if (metrics.http_port() != 0) {
    Say(absl::StrCat("metrics at http://", absl::GetFlag(FLAGS_metrics_host), ":",
                     metrics.http_port(), "/metrics"));
  }

  int signal = 0;
  sigwait(&stop_signals, &signal);
  const absl::Duration grace = absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds));
  Say(absl::StrCat("signal ", signal, ": draining for up to ", absl::FormatDuration(grace)));
  (*server)->Shutdown(grace);
  Say("primserve stopped");
  // Every call has ended. Destroying the server runs gRPC's teardown, which
  // can stall for 10 s in its TCP backup poller (seen after large requests;
  // grpc/grpc#41050), far past the grace: bound it.
  std::thread([] {
    absl::SleepFor(kTeardownLimit);
    if (absl::GetFlag(FLAGS_verbose)) {
      Say(absl::StrCat("gRPC's teardown still running after ", absl::FormatDuration(kTeardownLimit),
                       ": exiting without it"));
    }
    std::_Exit(0);
  }).detach();
  return 0;
}

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) {
  // Request and response buffers of a MiB or more go back to the system when
  // freed. glibc would otherwise raise this threshold to the largest buffer
  // freed (up to 32 MiB) and keep such buffers in per-thread arenas, so the
  // resident size would grow to the allocator's high-water mark under mixed
  // large and small requests (tests/soak_test measures with the same
  // setting).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  absl::SetProgramUsageMessage("GPU parallel primitives behind gRPC.");
  // absl's --help lists only flags of a file named like the binary
  // (primserve.cc); ours live in main.cc.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "server/main.cc");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  // Debian builds Abseil without NDEBUG, which leaves absl::Mutex's deadlock
  // detection on: every Lock and Unlock in the process (gRPC's included)
  // takes one global spin lock to update a lock graph, which serializes
  // request threads. Deadlocks are found in tests (TSan), not in serving.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // gRPC's log shows only errors by default (GRPC_VERBOSITY overrides).
  if (absl::GetFlag(FLAGS_verbose) && std::getenv("GRPC_VERBOSITY") == nullptr) {
    gpr_set_log_verbosity(GPR_LOG_SEVERITY_INFO);
  }
  return primserve::Main();
}
