// primctl: sends one primserve RPC with data from a file, the command line or a
// generator, and prints the result or a summary of it.
//
//   primctl scan --values=1,2,3,4 --print=all          # 1,3,6,10
//   primctl reduce --generate=random --n=1000000 --dtype=float32 --op=argmax
//   primctl select --input=data.txt --predicate=in_range --operand=0 --upper=10
//   primctl aggregate_by_key --generate=random --n=1000000 --generate_keys=random --num_keys=64
//   primctl sort --values=3,1,2 --sort_values=sequence --return_indices --print=all
//   primctl --shm scan --generate=random --n=1000000   # inputs and output in shared memory
//   primctl put --name=x --generate=random --n=1000000  # a resident buffer, 4 stripes
//   primctl scan --buffer=x --output_buffer=y           # no array travels
//   primctl get --name=y --print=all; primctl list; primctl free --name=x
//
// Exit status: 0 on success, 1 when the RPC fails (or health is not SERVING),
// 2 on a bad command line.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/buffer_routes.h"
#include "client/buffers_client.h"
#include "client/array_text.h"
#include "client/cli_flags.h"
#include "client/client.h"
#include "client/generators.h"
#include "client/pipeline_json.h"
#include "client/shm_placement.h"
#include "client/stream_messages.h"
#include "client/terminal_progress.h"
#include "core/primitives.h"

ABSL_FLAG(std::string, address, "localhost:50051", primserve::kAddressFlagHelp);
ABSL_FLAG(bool, tls, false,
          "Connect over TLS (implied by the other --tls_ flags), verifying the server against "
          "--tls_ca or else the system's CAs.");
ABSL_FLAG(std::string, tls_ca, "", "PEM file of the CA certificates that sign the server's.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM file of this client's certificate chain, for a server that requires one "
          "(with --tls_key).");
ABSL_FLAG(std::string, tls_key, "", "PEM file of --tls_cert's private key.");
ABSL_FLAG(int, timeout_seconds, 60, "Deadline of the RPC, in seconds.");
ABSL_FLAG(std::string, dtype, "int32",
          "Element type of the input: int32, int64, uint32, uint64, float32 or float64.");
ABSL_FLAG(std::string, input, "",
          "File holding the input (see --input_format). One of --input, --values, --generate.");
ABSL_FLAG(std::string, input_format, "text",
          "Format of the --input, --keys and --flags files: text (numbers separated by "
          "whitespace or commas) or binary (packed little-endian elements).");
ABSL_FLAG(std::string, values, "", "The input inline, comma-separated, e.g. 1,2,3.");
ABSL_FLAG(std::string, generate, "",
          "Generate the input: random (integers in [-100, 100], unsigned in [0, 200], floats "
          "uniform in [-1, 1)) or sequence (0, 1, 2, ...).");
ABSL_FLAG(int64_t, n, 1000, "Number of elements --generate makes.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of --generate, --generate_keys and --generate_flags.");
ABSL_FLAG(std::string, op, "sum",
          "scan, reduce, reduce_by_key, aggregate_by_key: sum, prod, min, max, argmin or argmax.");
ABSL_FLAG(bool, exclusive, false, "scan: exclusive instead of inclusive.");
ABSL_FLAG(std::string, segments, "",
          "scan, reduce, sort: segment start offsets, comma-separated (e.g. 0,10,20).");
ABSL_FLAG(std::string, predicate, "",
          "select: keep the elements x passing nonzero, eq, ne, lt, le, gt, ge (x op --operand) "
          "or in_range (--operand <= x < --upper).");
ABSL_FLAG(std::string, operand, "", "select: the predicate's operand, a number.");
ABSL_FLAG(std::string, upper, "", "select: in_range's exclusive upper bound.");
ABSL_FLAG(std::string, flags, "",
          "select: file of int32 flags, one per input element; keeps the elements whose flag is "
          "not 0.");
ABSL_FLAG(std::optional<double>, generate_flags, std::nullopt,
          "select: random int32 0/1 flags, each 1 with this probability.");
ABSL_FLAG(std::string, output, "values",
          "select: what to return: values, indices, values_and_indices or count.");
ABSL_FLAG(uint64_t, piece_bytes, 0,
          "scan, select, unique, rle, reduce_by_key: send the arrays as a stream (ScanStream, "
          "SelectStream, ...) of pieces of about this many bytes each (whole elements, all "
          "arrays together); 0: one unary call, or a stream of 4 MiB pieces for arrays over "
          "64 MiB.");
ABSL_FLAG(bool, partition, false, "select: also return the rejected elements after the kept.");
ABSL_FLAG(std::string, keys, "", "reduce_by_key, aggregate_by_key: file of keys (--key_dtype).");
ABSL_FLAG(std::string, generate_keys, "",
          "reduce_by_key, aggregate_by_key: generate the keys, one per input element: runs "
          "(0, 0, 1, 2, 2, 2, ...: runs of mean length --run_length) or random (uniform in "
          "[0, --num_keys)).");
ABSL_FLAG(std::string, key_dtype, "int32", "Element type of the keys.");
ABSL_FLAG(double, run_length, 4, "Mean run length of --generate_keys=runs (at least 1).");
ABSL_FLAG(uint64_t, num_keys, 16, "aggregate_by_key: number of groups; keys lie in [0, num_keys).");
ABSL_FLAG(bool, descending, false,
          "sort: the distinct keys in descending order (NaN still last, equal keys still in "
          "input order).");
