#include "tests/fuzz/request_path.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include <deque>
#include <memory>
#include <vector>

#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/primserve/v1/echo.pb.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "server/cpu/cpu_backend.h"
#include "wire/framing.h"
#include "wire/received.h"
#include "wire/testing.h"

namespace primserve::fuzz {
namespace {

[[noreturn]] void Fail(const char* rpc, const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "request_path: %s: %s %s\n", rpc, what, detail.c_str());
  std::abort();
}

#define PRIMSERVE_CHECK(rpc, condition) \
  if (!(condition)) Fail(rpc, "response shape check failed:", #condition)

// Elements of an array of a valid dtype: a response's, or a request's that
// validation accepted.
uint64_t Elements(const v1::Array& array) {
  return array.data().size() / DTypeSize(static_cast<DType>(array.dtype()));
}

template <typename T>
T Element(const v1::Array& array, uint64_t i) {
  T value;
  std::memcpy(&value, array.data().data() + i * sizeof(T), sizeof(T));
  return value;
}

void CheckShape(const v1::ScanRequest& request, const v1::ScanResponse& response) {
  PRIMSERVE_CHECK("Scan", response.output().dtype() == request.input().dtype());
  PRIMSERVE_CHECK("Scan", response.output().data().size() == request.input().data().size());
}

void CheckShape(const v1::ReduceRequest& request, const v1::ReduceResponse& response) {
  const uint64_t segments = std::max(1, request.segment_offsets_size());
  PRIMSERVE_CHECK("Reduce", response.values().dtype() == request.input().dtype());
  PRIMSERVE_CHECK("Reduce", Elements(response.values()) == segments);
  const bool arg = request.op() == v1::ARGMIN || request.op() == v1::ARGMAX;
  PRIMSERVE_CHECK("Reduce", response.has_indices() == arg);
  if (arg) PRIMSERVE_CHECK("Reduce", Elements(response.indices()) == segments);
}

void CheckShape(const v1::SelectRequest& request, const v1::SelectResponse& response) {
  const uint64_t n = Elements(request.input());
  PRIMSERVE_CHECK("Select", response.count() <= n);
  const uint64_t returned = request.partition() ? n : response.count();
  const auto output = request.output();
  const bool values = output == v1::SelectRequest::OUTPUT_UNSPECIFIED ||
                      output == v1::SelectRequest::VALUES ||
                      output == v1::SelectRequest::VALUES_AND_INDICES;
  const bool indices = output == v1::SelectRequest::INDICES ||
                       output == v1::SelectRequest::VALUES_AND_INDICES;
  PRIMSERVE_CHECK("Select", response.has_values() == values);
  PRIMSERVE_CHECK("Select", response.has_indices() == indices);
  if (values) PRIMSERVE_CHECK("Select", Elements(response.values()) == returned);
  if (indices) {
    PRIMSERVE_CHECK("Select", Elements(response.indices()) == returned);
    for (uint64_t i = 0; i < returned; ++i) {
      const int64_t index = Element<int64_t>(response.indices(), i);
      PRIMSERVE_CHECK("Select", index >= 0 && static_cast<uint64_t>(index) < n);
    }
  }
}

void CheckShape(const v1::UniqueRequest& request, const v1::UniqueResponse& response) {
  const uint64_t n = Elements(request.input());
  PRIMSERVE_CHECK("Unique", Elements(response.values()) <= n);
  PRIMSERVE_CHECK("Unique", (Elements(response.values()) == 0) == (n == 0));
}

void CheckShape(const v1::RunLengthEncodeRequest& request,
                const v1::RunLengthEncodeResponse& response) {
  const uint64_t runs = Elements(response.lengths());
  PRIMSERVE_CHECK("RunLengthEncode", Elements(response.values()) == runs);
  uint64_t total = 0;
  for (uint64_t i = 0; i < runs; ++i) {
    const int64_t length = Element<int64_t>(response.lengths(), i);
    PRIMSERVE_CHECK("RunLengthEncode", length >= 1);
    total += static_cast<uint64_t>(length);
  }
  PRIMSERVE_CHECK("RunLengthEncode", total == Elements(request.input()));
}

void CheckShape(const v1::ReduceByKeyRequest& request, const v1::ReduceByKeyResponse& response) {
  const uint64_t n = Elements(request.keys());
  const uint64_t runs = Elements(response.keys());
  PRIMSERVE_CHECK("ReduceByKey", Elements(response.values()) == runs);
  PRIMSERVE_CHECK("ReduceByKey", runs <= n && (runs == 0) == (n == 0));
}

void CheckShape(const v1::AggregateByKeyRequest& request,
                const v1::AggregateByKeyResponse& response) {
  PRIMSERVE_CHECK("AggregateByKey", response.values().dtype() == request.values().dtype());
  PRIMSERVE_CHECK("AggregateByKey", Elements(response.values()) == request.num_keys());
}

// Sort: keys, values and indices of the keys' length; indices a permutation.
void CheckShape(const v1::SortRequest& request, const v1::SortResponse& response) {
  const uint64_t n = Elements(request.keys());
  PRIMSERVE_CHECK("Sort", response.keys().dtype() == request.keys().dtype());
  PRIMSERVE_CHECK("Sort", Elements(response.keys()) == n);
  PRIMSERVE_CHECK("Sort", response.has_values() == request.has_values());
  if (request.has_values()) PRIMSERVE_CHECK("Sort", Elements(response.values()) == n);
  PRIMSERVE_CHECK("Sort", response.has_indices() == request.return_indices());
  if (request.return_indices()) {
    PRIMSERVE_CHECK("Sort", Elements(response.indices()) == n);
    std::vector<bool> seen(n, false);
    for (uint64_t i = 0; i < n; ++i) {
      const int64_t index = Element<int64_t>(response.indices(), i);
      PRIMSERVE_CHECK("Sort", index >= 0 && static_cast<uint64_t>(index) < n && !seen[index]);
      seen[index] = true;
    }
  }
}

void CheckShape(const v1::GatherRequest& request, const v1::GatherResponse& response) {
  PRIMSERVE_CHECK("Gather", response.output().dtype() == request.values().dtype());
  PRIMSERVE_CHECK("Gather", Elements(response.output()) == Elements(request.indices()));
}

// One result per returned step, in step order, each of its step's kind.
void CheckShape(const v1::PipelineRequest& request, const v1::PipelineResponse& response) {
  int next = 0;
  for (int k = 0; k < request.steps_size(); ++k) {
    if (!request.steps(k).returned()) continue;
    PRIMSERVE_CHECK("Pipeline", next < response.results_size());
    const v1::PipelineResult& result = response.results(next++);
    PRIMSERVE_CHECK("Pipeline", result.step() == static_cast<uint32_t>(k));
    // PipelineStep.op and PipelineResult.response number their kinds alike,
    // the response's one further.
    PRIMSERVE_CHECK("Pipeline", static_cast<int>(result.response_case()) ==
                                    static_cast<int>(request.steps(k).op_case()) + 1);
  }
  PRIMSERVE_CHECK("Pipeline", next == response.results_size());
}

#undef PRIMSERVE_CHECK

// --- The raw-buffer parser and the framer against protobuf --------------------

// A 64-bit hash of the input, and a stream of numbers from it: where the
// bytes are cut into slices, and whether frames use external payloads.
class Derived {
 public:
  explicit Derived(absl::Span<const uint8_t> bytes) {
    for (uint8_t b : bytes) state_ = (state_ ^ b) * 0x100000001b3ull;  // FNV-1a
  }
  uint64_t Next() {  // splitmix64
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_ = 0xcbf29ce484222325ull;
};

// `bytes` in 1 to 4 slices (empty ones possible), cut where `derived` says.
grpc::ByteBuffer CutIntoSlices(absl::Span<const uint8_t> bytes, Derived& derived,
                               size_t* count) {
  std::vector<size_t> cuts(derived.Next() % 4);
  for (size_t& cut : cuts) cut = derived.Next() % (bytes.size() + 1);
  std::sort(cuts.begin(), cuts.end());
  cuts.push_back(bytes.size());
  std::vector<grpc::Slice> slices;
  size_t previous = 0;
  for (size_t cut : cuts) {
    slices.emplace_back(bytes.data() + previous, cut - previous);
    previous = cut;
  }
  *count = slices.size();
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Whether `a` and `b` hold the same fields (NaNs equal: a Scalar may hold
// one) and serialize to the same bytes (NaNs' bits too).
bool SameFields(const google::protobuf::Message& a, const google::protobuf::Message& b,
                std::string* report) {
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&comparator);
  differencer.ReportDifferencesToString(report);
  if (!differencer.Compare(a, b)) return false;
  if (a.SerializeAsString() != b.SerializeAsString()) {
    *report += "(serialized bytes differ)";
    return false;
  }
  return true;
}

// Replaces each non-empty Array.data of `message` (any depth) with the bytes
// `received` resolves it to; false (with `why`) where that fails.
bool ResolveTokens(wire::ReceivedMessage& received, google::protobuf::Message* message,
                   std::string* why) {
  const absl::Status resolved = wire::ResolveAll(received, message);
  if (!resolved.ok()) *why = resolved.ToString();
  return resolved.ok();
}

// Frames a copy of `message` (every non-empty Array.data sent as external
// bytes, or only the large ones moved, as `derived` says) and checks that
// the bytes parse back to `message`, by protobuf and by ReceivedMessage.
void CheckFrame(const char* name, const google::protobuf::Message& message, Derived& derived) {
  std::unique_ptr<google::protobuf::Message> framed(message.New());
  framed->CopyFrom(message);
  std::deque<std::string> held;  // the external payloads' bytes; addresses stay put
  wire::ExternalPayload external;
  if (derived.Next() % 2 == 0) {
    external = [&held](absl::string_view data, absl::string_view* bytes) {
      held.emplace_back(data);
      *bytes = held.back();
      return true;
    };
  }
  const grpc::ByteBuffer buffer = wire::Frame(framed.get(), external);
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) Fail(name, "a framed buffer cannot be read");
  std::string flat;
  for (const grpc::Slice& s : slices) flat.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (flat.size() != message.ByteSizeLong()) {
    Fail(name, "framed size differs from protobuf's:",
         std::to_string(flat.size()) + " vs " + std::to_string(message.ByteSizeLong()));
  }
  std::unique_ptr<google::protobuf::Message> parsed(message.New());
  std::string report;
  if (!parsed->ParseFromString(flat)) Fail(name, "framed bytes rejected by protobuf");
  if (!SameFields(message, *parsed, &report)) Fail(name, "framed bytes parse to other fields:", report);
  wire::ReceivedMessage received;
  std::unique_ptr<google::protobuf::Message> got(message.New());
  if (!received.Parse(buffer, got.get()).ok()) Fail(name, "framed bytes rejected by the wire parser");
  if (!ResolveTokens(received, got.get(), &report)) Fail(name, "framed:", report);
  if (!SameFields(message, *got, &report)) Fail(name, "framed bytes wire-parse to other fields:", report);
}

// Parses `payload` as a `prototype` with protobuf and with ReceivedMessage
// (from slices cut where `derived` says) and aborts unless they agree.
WireOutcome CheckWire(const char* name, const google::protobuf::Message& prototype,
                      absl::Span<const uint8_t> payload, Derived& derived) {
  WireOutcome outcome;
  std::unique_ptr<google::protobuf::Message> expected(prototype.New());
  const bool protobuf_ok =
      expected->ParseFromArray(payload.data(), static_cast<int>(payload.size()));
  const grpc::ByteBuffer buffer = CutIntoSlices(payload, derived, &outcome.slices);
  wire::ReceivedMessage received;
  std::unique_ptr<google::protobuf::Message> got(prototype.New());
  const absl::Status status = received.Parse(buffer, got.get());
  outcome.accepted = status.ok();
  outcome.tokens = received.tokens();
  outcome.payloads = received.num_payloads();
  const std::string what = std::string(prototype.GetTypeName()) + " in " +
                           std::to_string(outcome.slices) + " slices:";
  if (status.ok() != protobuf_ok) {
    Fail(name, protobuf_ok ? "the wire parser rejects what protobuf accepts"
                           : "the wire parser accepts what protobuf rejects",
         what + " " + status.ToString());
  }
  if (!protobuf_ok) {
    if (status.code() != absl::StatusCode::kInvalidArgument || status.message().empty()) {
      Fail(name, "the wire parser rejects with an unexpected status:", status.ToString());
    }
    return outcome;
  }
  std::string report;
  if (!ResolveTokens(received, got.get(), &report)) Fail(name, what.c_str(), report);
  if (!SameFields(*expected, *got, &report)) {
    Fail(name, "the wire parser's fields differ from protobuf's:", what + " " + report);
  }
  CheckFrame(name, *expected, derived);
  return outcome;
}

void CheckRejection(const char* rpc, const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument &&
      status.code() != absl::StatusCode::kResourceExhausted &&
      status.code() != absl::StatusCode::kFailedPrecondition) {
    Fail(rpc, "rejected with an unexpected code:", status.ToString());
  }
  if (status.message().empty()) Fail(rpc, "rejected without a message");
}

template <typename Request, typename Response>
Outcome Run(Rpc rpc, absl::Span<const uint8_t> payload) {
  const char* name = RpcName(rpc);
  Outcome outcome{rpc};
  Request request;
  outcome.parsed = request.ParseFromArray(payload.data(), static_cast<int>(payload.size()));
  if (!outcome.parsed) return outcome;
  // Below gRPC there are no registries: shared memory and buffers are
  // refused as the streaming RPCs refuse them, and in a Pipeline's steps
  // (which need a memory of the request to hold their own) as a server
  // without them refuses them (FAILED_PRECONDITION).
  shm::RequestMemory memory(absl::FailedPreconditionError("shared memory is off"));
  constexpr bool kPipeline = std::is_same_v<Request, v1::PipelineRequest>;
  absl::StatusOr<Operation> operation =
      ToOperation(request, kFuzzLimits, kPipeline ? &memory : nullptr);
  if (!operation.ok()) {
    CheckRejection(name, operation.status());
    outcome.status = operation.status();
    return outcome;
  }
  // The backend rejects what validation cannot see cheaply (AggregateByKey
  // keys out of range).
  absl::StatusOr<Result> result = RunOnCpu(*operation);
  if (!result.ok()) {
    CheckRejection(name, result.status());
    outcome.status = result.status();
    return outcome;
  }
  Response response;
  if (absl::Status s = ToResponse(*std::move(result), &response, kPipeline ? &memory : nullptr);
      !s.ok()) {
    Fail(name, "ToResponse failed:", s.ToString());
  }
  CheckShape(request, response);
  return outcome;
}

// The request message type of each RPC.
const google::protobuf::Message& RequestPrototype(Rpc rpc) {
  switch (rpc) {
    case Rpc::kScan: return v1::ScanRequest::default_instance();
    case Rpc::kReduce: return v1::ReduceRequest::default_instance();
    case Rpc::kSelect: return v1::SelectRequest::default_instance();
    case Rpc::kUnique: return v1::UniqueRequest::default_instance();
    case Rpc::kRunLengthEncode: return v1::RunLengthEncodeRequest::default_instance();
    case Rpc::kReduceByKey: return v1::ReduceByKeyRequest::default_instance();
    case Rpc::kAggregateByKey: return v1::AggregateByKeyRequest::default_instance();
    case Rpc::kSort: return v1::SortRequest::default_instance();
    case Rpc::kGather: return v1::GatherRequest::default_instance();
    case Rpc::kPipeline: return v1::PipelineRequest::default_instance();
  }
  std::abort();  // kAllRpcs holds only the cases above
}

Outcome RunPath(Rpc rpc, absl::Span<const uint8_t> payload) {
  switch (rpc) {
    case Rpc::kScan: return Run<v1::ScanRequest, v1::ScanResponse>(rpc, payload);
    case Rpc::kReduce: return Run<v1::ReduceRequest, v1::ReduceResponse>(rpc, payload);
    case Rpc::kSelect: return Run<v1::SelectRequest, v1::SelectResponse>(rpc, payload);
    case Rpc::kUnique: return Run<v1::UniqueRequest, v1::UniqueResponse>(rpc, payload);
    case Rpc::kRunLengthEncode:
      return Run<v1::RunLengthEncodeRequest, v1::RunLengthEncodeResponse>(rpc, payload);
    case Rpc::kReduceByKey:
      return Run<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>(rpc, payload);
    case Rpc::kAggregateByKey:
      return Run<v1::AggregateByKeyRequest, v1::AggregateByKeyResponse>(rpc, payload);
    case Rpc::kSort: return Run<v1::SortRequest, v1::SortResponse>(rpc, payload);
    case Rpc::kGather: return Run<v1::GatherRequest, v1::GatherResponse>(rpc, payload);
    case Rpc::kPipeline: return Run<v1::PipelineRequest, v1::PipelineResponse>(rpc, payload);
  }
  std::abort();  // kAllRpcs holds only the cases above
}

}  // namespace

Outcome RunRequestBytes(absl::Span<const uint8_t> bytes) {
  if (bytes.empty()) return Outcome{};
  const Rpc rpc = kAllRpcs[bytes[0] % kNumRpcs];
  const absl::Span<const uint8_t> payload = bytes.subspan(1);
  Derived derived(bytes);
  const char* name = RpcName(rpc);
  const WireOutcome request = CheckWire(name, RequestPrototype(rpc), payload, derived);
  const WireOutcome multiplex =
      CheckWire(name, v1::MultiplexRequest::default_instance(), payload, derived);
  const WireOutcome echo = CheckWire(name, v1::EchoRequest::default_instance(), payload, derived);
  Outcome outcome = RunPath(rpc, payload);
  outcome.wire_request = request;
  outcome.wire_multiplex = multiplex;
  outcome.wire_echo = echo;
  return outcome;
}

std::string EncodeRequest(Rpc rpc, const google::protobuf::Message& request) {
  return std::string(1, static_cast<char>(RpcIndex(rpc))) + request.SerializeAsString();
}

}  // namespace primserve::fuzz
