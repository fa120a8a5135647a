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
// A task whose caller signals when its answer has been sent (Task::sent) keeps
// its cost in flight until then: an answer nobody reads holds its memory, so
// it holds its place under the bounds too.
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
  // occupy every batch thread: 96 MiB lets a caller run two 16 MiB Scans
  // (32 MiB each) at once, leaving the default 4 batch threads half free
  // for others (issue 27: 1 GiB let one caller's 16 such Scans push another's
  // small-request p99 from 1.6 to 379 ms).
  uint64_t max_peer_in_flight_bytes = uint64_t{96} << 20;
  // Requests one peer may have waiting here; more get RESOURCE_EXHAUSTED.
  uint64_t max_peer_queued_tasks = 1024;
  // Bytes of the requests one peer has waiting here (their arrays, which
  // wait with them, plus the fixed overhead); a request that would pass it
  // gets RESOURCE_EXHAUSTED (one waits whatever its size). Streams and Multiplex calls add up under it:
  // each reads a few requests ahead, but a caller may open many.
  uint64_t max_peer_queued_bytes = uint64_t{256} << 20;
  // The same for everyone's waiting requests together: each stream and
  // Multiplex call reads a few requests ahead, and callers may be many (one
  // waits whatever its size).
  uint64_t max_queued_bytes = uint64_t{1} << 30;
  // Bytes of one peer's answers handed to the transport (Task::sent) but not
  // yet sent: a client that does not read them (answers written in place
  // count nothing). While over, the peer's new
  // requests get RESOURCE_EXHAUSTED before they run (the answers stay in
  // flight meanwhile, so the peer's waiting requests wait).
  uint64_t max_peer_unsent_bytes = uint64_t{512} << 20;
  // The same for everyone's answers together.
  uint64_t max_unsent_bytes = uint64_t{2} << 30;
  // How often waiting requests are checked for a passed deadline or a caller
  // who left, so that they are answered then rather than when their turn comes.
  absl::Duration sweep_interval = absl::Milliseconds(10);
};

// The cost admission charges for an operation, in bytes.
uint64_t AdmissionCost(const Operation& operation);
// The bytes a waiting operation holds: its arrays plus the fixed overhead.
uint64_t WaitingBytes(const Operation& operation);

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
  // Bytes the waiting requests hold (WaitingBytes), everyone's.
  uint64_t queued_bytes() const;
  uint64_t in_flight_bytes() const;
  // Cost of answers handed to the transport and not yet sent.
  uint64_t unsent_bytes() const;

 private:
  struct Waiting {
    std::unique_ptr<Task> task;
    uint64_t cost;
    uint64_t bytes;  // what it holds while it waits (RequestBytes + overhead)
  };
  struct Peer {
    std::deque<Waiting> queue;
    uint64_t in_flight = 0;
    // Of in_flight: answered, the answer not yet sent.
    uint64_t unsent = 0;
    // Waiting::bytes of the queue.
    uint64_t queued_bytes = 0;
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
  // A handed-on task's answer went to the transport: its cost stays in
  // flight, and its `answer_bytes` count as unsent, until `sent` is
  // signalled; then both are released.
  void HoldUntilSent(const std::string& peer, uint64_t cost, uint64_t answer_bytes,
                     AnswerSent& sent);
  // Why a request of `bytes` (WaitingBytes) from `peer` may not wait, or OK.
  absl::Status QueueRefusal(const Peer& peer, uint64_t bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a new request from `peer` is refused for answers not yet sent, or OK.
  absl::Status UnsentRefusal(const Peer& peer) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
  uint64_t unsent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // Peer::queued_bytes, summed
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sweeper_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_ADMISSION_H_