ABSL_FLAG(bool, return_indices, false,
          "sort: also return the permutation (output position -> input position, INT64).");
ABSL_FLAG(std::string, sort_values, "",
          "sort: values moved with their keys, one per key: a file of --value_dtype elements "
          "(see --input_format), or sequence (0, 1, 2, ...) or random generated.");
ABSL_FLAG(std::string, value_dtype, "int32", "sort: element type of --sort_values.");
ABSL_FLAG(bool, shm, false,
          "Put the request's arrays in POSIX shared memory instead of the message: primctl "
          "creates a region (/dev/shm/primserve-client-*), registers it with the server "
          "(which must run on this host with --shared_memory), writes the inputs there and "
          "places the outputs there (output_location), reads the answer from it, then "
          "unregisters and removes it. Unary calls only (not with --piece_bytes).");
ABSL_FLAG(std::string, buffer, "",
          "The main input is this resident buffer of the caller's (elements "
          "[--buffer_offset, +--buffer_length), length 0: to the end), instead of --input, "
          "--values or --generate; unary calls only.");
ABSL_FLAG(uint64_t, buffer_offset, 0, "--buffer: the first element.");
ABSL_FLAG(uint64_t, buffer_length, 0, "--buffer: elements; 0 to the end.");
ABSL_FLAG(std::string, output_buffer, "",
          "Store the values output in this resident buffer (created or replaced) instead of "
          "receiving it; unary calls only.");
ABSL_FLAG(std::string, name, "", "put, get, free: the buffer's name.");
ABSL_FLAG(int, stripes, 4,
          "put, get: connections the transfer is striped over (disjoint ranges at once).");
ABSL_FLAG(std::string, service, "",
          "health: the health service to ask: empty for the server, primserve.device.N for "
          "GPU N of a server on several.");
ABSL_FLAG(std::string, request, "",
          "pipeline: the PipelineRequest as JSON (protobuf's JSON mapping; arrays' data base64), "
          "a file or - for standard input.");
ABSL_FLAG(std::string, print, "summary",
          "summary (element counts, first and last elements, count, latency and throughput), "
          "all (every element: one line per array, comma-separated, then select's count) or "
          "none.");

namespace primserve {
namespace {

constexpr char kUsage[] =
    "primctl [--address=host:port] <rpc> [flags]: sends one primserve RPC.\n"
    "rpc: scan | reduce | select | unique | rle | reduce_by_key | aggregate_by_key | sort | "
    "health\n"
    "buffers: put | get | free | list (resident buffers, --name)\n"
    "pipeline: the steps in --request (JSON) in one call\n"
    "Exit status: 0 success, 1 RPC error (or not SERVING), 2 bad command line.";

enum class PrintMode { kSummary, kAll, kNone };
enum class Generator { kRandom, kSequence };
enum class KeyGenerator { kRuns, kRandom };

// Elements printed at each end of an array by --print=summary.
constexpr size_t kSummaryEdge = 4;

int UsageError(const absl::Status& status) { return primserve::UsageError("primctl", status); }

absl::Status FirstError(std::initializer_list<absl::Status> statuses) {
  for (const absl::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// The contents of the file at `path`; empty when `path` is.
absl::StatusOr<std::string> ReadOptionalFile(const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::InvalidArgumentError(absl::StrCat("cannot open ", path));
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// A channel to `address` (default --address) as the --tls flags say; a
// distinct `index` gives it connections of its own.
absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(int index = 0,
                                                       std::string address = "") {
  ConnectOptions options;
  options.channel_index = index;
  if (address.empty()) address = absl::GetFlag(FLAGS_address);
  const std::string ca = absl::GetFlag(FLAGS_tls_ca);
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_tls_key);
  if (!absl::GetFlag(FLAGS_tls) && ca.empty() && cert.empty() && key.empty()) {
    return PrimitivesClient::Connect(address, options);
  }
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  absl::StatusOr<std::string> ca_pem = ReadOptionalFile(ca);
  absl::StatusOr<std::string> cert_pem = ReadOptionalFile(cert);
  absl::StatusOr<std::string> key_pem = ReadOptionalFile(key);
  if (absl::Status s = FirstError({ca_pem.status(), cert_pem.status(), key_pem.status()});
      !s.ok()) {
    return s;
  }
  return PrimitivesClient::ConnectTls(address, *ca_pem, *cert_pem, *key_pem, options);
}

absl::StatusOr<std::vector<uint64_t>> ParseSegments() {
  std::vector<uint64_t> offsets;
  for (absl::string_view token :
       absl::StrSplit(absl::GetFlag(FLAGS_segments), ',', absl::SkipEmpty())) {
    uint64_t offset;
    if (!absl::SimpleAtoi(token, &offset)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--segments: '", token, "' is not a segment offset"));
    }
    offsets.push_back(offset);
  }
  return offsets;
}

// An array file: text or binary as --input_format says.
absl::StatusOr<v1::Array> ReadInputFile(DType dtype, const std::string& path) {
  absl::StatusOr<ArrayFileFormat> format = Lookup<ArrayFileFormat>(
      "input_format", absl::GetFlag(FLAGS_input_format),
      {{"text", ArrayFileFormat::kText}, {"binary", ArrayFileFormat::kBinary}});
  if (!format.ok()) return format.status();
  return ReadArrayFile(dtype, path, *format);
}

size_t ElementCount(const v1::Array& array) {
  return array.data().size() / DTypeSize(static_cast<DType>(array.dtype()));
}

// A generator seeded by --seed; `stream` tells apart the generators of one run.
std::mt19937_64 Rng(uint32_t stream) { return SeededRng(absl::GetFlag(FLAGS_seed), stream); }

// Integer-valued elements converted to `dtype`.
v1::Array PackAs(DType dtype, absl::Span<const int64_t> values) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> converted(values.begin(), values.end());
    return PackArray<T>(converted);
  });
}

v1::Array RandomArray(DType dtype, size_t n) {
  std::mt19937_64 rng = Rng(0);
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    return PackArray<T>(RandomValues<T>(n, rng));
  });
}

