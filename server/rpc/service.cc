#include "server/rpc/service.h"

#include <chrono>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/buffers/owner.h"
#include "server/engine/admission.h"
#include "server/rpc/call_context.h"
#include "server/rpc/call_record.h"
#include "server/rpc/multiplex.h"
#include "server/rpc/request_validation.h"
#include "server/rpc/response_framing.h"
#include "server/rpc/stream_families.h"
#include "wire/framing.h"
#include "wire/received.h"

namespace primserve {

namespace {

// A unary call's reactor that says when its answer has gone: OnDone comes
// once gRPC has sent the answer and the status (or the call ended without).
class UnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit UnaryReactor(std::shared_ptr<AnswerSent> sent) : sent_(std::move(sent)) {}
  void OnDone() override {
    sent_->Signal();
    delete this;
  }

 private:
  const std::shared_ptr<AnswerSent> sent_;
};

}  // namespace

template <typename Request, typename Response>
grpc::ServerUnaryReactor* PrimitivesService::Handle(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* raw_request,
                                                    grpc::ByteBuffer* raw_response) {
  auto sent = std::make_shared<AnswerSent>();
  grpc::ServerUnaryReactor* reactor = new UnaryReactor(sent);
  // The parsed request and its payloads, which the operation views, live
  // until the answer is sent.
  struct Received {
    Received(const wire::PayloadAllocator& allocator, size_t min_pending_bytes,
             wire::CopyPool* copies)
        : payloads(allocator, copies), deferred(allocator, min_pending_bytes, copies) {}
    Request request;
    wire::ReceivedMessage payloads;
    DeferredInputs deferred;
  };
  auto received = std::make_unique<Received>(payload_allocator_, min_pending_bytes_, payload_copies_);
  if (absl::Status parsed = received->payloads.Parse(*raw_request, &received->request);
      !parsed.ok()) {
    RecordRefusal(metrics_, parsed);
    reactor->Finish(ToGrpc(parsed));
    return reactor;
  }
  const CallRecord call =
      CallRecord::Start(metrics_, LabelsOf(received->request), raw_request->Length());
  // Holds the leases on the shared memory the operation views, until the
  // task (and its done callback) is destroyed after the answer.
  std::unique_ptr<shm::RequestMemory> memory = RequestMemoryOf(
      shared_memory_, buffers_,
      buffers_ != nullptr ? buffers::OwnerOf(*context, caller_header_) : std::string());
  absl::StatusOr<Operation> operation = [&] {
    // A large scan's input is copied by the backend as its pipeline goes.
    if constexpr (std::is_same_v<Request, v1::ScanRequest>) {
      return ToOperation(received->request, limits_, memory.get(), &received->payloads,
                         min_pending_bytes_ != 0 ? &received->deferred : nullptr);
    } else {
      return ToOperation(received->request, limits_, memory.get(), &received->payloads);
    }
  }();
  if (!operation.ok()) {
    RecordRefusal(metrics_, operation.status());
    call.Done(operation.status(), nullptr, 0);
    reactor->Finish(ToGrpc(operation.status()));
    return reactor;
  }
  const uint64_t elements = ItemCount(*operation);
  auto task = std::make_unique<Task>();
  task->operation = *std::move(operation);
  task->deadline = DeadlineOf(*context);
  task->is_cancelled = [context] { return context->IsCancelled(); };
  task->peer = CallerOf(*context, caller_header_);
  task->answers = answer_allocator_;
  task->sent = std::move(sent);
  task->done = [reactor, raw_response, call, elements, memory = std::move(memory),
                received = std::move(received)](absl::StatusOr<Result> result) {
    Response response;
    absl::StatusOr<grpc::ByteBuffer> framed =
        result.ok() ? FrameResponse(*std::move(result), &response, memory.get())
                    : absl::StatusOr<grpc::ByteBuffer>(result.status());
    call.Done(framed.status(), framed.ok() ? framed->Length() : 0, elements);
    if (framed.ok()) *raw_response = *std::move(framed);
    reactor->Finish(ToGrpc(framed.status()));
  };
  // An idle engine runs a small task here and answers before this returns.
  // On failure the scheduler recorded its own refusal (queue full).
  if (absl::Status scheduled = scheduler_->ScheduleOrRun(&task); !scheduled.ok()) {
    call.Done(scheduled, nullptr, 0);
    reactor->Finish(ToGrpc(scheduled));
  }
  return reactor;
}

#define PRIMSERVE_RAW_UNARY(Rpc)                                                           \
  grpc::ServerUnaryReactor* PrimitivesService::Rpc(grpc::CallbackServerContext* context,   \
                                                   const grpc::ByteBuffer* request,        \
                                                   grpc::ByteBuffer* response) {           \
    return Handle<v1::Rpc##Request, v1::Rpc##Response>(context, request, response);       \
  }

PRIMSERVE_RAW_UNARY(Scan)
PRIMSERVE_RAW_UNARY(Reduce)
PRIMSERVE_RAW_UNARY(Select)
PRIMSERVE_RAW_UNARY(Unique)
PRIMSERVE_RAW_UNARY(RunLengthEncode)
PRIMSERVE_RAW_UNARY(ReduceByKey)
PRIMSERVE_RAW_UNARY(AggregateByKey)
PRIMSERVE_RAW_UNARY(Sort)
PRIMSERVE_RAW_UNARY(Gather)
PRIMSERVE_RAW_UNARY(Pipeline)

#undef PRIMSERVE_RAW_UNARY

RawBidiReactor* PrimitivesService::Multiplex(grpc::CallbackServerContext* context) {
  return new MultiplexReactor(context, scheduler_, limits_, metrics_,
                              CallerOf(*context, caller_header_), shared_memory_,
                              payload_allocator_, payload_copies_, answer_allocator_, buffers_,
                              buffers_ != nullptr ? buffers::OwnerOf(*context, caller_header_)
                                                  : std::string());
}

StreamEnvironment PrimitivesService::StreamEnvironmentOf(
    const grpc::CallbackServerContext& context) const {
  return StreamEnvironment{scheduler_, limits_, metrics_, CallerOf(context, caller_header_),
                           backend_, payload_allocator_, payload_copies_, answer_allocator_};
}

RawBidiReactor* PrimitivesService::ScanStream(grpc::CallbackServerContext* context) {
  return NewScanStream(context, StreamEnvironmentOf(*context));
}

RawReadReactor* PrimitivesService::ReduceStream(grpc::CallbackServerContext* context,
                                                grpc::ByteBuffer* response) {
  return NewReduceStream(context, StreamEnvironmentOf(*context), response);
}

RawBidiReactor* PrimitivesService::SelectStream(grpc::CallbackServerContext* context) {
  return NewSelectStream(context, StreamEnvironmentOf(*context));
}

RawBidiReactor* PrimitivesService::UniqueStream(grpc::CallbackServerContext* context) {
  return NewUniqueStream(context, StreamEnvironmentOf(*context));
}

RawBidiReactor* PrimitivesService::RunLengthEncodeStream(grpc::CallbackServerContext* context) {
  return NewRunLengthEncodeStream(context, StreamEnvironmentOf(*context));
}

RawBidiReactor* PrimitivesService::ReduceByKeyStream(grpc::CallbackServerContext* context) {
  return NewReduceByKeyStream(context, StreamEnvironmentOf(*context));
}

RawReadReactor* PrimitivesService::AggregateByKeyStream(grpc::CallbackServerContext* context,
                                                        grpc::ByteBuffer* response) {
  return NewAggregateByKeyStream(context, StreamEnvironmentOf(*context), response);
}

}  // namespace primserve
