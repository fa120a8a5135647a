#include "tests/fuzz/request_path.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "proto/primserve/v1/primitives.pb.h"
#include "server/cpu_backend.h"

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

#undef PRIMSERVE_CHECK

void CheckRejection(const char* rpc, const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument &&
      status.code() != absl::StatusCode::kResourceExhausted) {
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
  absl::StatusOr<Operation> operation = ToOperation(request, kFuzzLimits);
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
  if (absl::Status s = ToResponse(*std::move(result), &response); !s.ok()) {
    Fail(name, "ToResponse failed:", s.ToString());
  }
  CheckShape(request, response);
  return outcome;
}

}  // namespace

Outcome RunRequestBytes(absl::Span<const uint8_t> bytes) {
  if (bytes.empty()) return Outcome{};
  const Rpc rpc = kAllRpcs[bytes[0] % kNumRpcs];
  const absl::Span<const uint8_t> payload = bytes.subspan(1);
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
  }
  std::abort();  // kAllRpcs holds only the cases above
}

std::string EncodeRequest(Rpc rpc, const google::protobuf::Message& request) {
  return std::string(1, static_cast<char>(RpcIndex(rpc))) + request.SerializeAsString();
}

}  // namespace primserve::fuzz
