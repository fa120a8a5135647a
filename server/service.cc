#include "server/service.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

namespace primserve {
namespace {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Time DeadlineOf(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

// The metric labels of a call, read from the request as sent (they may be
// invalid; Metrics maps unknown values to "none"). 0 is "no op".
struct CallLabels {
  Rpc rpc;
  int op;
  int dtype;
};
CallLabels LabelsOf(const v1::ScanRequest& r) {
  return {Rpc::kScan, r.op(), r.input().dtype()};
}
CallLabels LabelsOf(const v1::ReduceRequest& r) {
  return {Rpc::kReduce, r.op(), r.input().dtype()};
}
CallLabels LabelsOf(const v1::SelectRequest& r) {
  return {Rpc::kSelect, 0, r.input().dtype()};
}
CallLabels LabelsOf(const v1::UniqueRequest& r) {
  return {Rpc::kUnique, 0, r.input().dtype()};
}
CallLabels LabelsOf(const v1::RunLengthEncodeRequest& r) {
  return {Rpc::kRunLengthEncode, 0, r.input().dtype()};
}
CallLabels LabelsOf(const v1::ReduceByKeyRequest& r) {
  return {Rpc::kReduceByKey, r.op(), r.keys().dtype()};
}
CallLabels LabelsOf(const v1::AggregateByKeyRequest& r) {
  return {Rpc::kAggregateByKey, r.op(), r.keys().dtype()};
}

// One call from receipt to answer, as the metrics see it.
struct CallRecord {
  Metrics* metrics;  // null: record nothing
  CallLabels labels;
  absl::Time received;
  uint64_t bytes_in;
};

// Records the call, then answers it (after which the response is gone).
// `response` is null unless `status` is OK; `elements` counts only then.
void Answer(grpc::ServerUnaryReactor* reactor, const CallRecord& call, const absl::Status& status,
            const google::protobuf::Message* response, uint64_t elements) {
  if (call.metrics != nullptr) {
    call.metrics->RequestDone(call.labels.rpc, call.labels.op, call.labels.dtype, status.code(),
                              absl::Now() - call.received, call.bytes_in,
                              response != nullptr ? response->ByteSizeLong() : 0,
                              status.ok() ? elements : 0);
    call.metrics->RequestFinished();
  }
  reactor->Finish(ToGrpc(status));
}

}  // namespace

template <typename Request, typename Response>
grpc::ServerUnaryReactor* PrimitivesService::Handle(grpc::CallbackServerContext* context,
                                                    const Request* request, Response* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  CallRecord call{metrics_, LabelsOf(*request), absl::Now(), 0};
  if (metrics_ != nullptr) {
    call.bytes_in = request->ByteSizeLong();
    metrics_->RequestStarted();
  }
  absl::StatusOr<Operation> operation = ToOperation(*request, limits_);
  if (!operation.ok()) {
    if (metrics_ != nullptr) {
      if (absl::IsInvalidArgument(operation.status())) metrics_->Rejected(RejectReason::kInvalid);
      if (absl::IsResourceExhausted(operation.status())) {
        metrics_->Rejected(RejectReason::kTooLarge);
      }
    }
    Answer(reactor, call, operation.status(), nullptr, 0);
    return reactor;
  }
  const uint64_t elements = ItemCount(*operation);
  auto task = std::make_unique<Task>();
  task->operation = *std::move(operation);
  task->deadline = DeadlineOf(*context);
  task->is_cancelled = [context] { return context->IsCancelled(); };
  task->done = [reactor, response, call, elements](absl::StatusOr<Result> result) {
    const absl::Status status =
        result.ok() ? ToResponse(*std::move(result), response) : result.status();
    Answer(reactor, call, status, status.ok() ? response : nullptr, elements);
  };
  // On failure the scheduler recorded its own refusal (queue full).
  if (absl::Status scheduled = scheduler_->Schedule(&task); !scheduled.ok()) {
    Answer(reactor, call, scheduled, nullptr, 0);
  }
  return reactor;
}

grpc::ServerUnaryReactor* PrimitivesService::Scan(grpc::CallbackServerContext* context,
                                                  const v1::ScanRequest* request,
                                                  v1::ScanResponse* response) {
  return Handle(context, request, response);
}

grpc::ServerUnaryReactor* PrimitivesService::Reduce(grpc::CallbackServerContext* context,
                                                    const v1::ReduceRequest* request,
                                                    v1::ReduceResponse* response) {
  return Handle(context, request, response);
}

grpc::ServerUnaryReactor* PrimitivesService::Select(grpc::CallbackServerContext* context,
                                                    const v1::SelectRequest* request,
                                                    v1::SelectResponse* response) {
  return Handle(context, request, response);
}

grpc::ServerUnaryReactor* PrimitivesService::Unique(grpc::CallbackServerContext* context,
                                                    const v1::UniqueRequest* request,
                                                    v1::UniqueResponse* response) {
  return Handle(context, request, response);
}

grpc::ServerUnaryReactor* PrimitivesService::RunLengthEncode(
    grpc::CallbackServerContext* context, const v1::RunLengthEncodeRequest* request,
    v1::RunLengthEncodeResponse* response) {
  return Handle(context, request, response);
}

grpc::ServerUnaryReactor* PrimitivesService::ReduceByKey(grpc::CallbackServerContext* context,
                                                         const v1::ReduceByKeyRequest* request,
                                                         v1::ReduceByKeyResponse* response) {
  return Handle(context, request, response);
}

grpc::ServerUnaryReactor* PrimitivesService::AggregateByKey(
    grpc::CallbackServerContext* context, const v1::AggregateByKeyRequest* request,
    v1::AggregateByKeyResponse* response) {
  return Handle(context, request, response);
}

}  // namespace primserve
