// Admission by cost, between the transport and the batcher: each caller
// (peer address, port stripped) has its own queue, and a caller's requests
// reach the batcher only while its cost in flight, and everyone's together,
// stay under a bound. A caller with many expensive requests therefore waits
// behind itself, not in front of everyone: the queues take turns (round robin,
// one request per turn), so a light caller's request is next in line as soon
// as the bounds allow.
// Cost is bytes: the request's arrays plus the largest answer it can produce
// (MaxAnswerBytes) plus a fixed overhead, which also tracks the work (every
// primitive is linear in its input and its answer).
#ifndef PRIMSERVE_SERVER_ENGINE_ADMISSION_H_
#define PRIMSERVE_SERVER_ENGINE_ADMISSION_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/metrics.h"
#include "server/engine/scheduler.h"

namespace primserve {

struct AdmissionOptions {
  // Cost of all requests handed on and not yet answered. One request costing
  // more still runs, alone.
  uint64_t max_in_flight_bytes = uint64_t{4} << 30;
  // Cost one peer may have handed on and not yet answered; one request
  // costing more still runs when the peer has nothing else in flight. Keep it
  // under (batch threads - 1) x a heavy request's cost so that one peer cannot
  // occupy every batch thread.
  uint64_t max_peer_in_flight_bytes = uint64_t{1} << 30;
  // Requests one peer may have waiting here; more get RESOURCE_EXHAUSTED.
  uint64_t max_peer_queued_tasks = 1024;
  // How often waiting requests are checked for a passed deadline or a caller
  // who left, so that they are answered then rather than when their turn comes.
  absl::Duration sweep_interval = absl::Milliseconds(10);
};

// The cost admission charges for an operation, in bytes.
uint64_t AdmissionCost(const Operation& operation);

// The peer key of a gRPC peer string: "ipv4:10.0.0.1:5000" -> "ipv4:10.0.0.1",
// "ipv6:[::1]:5000" -> "ipv6:[::1]"; others ("unix:/path") unchanged.
std::string PeerKey(const std::string& peer);

class FairAdmission final : public Scheduler {
 public:
  // Hands admitted tasks to `next`; records refusals into `metrics` unless it
  // is null. Both outlive this.
  FairAdmission(const AdmissionOptions& options, Scheduler* next, Metrics* metrics = nullptr);
  ~FairAdmission() override;  // Shutdown()

  // Never blocks. Keys the task by Task::peer. RESOURCE_EXHAUSTED when the
  // peer's queue is full, UNAVAILABLE after Shutdown.
  absl::Status Schedule(std::unique_ptr<Task>* task) override;
  // As Schedule; a task admitted at once (its caller has none waiting and the
  // bounds allow it) while no other is in flight goes on through `next`'s
  // ScheduleOrRun, on this thread.
  absl::Status ScheduleOrRun(std::unique_ptr<Task>* task) override;

  // Refuses new tasks and answers the waiting ones UNAVAILABLE. Tasks already
  // handed on finish there; `next` must still accept their completions.
  void Shutdown();

  uint64_t queued() const;
  uint64_t in_flight_bytes() const;

 private:
  struct Waiting {
    std::unique_ptr<Task> task;
    uint64_t cost;
  };
  struct Peer {
    std::deque<Waiting> queue;
    uint64_t in_flight = 0;
  };
  struct Handoff {
    std::string peer;
    Waiting waiting;
  };

  absl::Status Enter(std::unique_ptr<Task>* task, bool may_run);
  // Whether a task of `cost` from `peer` fits the bounds now.
  bool Fits(const Peer& peer, uint64_t cost) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the task's `done` free its cost once called; returns the `done`
  // it had.
  std::shared_ptr<absl::AnyInvocable<void(absl::StatusOr<Result>)>> ReleaseWhenDone(
      Task* task, const std::string& peer, uint64_t cost);
  // Takes, turn by turn, the waiting tasks the bounds now admit.
  std::vector<Handoff> TakeAdmitted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the tasks on (answering the dead ones), outside the lock.
  void HandOn(std::vector<Handoff> admitted);
  // A handed-on task was answered: frees its cost and admits more.
  void Release(const std::string& peer, uint64_t cost);
  // Returns a handed-on task's cost to its peer and the total.
  void Free(const std::string& peer, uint64_t cost) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetIfIdle(const std::string& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SweepLoop();

  const AdmissionOptions options_;
  Scheduler* const next_;
  Metrics* const metrics_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Peer> peers_ ABSL_GUARDED_BY(mu_);
  // Peers with waiting tasks, in turn order; each appears once.
  std::deque<std::string> turns_ ABSL_GUARDED_BY(mu_);
  uint64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sweeper_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_ADMISSION_H_
