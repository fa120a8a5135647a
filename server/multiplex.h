// The Multiplex RPC: many requests on one bidirectional stream, each answered
// with its id as soon as it finishes. Each request goes through the same
// validation and scheduler as a unary call (and is batched with them); the
// stream reads at most `window` requests ahead of the answers written, so a
// client that stops reading stalls only its own stream.
#ifndef PRIMSERVE_SERVER_MULTIPLEX_H_
#define PRIMSERVE_SERVER_MULTIPLEX_H_

#include <cstdint>
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/convert.h"
#include "server/metrics.h"
#include "server/scheduler.h"

namespace primserve {

class MultiplexReactor final
    : public grpc::ServerBidiReactor<v1::MultiplexRequest, v1::MultiplexResponse> {
 public:
  // Starts reading; deletes itself when the stream is done.
  // `caller` keys the stream's requests for admission (CallerOf).
  MultiplexReactor(grpc::CallbackServerContext* context, Scheduler* scheduler,
                   const RequestLimits& limits, Metrics* metrics, std::string caller,
                   const shm::Registry* shared_memory);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override { delete this; }

 private:
  // Validates and schedules one request; every path ends in Answer().
  void Start(std::unique_ptr<v1::MultiplexRequest> request);
  template <typename Request, typename Response>
  void Schedule(std::unique_ptr<v1::MultiplexRequest> holder, const Request& request,
                Response* (v1::MultiplexResponse::*answer_field)());
  // Queues the answer for writing; `releases_id` frees its id for reuse.
  void Answer(std::unique_ptr<v1::MultiplexResponse> answer, bool releases_id);
  // The error answer to request `id`.
  void Refuse(uint64_t id, const absl::Status& status, bool releases_id);
  // After a state change: reads the next request, writes the next answer or
  // finishes, as the state allows. Called without mu_ held.
  void Advance();

  grpc::CallbackServerContext* const context_;
  Scheduler* const scheduler_;
  const RequestLimits limits_;
  Metrics* const metrics_;
  const std::string caller_;
  const shm::Registry* const shared_memory_;  // null: off

  absl::Mutex mu_;
  std::unique_ptr<v1::MultiplexRequest> incoming_ ABSL_GUARDED_BY(mu_);
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // a write failed: the client is gone
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // Requests read whose answers are not yet written.
  uint64_t unanswered_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<uint64_t> ids_in_flight_ ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<v1::MultiplexResponse>> writes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_MULTIPLEX_H_
