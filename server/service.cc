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

}  // namespace

template <typename Request, typename Response>
grpc::ServerUnaryReactor* PrimitivesService::Handle(grpc::CallbackServerContext* context,
                                                    const Request* request, Response* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Operation> operation = ToOperation(*request, limits_);
  if (!operation.ok()) {
    reactor->Finish(ToGrpc(operation.status()));
    return reactor;
  }
  auto task = std::make_unique<Task>();
  task->operation = *std::move(operation);
  task->deadline = DeadlineOf(*context);
  task->is_cancelled = [context] { return context->IsCancelled(); };
  task->done = [reactor, response](absl::StatusOr<Result> result) {
    reactor->Finish(ToGrpc(result.ok() ? ToResponse(*std::move(result), response)
                                       : result.status()));
  };
  if (absl::Status scheduled = scheduler_->Schedule(&task); !scheduled.ok()) {
    reactor->Finish(ToGrpc(scheduled));
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
