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
// --shared_memory); --cuda_shm (primload_cuda, the CUDA build of this file)
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
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "wire/format.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/cli_flags.h"
#include "client/client.h"
#include "client/shared_memory_region.h"
#include "client/shm_placement.h"
#include "client/stream_messages.h"
#include "grpc/grpc.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/slice.h"
#include "core/primitives.h"
#include "core/rpc.h"
#include "reference/reference.h"
#include "reference/sort.h"
#include "proto/primserve/v1/echo.grpc.pb.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#ifdef PRIMLOAD_CUDA
#include "client/cuda_memory_region.h"
#endif

ABSL_FLAG(std::string, address, "localhost:50051", primserve::kAddressFlagHelp);
ABSL_FLAG(std::string, rpc, "scan",
          "The RPC: scan, reduce, select, unique, rle, reduce_by_key or aggregate_by_key.");
ABSL_FLAG(std::string, mode, "primitive",
          "primitive: call --rpc; echo: send the same bytes to the Echo method, which answers "
          "with as many bytes as --rpc would and does no work; both: primitive then echo at "
          "each level, and their ratio.");
ABSL_FLAG(std::string, dtype, "int32",
          "Element type: int32, int64, uint32, uint64, float32 or float64.");
ABSL_FLAG(std::string, op, "sum",
          "scan, reduce, reduce_by_key, aggregate_by_key: sum, prod, min, max, argmin or argmax.");
ABSL_FLAG(int64_t, n, 1 << 20, "Elements per request.");
ABSL_FLAG(int, distinct_requests, 4,
          "Different requests, generated before the run (random integers in [-100, 100], "
          "unsigned in [0, 200], floats in [-1, 1)) and sent in turn. Each is held in memory "
          "with the reference's answer.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the generated requests.");
ABSL_FLAG(int, segments, 1, "scan, reduce: equal segments per request.");
ABSL_FLAG(
    std::string, predicate, "gt",
    "select: keep the elements x passing nonzero, eq, ne, lt, le, gt or ge (x op --operand).");
ABSL_FLAG(double, operand, 0, "select: the predicate's operand (a whole number for integers).");
ABSL_FLAG(std::string, output, "values",
          "select: what to return: values, indices, values_and_indices or count.");
ABSL_FLAG(double, run_length, 4,
          "unique, rle: mean length of runs of equal values; reduce_by_key: of equal keys.");
ABSL_FLAG(int64_t, num_keys, 16, "aggregate_by_key: number of groups (keys are INT32).");
ABSL_FLAG(std::string, concurrency, "1,16,64,256",
          "Closed loop: levels of requests kept outstanding, comma-separated.");
ABSL_FLAG(std::string, rate, "",
          "Open loop: levels of requests per second, comma-separated, sent on schedule whatever "
          "the responses; replaces --concurrency. Latency counts from when a request was due.");
ABSL_FLAG(int, max_outstanding, 4096,
          "--rate: a request due while this many are outstanding is not sent; it counts as a "
          "NOT_SENT error.");
ABSL_FLAG(int, channels, 1, "HTTP/2 connections to spread the requests over.");
ABSL_FLAG(bool, multiplex, false,
          "Send the primitive calls as requests on one Multiplex stream per channel instead of "
          "as unary calls (Echo stays unary).");
ABSL_FLAG(uint64_t, stream_piece_bytes, 0,
          "Send each request through the RPC's streaming form (ScanStream, SelectStream, ...) "
          "in pieces of about this many bytes (whole elements), the answers joined for "
          "--verify; with --mode=echo or both, the same pieces go to EchoStream, each asking "
          "back its share of the answer's bytes. 0: unary calls.");
ABSL_FLAG(double, warmup_seconds, 2, "Load before each level's measurement, not measured.");
ABSL_FLAG(double, measure_seconds, 5, "Measurement time of each level.");
ABSL_FLAG(int, timeout_seconds, 60, "Deadline of each call, and of connecting.");
ABSL_FLAG(bool, verify, false,
          "Check responses against the CPU reference (float SUM and PROD within a tolerance); "
          "a wrong one counts as a mismatch, not as ok.");
ABSL_FLAG(int, verify_every, 10, "--verify: check one response in this many.");
ABSL_FLAG(std::string, csv, "", "Also write the table to this CSV file.");
ABSL_FLAG(bool, shm, false,
          "Put the requests' inputs and outputs in a POSIX shared-memory region (created, "
          "registered with the server, unregistered and removed at exit) instead of the "
          "messages. The server must run on this host with --shared_memory. --mode=primitive "
          "only.");
ABSL_FLAG(bool, cuda_shm, false,
          "primload_cuda only: put the requests' inputs and outputs in device memory "
          "(cudaMalloc on --cuda_device) registered with the server by CUDA IPC; the server "
          "must run on this host with --backend=cuda --shared_memory. --mode=primitive only.");
ABSL_FLAG(int, cuda_device, 0, "--cuda_shm: the GPU to allocate the region on.");
ABSL_FLAG(bool, in_place, false,
          "scan with --shm or --cuda_shm: the output goes over the input (each call scans the "
          "last call's answer, so not with --verify).");