// The input, from exactly one of --input, --values and --generate.
absl::StatusOr<v1::Array> MainInput() {
  absl::StatusOr<DType> dtype = ParseDType("dtype", absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return dtype.status();
  const std::string input = absl::GetFlag(FLAGS_input);
  const std::string values = absl::GetFlag(FLAGS_values);
  const std::string generate = absl::GetFlag(FLAGS_generate);
  const std::string buffer = absl::GetFlag(FLAGS_buffer);
  if (input.empty() + values.empty() + generate.empty() + buffer.empty() != 3) {
    return absl::InvalidArgumentError(
        "give the input with exactly one of --input, --values, --generate, --buffer");
  }
  if (!buffer.empty()) {
    // The buffer's dtype: --dtype is not sent.
    v1::Array array;
    *array.mutable_buffer() = BufferRef(buffer, absl::GetFlag(FLAGS_buffer_offset),
                                        absl::GetFlag(FLAGS_buffer_length));
    return array;
  }
  if (!input.empty()) return ReadInputFile(*dtype, input);
  if (!values.empty()) return ParseText(*dtype, values, "--values");
  absl::StatusOr<Generator> generator = Lookup<Generator>(
      "generate", generate, {{"random", Generator::kRandom}, {"sequence", Generator::kSequence}});
  if (!generator.ok()) return generator.status();
  const int64_t n = absl::GetFlag(FLAGS_n);
  if (n < 0) return absl::InvalidArgumentError("--n must not be negative");
  if (*generator == Generator::kRandom) return RandomArray(*dtype, n);
  std::vector<int64_t> sequence(n);
  for (int64_t i = 0; i < n; ++i) sequence[i] = i;
  return PackAs(*dtype, sequence);
}

// The keys of `n` values, from exactly one of --keys and --generate_keys.
absl::StatusOr<v1::Array> KeysInput(size_t n) {
  absl::StatusOr<DType> dtype = ParseDType("key_dtype", absl::GetFlag(FLAGS_key_dtype));
  if (!dtype.ok()) return dtype.status();
  const std::string path = absl::GetFlag(FLAGS_keys);
  const std::string generate = absl::GetFlag(FLAGS_generate_keys);
  if (path.empty() == generate.empty()) {
    return absl::InvalidArgumentError("give the keys with exactly one of --keys, --generate_keys");
  }
  if (!path.empty()) return ReadInputFile(*dtype, path);
  absl::StatusOr<KeyGenerator> generator = Lookup<KeyGenerator>(
      "generate_keys", generate, {{"runs", KeyGenerator::kRuns}, {"random", KeyGenerator::kRandom}});
  if (!generator.ok()) return generator.status();
  std::mt19937_64 rng = Rng(1);
  if (*generator == KeyGenerator::kRuns) {
    const double run_length = absl::GetFlag(FLAGS_run_length);
    if (!(run_length >= 1)) return absl::InvalidArgumentError("--run_length must be at least 1");
    return PackAs(*dtype, RunKeys<int64_t>(n, run_length, rng));
  }
  const uint64_t num_keys = absl::GetFlag(FLAGS_num_keys);
  if (num_keys < 1) return absl::InvalidArgumentError("--generate_keys=random needs --num_keys >= 1");
  return PackAs(*dtype, RandomKeys<int64_t>(n, num_keys, rng));
}

// Sets the select criterion from exactly one of --predicate, --flags and
// --generate_flags.
absl::Status SetCriterion(v1::SelectRequest* request) {
  const DType dtype = static_cast<DType>(request->input().dtype());
  const std::string predicate = absl::GetFlag(FLAGS_predicate);
  const std::string flags_path = absl::GetFlag(FLAGS_flags);
  const std::optional<double> keep_fraction = absl::GetFlag(FLAGS_generate_flags);
  if (predicate.empty() + flags_path.empty() + !keep_fraction.has_value() != 2) {
    return absl::InvalidArgumentError(
        "give the criterion with exactly one of --predicate, --flags, --generate_flags");
  }
  if (!flags_path.empty()) {
    absl::StatusOr<v1::Array> flags = ReadInputFile(DType::kInt32, flags_path);
    if (!flags.ok()) return flags.status();
    *request->mutable_flags() = *std::move(flags);
    return absl::OkStatus();
  }
  if (keep_fraction.has_value()) {
    if (!(*keep_fraction >= 0 && *keep_fraction <= 1)) {
      return absl::InvalidArgumentError("--generate_flags must be in [0, 1]");
    }
    std::mt19937_64 rng = Rng(2);
    std::bernoulli_distribution keep(*keep_fraction);
    std::vector<int64_t> flags(ElementCount(request->input()));
    for (int64_t& flag : flags) flag = keep(rng);
    *request->mutable_flags() = PackAs(DType::kInt32, flags);
    return absl::OkStatus();
  }
  absl::StatusOr<PredicateKind> kind = ParsePredicate(predicate, /*with_in_range=*/true);
  if (!kind.ok()) return kind.status();
  v1::Predicate* p = request->mutable_predicate();
  p->set_kind(static_cast<v1::Predicate::Kind>(*kind));
  if (*kind == PredicateKind::kNonzero) return absl::OkStatus();
  const std::string operand = absl::GetFlag(FLAGS_operand);
  if (operand.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--predicate=", predicate, " needs --operand"));
  }
  if (absl::Status s = ParseScalar(dtype, "operand", operand, p->mutable_operand()); !s.ok()) {
    return s;
  }
  if (*kind != PredicateKind::kInRange) return absl::OkStatus();
  const std::string upper = absl::GetFlag(FLAGS_upper);
  if (upper.empty()) return absl::InvalidArgumentError("--predicate=in_range needs --upper");
  return ParseScalar(dtype, "upper", upper, p->mutable_upper());
}

// What a response holds, for printing.
struct Result {
  std::vector<std::pair<absl::string_view, const v1::Array*>> arrays;
  std::optional<uint64_t> count;
};

absl::Status Print(PrintMode mode, const Result& result, absl::Duration latency,
                   size_t payload_bytes) {
  if (mode == PrintMode::kNone) return absl::OkStatus();
  std::string text;
  for (const auto& [name, array] : result.arrays) {
    if (array->has_buffer()) {
      absl::StrAppend(&text, name, ": in buffer ", array->buffer().name(), ", ",
                      array->buffer().length(), " x ",
                      DTypeName(static_cast<DType>(array->dtype())), "\n");
      continue;
    }
    if (mode == PrintMode::kAll) {
      absl::StatusOr<std::string> elements = FormatArray(*array, ",", 0);
      if (!elements.ok()) return elements.status();
      absl::StrAppend(&text, *elements, "\n");
    } else {
      absl::StatusOr<std::string> elements = FormatArray(*array, ", ", kSummaryEdge);
      if (!elements.ok()) return elements.status();
      absl::StrAppend(&text, name, ": ", ElementCount(*array), " x ",
                      DTypeName(static_cast<DType>(array->dtype())), " [", *elements, "]\n");
    }
  }
  if (result.count.has_value()) {
    absl::StrAppend(&text, mode == PrintMode::kAll ? "" : "count: ", *result.count, "\n");
  }
  if (mode == PrintMode::kSummary) {
    const double megabytes = payload_bytes / 1e6;
    absl::StrAppendFormat(&text, "latency %.3f ms, payload %.3f MB, %.1f MB/s\n",
                          absl::ToDoubleMilliseconds(latency), megabytes,
                          megabytes / absl::ToDoubleSeconds(latency));
  }
  std::cout << text;
  return absl::OkStatus();
}

int RpcError(const absl::Status& status) {
  std::cerr << "error: " << absl::StatusCodeToString(status.code()) << ": " << status.message()
            << "\n";
  return 1;
}

// --shm: a region of `bytes` registered on the client's channel. Failing
// that, prints why (the server's refusal: UNIMPLEMENTED without
// --shared_memory) and returns null.
std::unique_ptr<PlacementRegion> CreateRegion(PrimitivesClient& client, uint64_t bytes) {
  absl::StatusOr<std::unique_ptr<PlacementRegion>> region = CreateSystemPlacementRegion(
      client.channel(), absl::StrCat("primctl-", getpid()), std::max<uint64_t>(bytes, 1));
  if (!region.ok()) {
    std::cerr << "error: --shm: cannot register a shared-memory region with the server ("
              << absl::StatusCodeToString(region.status().code()) << ": "
              << region.status().message()
              << "); it must run on this host with --shared_memory\n";
    return nullptr;
  }
  return *std::move(region);
}

// Sends `request`, times it, and prints what `describe` finds in the response.
// With --shm, its arrays and outputs go through a region made for this call,
// unregistered and removed when it returns, whatever happened.
template <typename Request, typename Describe>
int Send(PrimitivesClient& client, PrintMode mode, const Request& inline_request,
         Describe describe) {
  std::unique_ptr<PlacementRegion> region;
  Request placed;
  const Request* to_send = &inline_request;
  if (absl::GetFlag(FLAGS_shm)) {
    const OutputRoom room = RoomFor(inline_request);
    region = CreateRegion(client, PlacedBytes(inline_request, room, /*in_place=*/false));
    if (region == nullptr) return 1;
    placed = inline_request;
    uint64_t cursor = 0;
    if (absl::Status s = PlaceRequest(&placed, room, /*in_place=*/false, *region, &cursor);
        !s.ok()) {
      return RpcError(s);
    }
    to_send = &placed;
  }
  Request with_output;
  if (const std::string output = absl::GetFlag(FLAGS_output_buffer); !output.empty()) {
    with_output = *to_send;
    // The main output: a Sort's keys, every other RPC's values.
    if constexpr (std::is_same_v<Request, v1::SortRequest>) {
      with_output.mutable_output_buffers()->set_keys(output);
    } else {
      with_output.mutable_output_buffers()->set_values(output);
    }
    to_send = &with_output;
  }
  const Request& request = *to_send;
  const absl::Time start = absl::Now();
  auto response = client.Call(request);
  const absl::Duration latency = absl::Now() - start;
  if (!response.ok()) return RpcError(response.status());
  if (region != nullptr) {
    if (absl::Status s = ReadBack(&*response, *region); !s.ok()) return RpcError(s);
  }
  const absl::Status printed = Print(mode, describe(*response), latency,
                                     request.ByteSizeLong() + response->ByteSizeLong());
  return printed.ok() ? 0 : RpcError(printed);
}

// The bytes of a piece --piece_bytes asks for; 0 for one unary call (always
// with --shm: the streams carry inline bytes only). `input_bytes`: all the
// request's arrays together.
uint64_t PieceBytes(uint64_t input_bytes) {
  if (absl::GetFlag(FLAGS_shm)) return 0;
  const uint64_t asked = absl::GetFlag(FLAGS_piece_bytes);
  if (asked != 0) return asked;
  return input_bytes > PrimitivesClient::kStreamAboveBytes ? PrimitivesClient::kStreamPieceBytes
                                                           : 0;
}

// Sends `whole` as a stream of pieces of about `piece_bytes` (all its
// arrays together, cut into pieces of equal length), joins the answers into
// one response and prints it as Send does.
template <typename Request, typename Response, typename Describe>
int SendStream(PrimitivesClient& client, PrintMode mode, Request whole, uint64_t piece_bytes,
               Describe describe) {
  // The arrays' bytes move out of `whole` into the cutter: never held twice.
  StreamCutter cutter(&whole);
  const uint64_t piece = cutter.PieceElements(piece_bytes);
  const size_t payload_bytes = whole.ByteSizeLong() + cutter.array_bytes();
  // gRPC asks for the next piece once it has taken the last one.
  TerminalProgress progress(Request::descriptor()->name() + " stream", cutter.array_bytes());
  const uint64_t element_bytes = cutter.elements() == 0 ? 0 : cutter.array_bytes() / cutter.elements();
  uint64_t taken = 0;  // elements
  const auto next = [&](Request* message) {
    progress.Add((cutter.cut() - taken) * element_bytes);
    taken = cutter.cut();
    if (cutter.done()) return false;
    cutter.Next(piece, message);
    return true;
  };
  Response joined;
  const auto on_answer = [&](Response answer) {
    AppendAnswer(&answer, &joined);
    return absl::OkStatus();
  };
  const absl::Time begin = absl::Now();
  const absl::Status status = client.CallStream(next, on_answer);
  const absl::Duration latency = absl::Now() - begin;
  if (!status.ok()) return RpcError(status);
  const absl::Status printed =
      Print(mode, describe(joined), latency, payload_bytes + joined.ByteSizeLong());
  return printed.ok() ? 0 : RpcError(printed);
}

// Sends `request` as SendStream does above the streaming threshold (or with
// --piece_bytes), else as Send does.
template <typename Request, typename Response, typename Describe>
int SendEither(PrimitivesClient& client, PrintMode mode, Request request, uint64_t input_bytes,
               Describe describe) {
  if (const uint64_t piece_bytes = PieceBytes(input_bytes); piece_bytes != 0) {
    return SendStream<Request, Response>(client, mode, std::move(request), piece_bytes, describe);
  }
  return Send(client, mode, request, describe);
}

int Scan(PrimitivesClient& client, PrintMode mode) {
  absl::StatusOr<v1::Array> input = MainInput();
  absl::StatusOr<Op> op = ParseOp(absl::GetFlag(FLAGS_op));
  absl::StatusOr<std::vector<uint64_t>> segments = ParseSegments();
  if (absl::Status s = FirstError({input.status(), op.status(), segments.status()}); !s.ok()) {
    return UsageError(s);
  }
  v1::ScanRequest request;
  *request.mutable_input() = *std::move(input);
  request.set_op(static_cast<v1::Op>(*op));
  request.set_exclusive(absl::GetFlag(FLAGS_exclusive));
  request.mutable_segment_offsets()->Add(segments->begin(), segments->end());
  const auto describe = [](const v1::ScanResponse& response) {
    return Result{{{"output", &response.output()}}};
  };
  if (const uint64_t piece_bytes = PieceBytes(request.input().data().size()); piece_bytes != 0) {
    return SendStream<v1::ScanRequest, v1::ScanResponse>(client, mode, std::move(request),
                                                         piece_bytes, describe);
  }
  return Send(client, mode, request, describe);
}

int Reduce(PrimitivesClient& client, PrintMode mode) {
  absl::StatusOr<v1::Array> input = MainInput();
  absl::StatusOr<Op> op = ParseOp(absl::GetFlag(FLAGS_op));
  absl::StatusOr<std::vector<uint64_t>> segments = ParseSegments();
  if (absl::Status s = FirstError({input.status(), op.status(), segments.status()}); !s.ok()) {
    return UsageError(s);
  }
  v1::ReduceRequest request;
  *request.mutable_input() = *std::move(input);
  request.set_op(static_cast<v1::Op>(*op));
  request.mutable_segment_offsets()->Add(segments->begin(), segments->end());
  return Send(client, mode, request, [](const v1::ReduceResponse& response) {
    Result result{{{"values", &response.values()}}};
    if (response.has_indices()) result.arrays.emplace_back("indices", &response.indices());
    return result;
  });
}

int Select(PrimitivesClient& client, PrintMode mode) {
  absl::StatusOr<v1::Array> input = MainInput();
  absl::StatusOr<v1::SelectRequest::Output> output =
      ParseSelectOutput(absl::GetFlag(FLAGS_output));
  if (absl::Status s = FirstError({input.status(), output.status()}); !s.ok()) {
    return UsageError(s);
  }
  v1::SelectRequest request;
  *request.mutable_input() = *std::move(input);
  request.set_output(*output);
  request.set_partition(absl::GetFlag(FLAGS_partition));
  if (absl::Status s = SetCriterion(&request); !s.ok()) return UsageError(s);
  const auto describe = [](const v1::SelectResponse& response) {
    Result result;
    if (response.has_values()) result.arrays.emplace_back("values", &response.values());
    if (response.has_indices()) result.arrays.emplace_back("indices", &response.indices());
    result.count = response.count();
    return result;
  };
  // A stream has no partition: only an explicit --piece_bytes streams it
  // (and the server refuses it, saying so).
  const uint64_t piece_bytes = request.partition() ? absl::GetFlag(FLAGS_piece_bytes)
                                                   : PieceBytes(request.input().data().size() +
                                                                request.flags().data().size());
  if (piece_bytes != 0) {
    return SendStream<v1::SelectRequest, v1::SelectResponse>(client, mode, std::move(request),
                                                             piece_bytes, describe);
  }
  return Send(client, mode, request, describe);
}

int Unique(PrimitivesClient& client, PrintMode mode) {
  absl::StatusOr<v1::Array> input = MainInput();
  if (!input.ok()) return UsageError(input.status());
  v1::UniqueRequest request;
  *request.mutable_input() = *std::move(input);
  const uint64_t bytes = request.input().data().size();
  return SendEither<v1::UniqueRequest, v1::UniqueResponse>(
      client, mode, std::move(request), bytes, [](const v1::UniqueResponse& response) {
        return Result{{{"values", &response.values()}}};
      });
}

int RunLengthEncode(PrimitivesClient& client, PrintMode mode) {
  absl::StatusOr<v1::Array> input = MainInput();
  if (!input.ok()) return UsageError(input.status());
  v1::RunLengthEncodeRequest request;
  *request.mutable_input() = *std::move(input);
  const uint64_t bytes = request.input().data().size();
  return SendEither<v1::RunLengthEncodeRequest, v1::RunLengthEncodeResponse>(
      client, mode, std::move(request), bytes, [](const v1::RunLengthEncodeResponse& response) {
        return Result{{{"values", &response.values()}, {"lengths", &response.lengths()}}};
      });
}

int ReduceByKey(PrimitivesClient& client, PrintMode mode) {
  absl::StatusOr<v1::Array> values = MainInput();
  if (!values.ok()) return UsageError(values.status());
  absl::StatusOr<v1::Array> keys = KeysInput(ElementCount(*values));
  absl::StatusOr<Op> op = ParseOp(absl::GetFlag(FLAGS_op));
  if (absl::Status s = FirstError({keys.status(), op.status()}); !s.ok()) return UsageError(s);
  v1::ReduceByKeyRequest request;
  *request.mutable_keys() = *std::move(keys);
  *request.mutable_values() = *std::move(values);
  request.set_op(static_cast<v1::Op>(*op));
  const uint64_t bytes = request.keys().data().size() + request.values().data().size();
  return SendEither<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>(
      client, mode, std::move(request), bytes, [](const v1::ReduceByKeyResponse& response) {
        return Result{{{"keys", &response.keys()}, {"values", &response.values()}}};
      });
}

int AggregateByKey(PrimitivesClient& client, PrintMode mode) {
  absl::StatusOr<v1::Array> values = MainInput();
  if (!values.ok()) return UsageError(values.status());
  absl::StatusOr<v1::Array> keys = KeysInput(ElementCount(*values));
  absl::StatusOr<Op> op = ParseOp(absl::GetFlag(FLAGS_op));
  if (absl::Status s = FirstError({keys.status(), op.status()}); !s.ok()) return UsageError(s);
  v1::AggregateByKeyRequest request;
  *request.mutable_keys() = *std::move(keys);
  *request.mutable_values() = *std::move(values);
  request.set_op(static_cast<v1::Op>(*op));
  request.set_num_keys(absl::GetFlag(FLAGS_num_keys));
  return Send(client, mode, request, [](const v1::AggregateByKeyResponse& response) {
    return Result{{{"values", &response.values()}}};
  });
}

// A sort's values for `n` keys from --sort_values (a file, sequence or
// random); nullopt when it is not given.
absl::StatusOr<std::optional<v1::Array>> SortValuesInput(size_t n) {
  const std::string source = absl::GetFlag(FLAGS_sort_values);
  if (source.empty()) return std::nullopt;
  absl::StatusOr<DType> dtype = ParseDType("value_dtype", absl::GetFlag(FLAGS_value_dtype));
  if (!dtype.ok()) return dtype.status();
  if (source == "random") {
    std::mt19937_64 rng = Rng(3);
    return VisitDType(*dtype, [&](auto zero) {
      using T = decltype(zero);
      return PackArray<T>(RandomValues<T>(n, rng));
    });
  }
  if (source == "sequence") {
    std::vector<int64_t> sequence(n);
    for (size_t i = 0; i < n; ++i) sequence[i] = static_cast<int64_t>(i);
    return PackAs(*dtype, sequence);
  }
  return ReadInputFile(*dtype, source);
}

int Sort(PrimitivesClient& client, PrintMode mode) {
  absl::StatusOr<v1::Array> keys = MainInput();
  if (!keys.ok()) return UsageError(keys.status());
  if (keys->has_buffer() && !absl::GetFlag(FLAGS_sort_values).empty()) {
    return UsageError(absl::InvalidArgumentError(
        "--sort_values needs the keys' count: give the keys with --input, --values or "
        "--generate"));
  }
  absl::StatusOr<std::optional<v1::Array>> values = SortValuesInput(ElementCount(*keys));
  absl::StatusOr<std::vector<uint64_t>> segments = ParseSegments();
  if (absl::Status s = FirstError({values.status(), segments.status()}); !s.ok()) {
    return UsageError(s);
  }
  v1::SortRequest request;
  *request.mutable_keys() = *std::move(keys);
  if (values->has_value()) *request.mutable_values() = **std::move(values);
  request.set_descending(absl::GetFlag(FLAGS_descending));
  request.set_return_indices(absl::GetFlag(FLAGS_return_indices));
  request.mutable_segment_offsets()->Add(segments->begin(), segments->end());
  return Send(client, mode, request, [](const v1::SortResponse& response) {
    Result result{{{"keys", &response.keys()}}};
    if (response.has_values()) result.arrays.emplace_back("values", &response.values());
    if (response.has_indices()) result.arrays.emplace_back("indices", &response.indices());
    return result;
  });
}

// Routes to each buffer's instance when --address names several servers
// (null otherwise), over channels made as `home` was.
std::shared_ptr<BufferRoutes> RoutesFrom(std::shared_ptr<grpc::Channel> home) {
  if (!TargetSpreads(absl::GetFlag(FLAGS_address))) return nullptr;
  return std::make_shared<BufferRoutes>(
      absl::GetFlag(FLAGS_address), std::move(home), [](const std::string& location, int index) {
        // The same flags made the home channel; only TLS files gone since fail.
        absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(index, location);
        if (!channel.ok()) {
          std::cerr << "primctl: connecting to " << location << ": " << channel.status() << "\n";
          std::exit(2);
        }
        return *std::move(channel);
      });
}

// The Buffers client over --stripes channels of their own.
absl::StatusOr<BuffersClient> ConnectBuffers() {
  const int stripes = absl::GetFlag(FLAGS_stripes);
  if (stripes < 1) return absl::InvalidArgumentError("--stripes must be at least 1");
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < stripes; ++i) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(i + 1);
    if (!channel.ok()) return channel.status();
    channels.push_back(*std::move(channel));
  }
  std::shared_ptr<BufferRoutes> routes = RoutesFrom(channels[0]);
  return BuffersClient(std::move(channels), std::move(routes),
                       absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds)));
}

