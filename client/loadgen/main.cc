// primload: a load generator for primserve, in the spirit of Triton's
// perf_analyzer. It sends one RPC over and over, either keeping N requests
// outstanding (--concurrency, closed loop) or at R requests per second
// whatever the responses (--rate, open loop), and prints a row per level:
// requests/s, items/s, payload GB/s, latency percentiles and errors.
// --mode=echo sends the same bytes to the Echo method, which does no work, so
// the transport's limit shows beside the primitive's (--mode=both: both, and
// their ratio). --stream_piece_bytes sends each request through the RPC's
// streaming form (ScanStream, ...) in pieces, and the Echo calls through
// EchoStream in the same pieces.
//
//   primload --rpc=scan --dtype=int32 --n=1048576 --concurrency=1,16,64 --mode=both
//   primload --rpc=select --dtype=float32 --rate=100,1000 --verify --csv=select.csv
//   primload --rpc=scan --n=1048576 --shm --verify     # arrays in POSIX shared memory
//   primload --rpc=scan --n=67108864 --stream_piece_bytes=4194304 --mode=both --verify
//   primload_cuda --rpc=scan --n=268435456 --cuda_shm --in_place --distinct_requests=1
//
// --shm puts every request's inputs and outputs in one POSIX shared-memory
// region registered with the server (which must run on this host with
// --shared_memory); --cuda_shm (primload_cuda, the CUDA build of this binary)
// in device memory registered by CUDA IPC (the server runs with
// --backend=cuda --shared_memory on this host's GPU). Each distinct request
// has its own inputs and output room there; calls of the same request write
// the same answer to the same place. --verify reads answers back from it.
//
// Requests are generated before the run, with the CPU reference's answers,
// and serialized once: a call costs the client a reference to those bytes,
// and a response is parsed only to verify it.
//
// Exit status: 0 when every call succeeded (and matched, with --verify), 1
// when some failed or the server cannot be reached, 2 on a bad command line.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli_flags.h"
#include "client/client.h"
#include "client/loadgen/loops.h"
#include "client/loadgen/options.h"
#include "client/loadgen/regions.h"
#include "client/loadgen/report.h"
#include "client/loadgen/requests.h"
#include "client/loadgen/stats.h"
#include "client/loadgen/target.h"
#include "client/loadgen/workload.h"
#include "client/shm_placement.h"
#include "grpc/grpc.h"
#include "grpcpp/channel.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace primserve {
namespace {

constexpr char kProgram[] = "primload";

constexpr char kUsage[] =
    "primload [flags]: load test of one primserve RPC. See --help for the flags.\n"
    "Exit status: 0 all calls ok, 1 failed calls or no server, 2 bad command line.";

// Each channel gets its own HTTP/2 connections: gRPC would otherwise share
// them between channels to the same address with the same arguments. Each
// balances over the servers `address` names as PrimitivesClient::Connect does.
std::vector<std::shared_ptr<grpc::Channel>> Connect(const std::string& address, int count) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < count; ++i) {
    grpc::ChannelArguments args = PrimitivesClient::ChannelArgs(ConnectOptions());
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channels.push_back(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }
  return channels;
}

// With --shm or --cuda_shm: creates the region the workload's requests take,
// registered on `channel`, and places them there. Nothing to do inline.
absl::Status PlaceArrays(const Options& options, const std::shared_ptr<grpc::Channel>& channel,
                         Workload& workload) {
  if (options.placement == Placement::kInline) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<PlacementRegion>> region =
      CreateRegion(options.placement, channel, absl::StrCat("primload-", getpid()),
                   std::max<uint64_t>(workload.placed_bytes(), 1), options.cuda_device);
  if (!region.ok()) return region.status();
  return workload.Place(*std::move(region));
}

int Main() {
  absl::StatusOr<Options> options = ParseOptions(CanPlaceInCuda());
  if (!options.ok()) return UsageError(kProgram, options.status());
  std::ofstream csv;
  if (!options->csv.empty()) {
    csv.open(options->csv);
    if (!csv) {
      return UsageError(kProgram,
                        absl::InvalidArgumentError(absl::StrCat("cannot write ", options->csv)));
    }
  }
  const std::string& address = options->address;
  const std::vector<std::shared_ptr<grpc::Channel>> channels = Connect(address, options->channels);
  for (const auto& channel : channels) {
    if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + options->timeout))) {
      std::cerr << "primload: cannot connect to " << address << "\n";
      return 1;
    }
  }
  Workload workload(*options, channels);
  for (int i = 0; i < options->distinct_requests; ++i) AddRequest(*options, i, &workload);
  if (absl::Status placed = PlaceArrays(*options, channels.front(), workload); !placed.ok()) {
    std::cerr << "primload: " << (options->placement == Placement::kSystem ? "--shm" : "--cuda_shm")
              << ": cannot set up the region (" << absl::StatusCodeToString(placed.code())
              << ": " << placed.message() << ")"
              << (placed.code() == absl::StatusCode::kUnimplemented
                      ? "; the server must run with --shared_memory"
                      : "")
              << "\n";
    return 1;
  }

  PrintHeader(*options, workload);
  const std::string rpc(options->rpc.flag);
  Table table(Columns(*options), rpc.size() + std::string("/stream/echo").size(), std::move(csv));
  uint64_t failures = 0;
  for (const double level : options->levels) {
    const std::string label = absl::StrCat(level);
    std::vector<Summary> summaries;
    for (const Target* target : {workload.primitive(), workload.echo()}) {
      if (target == nullptr) continue;
      LevelStats stats = RunLevel(*target, level, *options);
      summaries.push_back(Summarize(stats, options->measure, options->spec.n));
      table.Print(MeasuredRow(target->name(), label, stats, summaries.back()));
      failures += stats.failures();
    }
    if (summaries.size() == 2) {
      table.Print(RatioRow(rpc + "/echo", label, summaries[0], summaries[1]));
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(primserve::kUsage);
  const std::vector<char*> args = primserve::ParseCommandLineOrExitTwo(argc, argv);
  if (args.size() > 1) {
    return primserve::UsageError(
        primserve::kProgram,
        absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[1], "'")));
  }
  return primserve::Main();
}