namespace primserve {
namespace {

constexpr char kUsage[] =
    "primload [flags]: load test of one primserve RPC. See --help for the flags.\n"
    "Exit status: 0 all calls ok, 1 failed calls or no server, 2 bad command line.";

// Relative tolerance of float SUM and PROD results, as the GPU tests use.
template <typename T>
constexpr double kTolerance = std::is_same_v<T, float> ? 1e-4 : 1e-12;

enum class Mode { kPrimitive, kEcho, kBoth };

// Where the requests' arrays go: in the messages, in a POSIX shared-memory
// region (--shm) or in device memory registered by CUDA IPC (--cuda_shm).
enum class Placement { kInline, kSystem, kCuda };

#ifdef PRIMLOAD_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

struct RpcInfo {
  Rpc rpc;
  absl::string_view flag;  // --rpc value
  std::vector<Op> ops;     // those it takes; empty: it takes none
};

const std::vector<RpcInfo>& Rpcs() {
  static const auto* rpcs = new std::vector<RpcInfo>{
      {Rpc::kScan, "scan", {Op::kSum, Op::kProd, Op::kMin, Op::kMax}},
      {Rpc::kReduce, "reduce", {Op::kSum, Op::kProd, Op::kMin, Op::kMax, Op::kArgMin, Op::kArgMax}},
      {Rpc::kSelect, "select", {}},
      {Rpc::kUnique, "unique", {}},
      {Rpc::kRunLengthEncode, "rle", {}},
      {Rpc::kReduceByKey, "reduce_by_key", {Op::kSum, Op::kProd, Op::kMin, Op::kMax}},
      {Rpc::kAggregateByKey, "aggregate_by_key", {Op::kSum, Op::kMin, Op::kMax}},
      {Rpc::kSort, "sort", {}},
  };
  return *rpcs;
}

// What every request of the run shares, from the flags.
struct RequestSpec {
  DType dtype = DType::kInt32;
  Op op = Op::kSum;
  size_t n = 0;
  int segments = 1;
  PredicateKind predicate = PredicateKind::kGt;
  double operand = 0;
  v1::SelectRequest::Output output = v1::SelectRequest::VALUES;
  double run_length = 4;
  int64_t num_keys = 16;
};

struct Options {
  RpcInfo rpc;
  Mode mode = Mode::kPrimitive;
  RequestSpec spec;
  int distinct_requests = 0;
  uint64_t seed = 0;
  bool open_loop = false;  // levels are rates, else concurrencies
  std::vector<double> levels;
  int max_outstanding = 0;
  int channels = 0;
  bool multiplex = false;  // primitive calls as requests on Multiplex streams
  uint64_t stream_piece_bytes = 0;  // 0: unary calls
  absl::Duration warmup;
  absl::Duration measure;
  absl::Duration timeout;
  int verify_every = 0;  // 0: no verification
  std::string csv;
  Placement placement = Placement::kInline;
  bool in_place = false;  // a scan's output over its input
  int cuda_device = 0;
};

// ---------------------------------------------------------------------------
// Command line

int UsageError(const absl::Status& status) {
  std::cerr << "primload: " << status.message() << "\nrun 'primload --help' for usage\n";
  return 2;
}

// The value `table` pairs with the --`flag` value `name`.
template <typename T>
absl::StatusOr<T> Lookup(absl::string_view flag, absl::string_view name,
                         std::initializer_list<std::pair<absl::string_view, T>> table) {
  std::vector<absl::string_view> names;
  for (const auto& [key, value] : table) {
    if (key == name) return value;
    names.push_back(key);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", name, " is not one of ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<RpcInfo> ParseRpc(absl::string_view name) {
  std::vector<absl::string_view> names;
  for (const RpcInfo& info : Rpcs()) {
    if (info.flag == name) return info;
    names.push_back(info.flag);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--rpc=", name, " is not one of ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<Op> ParseOp(const RpcInfo& rpc, absl::string_view name) {
  absl::StatusOr<Op> op = Lookup<Op>("op", name,
                                     {{"sum", Op::kSum},
                                      {"prod", Op::kProd},
                                      {"min", Op::kMin},
                                      {"max", Op::kMax},
                                      {"argmin", Op::kArgMin},
                                      {"argmax", Op::kArgMax}});
  if (!op.ok() || rpc.ops.empty()) return op;
  if (std::find(rpc.ops.begin(), rpc.ops.end(), *op) == rpc.ops.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rpc=", rpc.flag, " does not take --op=", name));
  }
  return op;
}

// A comma-separated list of positive numbers; whole ones if `whole`.
absl::StatusOr<std::vector<double>> ParseLevels(absl::string_view flag, absl::string_view text,
                                                bool whole) {
  std::vector<double> levels;
  for (absl::string_view token : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double level;
    if (!absl::SimpleAtod(token, &level) || !(level > 0) || (whole && level != std::floor(level))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": '", token, "' is not a positive", whole ? " whole" : "", " number"));
    }
    levels.push_back(level);
  }
  if (levels.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return levels;
}

// Whether `operand` converts to the element type of `dtype` exactly enough:
// integers must be whole and in range.
bool OperandFits(DType dtype, double operand) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      return true;
    } else {
      return operand == std::floor(operand) &&
             operand >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
             operand < std::ldexp(1.0, std::numeric_limits<T>::digits);
    }
  });
}

absl::Status ParseSpec(const RpcInfo& rpc, RequestSpec* spec) {
  absl::StatusOr<DType> dtype = Lookup<DType>("dtype", absl::GetFlag(FLAGS_dtype),
                                              {{"int32", DType::kInt32},
                                               {"int64", DType::kInt64},
                                               {"uint32", DType::kUint32},
                                               {"uint64", DType::kUint64},
                                               {"float32", DType::kFloat32},
                                               {"float64", DType::kFloat64}});
  if (!dtype.ok()) return dtype.status();
  spec->dtype = *dtype;
  absl::StatusOr<Op> op = ParseOp(rpc, absl::GetFlag(FLAGS_op));
  if (!op.ok()) return op.status();
  spec->op = *op;
  const int64_t n = absl::GetFlag(FLAGS_n);
  if (n < 1) return absl::InvalidArgumentError("--n must be at least 1");
  spec->n = n;
  spec->segments = absl::GetFlag(FLAGS_segments);
  if (spec->segments < 1) return absl::InvalidArgumentError("--segments must be at least 1");
  absl::StatusOr<PredicateKind> predicate =
      Lookup<PredicateKind>("predicate", absl::GetFlag(FLAGS_predicate),
                            {{"nonzero", PredicateKind::kNonzero},
                             {"eq", PredicateKind::kEq},
                             {"ne", PredicateKind::kNe},
                             {"lt", PredicateKind::kLt},
                             {"le", PredicateKind::kLe},
                             {"gt", PredicateKind::kGt},
                             {"ge", PredicateKind::kGe}});
  if (!predicate.ok()) return predicate.status();
  spec->predicate = *predicate;
  spec->operand = absl::GetFlag(FLAGS_operand);
  if (!OperandFits(spec->dtype, spec->operand)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--operand=", spec->operand, " is not a valid ", DTypeName(spec->dtype)));
  }
  absl::StatusOr<v1::SelectRequest::Output> output = Lookup<v1::SelectRequest::Output>(
      "output", absl::GetFlag(FLAGS_output),
      {{"values", v1::SelectRequest::VALUES},
       {"indices", v1::SelectRequest::INDICES},
       {"values_and_indices", v1::SelectRequest::VALUES_AND_INDICES},
       {"count", v1::SelectRequest::COUNT}});
  if (!output.ok()) return output.status();
  spec->output = *output;
  spec->run_length = absl::GetFlag(FLAGS_run_length);
  if (!(spec->run_length >= 1)) {
    return absl::InvalidArgumentError("--run_length must be at least 1");
  }
  spec->num_keys = absl::GetFlag(FLAGS_num_keys);
  if (spec->num_keys < 1 || spec->num_keys > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError("--num_keys must be in [1, 2^31)");
  }
  return absl::OkStatus();
}

absl::StatusOr<Options> ParseOptions() {
  Options options;
  absl::StatusOr<RpcInfo> rpc = ParseRpc(absl::GetFlag(FLAGS_rpc));
  if (!rpc.ok()) return rpc.status();
  options.rpc = *rpc;
  absl::StatusOr<Mode> mode =
      Lookup<Mode>("mode", absl::GetFlag(FLAGS_mode),
                   {{"primitive", Mode::kPrimitive}, {"echo", Mode::kEcho}, {"both", Mode::kBoth}});
  if (!mode.ok()) return mode.status();
  options.mode = *mode;
  if (absl::Status s = ParseSpec(options.rpc, &options.spec); !s.ok()) return s;
  options.distinct_requests = absl::GetFlag(FLAGS_distinct_requests);
  if (options.distinct_requests < 1) {
    return absl::InvalidArgumentError("--distinct_requests must be at least 1");
  }
  options.seed = absl::GetFlag(FLAGS_seed);
  const std::string rate = absl::GetFlag(FLAGS_rate);
  options.open_loop = !rate.empty();
  absl::StatusOr<std::vector<double>> levels =
      options.open_loop ? ParseLevels("rate", rate, /*whole=*/false)
                        : ParseLevels("concurrency", absl::GetFlag(FLAGS_concurrency), true);
  if (!levels.ok()) return levels.status();
  options.levels = *std::move(levels);
  options.max_outstanding = absl::GetFlag(FLAGS_max_outstanding);
  options.channels = absl::GetFlag(FLAGS_channels);
  options.multiplex = absl::GetFlag(FLAGS_multiplex);
  options.stream_piece_bytes = absl::GetFlag(FLAGS_stream_piece_bytes);
  if (options.stream_piece_bytes > 0 && options.multiplex) {
    return absl::InvalidArgumentError(
        "--stream_piece_bytes and --multiplex do not go together: a call is a stream of one "
        "request's pieces, or a request on a Multiplex stream");
  }
  if (options.max_outstanding < 1 || options.channels < 1) {
    return absl::InvalidArgumentError("--max_outstanding and --channels must be at least 1");
  }
  const double warmup = absl::GetFlag(FLAGS_warmup_seconds);
  const double measure = absl::GetFlag(FLAGS_measure_seconds);
  const int timeout = absl::GetFlag(FLAGS_timeout_seconds);
  if (!(warmup >= 0) || !(measure > 0) || timeout < 1) {
    return absl::InvalidArgumentError(
        "--warmup_seconds must not be negative; --measure_seconds and --timeout_seconds must be "
        "positive");
  }
  options.warmup = absl::Seconds(warmup);
  options.measure = absl::Seconds(measure);
  options.timeout = absl::Seconds(timeout);
  if (absl::GetFlag(FLAGS_verify)) {
    options.verify_every = absl::GetFlag(FLAGS_verify_every);
    if (options.verify_every < 1) return absl::InvalidArgumentError("--verify_every must be >= 1");
  }
  options.csv = absl::GetFlag(FLAGS_csv);
  const bool shm = absl::GetFlag(FLAGS_shm), cuda_shm = absl::GetFlag(FLAGS_cuda_shm);
  if (shm && cuda_shm) return absl::InvalidArgumentError("give one of --shm and --cuda_shm");
  if (cuda_shm && !kCudaBuild) {
    return absl::InvalidArgumentError(
        "--cuda_shm needs primload_cuda (bazel build //client:primload_cuda, a CUDA build); "
        "this primload is CPU-only");
  }
  options.placement = shm ? Placement::kSystem : cuda_shm ? Placement::kCuda : Placement::kInline;
  const char* placement_flag = shm ? "--shm" : "--cuda_shm";
  if (options.placement != Placement::kInline && options.stream_piece_bytes > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        placement_flag, " and --stream_piece_bytes do not go together: the streaming RPCs carry "
        "inline bytes only"));
  }
  if (options.placement != Placement::kInline && options.mode != Mode::kPrimitive) {
    return absl::InvalidArgumentError(absl::StrCat(
        placement_flag, " places the primitive's arrays; the Echo method carries inline bytes "
        "only: use --mode=primitive (and --mode=echo without ", placement_flag,
        " for the transport's floor)"));
  }
  options.in_place = absl::GetFlag(FLAGS_in_place);
  if (options.in_place) {
    if (options.placement == Placement::kInline) {
      return absl::InvalidArgumentError("--in_place needs --shm or --cuda_shm");
    }
    if (options.rpc.rpc != Rpc::kScan) {
      return absl::InvalidArgumentError("--in_place: only --rpc=scan runs in place");
    }
    if (options.verify_every > 0) {
      return absl::InvalidArgumentError(
          "--in_place and --verify do not go together: each call scans the last one's answer");
    }
  }
  options.cuda_device = absl::GetFlag(FLAGS_cuda_device);
  if (options.cuda_device < 0) return absl::InvalidArgumentError("--cuda_device must be >= 0");
  return options;
}