absl::StatusOr<std::string> BufferName() {
  const std::string name = absl::GetFlag(FLAGS_name);
  if (name.empty()) return absl::InvalidArgumentError("give the buffer's --name");
  return name;
}

std::string Describe(const v1::BufferInfo& info) {
  return absl::StrCat(info.name(), ": ", info.length(), " x ",
                      DTypeName(static_cast<DType>(info.dtype())), " on ",
                      info.device_id() < 0 ? "the host" : absl::StrCat("device ", info.device_id()),
                      " at ", info.location(), ", expires in ",
                      absl::SixDigits(info.expires_in_seconds()), " s idle");
}

// put: the input (--input, --values, --generate) into buffer --name,
// striped over --stripes connections.
int Put(PrintMode mode) {
  absl::StatusOr<std::string> name = BufferName();
  absl::StatusOr<v1::Array> input = MainInput();
  if (absl::Status s = FirstError({name.status(), input.status()}); !s.ok()) return UsageError(s);
  if (input->has_buffer()) {
    return UsageError(absl::InvalidArgumentError("put takes --input, --values or --generate"));
  }
  absl::StatusOr<BuffersClient> buffers = ConnectBuffers();
  if (!buffers.ok()) return UsageError(buffers.status());
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::BufferInfo> info;
  {
    TerminalProgress progress("put " + *name, input->data().size());
    buffers->set_progress([&progress](uint64_t bytes) { progress.Add(bytes); });
    info = buffers->PutBytes(*name, static_cast<DType>(input->dtype()), input->data());
  }
  const absl::Duration took = absl::Now() - start;
  if (!info.ok()) return RpcError(info.status());
  if (mode != PrintMode::kNone) {
    std::cout << Describe(*info) << "\n";
    const double megabytes = input->data().size() / 1e6;
    std::cout << absl::StrFormat("put %.3f MB in %.3f ms over %d connections, %.1f MB/s\n",
                                 megabytes, absl::ToDoubleMilliseconds(took),
                                 buffers->channels(), megabytes / absl::ToDoubleSeconds(took));
  }
  return 0;
}

