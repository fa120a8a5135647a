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
#include "wire/parallel_copy.h"
#include "wire/received.h"

namespace primserve {

// The Primitives service with every method over raw buffers (so over the
// plain Service: the typed callback methods would clash with the streams').
namespace raw {
using P = v1::Primitives;
using Primitives = P::WithRawCallbackMethod_Scan<P::WithRawCallbackMethod_Reduce<
    P::WithRawCallbackMethod_Select<P::WithRawCallbackMethod_Unique<
        P::WithRawCallbackMethod_RunLengthEncode<P::WithRawCallbackMethod_ReduceByKey<
            P::WithRawCallbackMethod_AggregateByKey<P::WithRawCallbackMethod_Sort<
            P::WithRawCallbackMethod_Gather<P::WithRawCallbackMethod_Pipeline<
            P::WithRawCallbackMethod_Multiplex<
                P::WithRawCallbackMethod_ScanStream<P::WithRawCallbackMethod_ReduceStream<
                    P::WithRawCallbackMethod_SelectStream<P::WithRawCallbackMethod_UniqueStream<
                        P::WithRawCallbackMethod_RunLengthEncodeStream<
                            P::WithRawCallbackMethod_ReduceByKeyStream<
                                P::WithRawCallbackMethod_AggregateByKeyStream<
                                    P::Service>>>>>>>>>>>>>>>>>>;
}  // namespace raw

class PrimitivesService final : public raw::Primitives {
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
  PrimitivesService(Scheduler* scheduler, const RequestLimits& limits,
                    Metrics* metrics = nullptr, std::string caller_header = "",
                    const shm::Registry* shared_memory = nullptr,
                    const ExecutionBackend* backend = nullptr,
                    wire::PayloadAllocator payload_allocator = nullptr,
                    AnswerAllocator answer_allocator = nullptr,
                    wire::CopyPool* payload_copies = nullptr,
                    buffers::Registry* buffers = nullptr)
      : scheduler_(scheduler),
        limits_(limits),
        metrics_(metrics),
        caller_header_(std::move(caller_header)),
        shared_memory_(shared_memory),
        backend_(backend),
        payload_allocator_(std::move(payload_allocator)),
        answer_allocator_(std::move(answer_allocator)),
        payload_copies_(payload_copies),
        buffers_(buffers),
        min_pending_bytes_(backend != nullptr && payload_allocator_
                               ? backend->MinPendingInputBytes()
                               : 0) {}

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
  // Multiplex and the streaming forms (server/rpc/multiplex.h,
  // server/rpc/stream_reactor.h), over raw buffers likewise.
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

  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Handle(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request, grpc::ByteBuffer* response);

  Scheduler* const scheduler_;
  const RequestLimits limits_;
  Metrics* const metrics_;
  const std::string caller_header_;
  const shm::Registry* const shared_memory_;
  const ExecutionBackend* const backend_;
  const wire::PayloadAllocator payload_allocator_;
  const AnswerAllocator answer_allocator_;
  wire::CopyPool* const payload_copies_;
  buffers::Registry* const buffers_;
  // Scan inputs this large reach the backend pending (DeferredInputs), into
  // memory from payload_allocator_; 0: none.
  const size_t min_pending_bytes_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_SERVICE_H_