// ---------------------------------------------------------------------------
// Targets: a method and its requests, serialized once

// Whether a serialized response to one request is right.
using Check = std::function<bool(grpc::ByteBuffer response)>;

// The Check of a parsed response.
template <typename Response, typename F>
Check Parsed(F check) {
  return [check = std::move(check)](grpc::ByteBuffer buffer) {
    Response response;
    return grpc::SerializationTraits<Response>::Deserialize(&buffer, &response).ok() &&
           check(response);
  };
}

// How one call went.
struct CallOutcome {
  grpc::Status status;
  uint64_t bytes = 0;     // request + response, when status is OK
  bool verified = false;  // the response was checked
  bool mismatch = false;  // ... and it was wrong
};

// A method and the requests the run sends it.
class Target {
 public:
  virtual ~Target() = default;
  virtual const std::string& name() const = 0;
  virtual size_t num_requests() const = 0;
  // `check` may be empty when no call will be verified.
  virtual void Add(const google::protobuf::Message& request, Check check) = 0;
  // Starts a call of request `index` on channel `channel`; `done` runs once,
  // on a gRPC thread, when it ends. `verify`: check the response.
  virtual void Start(size_t channel, size_t index, bool verify,
                     std::function<void(const CallOutcome&)> done) const = 0;
};

// Each call a unary call.
class UnaryTarget final : public Target {
 public:
  UnaryTarget(std::string name, std::string method,
              const std::vector<std::shared_ptr<grpc::Channel>>& channels, absl::Duration timeout)
      : name_(std::move(name)), method_(std::move(method)), timeout_(timeout) {
    for (const auto& channel : channels) {
      stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
    }
  }

  const std::string& name() const override { return name_; }
  size_t num_requests() const override { return requests_.size(); }

  void Add(const google::protobuf::Message& request, Check check) override {
    grpc::Slice bytes(request.SerializeAsString());
    requests_.push_back({grpc::ByteBuffer(&bytes, 1), std::move(check)});
  }

  void Start(size_t channel, size_t index, bool verify,
             std::function<void(const CallOutcome&)> done) const override {
    auto* call = new Call;  // deleted by the callback
    call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
    const Request& request = requests_[index];
    stubs_[channel]->UnaryCall(
        &call->context, method_, grpc::StubOptions(), &request.bytes, &call->response,
        [call, &request, verify, done = std::move(done)](grpc::Status status) {
          CallOutcome outcome;
          outcome.status = std::move(status);
          if (outcome.status.ok()) {
            outcome.bytes = request.bytes.Length() + call->response.Length();
            outcome.verified = verify;
            outcome.mismatch = verify && !request.check(call->response);
          }
          delete call;
          done(outcome);
        });
  }

 private:
  struct Request {
    grpc::ByteBuffer bytes;
    Check check;
  };
  struct Call {
    grpc::ClientContext context;
    grpc::ByteBuffer response;
  };

  const std::string name_;
  const std::string method_;  // "/package.Service/Method"
  const absl::Duration timeout_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // one per channel
  std::vector<Request> requests_;
};

using wire::Varint;

// One Multiplex stream: requests go out in order (one write at a time),
// answers come back in any order and are matched to their calls by id.
class MultiplexStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  struct Call {
    uint64_t request_bytes = 0;
    const Check* check = nullptr;  // null: not verified
    std::function<void(const CallOutcome&)> done;
  };

  MultiplexStream(grpc::GenericStub& stub, const std::string& method) {
    stub.PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    StartRead(&incoming_);
    StartCall();
  }

  // Sends `body` (the request's oneof field, tag and length included) as call
  // `id`'s request.
  void Send(const grpc::Slice& body, Call call) {
    const std::string id = Varint(next_id_.fetch_add(1));
    grpc::Slice slices[] = {grpc::Slice("\x08" + id), body};
    grpc::ByteBuffer request(slices, 2);
    const uint64_t key = DecodeId(id);
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      call.request_bytes = request.Length();
      calls_.emplace(key, std::move(call));
      writes_.push_back(std::move(request));
      if (!writing_) start = writing_ = true;
    }
    if (start) StartWrite(&writes_.front());
  }

  // Half-closes the stream once every request is written, and waits for its
  // end. Every call must have been answered.
  void Close() {
    bool now = false;
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      now = !writing_;
    }
    if (now) StartWritesDone();
    done_.WaitForNotification();
  }

  void OnWriteDone(bool ok) override {
    bool next = false, more = false, close = false;
    {
      absl::MutexLock lock(&mu_);
      writes_.pop_front();
      if (!ok) writes_.clear();
      next = !writes_.empty();
      more = writes_.size() > 1;
      writing_ = next;
      close = !next && closing_;
    }
    // With more requests queued behind it, a request may wait in gRPC's
    // buffer for the next: several go out in one write to the socket.
    if (next) StartWrite(&writes_.front(), more ? grpc::WriteOptions().set_buffer_hint()
                                                : grpc::WriteOptions());
    if (close) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    v1::MultiplexResponse answer;
    const uint64_t response_bytes = incoming_.Length();
    const bool parsed =
        grpc::SerializationTraits<v1::MultiplexResponse>::Deserialize(&incoming_, &answer).ok();
    StartRead(&incoming_);
    Call call;
    {
      absl::MutexLock lock(&mu_);
      auto it = calls_.find(answer.id());
      if (!parsed || it == calls_.end()) return;
      call = std::move(it->second);
      calls_.erase(it);
    }
    CallOutcome outcome;
    outcome.status = answer.code() == 0
                         ? grpc::Status::OK
                         : grpc::Status(static_cast<grpc::StatusCode>(answer.code()),
                                        answer.message());
    if (outcome.status.ok()) {
      outcome.bytes = call.request_bytes + response_bytes;
      outcome.verified = call.check != nullptr;
      outcome.mismatch = call.check != nullptr && !(*call.check)(InnerResponse(answer));
    }
    call.done(outcome);
  }

  void OnDone(const grpc::Status& status) override {
    std::vector<Call> orphans;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [id, call] : calls_) orphans.push_back(std::move(call));
      calls_.clear();
    }
    for (Call& call : orphans) {
      CallOutcome outcome;
      outcome.status = status.ok() ? grpc::Status(grpc::StatusCode::UNKNOWN,
                                                  "the stream ended without this answer")
                                   : status;
      call.done(outcome);
    }
    done_.Notify();
  }

 private:
  static uint64_t DecodeId(const std::string& varint) {
    uint64_t value = 0;
    for (size_t i = 0; i < varint.size(); ++i) {
      value |= static_cast<uint64_t>(static_cast<uint8_t>(varint[i]) & 0x7f) << (7 * i);
    }
    return value;
  }

  // The answer's response (the oneof) serialized alone, as a unary call
  // would have returned it.
  static grpc::ByteBuffer InnerResponse(const v1::MultiplexResponse& answer) {
    const google::protobuf::Reflection* reflection = answer.GetReflection();
    const google::protobuf::OneofDescriptor* oneof =
        answer.GetDescriptor()->FindOneofByName("response");
    const google::protobuf::FieldDescriptor* field =
        reflection->GetOneofFieldDescriptor(answer, oneof);
    std::string bytes;
    if (field != nullptr) bytes = reflection->GetMessage(answer, field).SerializeAsString();
    grpc::Slice slice(bytes);
    return grpc::ByteBuffer(&slice, 1);
  }

  grpc::ClientContext context_;
  grpc::ByteBuffer incoming_;
  std::atomic<uint64_t> next_id_{0};
  absl::Mutex mu_;
  std::map<uint64_t, Call> calls_ ABSL_GUARDED_BY(mu_);
  // The front is being written; deque keeps its address while others queue.
  std::deque<grpc::ByteBuffer> writes_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Notification done_;
};

// Each call a request on the channel's Multiplex stream.
class MultiplexTarget final : public Target {
 public:
  MultiplexTarget(std::string name, Rpc rpc,
                  const std::vector<std::shared_ptr<grpc::Channel>>& channels)
      : name_(std::move(name)),
        field_tag_(Varint(((RpcIndex(rpc) + 2) << 3) | 2)) {  // MultiplexRequest's oneof
    const std::string method =
        absl::StrCat("/", v1::Primitives::service_full_name(), "/Multiplex");
    for (const auto& channel : channels) {
      stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
      streams_.push_back(std::make_unique<MultiplexStream>(*stubs_.back(), method));
    }
  }
  ~MultiplexTarget() override {
    for (auto& stream : streams_) stream->Close();
  }