// get: buffer --name's elements, printed as an answer's.
int Get(PrintMode mode) {
  absl::StatusOr<std::string> name = BufferName();
  if (!name.ok()) return UsageError(name.status());
  absl::StatusOr<BuffersClient> buffers = ConnectBuffers();
  if (!buffers.ok()) return UsageError(buffers.status());
  absl::StatusOr<v1::BufferInfo> info = buffers->Info(*name);
  if (!info.ok()) return RpcError(info.status());
  const size_t size = info->length() * DTypeSize(static_cast<DType>(info->dtype()));
  // Not zero-filled: the stripes' threads touch its pages as pieces arrive.
  std::unique_ptr<char[]> data(new char[std::max<size_t>(size, 1)]);
  const absl::Time start = absl::Now();
  absl::Status read;
  {
    TerminalProgress progress("get " + *name, size);
    buffers->set_progress([&progress](uint64_t bytes) { progress.Add(bytes); });
    read = buffers->ReadInto(*info, data.get());
  }
  const absl::Duration took = absl::Now() - start;
  if (!read.ok()) return RpcError(read);
  v1::Array array;
  array.set_dtype(info->dtype());
  if (mode != PrintMode::kNone) array.set_data(data.get(), size);
  const absl::Status printed = Print(mode, Result{{{*name, &array}}}, took, size);
  return printed.ok() ? 0 : RpcError(printed);
}

