// primserve: GPU parallel primitives behind gRPC.
#include <csignal>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpc/support/log.h"
#include "server/cpu_backend.h"
#include "server/server.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on for gRPC.");
ABSL_FLAG(int, port, 50051, "Port to listen on for gRPC (0 picks a free one).");
ABSL_FLAG(std::string, backend, "auto",
          "Execution backend: auto (cuda when a CUDA device is present, else cpu), cuda or cpu.");
ABSL_FLAG(int, max_receive_message_bytes, 2147483647,
          "Largest request message gRPC accepts; larger ones get RESOURCE_EXHAUSTED before they "
          "are read.");
ABSL_FLAG(uint64_t, max_request_elements, uint64_t{1} << 31,
          "Most elements in any array of a request (and most AggregateByKey groups); more get "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, batch_threads, 4, "Threads handing batches to the backend.");
ABSL_FLAG(uint64_t, max_batch_size, 256, "Most requests fused into one batch.");
ABSL_FLAG(uint64_t, max_batch_items, uint64_t{1} << 22, "Most elements in one batch.");
ABSL_FLAG(int64_t, batch_timeout_micros, 200,
          "Longest a small request waits for its batch to fill; 0 turns batching off.");
ABSL_FLAG(uint64_t, max_enqueued_tasks, 4096,
          "Requests accepted but not started; beyond it requests get RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, large_request_items, uint64_t{1} << 18,
          "Requests of at least this many elements run alone, unbatched.");
ABSL_FLAG(double, shutdown_grace_seconds, 30,
          "On SIGINT/SIGTERM, how long calls in flight get to finish.");

namespace primserve {
namespace {

absl::StatusOr<std::unique_ptr<ExecutionBackend>> MakeBackend(const std::string& name) {
  if (name == "cpu") return std::unique_ptr<ExecutionBackend>(new CpuBackend());
  if (name == "auto") {
    gpr_log(GPR_INFO, "backend: cpu (this build has no CUDA backend yet)");
    return std::unique_ptr<ExecutionBackend>(new CpuBackend());
  }
  if (name == "cuda") return absl::UnimplementedError("this build has no CUDA backend yet");
  return absl::InvalidArgumentError(
      absl::StrCat("--backend=", name, " is not one of auto, cuda, cpu"));
}

int Main() {
  // Block the stop signals in every thread; main() waits for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<std::unique_ptr<ExecutionBackend>> backend =
      MakeBackend(absl::GetFlag(FLAGS_backend));
  if (!backend.ok()) {
    gpr_log(GPR_ERROR, "%s", backend.status().ToString().c_str());
    return 2;
  }
  ServerOptions options;
  options.address = absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_receive_message_bytes);
  options.limits.max_elements = absl::GetFlag(FLAGS_max_request_elements);
  options.batcher.num_threads = absl::GetFlag(FLAGS_batch_threads);
  options.batcher.max_batch_size = absl::GetFlag(FLAGS_max_batch_size);
  options.batcher.max_batch_items = absl::GetFlag(FLAGS_max_batch_items);
  options.batcher.batch_timeout_micros = absl::GetFlag(FLAGS_batch_timeout_micros);
  options.batcher.max_enqueued_tasks = absl::GetFlag(FLAGS_max_enqueued_tasks);
  options.batcher.large_request_items = absl::GetFlag(FLAGS_large_request_items);

  const std::string backend_name = (*backend)->name();
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, *std::move(backend));
  if (!server.ok()) {
    gpr_log(GPR_ERROR, "%s", server.status().ToString().c_str());
    return 1;
  }
  gpr_log(GPR_INFO, "primserve listening on %s:%d (backend %s)",
          absl::GetFlag(FLAGS_host).c_str(), (*server)->port(), backend_name.c_str());

  int signal = 0;
  sigwait(&stop_signals, &signal);
  const absl::Duration grace = absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds));
  gpr_log(GPR_INFO, "signal %d: draining for up to %s", signal,
          absl::FormatDuration(grace).c_str());
  (*server)->Shutdown(grace);
  gpr_log(GPR_INFO, "primserve stopped");
  return 0;
}

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("primserve: GPU parallel primitives behind gRPC.");
  absl::ParseCommandLine(argc, argv);
  return primserve::Main();
}