  const std::string& name() const override { return name_; }
  size_t num_requests() const override { return requests_.size(); }

  void Add(const google::protobuf::Message& request, Check check) override {
    const std::string bytes = request.SerializeAsString();
    requests_.push_back({grpc::Slice(field_tag_ + Varint(bytes.size()) + bytes), std::move(check)});
  }

  void Start(size_t channel, size_t index, bool verify,
             std::function<void(const CallOutcome&)> done) const override {
    const Request& request = requests_[index];
    streams_[channel]->Send(request.body,
                            {0, verify ? &request.check : nullptr, std::move(done)});
  }

 private:
  struct Request {
    grpc::Slice body;
    Check check;
  };

  const std::string name_;
  const std::string field_tag_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;
  std::vector<std::unique_ptr<MultiplexStream>> streams_;
  std::vector<Request> requests_;
};

// ---------------------------------------------------------------------------
// Streams: a request cut into pieces and sent through the RPC's *Stream form

// One message of a stream: elements [start, end) of the whole request's arrays.
struct StreamPiece {
  std::unique_ptr<google::protobuf::Message> message;
  uint64_t start = 0;
  uint64_t end = 0;
};

// `whole` as the messages of a stream of pieces of about `piece_bytes`
// (StreamCutter), cut before the load starts. At least one message.
std::vector<StreamPiece> CutIntoPieces(const google::protobuf::Message& whole,
                                       uint64_t piece_bytes) {
  StreamCutter cutter(whole);
  const uint64_t step = cutter.PieceElements(piece_bytes);
  std::vector<StreamPiece> pieces;
  while (!cutter.done()) {
    StreamPiece piece{std::unique_ptr<google::protobuf::Message>(whole.New()), cutter.cut(),
                      std::min(cutter.elements(), cutter.cut() + step)};
    cutter.Next(step, piece.message.get());
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

// The answers of a stream as the one response the unary call gives.
bool JoinAnswers(const std::vector<grpc::ByteBuffer>& answers, google::protobuf::Message* joined) {
  joined->Clear();
  std::unique_ptr<google::protobuf::Message> answer(joined->New());
  for (grpc::ByteBuffer buffer : answers) {
    if (!grpc::GenericDeserialize<grpc::ProtoBufferReader, google::protobuf::Message>(
             &buffer, answer.get())
             .ok()) {
      return false;
    }
    AppendAnswer(answer.get(), joined);
  }
  return true;
}

// One call of a stream: writes the messages in order, one at a time, while
// reading the answers; deletes itself when done.
class StreamCall final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `done` gets the call's status, its answers' bytes and (with
  // `keep_answers`) the answers.
  using Done = std::function<void(const grpc::Status&, uint64_t response_bytes,
                                  std::vector<grpc::ByteBuffer> answers)>;

  StreamCall(const std::vector<grpc::ByteBuffer>* messages, bool keep_answers, Done done)
      : messages_(messages), keep_answers_(keep_answers), done_(std::move(done)) {}

  void Start(grpc::GenericStub& stub, const std::string& method, absl::Duration timeout) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    stub.PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    StartRead(&incoming_);
    WriteNext();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();  // else the call is ending: OnDone says how
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    response_bytes_ += incoming_.Length();
    if (keep_answers_) answers_.push_back(incoming_);
    StartRead(&incoming_);
  }

  void OnDone(const grpc::Status& status) override {
    done_(status, response_bytes_, std::move(answers_));
    delete this;
  }

 private:
  void WriteNext() {
    if (next_ < messages_->size()) {
      StartWrite(&(*messages_)[next_++]);
    } else {
      StartWritesDone();
    }
  }

  const std::vector<grpc::ByteBuffer>* const messages_;
  const bool keep_answers_;
  const Done done_;
  grpc::ClientContext context_;
  grpc::ByteBuffer incoming_;
  size_t next_ = 0;
  uint64_t response_bytes_ = 0;
  std::vector<grpc::ByteBuffer> answers_;
};

// Each call a stream of a request's pieces, to the RPC's *Stream form (Add)
// or to EchoStream (AddMessages).
class StreamTarget final : public Target {
 public:
  // Whether a stream's answers are right.
  using AnswersCheck = std::function<bool(const std::vector<grpc::ByteBuffer>&)>;

  // `response_type`: the unary response the answers join into (Add); null
  // for AddMessages only.
  StreamTarget(std::string name, std::string method,
               const std::vector<std::shared_ptr<grpc::Channel>>& channels,
               absl::Duration timeout, uint64_t piece_bytes,
               const google::protobuf::Message* response_type)
      : name_(std::move(name)),
        method_(std::move(method)),
        timeout_(timeout),
        piece_bytes_(piece_bytes),
        response_type_(response_type) {
    for (const auto& channel : channels) {
      stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
    }
  }

  const std::string& name() const override { return name_; }
  size_t num_requests() const override { return requests_.size(); }

  // `request` cut into pieces of about piece_bytes; `check` sees the
  // answers joined into the unary response.
  void Add(const google::protobuf::Message& request, Check check) override {
    std::vector<const google::protobuf::Message*> messages;
    const std::vector<StreamPiece> pieces = CutIntoPieces(request, piece_bytes_);
    for (const StreamPiece& piece : pieces) messages.push_back(piece.message.get());
    AnswersCheck answers_check;
    if (check) {
      answers_check = [check = std::move(check), type = response_type_](
                          const std::vector<grpc::ByteBuffer>& answers) {
        std::unique_ptr<google::protobuf::Message> joined(type->New());
        if (!JoinAnswers(answers, joined.get())) return false;
        grpc::Slice bytes(joined->SerializeAsString());
        return check(grpc::ByteBuffer(&bytes, 1));
      };
    }
    AddMessages(messages, std::move(answers_check));
  }

  // A stream of these messages, as they are.
  void AddMessages(const std::vector<const google::protobuf::Message*>& messages,
                   AnswersCheck check) {
    Request request;
    for (const google::protobuf::Message* message : messages) {
      grpc::Slice bytes(message->SerializeAsString());
      request.messages.emplace_back(&bytes, 1);
      request.bytes += request.messages.back().Length();
    }
    request.check = std::move(check);
    requests_.push_back(std::move(request));
  }

  void Start(size_t channel, size_t index, bool verify,
             std::function<void(const CallOutcome&)> done) const override {
    const Request& request = requests_[index];
    auto* call = new StreamCall(
        &request.messages, verify,
        [&request, verify, done = std::move(done)](
            const grpc::Status& status, uint64_t response_bytes,
            std::vector<grpc::ByteBuffer> answers) {
          CallOutcome outcome;
          outcome.status = status;
          if (status.ok()) {
            outcome.bytes = request.bytes + response_bytes;
            outcome.verified = verify;
            outcome.mismatch = verify && !request.check(answers);
          }
          done(outcome);
        });
    call->Start(*stubs_[channel], method_, timeout_);
  }

 private:
  struct Request {
    std::vector<grpc::ByteBuffer> messages;
    uint64_t bytes = 0;
    AnswersCheck check;
  };

  const std::string name_;
  const std::string method_;
  const absl::Duration timeout_;
  const uint64_t piece_bytes_;
  const google::protobuf::Message* const response_type_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // one per channel
  std::vector<Request> requests_;
};

// Whether `response` holds what Echo promises: the data of the request's
// arrays, concatenated, then cut or zero-padded to response_bytes.
bool EchoMatches(const v1::EchoRequest& request, const v1::EchoResponse& response) {
  absl::string_view payload = response.payload();
  if (payload.size() != request.response_bytes()) return false;
  for (const v1::Array& array : request.arrays()) {
    const absl::string_view part = absl::string_view(array.data()).substr(0, payload.size());
    if (!absl::StartsWith(payload, part)) return false;
    payload.remove_prefix(part.size());
  }
  return payload.find_first_not_of('\0') == absl::string_view::npos;
}

// An Echo request with the arrays of `primitive` that asks for
// `response_bytes` back.
v1::EchoRequest EchoOf(const google::protobuf::Message& primitive, uint64_t response_bytes) {
  v1::EchoRequest echo;
  const google::protobuf::Descriptor* descriptor = primitive.GetDescriptor();
  const google::protobuf::Reflection* reflection = primitive.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (field->message_type() == v1::Array::descriptor() && !field->is_repeated() &&
        reflection->HasField(primitive, field)) {
      echo.add_arrays()->CopyFrom(reflection->GetMessage(primitive, field));
    }
  }
  echo.set_response_bytes(response_bytes);
  return echo;
}