int Free() {
  absl::StatusOr<std::string> name = BufferName();
  if (!name.ok()) return UsageError(name.status());
  absl::StatusOr<BuffersClient> buffers = ConnectBuffers();
  if (!buffers.ok()) return UsageError(buffers.status());
  if (absl::Status freed = buffers->Free(*name); !freed.ok()) return RpcError(freed);
  return 0;
}

int List() {
  absl::StatusOr<BuffersClient> buffers = ConnectBuffers();
  if (!buffers.ok()) return UsageError(buffers.status());
  absl::StatusOr<v1::ListBuffersResponse> list = buffers->List();
  if (!list.ok()) return RpcError(list.status());
  for (const v1::BufferInfo& info : list->buffers()) std::cout << Describe(info) << "\n";
  std::cout << absl::StrCat(list->bytes_used(), " bytes used of ", list->bytes_limit(), "\n");
  return 0;
}

// pipeline: the PipelineRequest in --request (JSON); --print=all prints the
// answer as JSON, summary each returned step's arrays and the latency.
int Pipeline(PrimitivesClient& client, PrintMode mode) {
  absl::StatusOr<v1::PipelineRequest> request = ReadPipelineRequest(absl::GetFlag(FLAGS_request));
  if (!request.ok()) return UsageError(request.status());
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::PipelineResponse> response = client.Call(*request);
  const absl::Duration took = absl::Now() - start;
  if (!response.ok()) return RpcError(response.status());
  if (mode == PrintMode::kAll) std::cout << PipelineResponseJson(*response) << "\n";
  if (mode == PrintMode::kSummary) {
    std::cout << PipelineResponseSummary(*response)
              << absl::StrFormat("latency %.3f ms\n", absl::ToDoubleMilliseconds(took));
  }
  return 0;
}

