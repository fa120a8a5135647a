// The gRPC transport: the Primitives service. Thin on purpose: it converts
// each request into an Operation, hands it to the scheduler, and answers when
// the task completes. It knows the scheduler interface and nothing below it.
#ifndef PRIMSERVE_SERVER_RPC_SERVICE_H_
#define PRIMSERVE_SERVER_RPC_SERVICE_H_

#include <memory>
#include <string>
#include <utility>

#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/buffers/registry.h"
#include "server/engine/metrics.h"
#include "server/engine/scheduler.h"
#include "server/rpc/call_context.h"
#include "server/rpc/deferred_inputs.h"
#include "server/rpc/request_limits.h"
#include "server/rpc/stream_reactor.h"
#include "server/rpc/unary_handling.h"
#include "wire/parallel_copy.h"
#include "wire/received.h"

namespace primserve {

// The Primitives service's methods over raw buffers (so over the plain
// Service: the typed callback methods would clash with the streams'). The
// unary methods are callback methods (PrimitivesService) or methods of the
// completion-queue API (QueuedPrimitivesService); Multiplex and the streams
// are callback methods in both.
namespace raw {
using P = v1::Primitives;
using CallbackUnary = P::WithRawCallbackMethod_Scan<P::WithRawCallbackMethod_Reduce<
    P::WithRawCallbackMethod_Select<P::WithRawCallbackMethod_Unique<
        P::WithRawCallbackMethod_RunLengthEncode<P::WithRawCallbackMethod_ReduceByKey<
            P::WithRawCallbackMethod_AggregateByKey<P::WithRawCallbackMethod_Sort<
                P::WithRawCallbackMethod_Gather<P::WithRawCallbackMethod_Pipeline<P::Service>>>>>>>>>>;
using QueuedUnary = P::WithRawMethod_Scan<P::WithRawMethod_Reduce<P::WithRawMethod_Select<
    P::WithRawMethod_Unique<P::WithRawMethod_RunLengthEncode<P::WithRawMethod_ReduceByKey<
        P::WithRawMethod_AggregateByKey<P::WithRawMethod_Sort<
            P::WithRawMethod_Gather<P::WithRawMethod_Pipeline<P::Service>>>>>>>>>>;
template <typename Unary>
using WithStreams = P::WithRawCallbackMethod_Multiplex<P::WithRawCallbackMethod_ScanStream<
    P::WithRawCallbackMethod_ReduceStream<P::WithRawCallbackMethod_SelectStream<
        P::WithRawCallbackMethod_UniqueStream<P::WithRawCallbackMethod_RunLengthEncodeStream<
            P::WithRawCallbackMethod_ReduceByKeyStream<
                P::WithRawCallbackMethod_AggregateByKeyStream<Unary>>>>>>>>;
}  // namespace raw

// What both forms of the service share: what they serve with, Multiplex and
// the streaming forms (server/rpc/multiplex.h, server/rpc/stream_reactor.h).
template <typename Unary>
class PrimitivesStreams : public raw::WithStreams<Unary> {
 public:
  // Records every call (count, latency, payload, refusals) into `metrics`
  // unless it is null.
  // `caller_header`: see CallerOf. `shared_memory` (not owned; null: off)
  // resolves Array.shm and output_location in unary and Multiplex requests.
  // `backend` (not owned; may be null) tells reproducible ScanStreams where
  // to cut (ExecutionBackend::ReproducibleScanGranule). `payload_allocator`
  // (may be empty) is where requests' arrays are made contiguous
  // (wire::ReceivedMessage), unary, streamed or multiplexed;
  // `answer_allocator` (may be empty) where the backend may write requests'
  // large answers, sent from there (Task::answers), unary, streamed or
  // multiplexed.
  // `payload_copies` (not owned; null: each on the thread that makes it)
  // copies arrays out of gRPC's slices, when made contiguous or filled
  // pending. `buffers` (not owned; null: refused) resolves Array.buffer and
  // output_buffers in unary and Multiplex requests.
  PrimitivesStreams(Scheduler* scheduler, const RequestLimits& limits, Metrics* metrics,
                    std::string caller_header, const shm::Registry* shared_memory,
                    const ExecutionBackend* backend, wire::PayloadAllocator payload_allocator,
                    AnswerAllocator answer_allocator, wire::CopyPool* payload_copies,
                    buffers::Registry* buffers);

  const PrimitivesEnvironment& environment() const { return environment_; }

  RawBidiReactor* Multiplex(grpc::CallbackServerContext* context) override;
  RawBidiReactor* ScanStream(grpc::CallbackServerContext* context) override;
  RawReadReactor* ReduceStream(grpc::CallbackServerContext* context,
                               grpc::ByteBuffer* response) override;
  RawBidiReactor* SelectStream(grpc::CallbackServerContext* context) override;
  RawBidiReactor* UniqueStream(grpc::CallbackServerContext* context) override;
  RawBidiReactor* RunLengthEncodeStream(grpc::CallbackServerContext* context) override;
  RawBidiReactor* ReduceByKeyStream(grpc::CallbackServerContext* context) override;
  RawReadReactor* AggregateByKeyStream(grpc::CallbackServerContext* context,
                                       grpc::ByteBuffer* response) override;

 private:
  StreamEnvironment StreamEnvironmentOf(const grpc::CallbackServerContext& context) const;

  const PrimitivesEnvironment environment_;
};

extern template class PrimitivesStreams<raw::CallbackUnary>;
extern template class PrimitivesStreams<raw::QueuedUnary>;

// The service with callback unary methods.
class PrimitivesService final : public PrimitivesStreams<raw::CallbackUnary> {
 public:
  // See PrimitivesStreams.
  PrimitivesService(Scheduler* scheduler, const RequestLimits& limits,
                    Metrics* metrics = nullptr, std::string caller_header = "",
                    const shm::Registry* shared_memory = nullptr,
                    const ExecutionBackend* backend = nullptr,
                    wire::PayloadAllocator payload_allocator = nullptr,
                    AnswerAllocator answer_allocator = nullptr,
                    wire::CopyPool* payload_copies = nullptr,
                    buffers::Registry* buffers = nullptr)
      : PrimitivesStreams(scheduler, limits, metrics, std::move(caller_header), shared_memory,
                          backend, std::move(payload_allocator), std::move(answer_allocator),
                          payload_copies, buffers) {}

  // The unary RPCs take and give raw gRPC buffers: requests are parsed with
  // their arrays left where gRPC received them, and answers are sent from the
  // memory that holds them (wire/). The bytes are v1's messages all the same.
  grpc::ServerUnaryReactor* Scan(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Reduce(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Select(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Unique(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RunLengthEncode(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ReduceByKey(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* AggregateByKey(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Sort(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Gather(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Pipeline(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;

 private:
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Handle(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request, grpc::ByteBuffer* response);
};

// The service with the unary methods of the completion-queue API: their
// calls are asked for with RequestScan, RequestReduce, ... and served by
// CompletionQueueUnary (server/rpc/completion_queue_unary.h).
class QueuedPrimitivesService final : public PrimitivesStreams<raw::QueuedUnary> {
 public:
  using PrimitivesStreams::PrimitivesStreams;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_SERVICE_H_
