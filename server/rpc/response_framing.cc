#include "server/rpc/response_framing.h"

#include <memory>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/engine/pipeline_steps.h"
#include "wire/framing.h"

namespace primserve {
namespace {

// An inline array sent from the answer buffer that holds it: its response
// field and the buffer's first `bytes`.
struct HeldArray {
  v1::Array* field;
  std::shared_ptr<const char> buffer;
  size_t bytes;
};
using HeldArrays = std::vector<HeldArray>;

template <typename Want>
absl::StatusOr<Want> Take(Result& result) {
  if (auto* want = std::get_if<Want>(&result)) return std::move(*want);
  return absl::InternalError("the backend returned a result of another kind");
}

// Places the outputs in shared memory or moves them inline. An array held
// in an answer buffer (HostArray::held) that goes inline is named in `held`
// with its response field, to be framed from where it is; without `held`, or
// where it is placed or small, it is copied into a string first.
absl::Status Deliver(absl::Span<const shm::Delivery> outputs, shm::RequestMemory* memory,
                     HeldArrays* held) {
  std::vector<shm::Delivery> rest;
  rest.reserve(outputs.size());
  for (const shm::Delivery& d : outputs) {
    if (d.array->held == nullptr) {
      rest.push_back(d);
      continue;
    }
    const bool placed = memory != nullptr && memory->IsPlaced(d.slot);
    if (held != nullptr && !placed && d.array->held_bytes >= wire::kMinSlicePayload) {
      d.field->set_dtype(static_cast<v1::DType>(d.array->dtype));
      held->push_back(HeldArray{d.field, std::move(d.array->held), d.array->held_bytes});
      continue;
    }
    d.array->bytes.assign(d.array->held.get(), d.array->held_bytes);
    d.array->held.reset();
    d.array->held_bytes = 0;
    rest.push_back(d);
  }
  if (memory != nullptr) return memory->Deliver(rest);
  for (const shm::Delivery& d : rest) {
    d.field->set_dtype(static_cast<v1::DType>(d.array->dtype));
    d.field->mutable_data()->swap(d.array->bytes);
  }
  return absl::OkStatus();
}

// The answer of one response, moved into it (ToResponse), with its arrays
// held in answer buffers named in `held` (null: copied into the response).
absl::Status Fill(ScanResult r, v1::ScanResponse* response, shm::RequestMemory* memory,
                  HeldArrays* held) {
  return Deliver({{shm::Slot::kValues, &r.output, response->mutable_output()}}, memory, held);
}

absl::Status Fill(ReduceResult r, v1::ReduceResponse* response, shm::RequestMemory* memory,
                  HeldArrays* held) {
  if (!r.indices) {
    return Deliver({{shm::Slot::kValues, &r.values, response->mutable_values()}}, memory, held);
  }
  return Deliver({{shm::Slot::kValues, &r.values, response->mutable_values()},
                  {shm::Slot::kIndices, &*r.indices, response->mutable_indices()}},
                 memory, held);
}

absl::Status Fill(SelectResult r, v1::SelectResponse* response, shm::RequestMemory* memory,
                  HeldArrays* held) {
  shm::Delivery outputs[2];
  size_t n = 0;
  if (r.values) outputs[n++] = {shm::Slot::kValues, &*r.values, response->mutable_values()};
  if (r.indices) outputs[n++] = {shm::Slot::kIndices, &*r.indices, response->mutable_indices()};
  response->set_count(r.count);
  return Deliver(absl::MakeConstSpan(outputs, n), memory, held);
}

absl::Status Fill(UniqueResult r, v1::UniqueResponse* response, shm::RequestMemory* memory,
                  HeldArrays* held) {
  return Deliver({{shm::Slot::kValues, &r.values, response->mutable_values()}}, memory, held);
}

absl::Status Fill(RunLengthEncodeResult r, v1::RunLengthEncodeResponse* response,
                  shm::RequestMemory* memory, HeldArrays* held) {
  return Deliver({{shm::Slot::kValues, &r.values, response->mutable_values()},
                  {shm::Slot::kLengths, &r.lengths, response->mutable_lengths()}},
                 memory, held);
}

absl::Status Fill(ReduceByKeyResult r, v1::ReduceByKeyResponse* response,
                  shm::RequestMemory* memory, HeldArrays* held) {
  return Deliver({{shm::Slot::kKeys, &r.keys, response->mutable_keys()},
                  {shm::Slot::kValues, &r.values, response->mutable_values()}},
                 memory, held);
}

absl::Status Fill(AggregateByKeyResult r, v1::AggregateByKeyResponse* response,
                  shm::RequestMemory* memory, HeldArrays* held) {
  return Deliver({{shm::Slot::kValues, &r.values, response->mutable_values()}}, memory, held);
}

absl::Status Fill(SortResult r, v1::SortResponse* response, shm::RequestMemory* memory,
                  HeldArrays* held) {
  shm::Delivery outputs[3];
  size_t n = 0;
  outputs[n++] = {shm::Slot::kKeys, &r.keys, response->mutable_keys()};
  if (r.values) outputs[n++] = {shm::Slot::kValues, &*r.values, response->mutable_values()};
  if (r.indices) outputs[n++] = {shm::Slot::kIndices, &*r.indices, response->mutable_indices()};
  return Deliver(absl::MakeConstSpan(outputs, n), memory, held);
}

absl::Status Fill(GatherResult r, v1::GatherResponse* response, shm::RequestMemory* memory,
                  HeldArrays* held) {
  return Deliver({{shm::Slot::kValues, &r.output, response->mutable_output()}}, memory, held);
}

// One returned step's answer, as its own RPC would give it, delivered with
// the step's own request memory.
absl::Status FillStep(Result& result, v1::PipelineResult* out, shm::RequestMemory* memory,
                      HeldArrays* held) {
  return std::visit(
      Overloaded{
          [&](ScanResult& r) { return Fill(std::move(r), out->mutable_scan(), memory, held); },
          [&](ReduceResult& r) { return Fill(std::move(r), out->mutable_reduce(), memory, held); },
          [&](SelectResult& r) { return Fill(std::move(r), out->mutable_select(), memory, held); },
          [&](UniqueResult& r) { return Fill(std::move(r), out->mutable_unique(), memory, held); },
          [&](RunLengthEncodeResult& r) {
            return Fill(std::move(r), out->mutable_run_length_encode(), memory, held);
          },
          [&](ReduceByKeyResult& r) {
            return Fill(std::move(r), out->mutable_reduce_by_key(), memory, held);
          },
          [&](AggregateByKeyResult& r) {
            return Fill(std::move(r), out->mutable_aggregate_by_key(), memory, held);
          },
          [&](SortResult& r) { return Fill(std::move(r), out->mutable_sort(), memory, held); },
          [&](GatherResult& r) { return Fill(std::move(r), out->mutable_gather(), memory, held); },
          [&](PipelineResult&) {
            return absl::InternalError("a pipeline's step gave a pipeline's result");
          },
      },
      result);
}

absl::Status Fill(PipelineResult r, v1::PipelineResponse* response, shm::RequestMemory* memory,
                  HeldArrays* held) {
  if (memory == nullptr) {
    return absl::InternalError("a pipeline's answer is delivered with its request's memory");
  }
  for (StepResult& step : r.steps) {
    v1::PipelineResult* out = response->add_results();
    out->set_step(step.step);
    if (absl::Status s = FillStep(step.result, out, memory->step(step.step), held); !s.ok()) {
      return InStep(step.step, s);
    }
  }
  return absl::OkStatus();
}

// The result that fills each response.
template <typename Response>
struct AnswerOfResponse;
template <>
struct AnswerOfResponse<v1::ScanResponse> { using type = ScanResult; };
template <>
struct AnswerOfResponse<v1::ReduceResponse> { using type = ReduceResult; };
template <>
struct AnswerOfResponse<v1::SelectResponse> { using type = SelectResult; };
template <>
struct AnswerOfResponse<v1::UniqueResponse> { using type = UniqueResult; };
template <>
struct AnswerOfResponse<v1::RunLengthEncodeResponse> { using type = RunLengthEncodeResult; };
template <>
struct AnswerOfResponse<v1::ReduceByKeyResponse> { using type = ReduceByKeyResult; };
template <>
struct AnswerOfResponse<v1::AggregateByKeyResponse> { using type = AggregateByKeyResult; };
template <>
struct AnswerOfResponse<v1::SortResponse> { using type = SortResult; };
template <>
struct AnswerOfResponse<v1::GatherResponse> { using type = GatherResult; };
template <>
struct AnswerOfResponse<v1::PipelineResponse> { using type = PipelineResult; };
template <typename Response>
using AnswerOf = typename AnswerOfResponse<Response>::type;

void ReleaseHeld(void* buffer) { delete static_cast<std::shared_ptr<const char>*>(buffer); }

// FrameResponse once the result is known to be the response's kind.
template <typename Answer, typename Response>
absl::StatusOr<grpc::ByteBuffer> FrameAnswer(Answer answer, Response* response,
                                             shm::RequestMemory* memory,
                                             google::protobuf::Message* message) {
  HeldArrays held;
  if (absl::Status s = Fill(std::move(answer), response, memory, &held); !s.ok()) return s;
  return wire::FrameWithSlices(message != nullptr ? message : response,
                               [&held](const v1::Array& array) -> std::optional<grpc::Slice> {
    for (HeldArray& h : held) {
      if (h.field != &array || h.buffer == nullptr) continue;
      // The slice's reference keeps the buffer out of its pool until gRPC is
      // done sending it.
      auto* reference = new std::shared_ptr<const char>(std::move(h.buffer));
      return grpc::Slice(const_cast<char*>(reference->get()), h.bytes, ReleaseHeld, reference);
    }
    return std::nullopt;
  });
}

}  // namespace

template <typename Response>
absl::Status ToResponse(Result result, Response* response, shm::RequestMemory* memory) {
  absl::StatusOr<AnswerOf<Response>> r = Take<AnswerOf<Response>>(result);
  if (!r.ok()) return r.status();
  return Fill(*std::move(r), response, memory, nullptr);
}

template <typename Response>
absl::StatusOr<grpc::ByteBuffer> FrameResponse(Result result, Response* response,
                                               shm::RequestMemory* memory,
                                               google::protobuf::Message* message) {
  absl::StatusOr<AnswerOf<Response>> r = Take<AnswerOf<Response>>(result);
  if (!r.ok()) return r.status();
  // Framing allocates by the answer's size: an answer the memory left cannot
  // frame fails its own call, not the server.
  try {
    return FrameAnswer(*std::move(r), response, memory, message);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "the server has no memory left to send this answer now; retry later or ask for less");
  }
}

// The unary responses, each with the result that fills it (AnswerOf).
#define PRIMSERVE_RESPONSE(Response)                                                      \
  template absl::Status ToResponse(Result, v1::Response*, shm::RequestMemory*);           \
  template absl::StatusOr<grpc::ByteBuffer> FrameResponse(                               \
      Result, v1::Response*, shm::RequestMemory*, google::protobuf::Message*);
PRIMSERVE_RESPONSE(ScanResponse)
PRIMSERVE_RESPONSE(ReduceResponse)
PRIMSERVE_RESPONSE(SelectResponse)
PRIMSERVE_RESPONSE(UniqueResponse)
PRIMSERVE_RESPONSE(RunLengthEncodeResponse)
PRIMSERVE_RESPONSE(ReduceByKeyResponse)
PRIMSERVE_RESPONSE(AggregateByKeyResponse)
PRIMSERVE_RESPONSE(SortResponse)
PRIMSERVE_RESPONSE(GatherResponse)
PRIMSERVE_RESPONSE(PipelineResponse)
#undef PRIMSERVE_RESPONSE

}  // namespace primserve
