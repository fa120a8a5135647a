// The Multiplex RPC: many requests on one bidirectional stream, each answered
// with its id as soon as it finishes. Each request goes through the same
// validation and scheduler as a unary call (and is batched with them); the
// stream reads at most `window` requests, and `window_bytes` of them, ahead of
// the answers written, so a client that stops reading stalls only its own
// stream. Over raw buffers, as
// the unary RPCs: each message is parsed with its arrays left where gRPC
// received them (wire::ReceivedMessage), each answer framed with its arrays
// as slices, those held in answer buffers over them (FrameResponse). A
// message that is no MultiplexRequest (so has no id to answer) ends the
// stream with INVALID_ARGUMENT once the requests before it are answered.
#ifndef PRIMSERVE_SERVER_RPC_MULTIPLEX_H_
#define PRIMSERVE_SERVER_RPC_MULTIPLEX_H_

#include <cstdint>
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/buffers/registry.h"
#include "server/engine/metrics.h"
#include "server/engine/scheduler.h"
#include "server/rpc/request_limits.h"
#include "server/rpc/request_validation.h"
#include "server/rpc/response_framing.h"
#include "wire/parallel_copy.h"
#include "wire/received.h"

namespace primserve {

class MultiplexReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Starts reading; deletes itself when the stream is done.
  // `caller` keys the stream's requests for admission (CallerOf).
  // `payload_allocator`: where the requests' arrays are made contiguous
  // (empty: the heap); `payload_copies` (null: this thread) copies them;
  // `answer_allocator`: where the backend may write their large answers,
  // sent from there (Task::answers; empty: strings). `buffers` (null:
  // refused) resolves buffer refs among `buffer_owner`'s buffers.
  MultiplexReactor(grpc::CallbackServerContext* context, Scheduler* scheduler,
                   const RequestLimits& limits, Metrics* metrics, std::string caller,
                   const shm::Registry* shared_memory, wire::PayloadAllocator payload_allocator,
                   wire::CopyPool* payload_copies = nullptr,
                   AnswerAllocator answer_allocator = nullptr,
                   buffers::Registry* buffers = nullptr, std::string buffer_owner = "");

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override { delete this; }

 private:
  // A request as received: its Array.data fields are tokens for payloads
  // left in gRPC's slices, which its operation views until it is answered.
  struct Received {
    Received(wire::PayloadAllocator allocator, wire::CopyPool* copies)
        : payloads(std::move(allocator), copies) {}
    v1::MultiplexRequest request;
    wire::ReceivedMessage payloads;
    uint64_t bytes_in = 0;  // the message's size on the wire
  };

  // The message just read, parsed; null if it is no request (the stream's
  // error is then set).
  std::unique_ptr<Received> Parse();
  // Validates and schedules one request; every path ends in Answer().
  void Start(std::unique_ptr<Received> received);
  template <typename Request, typename Response>
  void Schedule(std::unique_ptr<Received> holder, const Request& request,
                Response* (v1::MultiplexResponse::*answer_field)());
  // An answer queued for writing, and who waits for it to be sent (null:
  // nobody).
  struct Write {
    grpc::ByteBuffer framed;
    std::shared_ptr<AnswerSent> sent;
    uint64_t bytes_in = 0;  // its request's, held in unanswered_bytes_ until written
  };

  // Queues the answer to request `id` (of `bytes_in` as received), framed,
  // for writing; `releases_id` frees its id for reuse; `sent` (may be null)
  // is signalled once it is written or dropped.
  void Answer(uint64_t id, uint64_t bytes_in, grpc::ByteBuffer framed, bool releases_id,
              std::shared_ptr<AnswerSent> sent = nullptr);
  // The error answer to request `id`.
  void Refuse(uint64_t id, uint64_t bytes_in, const absl::Status& status, bool releases_id);
  // After a state change (`update`, applied under mu_): reads the next
  // request, writes the next answer or finishes, as the state allows. Called
  // without mu_ held. Touches nothing of the reactor after starting a read,
  // a write or Finish: from a scheduler thread, it may be deleted by then.
  void Advance(absl::FunctionRef<void()> update = [] {});

  grpc::CallbackServerContext* const context_;
  Scheduler* const scheduler_;
  const RequestLimits limits_;
  Metrics* const metrics_;
  const std::string caller_;
  const shm::Registry* const shared_memory_;  // null: off
  buffers::Registry* const buffers_;  // null: refused
  const std::string buffer_owner_;
  const wire::PayloadAllocator payload_allocator_;
  wire::CopyPool* const payload_copies_;
  const AnswerAllocator answer_allocator_;

  absl::Mutex mu_;
  grpc::ByteBuffer incoming_ ABSL_GUARDED_BY(mu_);
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // a write failed: the client is gone
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // A message that was no request: nothing more is read, and the stream
  // ends with it once every request before it is answered.
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  uint64_t messages_read_ ABSL_GUARDED_BY(mu_) = 0;  // their place in the stream
  // Requests read whose answers are not yet written.
  uint64_t unanswered_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unanswered_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // their Received::bytes_in
  absl::flat_hash_set<uint64_t> ids_in_flight_ ABSL_GUARDED_BY(mu_);
  std::deque<Write> writes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_MULTIPLEX_H_
