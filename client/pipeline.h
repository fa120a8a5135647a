// A Pipeline request built step by step: each step is a request as its own
// RPC takes it, whose arrays may be outputs of earlier steps (Output), and
// only the steps marked returned answer. The steps run on the server in one
// call; what they make in between stays there.
//
//   primserve::PipelineBuilder p;
//   v1::SelectRequest where;             // a > 0: the rows' indices
//   *where.mutable_input()->mutable_buffer() = primserve::BufferRef("a");
//   where.mutable_predicate()->set_kind(v1::Predicate::GT);
//   where.mutable_predicate()->mutable_operand()->set_int_value(0);
//   where.set_output(v1::SelectRequest::INDICES);
//   const uint32_t rows = p.Add(where);
//   v1::GatherRequest keys;              // k of those rows
//   *keys.mutable_values()->mutable_buffer() = primserve::BufferRef("k");
//   *keys.mutable_indices() = p.Output(rows, v1::StepOutput::INDICES);
//   ...
//   absl::StatusOr<v1::PipelineResponse> answer = p.Run(client);
#ifndef PRIMSERVE_CLIENT_PIPELINE_H_
#define PRIMSERVE_CLIENT_PIPELINE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {

class PipelineBuilder final {
 public:
  // Appends a step and returns its index; `returned`: its answer comes back.
  uint32_t Add(const v1::ScanRequest& r, bool returned = false) {
    return Append(returned, [&](v1::PipelineStep* s) { *s->mutable_scan() = r; });
  }
  uint32_t Add(const v1::ReduceRequest& r, bool returned = false) {
    return Append(returned, [&](v1::PipelineStep* s) { *s->mutable_reduce() = r; });
  }
  uint32_t Add(const v1::SelectRequest& r, bool returned = false) {
    return Append(returned, [&](v1::PipelineStep* s) { *s->mutable_select() = r; });
  }
  uint32_t Add(const v1::UniqueRequest& r, bool returned = false) {
    return Append(returned, [&](v1::PipelineStep* s) { *s->mutable_unique() = r; });
  }
  uint32_t Add(const v1::RunLengthEncodeRequest& r, bool returned = false) {
    return Append(returned, [&](v1::PipelineStep* s) { *s->mutable_run_length_encode() = r; });
  }
  uint32_t Add(const v1::ReduceByKeyRequest& r, bool returned = false) {
    return Append(returned, [&](v1::PipelineStep* s) { *s->mutable_reduce_by_key() = r; });
  }
  uint32_t Add(const v1::AggregateByKeyRequest& r, bool returned = false) {
    return Append(returned, [&](v1::PipelineStep* s) { *s->mutable_aggregate_by_key() = r; });
  }
  uint32_t Add(const v1::GatherRequest& r, bool returned = false) {
    return Append(returned, [&](v1::PipelineStep* s) { *s->mutable_gather() = r; });
  }
  uint32_t Add(const v1::SortRequest& r, bool returned = false) {
    return Append(returned, [&](v1::PipelineStep* s) { *s->mutable_sort() = r; });
  }

  // Output `which` of step `step`, as an input of a later step.
  static v1::Array Output(uint32_t step, v1::StepOutput::Which which) {
    v1::Array array;
    array.mutable_step()->set_step(step);
    array.mutable_step()->set_output(which);
    return array;
  }

  const v1::PipelineRequest& request() const { return request_; }
  v1::PipelineRequest* mutable_request() { return &request_; }

  // One Pipeline call: the returned steps' answers, in step order. With
  // routes (PrimitivesClient::RouteBuffers) it goes to the instance holding
  // the buffers its steps name: INVALID_ARGUMENT naming both, before
  // sending, when they are on two.
  absl::StatusOr<v1::PipelineResponse> Run(PrimitivesClient& client) const {
    return client.Call(request_);
  }

 private:
  template <typename Fill>
  uint32_t Append(bool returned, Fill fill) {
    v1::PipelineStep* step = request_.add_steps();
    fill(step);
    step->set_returned(returned);
    return static_cast<uint32_t>(request_.steps_size() - 1);
  }

  v1::PipelineRequest request_;
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_PIPELINE_H_
