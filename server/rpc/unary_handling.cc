#include "server/rpc/unary_handling.h"

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "proto/primserve/v1/primitives.pb.h"
#include "server/buffers/owner.h"
#include "server/rpc/call_context.h"
#include "server/rpc/call_record.h"
#include "server/rpc/deferred_inputs.h"
#include "server/rpc/request_validation.h"
#include "server/rpc/response_framing.h"

namespace primserve {

size_t MinPendingBytesOf(const ExecutionBackend* backend,
                         const wire::PayloadAllocator& payload_allocator) {
  return backend != nullptr && payload_allocator ? backend->MinPendingInputBytes() : 0;
}

template <typename Request, typename Response>
void ServeUnary(const PrimitivesEnvironment& environment, UnaryCall* call,
                const grpc::ByteBuffer& raw_request, std::shared_ptr<AnswerSent> sent,
                bool may_run_here) {
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
  auto received = std::make_unique<Received>(
      environment.payload_allocator, environment.min_pending_bytes, environment.payload_copies);
  if (absl::Status parsed = received->payloads.Parse(raw_request, &received->request);
      !parsed.ok()) {
    RecordRefusal(environment.metrics, parsed);
    call->Answer(grpc::ByteBuffer(), ToGrpc(parsed));
    return;
  }
  const CallRecord record = CallRecord::Start(environment.metrics, LabelsOf(received->request),
                                              raw_request.Length());
  const grpc::ServerContextBase& context = call->context();
  // Holds the leases on the shared memory the operation views, until the
  // task (and its done callback) is destroyed after the answer.
  std::unique_ptr<shm::RequestMemory> memory =
      RequestMemoryOf(environment.shared_memory, environment.buffers,
                      environment.buffers != nullptr
                          ? buffers::OwnerOf(context, environment.caller_header)
                          : std::string());
  absl::StatusOr<Operation> operation = [&] {
    // A large scan's input is copied by the backend as its pipeline goes.
    if constexpr (std::is_same_v<Request, v1::ScanRequest>) {
      return ToOperation(received->request, environment.limits, memory.get(), &received->payloads,
                         environment.min_pending_bytes != 0 ? &received->deferred : nullptr);
    } else {
      return ToOperation(received->request, environment.limits, memory.get(),
                         &received->payloads);
    }
  }();
  if (!operation.ok()) {
    RecordRefusal(environment.metrics, operation.status());
    record.Done(operation.status(), nullptr, 0);
    call->Answer(grpc::ByteBuffer(), ToGrpc(operation.status()));
    return;
  }
  const uint64_t elements = ItemCount(*operation);
  auto task = std::make_unique<Task>();
  task->operation = *std::move(operation);
  task->deadline = DeadlineOf(context);
  task->is_cancelled = [call] { return call->IsCancelled(); };
  task->peer = CallerOf(context, environment.caller_header);
  task->answers = environment.answer_allocator;
  task->sent = std::move(sent);
  task->done = [call, record, elements, memory = std::move(memory),
                received = std::move(received)](absl::StatusOr<Result> result) {
    Response response;
    absl::StatusOr<grpc::ByteBuffer> framed =
        result.ok() ? FrameResponse(*std::move(result), &response, memory.get())
                    : absl::StatusOr<grpc::ByteBuffer>(result.status());
    record.Done(framed.status(), framed.ok() ? framed->Length() : 0, elements);
    const grpc::Status status = ToGrpc(framed.status());
    call->Answer(framed.ok() ? *std::move(framed) : grpc::ByteBuffer(), status);
  };
  // On failure the scheduler recorded its own refusal (queue full).
  if (absl::Status scheduled = may_run_here ? environment.scheduler->ScheduleOrRun(&task)
                                            : environment.scheduler->Schedule(&task);
      !scheduled.ok()) {
    record.Done(scheduled, nullptr, 0);
    call->Answer(grpc::ByteBuffer(), ToGrpc(scheduled));
  }
}

#define PRIMSERVE_SERVE_UNARY(Rpc)                                                     \
  template void ServeUnary<v1::Rpc##Request, v1::Rpc##Response>(                      \
      const PrimitivesEnvironment& environment, UnaryCall* call,                       \
      const grpc::ByteBuffer& request, std::shared_ptr<AnswerSent> sent, bool may_run_here);

PRIMSERVE_SERVE_UNARY(Scan)
PRIMSERVE_SERVE_UNARY(Reduce)
PRIMSERVE_SERVE_UNARY(Select)
PRIMSERVE_SERVE_UNARY(Unique)
PRIMSERVE_SERVE_UNARY(RunLengthEncode)
PRIMSERVE_SERVE_UNARY(ReduceByKey)
PRIMSERVE_SERVE_UNARY(AggregateByKey)
PRIMSERVE_SERVE_UNARY(Sort)
PRIMSERVE_SERVE_UNARY(Gather)
PRIMSERVE_SERVE_UNARY(Pipeline)

#undef PRIMSERVE_SERVE_UNARY

}  // namespace primserve
