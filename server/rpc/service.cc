#include "server/rpc/service.h"

#include <memory>
#include <string>
#include <utility>

#include "server/buffers/owner.h"
#include "server/rpc/call_context.h"
#include "server/rpc/multiplex.h"
#include "server/rpc/stream_families.h"

namespace primserve {

namespace {

// A unary call of the callback API. OnDone comes once gRPC has sent the
// answer and the status (or the call ended without): the answer has gone.
class UnaryReactor final : public grpc::ServerUnaryReactor, public UnaryCall {
 public:
  UnaryReactor(grpc::CallbackServerContext* context, grpc::ByteBuffer* response,
               std::shared_ptr<AnswerSent> sent)
      : context_(context), response_(response), sent_(std::move(sent)) {}

  const grpc::ServerContextBase& context() const override { return *context_; }
  bool IsCancelled() const override { return context_->IsCancelled(); }
  void Answer(grpc::ByteBuffer answer, const grpc::Status& status) override {
    if (status.ok()) *response_ = std::move(answer);
    Finish(status);
  }

  void OnDone() override {
    sent_->Signal();
    delete this;
  }

 private:
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_;
  const std::shared_ptr<AnswerSent> sent_;
};

}  // namespace

template <typename Unary>
PrimitivesStreams<Unary>::PrimitivesStreams(
    Scheduler* scheduler, const RequestLimits& limits, Metrics* metrics,
    std::string caller_header, const shm::Registry* shared_memory,
    const ExecutionBackend* backend, wire::PayloadAllocator payload_allocator,
    AnswerAllocator answer_allocator, wire::CopyPool* payload_copies, buffers::Registry* buffers)
    : environment_{scheduler,
                   limits,
                   metrics,
                   std::move(caller_header),
                   shared_memory,
                   backend,
                   payload_allocator,
                   std::move(answer_allocator),
                   payload_copies,
                   buffers,
                   MinPendingBytesOf(backend, payload_allocator)} {}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* PrimitivesService::Handle(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  auto sent = std::make_shared<AnswerSent>();
  auto* reactor = new UnaryReactor(context, response, sent);
  // An idle engine runs a small task on gRPC's callback thread and answers
  // before this returns (--run_small_requests_inline).
  ServeUnary<Request, Response>(environment(), reactor, *request, std::move(sent),
                                /*may_run_here=*/true);
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

template <typename Unary>
RawBidiReactor* PrimitivesStreams<Unary>::Multiplex(grpc::CallbackServerContext* context) {
  const PrimitivesEnvironment& e = environment_;
  return new MultiplexReactor(context, e.scheduler, e.limits, e.metrics,
                              CallerOf(*context, e.caller_header), e.shared_memory,
                              e.payload_allocator, e.payload_copies, e.answer_allocator, e.buffers,
                              e.buffers != nullptr ? buffers::OwnerOf(*context, e.caller_header)
                                                   : std::string());
}

template <typename Unary>
StreamEnvironment PrimitivesStreams<Unary>::StreamEnvironmentOf(
    const grpc::CallbackServerContext& context) const {
  const PrimitivesEnvironment& e = environment_;
  return StreamEnvironment{e.scheduler,        e.limits,         e.metrics,
                           CallerOf(context, e.caller_header), e.backend,
                           e.payload_allocator, e.payload_copies, e.answer_allocator};
}

template <typename Unary>
RawBidiReactor* PrimitivesStreams<Unary>::ScanStream(grpc::CallbackServerContext* context) {
  return NewScanStream(context, StreamEnvironmentOf(*context));
}

template <typename Unary>
RawReadReactor* PrimitivesStreams<Unary>::ReduceStream(grpc::CallbackServerContext* context,
                                                grpc::ByteBuffer* response) {
  return NewReduceStream(context, StreamEnvironmentOf(*context), response);
}

template <typename Unary>
RawBidiReactor* PrimitivesStreams<Unary>::SelectStream(grpc::CallbackServerContext* context) {
  return NewSelectStream(context, StreamEnvironmentOf(*context));
}

template <typename Unary>
RawBidiReactor* PrimitivesStreams<Unary>::UniqueStream(grpc::CallbackServerContext* context) {
  return NewUniqueStream(context, StreamEnvironmentOf(*context));
}

template <typename Unary>
RawBidiReactor* PrimitivesStreams<Unary>::RunLengthEncodeStream(grpc::CallbackServerContext* context) {
  return NewRunLengthEncodeStream(context, StreamEnvironmentOf(*context));
}

template <typename Unary>
RawBidiReactor* PrimitivesStreams<Unary>::ReduceByKeyStream(grpc::CallbackServerContext* context) {
  return NewReduceByKeyStream(context, StreamEnvironmentOf(*context));
}

template <typename Unary>
RawReadReactor* PrimitivesStreams<Unary>::AggregateByKeyStream(grpc::CallbackServerContext* context,
                                                        grpc::ByteBuffer* response) {
  return NewAggregateByKeyStream(context, StreamEnvironmentOf(*context), response);
}

template class PrimitivesStreams<raw::CallbackUnary>;
template class PrimitivesStreams<raw::QueuedUnary>;

}  // namespace primserve
