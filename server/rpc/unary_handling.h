// A unary primitive call from its request's bytes to its answer, whichever of
// gRPC's APIs carries it (the callback reactors of server/rpc/service.cc or
// the completion queues of server/rpc/completion_queue_unary.cc): parsing,
// validation, admission, metrics, deadline, cancellation, caller identity,
// shared memory and buffer refs, framing. Both APIs call ServeUnary, so they
// answer alike.
#ifndef PRIMSERVE_SERVER_RPC_UNARY_HANDLING_H_
#define PRIMSERVE_SERVER_RPC_UNARY_HANDLING_H_

#include <cstddef>
#include <memory>
#include <string>

#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "server/buffers/registry.h"
#include "server/engine/answer_sent.h"
#include "server/engine/backend.h"
#include "server/engine/metrics.h"
#include "server/engine/scheduler.h"
#include "server/engine/task.h"
#include "server/rpc/request_limits.h"
#include "server/shm/registry.h"
#include "wire/parallel_copy.h"
#include "wire/received.h"

namespace primserve {

// What the Primitives service's calls are served with, unary or streamed
// (see PrimitivesService's constructor for each).
struct PrimitivesEnvironment {
  Scheduler* scheduler = nullptr;
  RequestLimits limits;
  Metrics* metrics = nullptr;
  std::string caller_header;
  const shm::Registry* shared_memory = nullptr;
  const ExecutionBackend* backend = nullptr;
  wire::PayloadAllocator payload_allocator;
  AnswerAllocator answer_allocator;
  wire::CopyPool* payload_copies = nullptr;
  buffers::Registry* buffers = nullptr;
  // Scan inputs this large reach the backend pending (DeferredInputs), into
  // memory from payload_allocator; 0: none.
  size_t min_pending_bytes = 0;
};

// The Scan input size from which a backend takes inputs pending, as above.
size_t MinPendingBytesOf(const ExecutionBackend* backend,
                         const wire::PayloadAllocator& payload_allocator);

// One unary call as its gRPC API holds it. The API keeps it alive until
// Answer has been called and the call has ended.
class UnaryCall {
 public:
  // The caller's deadline, metadata, address and TLS identity.
  virtual const grpc::ServerContextBase& context() const = 0;
  // Whether the call was cancelled (by its caller, its deadline, or the
  // server's shutdown). Any thread.
  virtual bool IsCancelled() const = 0;
  // Sends `answer` (when `status` is OK) and `status`. Once per call, from
  // any thread; the call may be gone when it returns.
  virtual void Answer(grpc::ByteBuffer answer, const grpc::Status& status) = 0;

 protected:
  ~UnaryCall() = default;
};

// Serves `request`, the bytes of a v1 Request, on `call`: answers at once
// when the request is refused, else from the task's completion (no thread
// waits for it). `sent` is the task's AnswerSent: the API signals it once the
// answer has gone or the call ended without it. With `may_run_here`, an idle
// engine may run a small task on this thread before this returns
// (Scheduler::ScheduleOrRun); without, the task always goes to the engine's
// threads (Scheduler::Schedule).
template <typename Request, typename Response>
void ServeUnary(const PrimitivesEnvironment& environment, UnaryCall* call,
                const grpc::ByteBuffer& request, std::shared_ptr<AnswerSent> sent,
                bool may_run_here);

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_UNARY_HANDLING_H_