#ifdef PRIMLOAD_CUDA
// A CudaMemoryRegion as a PlacementRegion; owns it.
class CudaPlacementRegion final : public PlacementRegion {
 public:
  explicit CudaPlacementRegion(std::unique_ptr<CudaMemoryRegion> region)
      : region_(std::move(region)) {}
  const std::string& name() const override { return region_->name(); }
  uint64_t size() const override { return region_->size(); }
  absl::Status Write(uint64_t offset, absl::string_view bytes) override {
    return region_->Write(offset, bytes.data(), bytes.size());
  }
  absl::Status Read(uint64_t offset, uint64_t bytes, std::string* to) const override {
    to->resize(bytes);
    return region_->Read(offset, to->data(), bytes);
  }

 private:
  const std::unique_ptr<CudaMemoryRegion> region_;
};
#endif

// The region of `bytes` that `placement` asks for, registered on `channel`.
absl::StatusOr<std::unique_ptr<PlacementRegion>> CreateRegion(
    Placement placement, const std::shared_ptr<grpc::Channel>& channel, uint64_t bytes,
    int cuda_device) {
  const std::string name = absl::StrCat("primload-", getpid());
  if (placement == Placement::kSystem) {
    absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> region =
        SharedMemoryRegion::Create(channel, name, bytes);
    if (!region.ok()) return region.status();
    UnlinkOnSignal((*region)->key());
    return SystemPlacementRegion(*std::move(region));
  }
#ifdef PRIMLOAD_CUDA
  absl::StatusOr<std::unique_ptr<CudaMemoryRegion>> region =
      CudaMemoryRegion::Create(channel, name, bytes, cuda_device);
  if (!region.ok()) return region.status();
  return std::unique_ptr<PlacementRegion>(new CudaPlacementRegion(*std::move(region)));
#else
  return absl::FailedPreconditionError("this primload has no CUDA");
#endif
}

// The targets of the run, filled by the request generators below.
class Workload {
 public:
  Workload(const Options& options, const std::vector<std::shared_ptr<grpc::Channel>>& channels)
      : verify_(options.verify_every > 0),
        placement_(options.placement),
        in_place_(options.in_place),
        cuda_device_(options.cuda_device),
        stream_piece_bytes_(options.stream_piece_bytes) {
    const std::string service = absl::StrCat("/", v1::Primitives::service_full_name(), "/");
    if (options.mode != Mode::kEcho) {
      if (options.stream_piece_bytes > 0) {
        const std::string method = absl::StrCat(RpcName(options.rpc.rpc), "Stream");
        primitive_ = std::make_unique<StreamTarget>(
            absl::StrCat(options.rpc.flag, "/stream"), service + method, channels,
            options.timeout, options.stream_piece_bytes,
            google::protobuf::MessageFactory::generated_factory()->GetPrototype(
                google::protobuf::DescriptorPool::generated_pool()
                    ->FindServiceByName(v1::Primitives::service_full_name())
                    ->FindMethodByName(method)
                    ->output_type()));
      } else if (options.multiplex) {
        primitive_ = std::make_unique<MultiplexTarget>(
            absl::StrCat(options.rpc.flag, "/multiplex"), options.rpc.rpc, channels);
      } else {
        primitive_ = std::make_unique<UnaryTarget>(
            std::string(options.rpc.flag),
            absl::StrCat("/", v1::Primitives::service_full_name(), "/", RpcName(options.rpc.rpc)),
            channels, options.timeout);
      }
    }
    if (options.mode != Mode::kPrimitive && options.stream_piece_bytes > 0) {
      auto echo = std::make_unique<StreamTarget>(
          "echo/stream", absl::StrCat("/", v1::Echo::service_full_name(), "/EchoStream"),
          channels, options.timeout, options.stream_piece_bytes, nullptr);
      echo_stream_ = echo.get();
      echo_ = std::move(echo);
    } else if (options.mode != Mode::kPrimitive) {
      echo_ = std::make_unique<UnaryTarget>("echo",
                                       absl::StrCat("/", v1::Echo::service_full_name(), "/Echo"),
                                       channels, options.timeout);
    }
  }

  bool verify() const { return verify_; }
  // Null when the mode does not call it.
  const Target* primitive() const { return primitive_.get(); }
  const Target* echo() const { return echo_.get(); }
  uint64_t first_request_bytes() const { return first_request_bytes_; }
  uint64_t first_response_bytes() const { return first_response_bytes_; }
  // The shared-memory region's bytes; 0 when the arrays go inline.
  uint64_t region_bytes() const { return region_ == nullptr ? 0 : region_->size(); }

  // With --shm or --cuda_shm: creates the region every request added takes,
  // registers it on `channel`, writes the requests' inputs there, points
  // their outputs there and hands them to the targets. Nothing to do inline.
  absl::Status Place(const std::shared_ptr<grpc::Channel>& channel) {
    if (placement_ == Placement::kInline) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<PlacementRegion>> region =
        CreateRegion(placement_, channel, std::max<uint64_t>(placed_bytes_, 1), cuda_device_);
    if (!region.ok()) return region.status();
    region_ = *std::move(region);
    uint64_t cursor = 0;
    for (auto& place : pending_) {
      if (absl::Status s = place(*region_, &cursor); !s.ok()) return s;
    }
    pending_.clear();
    return absl::OkStatus();
  }

  // Adds a request, the reference's response to it, and a check of the
  // responses (empty unless verify()). Its echo asks for as many bytes back
  // as the response has.
  template <typename Response>
  void Add(const google::protobuf::Message& request, const Response& expected,
           std::function<bool(const Response&)> check) {
    if (placement_ != Placement::kInline) return AddPlaced(request, expected, std::move(check));
    if (first_request_bytes_ == 0) {
      first_request_bytes_ = request.ByteSizeLong();
      first_response_bytes_ = expected.ByteSizeLong();
    }
    if (primitive_ != nullptr) {
      primitive_->Add(request, verify_ ? Parsed<Response>(std::move(check)) : nullptr);
    }
    if (echo_stream_ != nullptr) {
      AddEchoStream(request, expected.ByteSizeLong());
    } else if (echo_ != nullptr) {
      const v1::EchoRequest echo = EchoOf(request, expected.ByteSizeLong());
      echo_->Add(echo, verify_ ? Parsed<v1::EchoResponse>([echo](const v1::EchoResponse& r) {
                   return EchoMatches(echo, r);
                 })
                               : nullptr);
    }
  }

 private:
  // `request`'s pieces to EchoStream, each asking back its share (by
  // elements) of the `response_bytes` the primitive answers with.
  void AddEchoStream(const google::protobuf::Message& request, uint64_t response_bytes) {
    const std::vector<StreamPiece> pieces = CutIntoPieces(request, stream_piece_bytes_);
    const uint64_t n = pieces.back().end;
    const auto share = [&](uint64_t element) {
      return n == 0 ? response_bytes : response_bytes * element / n;
    };
    auto echoes = std::make_shared<std::vector<v1::EchoRequest>>();
    for (size_t i = 0; i < pieces.size(); ++i) {
      const uint64_t start = i == 0 ? 0 : share(pieces[i].start);
      echoes->push_back(EchoOf(*pieces[i].message, share(pieces[i].end) - start));
    }
    std::vector<const google::protobuf::Message*> messages;
    for (const v1::EchoRequest& echo : *echoes) messages.push_back(&echo);
    StreamTarget::AnswersCheck check;
    if (verify_) {
      check = [echoes](const std::vector<grpc::ByteBuffer>& answers) {
        if (answers.size() != echoes->size()) return false;
        for (size_t i = 0; i < answers.size(); ++i) {
          v1::EchoResponse response;
          grpc::ByteBuffer answer = answers[i];
          if (!grpc::SerializationTraits<v1::EchoResponse>::Deserialize(&answer, &response)
                   .ok() ||
              !EchoMatches((*echoes)[i], response)) {
            return false;
          }
        }
        return true;
      };
    }
    echo_stream_->AddMessages(messages, std::move(check));
  }

  // Keeps `request` until Place() puts it in the region; its answers are
  // read back from there before `check` sees them.
  template <typename Response>
  void AddPlaced(const google::protobuf::Message& request, const Response& expected,
                 std::function<bool(const Response&)> check) {
    std::shared_ptr<google::protobuf::Message> owned(request.New());
    owned->CopyFrom(request);
    OutputRoom room = RoomOf(expected);
    placed_bytes_ += PlacedBytes(*owned, room, in_place_);
    if (first_response_bytes_ == 0) first_response_bytes_ = expected.ByteSizeLong();
    pending_.push_back([this, owned, room = std::move(room), check = std::move(check)](
                           PlacementRegion& region, uint64_t* cursor) mutable -> absl::Status {
      if (absl::Status s = PlaceRequest(owned.get(), room, in_place_, region, cursor); !s.ok()) {
        return s;
      }
      if (first_request_bytes_ == 0) first_request_bytes_ = owned->ByteSizeLong();
      Check placed_check;
      if (verify_) {
        placed_check = Parsed<Response>([&region, check = std::move(check)](const Response& r) {
          Response answer = r;
          return ReadBack(&answer, region).ok() && check(answer);
        });
      }
      if (primitive_ != nullptr) primitive_->Add(*owned, std::move(placed_check));
      return absl::OkStatus();
    });
  }

