#include "server/service.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "server/call_record.h"
#include "server/multiplex.h"
#include "absl/strings/str_cat.h"
#include "server/admission.h"

namespace primserve {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Time DeadlineOf(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

std::string CallerOf(const grpc::CallbackServerContext& context,
                     const std::string& caller_header) {
  if (!caller_header.empty()) {
    const auto& metadata = context.client_metadata();
    if (auto it = metadata.find(caller_header); it != metadata.end()) {
      return absl::StrCat(caller_header, ":", absl::string_view(it->second.data(),
                                                                it->second.size()));
    }
  }
  return PeerKey(context.peer());
}

std::unique_ptr<shm::RequestMemory> RequestMemoryOf(const shm::Registry* registry) {
  if (registry != nullptr) return std::make_unique<shm::RequestMemory>(registry);
  // Shared by every request (a Status copy shares its message).
  static const absl::Status* const off =
      new absl::Status(absl::FailedPreconditionError("shared memory is off (--shared_memory)"));
  return std::make_unique<shm::RequestMemory>(*off);
}

namespace {

// Records the call, then answers it (after which the response is gone).
void Answer(grpc::ServerUnaryReactor* reactor, const CallRecord& call, const absl::Status& status,
            const google::protobuf::Message* response, uint64_t elements) {
  call.Done(status, response, elements);
  reactor->Finish(ToGrpc(status));
}

}  // namespace

template <typename Request, typename Response>
grpc::ServerUnaryReactor* PrimitivesService::Handle(grpc::CallbackServerContext* context,
                                                    const Request* request, Response* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const CallRecord call = CallRecord::Start(metrics_, LabelsOf(*request), *request);
  // Holds the leases on the shared memory the operation views, until the
  // task (and its done callback) is destroyed after the answer.
  std::unique_ptr<shm::RequestMemory> memory = RequestMemoryOf(shared_memory_);
  absl::StatusOr<Operation> operation = ToOperation(*request, limits_, memory.get());
  if (!operation.ok()) {
    RecordRefusal(metrics_, operation.status());
    Answer(reactor, call, operation.status(), nullptr, 0);
    return reactor;
  }
  const uint64_t elements = ItemCount(*operation);
  auto task = std::make_unique<Task>();
  task->operation = *std::move(operation);
  task->deadline = DeadlineOf(*context);
  task->is_cancelled = [context] { return context->IsCancelled(); };
  task->peer = CallerOf(*context, caller_header_);
  task->done = [reactor, response, call, elements,
                memory = std::move(memory)](absl::StatusOr<Result> result) {
    const absl::Status status =
        result.ok() ? ToResponse(*std::move(result), response, memory.get()) : result.status();
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

grpc::ServerBidiReactor<v1::MultiplexRequest, v1::MultiplexResponse>*
PrimitivesService::Multiplex(grpc::CallbackServerContext* context) {
  return new MultiplexReactor(context, scheduler_, limits_, metrics_,
                              CallerOf(*context, caller_header_), shared_memory_);
}

StreamEnvironment PrimitivesService::StreamEnvironmentOf(
    const grpc::CallbackServerContext& context) const {
  return StreamEnvironment{scheduler_, limits_, metrics_, CallerOf(context, caller_header_),
                           backend_};
}

grpc::ServerBidiReactor<v1::ScanRequest, v1::ScanResponse>* PrimitivesService::ScanStream(
    grpc::CallbackServerContext* context) {
  return NewScanStream(context, StreamEnvironmentOf(*context));
}

grpc::ServerReadReactor<v1::ReduceRequest>* PrimitivesService::ReduceStream(
    grpc::CallbackServerContext* context, v1::ReduceResponse* response) {
  return NewReduceStream(context, StreamEnvironmentOf(*context), response);
}

grpc::ServerBidiReactor<v1::SelectRequest, v1::SelectResponse>* PrimitivesService::SelectStream(
    grpc::CallbackServerContext* context) {
  return NewSelectStream(context, StreamEnvironmentOf(*context));
}

grpc::ServerBidiReactor<v1::UniqueRequest, v1::UniqueResponse>* PrimitivesService::UniqueStream(
    grpc::CallbackServerContext* context) {
  return NewUniqueStream(context, StreamEnvironmentOf(*context));
}

grpc::ServerBidiReactor<v1::RunLengthEncodeRequest, v1::RunLengthEncodeResponse>*
PrimitivesService::RunLengthEncodeStream(grpc::CallbackServerContext* context) {
  return NewRunLengthEncodeStream(context, StreamEnvironmentOf(*context));
}

grpc::ServerBidiReactor<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>*
PrimitivesService::ReduceByKeyStream(grpc::CallbackServerContext* context) {
  return NewReduceByKeyStream(context, StreamEnvironmentOf(*context));
}

grpc::ServerReadReactor<v1::AggregateByKeyRequest>* PrimitivesService::AggregateByKeyStream(
    grpc::CallbackServerContext* context, v1::AggregateByKeyResponse* response) {
  return NewAggregateByKeyStream(context, StreamEnvironmentOf(*context), response);
}

}  // namespace primserve