// Prints the server's health; when nothing answers, the call's code (e.g.
// UNAVAILABLE) and, on stderr, why: an unreachable server must not read as
// a draining one.
int Health(PrimitivesClient& client) {
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> health =
      client.Health(absl::GetFlag(FLAGS_service));
  if (!health.ok()) {
    std::cout << absl::StatusCodeToString(health.status().code()) << "\n";
    std::cerr << "primctl: health: " << health.status().message() << "\n";
    return 1;
  }
  const bool serving = *health == grpc::health::v1::HealthCheckResponse::SERVING;
  std::cout << (serving ? "SERVING" : "NOT_SERVING") << "\n";
  return serving ? 0 : 1;
}

int Main(const std::vector<char*>& args) {
  if (args.size() != 2) {
    return UsageError(absl::InvalidArgumentError(
        args.size() < 2 ? "no rpc given" : absl::StrCat("unexpected argument '", args[2], "'")));
  }
  const absl::string_view rpc = args[1];
  absl::StatusOr<PrintMode> mode = Lookup<PrintMode>(
      "print", absl::GetFlag(FLAGS_print),
      {{"summary", PrintMode::kSummary}, {"all", PrintMode::kAll}, {"none", PrintMode::kNone}});
  if (!mode.ok()) return UsageError(mode.status());
  if (absl::GetFlag(FLAGS_shm) && absl::GetFlag(FLAGS_piece_bytes) != 0) {
    return UsageError(absl::InvalidArgumentError(
        "--shm and --piece_bytes do not go together: the streaming RPCs take inline bytes only"));
  }
  if (absl::GetFlag(FLAGS_shm) && rpc == "health") {
    return UsageError(absl::InvalidArgumentError("--shm: health has no arrays to place"));
  }
  const int timeout_seconds = absl::GetFlag(FLAGS_timeout_seconds);
  if (timeout_seconds <= 0) {
    return UsageError(absl::InvalidArgumentError("--timeout_seconds must be positive"));
  }
  if (rpc == "put") return Put(*mode);
  if (rpc == "get") return Get(*mode);
  if (rpc == "free") return Free();
  if (rpc == "list") return List();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect();
  if (!channel.ok()) return UsageError(channel.status());
  PrimitivesClient client(*channel, absl::Seconds(timeout_seconds));
  client.RouteBuffers(RoutesFrom(*channel));
  if (rpc == "scan") return Scan(client, *mode);
  if (rpc == "reduce") return Reduce(client, *mode);
  if (rpc == "select") return Select(client, *mode);
  if (rpc == "unique") return Unique(client, *mode);
  if (rpc == "rle") return RunLengthEncode(client, *mode);
  if (rpc == "reduce_by_key") return ReduceByKey(client, *mode);
  if (rpc == "aggregate_by_key") return AggregateByKey(client, *mode);
  if (rpc == "sort") return Sort(client, *mode);
  if (rpc == "pipeline") return Pipeline(client, *mode);
  if (rpc == "health") return Health(client);
  return UsageError(absl::InvalidArgumentError(absl::StrCat("unknown rpc '", rpc, "'")));
}

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(primserve::kUsage);
  const std::vector<char*> args = primserve::ParseCommandLineOrExitTwo(argc, argv);
  return primserve::Main(args);
}
