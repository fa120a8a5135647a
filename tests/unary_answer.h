// The unary call for the request inside a MultiplexRequest, its answer as a
// MultiplexResponse: what a Multiplex stream (or any other path to the same
// request) must give, for tests that compare against it.
#ifndef PRIMSERVE_TESTS_UNARY_ANSWER_H_
#define PRIMSERVE_TESTS_UNARY_ANSWER_H_

#include "grpcpp/client_context.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"

namespace primserve {

inline v1::MultiplexResponse UnaryAnswer(v1::Primitives::Stub& stub,
                                         const v1::MultiplexRequest& m, grpc::Status* status) {
  using S = v1::Primitives::Stub;
  v1::MultiplexResponse got;
  got.set_id(m.id());
  auto call = [&](auto method, const auto& request, auto* response) {
    grpc::ClientContext context;
    *status = (stub.*method)(&context, request, response);
  };
  switch (m.request_case()) {
    case v1::MultiplexRequest::kScan: call(&S::Scan, m.scan(), got.mutable_scan()); break;
    case v1::MultiplexRequest::kReduce: call(&S::Reduce, m.reduce(), got.mutable_reduce()); break;
    case v1::MultiplexRequest::kSelect: call(&S::Select, m.select(), got.mutable_select()); break;
    case v1::MultiplexRequest::kUnique: call(&S::Unique, m.unique(), got.mutable_unique()); break;
    case v1::MultiplexRequest::kRunLengthEncode:
      call(&S::RunLengthEncode, m.run_length_encode(), got.mutable_run_length_encode());
      break;
    case v1::MultiplexRequest::kReduceByKey:
      call(&S::ReduceByKey, m.reduce_by_key(), got.mutable_reduce_by_key());
      break;
    case v1::MultiplexRequest::kAggregateByKey:
      call(&S::AggregateByKey, m.aggregate_by_key(), got.mutable_aggregate_by_key());
      break;
    case v1::MultiplexRequest::kSort: call(&S::Sort, m.sort(), got.mutable_sort()); break;
    case v1::MultiplexRequest::kGather: call(&S::Gather, m.gather(), got.mutable_gather()); break;
    case v1::MultiplexRequest::kPipeline:
      call(&S::Pipeline, m.pipeline(), got.mutable_pipeline());
      break;
    case v1::MultiplexRequest::REQUEST_NOT_SET:
      *status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request");
      break;
  }
  return got;
}

}  // namespace primserve

#endif  // PRIMSERVE_TESTS_UNARY_ANSWER_H_