  const bool verify_;
  const Placement placement_;
  const bool in_place_;
  const int cuda_device_;
  // Declared before the targets, so it outlives their calls.
  std::unique_ptr<PlacementRegion> region_;
  uint64_t placed_bytes_ = 0;
  std::vector<std::function<absl::Status(PlacementRegion&, uint64_t*)>> pending_;
  const uint64_t stream_piece_bytes_;
  std::unique_ptr<Target> primitive_;
  std::unique_ptr<Target> echo_;
  StreamTarget* echo_stream_ = nullptr;  // echo_, when it streams
  uint64_t first_request_bytes_ = 0;
  uint64_t first_response_bytes_ = 0;
};

// ---------------------------------------------------------------------------
// Requests, with the reference's answers

template <typename T>
T RandomValue(std::mt19937_64& rng) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::uniform_real_distribution<T>(-1, 1)(rng);
  } else {
    return static_cast<T>(std::uniform_int_distribution<int64_t>(
        std::is_signed_v<T> ? -100 : 0, std::is_signed_v<T> ? 100 : 200)(rng));
  }
}

template <typename T>
std::vector<T> RandomValues(size_t n, std::mt19937_64& rng) {
  std::vector<T> values(n);
  for (T& value : values) value = RandomValue<T>(rng);
  return values;
}

// Random values in runs: each element starts a new run with probability
// 1 / mean_run_length.
template <typename T>
std::vector<T> RandomRuns(size_t n, double mean_run_length, std::mt19937_64& rng) {
  std::bernoulli_distribution new_run(1 / mean_run_length);
  std::vector<T> values(n);
  for (size_t i = 0; i < n; ++i)
    values[i] = i == 0 || new_run(rng) ? RandomValue<T>(rng) : values[i - 1];
  return values;
}

// Keys 0, 0, 1, 2, 2, 2, ...: runs of mean length `mean_run_length`.
std::vector<int32_t> RunKeys(size_t n, double mean_run_length, std::mt19937_64& rng) {
  std::bernoulli_distribution new_run(1 / mean_run_length);
  std::vector<int32_t> keys(n);
  for (size_t i = 1; i < n; ++i) keys[i] = keys[i - 1] + new_run(rng);
  return keys;
}

std::vector<int32_t> RandomKeys(size_t n, int32_t num_keys, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> uniform(0, num_keys - 1);
  std::vector<int32_t> keys(n);
  for (int32_t& key : keys) key = uniform(rng);
  return keys;
}

// Equal segments; none (one segment over all) for one.
std::vector<uint64_t> SegmentStarts(const RequestSpec& spec) {
  std::vector<uint64_t> starts;
  if (spec.segments == 1) return starts;
  for (int k = 0; k < spec.segments; ++k) starts.push_back(spec.n * k / spec.segments);
  return starts;
}

using ArrayCheck = std::function<bool(const v1::Array&)>;

ArrayCheck Exactly(v1::Array expected) {
  return [expected = std::move(expected)](const v1::Array& got) {
    return got.dtype() == expected.dtype() && got.data() == expected.data();
  };
}

template <typename T>
ArrayCheck Approximately(std::vector<T> want, std::vector<double> tolerance) {
  return [want = std::move(want), tolerance = std::move(tolerance)](const v1::Array& got) {
    absl::StatusOr<std::vector<T>> values = UnpackArray<T>(got);
    if (!values.ok() || values->size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i) {
      if (!(std::fabs(static_cast<double>((*values)[i]) - static_cast<double>(want[i])) <=
            tolerance[i]))
        return false;
    }
    return true;
  };
}

// Checks the results `want` that `compute(values)` derives from `input` with
// `op`: exactly, but for float SUM and PROD, whose results depend on the
// order of operations (the GPU's differs from the reference's loop): SUM
// within kTolerance of the same sums over |x|, PROD within kTolerance of the
// product plus T's smallest normal (long products underflow).
template <typename T, typename Compute>
ArrayCheck ResultCheck(const std::vector<T>& input, Op op, const std::vector<T>& want,
                       Compute compute) {
  if constexpr (std::is_floating_point_v<T>) {
    if (op == Op::kSum) {
      std::vector<double> magnitudes(input.size());
      for (size_t i = 0; i < input.size(); ++i)
        magnitudes[i] = std::fabs(static_cast<double>(input[i]));
      std::vector<double> tolerance = compute(absl::MakeConstSpan(magnitudes));
      for (double& t : tolerance) t *= kTolerance<T>;
      return Approximately<T>(want, std::move(tolerance));
    }
    if (op == Op::kProd) {
      std::vector<double> tolerance(want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        tolerance[i] =
            kTolerance<T> * std::fabs(static_cast<double>(want[i])) + std::numeric_limits<T>::min();
      }
      return Approximately<T>(want, std::move(tolerance));
    }
  }
  return Exactly(PackArray<T>(want));
}

