// primload's flags, and their values checked and gathered into Options.
#include "client/loadgen/options.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli_flags.h"

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
ABSL_FLAG(bool, resident, false,
          "Upload each request's inputs once into resident buffers (Buffers service, striped "
          "over --channels connections) before measuring; every request then names them and "
          "no input travels. --mode=primitive, unary or --multiplex only.");
ABSL_FLAG(std::string, resident_output, "buffer",
          "--resident: where the outputs go, buffer (stored in resident buffers, replaced by "
          "each call; not with --verify) or inline (in the responses).");
ABSL_FLAG(bool, in_place, false,
          "scan with --shm or --cuda_shm: the output goes over the input (each call scans the "
          "last call's answer, so not with --verify).");

namespace primserve {
namespace {

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

absl::StatusOr<RpcInfo> ParseRpc(absl::string_view name) {
  std::vector<absl::string_view> names;
  for (const RpcInfo& info : Rpcs()) {
    if (info.flag == name) return info;
    names.push_back(info.flag);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--rpc=", name, " is not one of ", absl::StrJoin(names, ", ")));
}

// The --op value `name`, if `rpc` takes it.
absl::StatusOr<Op> ParseRpcOp(const RpcInfo& rpc, absl::string_view name) {
  absl::StatusOr<Op> op = primserve::ParseOp(name);
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
  absl::StatusOr<DType> dtype = ParseDType("dtype", absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return dtype.status();
  spec->dtype = *dtype;
  absl::StatusOr<Op> op = ParseRpcOp(rpc, absl::GetFlag(FLAGS_op));
  if (!op.ok()) return op.status();
  spec->op = *op;
  const int64_t n = absl::GetFlag(FLAGS_n);
  if (n < 1) return absl::InvalidArgumentError("--n must be at least 1");
  spec->n = n;
  spec->segments = absl::GetFlag(FLAGS_segments);
  if (spec->segments < 1) return absl::InvalidArgumentError("--segments must be at least 1");
  absl::StatusOr<PredicateKind> predicate =
      ParsePredicate(absl::GetFlag(FLAGS_predicate), /*with_in_range=*/false);
  if (!predicate.ok()) return predicate.status();
  spec->predicate = *predicate;
  spec->operand = absl::GetFlag(FLAGS_operand);
  if (!OperandFits(spec->dtype, spec->operand)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--operand=", spec->operand, " is not a valid ", DTypeName(spec->dtype)));
  }
  absl::StatusOr<v1::SelectRequest::Output> output =
      ParseSelectOutput(absl::GetFlag(FLAGS_output));
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

}  // namespace

absl::StatusOr<Options> ParseOptions(bool cuda_build) {
  Options options;
  options.address = absl::GetFlag(FLAGS_address);
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
  if (cuda_shm && !cuda_build) {
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
  if (absl::GetFlag(FLAGS_resident)) {
    if (options.placement != Placement::kInline) {
      return absl::InvalidArgumentError("--resident and --shm/--cuda_shm do not go together");
    }
    if (options.stream_piece_bytes > 0 || options.mode != Mode::kPrimitive) {
      return absl::InvalidArgumentError(
          "--resident: buffers are for the primitives' unary calls and Multiplex "
          "(--mode=primitive, no --stream_piece_bytes)");
    }
    options.placement = Placement::kResident;
    absl::StatusOr<bool> outputs = Lookup<bool>("resident_output",
                                                absl::GetFlag(FLAGS_resident_output),
                                                {{"buffer", true}, {"inline", false}});
    if (!outputs.ok()) return outputs.status();
    options.resident_outputs = *outputs;
    if (options.resident_outputs && options.verify_every > 0) {
      return absl::InvalidArgumentError(
          "--verify checks answers that come back: use --resident_output=inline with it");
    }
  }
  options.in_place = absl::GetFlag(FLAGS_in_place);
  if (options.in_place) {
    if (options.placement == Placement::kInline || options.placement == Placement::kResident) {
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

}  // namespace primserve