template <typename T>
void AddScan(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> input = RandomValues<T>(spec.n, rng);
  const std::vector<uint64_t> segments = SegmentStarts(spec);
  v1::ScanRequest request;
  *request.mutable_input() = PackArray<T>(input);
  request.set_op(static_cast<v1::Op>(spec.op));
  request.mutable_segment_offsets()->Add(segments.begin(), segments.end());
  const auto scan = [&](auto values) {
    return reference::Scan(values, spec.op, /*exclusive=*/false, segments);
  };
  const std::vector<T> want = scan(absl::MakeConstSpan(input));
  v1::ScanResponse expected;
  *expected.mutable_output() = PackArray<T>(want);
  std::function<bool(const v1::ScanResponse&)> check;
  if (workload->verify()) {
    check = [output = ResultCheck(input, spec.op, want, scan)](const v1::ScanResponse& r) {
      return output(r.output());
    };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddReduce(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> input = RandomValues<T>(spec.n, rng);
  const std::vector<uint64_t> segments = SegmentStarts(spec);
  v1::ReduceRequest request;
  *request.mutable_input() = PackArray<T>(input);
  request.set_op(static_cast<v1::Op>(spec.op));
  request.mutable_segment_offsets()->Add(segments.begin(), segments.end());
  const auto reduce = [&](auto values) {
    return reference::Reduce(values, spec.op, segments).values;
  };
  const reference::ReduceResult<T> want = reference::Reduce<T>(input, spec.op, segments);
  v1::ReduceResponse expected;
  *expected.mutable_values() = PackArray<T>(want.values);
  if (spec.op == Op::kArgMin || spec.op == Op::kArgMax) {
    *expected.mutable_indices() = PackArray<int64_t>(want.indices);
  }
  std::function<bool(const v1::ReduceResponse&)> check;
  if (workload->verify()) {
    check = [values = ResultCheck(input, spec.op, want.values, reduce),
             indices = Exactly(expected.indices())](const v1::ReduceResponse& r) {
      return values(r.values()) && indices(r.indices());
    };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddSelect(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> input = RandomValues<T>(spec.n, rng);
  const Predicate<T> predicate{spec.predicate, static_cast<T>(spec.operand), T{}};
  v1::SelectRequest request;
  *request.mutable_input() = PackArray<T>(input);
  request.mutable_predicate()->set_kind(static_cast<v1::Predicate::Kind>(spec.predicate));
  *request.mutable_predicate()->mutable_operand() = ScalarOf(predicate.operand);
  request.set_output(spec.output);
  const reference::SelectResult<T> want = reference::Select<T>(
      input, reference::EvaluatePredicate<T>(input, predicate), /*partition=*/false);
  v1::SelectResponse expected;
  if (spec.output != v1::SelectRequest::INDICES && spec.output != v1::SelectRequest::COUNT) {
    *expected.mutable_values() = PackArray<T>(want.values);
  }
  if (spec.output == v1::SelectRequest::INDICES ||
      spec.output == v1::SelectRequest::VALUES_AND_INDICES) {
    *expected.mutable_indices() = PackArray<int64_t>(want.indices);
  }
  expected.set_count(want.count);
  std::function<bool(const v1::SelectResponse&)> check;
  if (workload->verify()) {
    check = [values = Exactly(expected.values()), indices = Exactly(expected.indices()),
             count = want.count](const v1::SelectResponse& r) {
      return values(r.values()) && indices(r.indices()) && r.count() == count;
    };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddUnique(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> input = RandomRuns<T>(spec.n, spec.run_length, rng);
  v1::UniqueRequest request;
  *request.mutable_input() = PackArray<T>(input);
  v1::UniqueResponse expected;
  *expected.mutable_values() = PackArray<T>(reference::Unique<T>(input));
  std::function<bool(const v1::UniqueResponse&)> check;
  if (workload->verify()) {
    check = [values = Exactly(expected.values())](const v1::UniqueResponse& r) {
      return values(r.values());
    };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddRunLengthEncode(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> input = RandomRuns<T>(spec.n, spec.run_length, rng);
  v1::RunLengthEncodeRequest request;
  *request.mutable_input() = PackArray<T>(input);
  const reference::Runs<T> runs = reference::RunLengthEncode<T>(input);
  v1::RunLengthEncodeResponse expected;
  *expected.mutable_values() = PackArray<T>(runs.values);
  *expected.mutable_lengths() = PackArray<int64_t>(runs.lengths);
  std::function<bool(const v1::RunLengthEncodeResponse&)> check;
  if (workload->verify()) {
    check = [values = Exactly(expected.values()),
             lengths = Exactly(expected.lengths())](const v1::RunLengthEncodeResponse& r) {
      return values(r.values()) && lengths(r.lengths());
    };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddReduceByKey(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<int32_t> keys = RunKeys(spec.n, spec.run_length, rng);
  const std::vector<T> values = RandomValues<T>(spec.n, rng);
  v1::ReduceByKeyRequest request;
  *request.mutable_keys() = PackArray<int32_t>(keys);
  *request.mutable_values() = PackArray<T>(values);
  request.set_op(static_cast<v1::Op>(spec.op));
  const auto reduce = [&](auto v) {
    return reference::ReduceByKey(absl::MakeConstSpan(keys), v, spec.op).values;
  };
  const reference::KeyedValues<int32_t, T> want =
      reference::ReduceByKey<int32_t, T>(keys, values, spec.op);
  v1::ReduceByKeyResponse expected;
  *expected.mutable_keys() = PackArray<int32_t>(want.keys);
  *expected.mutable_values() = PackArray<T>(want.values);
  std::function<bool(const v1::ReduceByKeyResponse&)> check;
  if (workload->verify()) {
    check = [keys = Exactly(expected.keys()),
             sums = ResultCheck(values, spec.op, want.values, reduce)](
                const v1::ReduceByKeyResponse& r) { return keys(r.keys()) && sums(r.values()); };
  }
  workload->Add(request, expected, std::move(check));
}

// Keys only, ascending: the sorted keys must match the reference's bits.
template <typename T>
void AddSort(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> keys = RandomValues<T>(spec.n, rng);
  v1::SortRequest request;
  *request.mutable_keys() = PackArray<T>(keys);
  v1::SortResponse expected;
  *expected.mutable_keys() = PackArray<T>(
      reference::Permute<T>(keys, reference::SortPermutation<T>(keys, /*descending=*/false)));
  std::function<bool(const v1::SortResponse&)> check;
  if (workload->verify()) {
    check = [sorted = Exactly(expected.keys())](const v1::SortResponse& r) {
      return sorted(r.keys());
    };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddAggregateByKey(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<int32_t> keys = RandomKeys(spec.n, spec.num_keys, rng);
  const std::vector<T> values = RandomValues<T>(spec.n, rng);
  v1::AggregateByKeyRequest request;
  *request.mutable_keys() = PackArray<int32_t>(keys);
  *request.mutable_values() = PackArray<T>(values);
  request.set_op(static_cast<v1::Op>(spec.op));
  request.set_num_keys(spec.num_keys);
  // The keys are in range and the op is one AggregateByKey takes (ParseOp).
  const auto aggregate = [&](auto v) {
    return *reference::AggregateByKey(absl::MakeConstSpan(keys), v, spec.op, spec.num_keys);
  };
  const std::vector<T> want = aggregate(absl::MakeConstSpan(values));
  v1::AggregateByKeyResponse expected;
  *expected.mutable_values() = PackArray<T>(want);
  std::function<bool(const v1::AggregateByKeyResponse&)> check;
  if (workload->verify()) {
    check = [groups = ResultCheck(values, spec.op, want, aggregate)](
                const v1::AggregateByKeyResponse& r) { return groups(r.values()); };
  }
  workload->Add(request, expected, std::move(check));
}

// Request `index` of the run, from its own seeded generator.
void AddRequest(const Options& options, uint32_t index, Workload* workload) {
  std::seed_seq seed{static_cast<uint32_t>(options.seed), static_cast<uint32_t>(options.seed >> 32),
                     index};
  std::mt19937_64 rng(seed);
  VisitDType(options.spec.dtype, [&](auto zero) {
    using T = decltype(zero);
    switch (options.rpc.rpc) {
      case Rpc::kScan:
        return AddScan<T>(options.spec, rng, workload);
      case Rpc::kReduce:
        return AddReduce<T>(options.spec, rng, workload);
      case Rpc::kSelect:
        return AddSelect<T>(options.spec, rng, workload);
      case Rpc::kUnique:
        return AddUnique<T>(options.spec, rng, workload);
      case Rpc::kRunLengthEncode:
        return AddRunLengthEncode<T>(options.spec, rng, workload);
      case Rpc::kReduceByKey:
        return AddReduceByKey<T>(options.spec, rng, workload);
      case Rpc::kAggregateByKey:
        return AddAggregateByKey<T>(options.spec, rng, workload);
      case Rpc::kSort:
        return AddSort<T>(options.spec, rng, workload);
    }
  });
}

// ---------------------------------------------------------------------------
// Load

// The calls of one level that ended inside its measurement window.
struct LevelStats {
  std::vector<double> latencies_ms;  // of the ok calls
  uint64_t bytes = 0;                // request + response, of the ok calls
  uint64_t verified = 0;
  uint64_t mismatches = 0;
  std::map<std::string, uint64_t> errors;  // failed calls by status code

  uint64_t failures() const {
    uint64_t failed = mismatches;
    for (const auto& [code, count] : errors) failed += count;
    return failed;
  }
};

class Recorder {
 public:
  Recorder(absl::Time start, absl::Duration warmup, absl::Duration measure)
      : window_start_(start + warmup), window_end_(window_start_ + measure) {}

  absl::Time end() const { return window_end_; }

  // A call sent (or, open loop, due) at `sent` that ended at `ended`.
  void Record(absl::Time sent, absl::Time ended, const CallOutcome& outcome) {
    if (!InWindow(ended)) return;
    absl::MutexLock lock(&mu_);
    stats_.verified += outcome.verified;
    if (!outcome.status.ok()) {
      ++stats_.errors[absl::StatusCodeToString(
          static_cast<absl::StatusCode>(outcome.status.error_code()))];
    } else if (outcome.mismatch) {
      ++stats_.mismatches;
    } else {
      stats_.latencies_ms.push_back(absl::ToDoubleMilliseconds(ended - sent));
      stats_.bytes += outcome.bytes;
    }
  }

  // Open loop: a call due at `due` was not sent (--max_outstanding).
  void RecordNotSent(absl::Time due) {
    if (!InWindow(due)) return;
    absl::MutexLock lock(&mu_);
    ++stats_.errors["NOT_SENT"];
  }

  LevelStats Take() {
    absl::MutexLock lock(&mu_);
    return std::move(stats_);
  }

 private:
  bool InWindow(absl::Time t) const { return t >= window_start_ && t < window_end_; }

  const absl::Time window_start_;
  const absl::Time window_end_;
  absl::Mutex mu_;
  LevelStats stats_ ABSL_GUARDED_BY(mu_);
};

// Counts the calls in flight; Wait() returns when none is.
class InFlight {
 public:
  void Add() {
    absl::MutexLock lock(&mu_);
    ++count_;
  }
  // Unless at `limit`, adds one and returns true.
  bool AddBelow(int limit) {
    absl::MutexLock lock(&mu_);
    if (count_ >= limit) return false;
    ++count_;
    return true;
  }
  void Remove() {
    absl::MutexLock lock(&mu_);
    --count_;
  }
  void Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* count) { return *count == 0; }, &count_));
  }

 private:
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

bool ShouldVerify(const Options& options, uint64_t call) {
  return options.verify_every > 0 && call % options.verify_every == 0;
}

// Closed loop: `concurrency` slots each send a request, wait for its end and
// send the next, until the window closes.
LevelStats RunClosedLoop(const Target& target, int concurrency, const Options& options) {
  Recorder recorder(absl::Now(), options.warmup, options.measure);
  InFlight in_flight;
  std::atomic<uint64_t> next_call{0};
  std::function<void(int)> send = [&](int slot) {
    const uint64_t call = next_call++;
    const absl::Time sent = absl::Now();
    target.Start(slot % options.channels, call % target.num_requests(), ShouldVerify(options, call),
                 [&, slot, sent](const CallOutcome& outcome) {
                   const absl::Time ended = absl::Now();
                   recorder.Record(sent, ended, outcome);
                   if (ended < recorder.end()) return send(slot);
                   in_flight.Remove();
                 });
  };
  for (int slot = 0; slot < concurrency; ++slot) {
    in_flight.Add();
    send(slot);
  }
  in_flight.Wait();
  return recorder.Take();
}

// Open loop: a request every 1/rate seconds, on schedule, until the window
// closes. Latency counts from when a request was due, so a client that falls
// behind does not hide the server's queueing.
LevelStats RunOpenLoop(const Target& target, double rate, const Options& options) {
  const absl::Time start = absl::Now();
  Recorder recorder(start, options.warmup, options.measure);
  InFlight in_flight;
  for (uint64_t call = 0;; ++call) {
    const absl::Time due = start + absl::Seconds(call / rate);
    if (due >= recorder.end()) break;
    const absl::Duration wait = due - absl::Now();
    if (wait > absl::ZeroDuration()) absl::SleepFor(wait);
    if (!in_flight.AddBelow(options.max_outstanding)) {
      recorder.RecordNotSent(due);
      continue;
    }
    target.Start(call % options.channels, call % target.num_requests(), ShouldVerify(options, call),
                 [&, due](const CallOutcome& outcome) {
                   recorder.Record(due, absl::Now(), outcome);
                   in_flight.Remove();
                 });
  }
  in_flight.Wait();
  return recorder.Take();
}

LevelStats RunLevel(const Target& target, double level, const Options& options) {
  return options.open_loop ? RunOpenLoop(target, level, options)
                           : RunClosedLoop(target, static_cast<int>(level), options);
}

// ---------------------------------------------------------------------------
// Report

struct Summary {
  double requests_per_second = 0;
  double items_per_second = 0;
  double gigabytes_per_second = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
};

// The nearest-rank percentile `p` of sorted values; NaN for none.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return std::nan("");
  const size_t rank = static_cast<size_t>(std::ceil(p * sorted.size()));
  return sorted[std::max<size_t>(rank, 1) - 1];
}

Summary Summarize(LevelStats& stats, const Options& options) {
  std::sort(stats.latencies_ms.begin(), stats.latencies_ms.end());
  const double seconds = absl::ToDoubleSeconds(options.measure);
  Summary summary;
  summary.requests_per_second = stats.latencies_ms.size() / seconds;
  summary.items_per_second = summary.requests_per_second * options.spec.n;
  summary.gigabytes_per_second = stats.bytes / seconds / 1e9;
  summary.p50_ms = Percentile(stats.latencies_ms, 0.50);
  summary.p90_ms = Percentile(stats.latencies_ms, 0.90);
  summary.p99_ms = Percentile(stats.latencies_ms, 0.99);
  return summary;
}

std::vector<std::string> Columns(const Options& options) {
  std::vector<std::string> columns = {"target", options.open_loop ? "rate" : "concurrency"};
  for (const char* column : {"requests/s", "items/s", "GB/s", "p50_ms", "p90_ms", "p99_ms", "ok",
                             "verified", "mismatches", "errors"}) {
    columns.push_back(column);
  }
  return columns;
}

std::string Milliseconds(double ms) { return std::isnan(ms) ? "-" : absl::StrFormat("%.3f", ms); }

std::string FormatErrors(const std::map<std::string, uint64_t>& errors) {
  if (errors.empty()) return "0";
  return absl::StrJoin(errors, ";", absl::PairFormatter("="));
}

std::vector<std::string> MeasuredRow(const std::string& target, const std::string& level,
                                     const LevelStats& stats, const Summary& s) {
  return {target,
          level,
          absl::StrFormat("%.1f", s.requests_per_second),
          absl::StrFormat("%.4g", s.items_per_second),
          absl::StrFormat("%.3f", s.gigabytes_per_second),
          Milliseconds(s.p50_ms),
          Milliseconds(s.p90_ms),
          Milliseconds(s.p99_ms),
          absl::StrCat(stats.latencies_ms.size()),
          absl::StrCat(stats.verified),
          absl::StrCat(stats.mismatches),
          FormatErrors(stats.errors)};
}

// Primitive over echo, column by column.
std::vector<std::string> RatioRow(const std::string& target, const std::string& level,
                                  const Summary& primitive, const Summary& echo) {
  const auto ratio = [](double a, double b) { return absl::StrFormat("%.3f", a / b); };
  return {target,
          level,
          ratio(primitive.requests_per_second, echo.requests_per_second),
          ratio(primitive.items_per_second, echo.items_per_second),
          ratio(primitive.gigabytes_per_second, echo.gigabytes_per_second),
          ratio(primitive.p50_ms, echo.p50_ms),
          ratio(primitive.p90_ms, echo.p90_ms),
          ratio(primitive.p99_ms, echo.p99_ms),
          "-",
          "-",
          "-",
          "-"};
}

// Prints rows aligned under the column names, and to a CSV file if given.
class Table {
 public:
  Table(std::vector<std::string> columns, size_t first_width, std::ofstream csv)
      : csv_(std::move(csv)) {
    for (const std::string& column : columns) {
      widths_.push_back(std::max(column.size(), widths_.empty() ? first_width : size_t{10}));
    }
    Print(columns);
  }

  void Print(const std::vector<std::string>& row) {
    std::string line = absl::StrFormat("%-*s", widths_[0], row[0]);
    for (size_t i = 1; i + 1 < row.size(); ++i) {
      absl::StrAppendFormat(&line, " %*s", widths_[i], row[i]);
    }
    absl::StrAppend(&line, "  ", row.back());
    std::cout << line << std::endl;
    if (csv_.is_open()) csv_ << absl::StrJoin(row, ",") << std::endl;
  }

 private:
  std::vector<size_t> widths_;
  std::ofstream csv_;
};

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1000) return absl::StrCat(bytes, " B");
  if (bytes < 1000 * 1000) return absl::StrFormat("%.1f kB", bytes / 1e3);
  if (bytes < 1000 * 1000 * 1000) return absl::StrFormat("%.1f MB", bytes / 1e6);
  return absl::StrFormat("%.2f GB", bytes / 1e9);
}

void PrintHeader(const Options& options, const Workload& workload) {
  std::string arrays;  // how the arrays travel, unless whole in each message
  if (options.placement != Placement::kInline) {
    arrays = absl::StrCat(
        " (arrays in a ", FormatBytes(workload.region_bytes()),
        options.placement == Placement::kSystem ? " POSIX shared-memory region"
                                                : " CUDA IPC region",
        options.in_place ? ", in place" : "", "; inline the response would be ",
        FormatBytes(workload.first_response_bytes()), ")");
  }
  if (options.stream_piece_bytes > 0) {
    arrays = absl::StrCat(" (streamed in pieces of about ", FormatBytes(options.stream_piece_bytes),
                          ")");
  }
  std::cout << absl::StreamFormat(
      "primload: %s %s%s, %d elements per request, %d distinct; request %s, response %s%s; %d "
      "channel%s to %s; %g s warmup + %g s measured per level\n",
      options.rpc.flag, DTypeName(options.spec.dtype),
      options.rpc.ops.empty() ? "" : absl::StrCat(" ", OpName(options.spec.op)), options.spec.n,
      options.distinct_requests, FormatBytes(workload.first_request_bytes()),
      options.placement == Placement::kInline ? FormatBytes(workload.first_response_bytes())
                                              : "placed",
      arrays, options.channels,
      options.channels == 1 ? "" : "s", absl::GetFlag(FLAGS_address),
      absl::ToDoubleSeconds(options.warmup), absl::ToDoubleSeconds(options.measure));
}

// ---------------------------------------------------------------------------

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

int Main() {
  absl::StatusOr<Options> options = ParseOptions();
  if (!options.ok()) return UsageError(options.status());
  std::ofstream csv;
  if (!options->csv.empty()) {
    csv.open(options->csv);
    if (!csv) {
      return UsageError(absl::InvalidArgumentError(absl::StrCat("cannot write ", options->csv)));
    }
  }
  const std::string address = absl::GetFlag(FLAGS_address);
  const std::vector<std::shared_ptr<grpc::Channel>> channels = Connect(address, options->channels);
  for (const auto& channel : channels) {
    if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + options->timeout))) {
      std::cerr << "primload: cannot connect to " << address << "\n";
      return 1;
    }
  }
  Workload workload(*options, channels);
  for (int i = 0; i < options->distinct_requests; ++i) AddRequest(*options, i, &workload);
  if (absl::Status placed = workload.Place(channels.front()); !placed.ok()) {
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
      summaries.push_back(Summarize(stats, *options));
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
        absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[1], "'")));
  }
  return primserve::Main();
}
