// The dynamic batcher: gathers small tasks of one kind (same BatchKey) and
// hands them to the backend together, so the backend can fuse them into one
// segmented launch. Batching costs nothing when the engine is idle: a free
// worker takes the oldest batch at once, however small, so tasks gather only
// while every worker is busy (as TF-Serving's and Triton's batchers do); and
// ScheduleOrRun runs a small task on its caller's thread when nothing runs or
// waits, saving the hand-off to a worker (a wake-up and two context
// switches) that an idle engine would otherwise cost each request. A
// batch stops gathering when it reaches max_batch_size requests or
// max_batch_items elements, or batch_timeout_micros after it opened; it then
// waits for a worker. Large tasks bypass batching. Knows nothing of gRPC or
// CUDA.
#ifndef PRIMSERVE_SERVER_ENGINE_BATCHER_H_
#define PRIMSERVE_SERVER_ENGINE_BATCHER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/engine/backend.h"
#include "server/engine/metrics.h"
#include "server/engine/scheduler.h"

namespace primserve {

struct BatcherOptions {
  // Threads that hand batches to the backend (batches running at once).
  int num_threads = 4;
  // Most requests fused into one batch.
  uint64_t max_batch_size = 256;
  // Most elements in one batch; a task that would overflow it starts a new one.
  uint64_t max_batch_items = uint64_t{1} << 22;
  // Longest a batch gathers tasks while every worker is busy (a ceiling, not
  // a wait: an idle worker takes a batch at once). 0 disables batching.
  int64_t batch_timeout_micros = 200;
  // Tasks accepted but not yet handed to the backend; beyond it Schedule
  // answers RESOURCE_EXHAUSTED.
  uint64_t max_enqueued_tasks = 4096;
  // Tasks of at least this many elements run alone, unbatched.
  uint64_t large_request_items = uint64_t{1} << 18;
  // ScheduleOrRun may run a small task on its caller's thread when the
  // engine is idle; false: it always hands tasks to the workers.
  bool run_when_idle = true;
};

class Batcher final : public Scheduler {
 public:
  // Records queue waits, batch sizes, queue depth and its rejections into
  // `metrics` unless it is null.
  Batcher(const BatcherOptions& options, ExecutionBackend* backend, Metrics* metrics = nullptr);
  ~Batcher() override;  // Shutdown()

  absl::Status Schedule(std::unique_ptr<Task>* task) override;
  // With run_when_idle, runs a task under large_request_items on the calling
  // thread when no batch runs and none waits (it counts as one of
  // num_threads while it runs); otherwise Schedule.
  absl::Status ScheduleOrRun(std::unique_ptr<Task>* task) override;

  // Refuses new tasks, runs every task already accepted, joins the threads,
  // and waits for tasks running on callers' threads. A second call returns
  // at once.
  void Shutdown();

  // Tasks accepted and not yet handed to the backend.
  uint64_t enqueued() const;

 private:
  using Batch = std::vector<std::unique_ptr<Task>>;
  // Batches are numbered as they open; workers take the oldest first.
  struct OpenBatch {
    Batch tasks;
    uint64_t items = 0;
    absl::Time opened;
    uint64_t number = 0;
  };
  struct ClosedBatch {
    Batch tasks;
    uint64_t number = 0;
  };

  void WorkerLoop();
  // The oldest batch, open or closed, or none once stopping with nothing left;
  // waits while there is nothing to take or num_threads batches run.
  std::optional<Batch> TakeOldest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stops `open` gathering and queues it for a worker.
  void Close(absl::flat_hash_map<BatchKey, OpenBatch>::iterator open)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers tasks whose deadline passed or whose caller left; keeps the rest.
  void DropDead(Batch* batch);
  // Hands the batch's live tasks to the backend (outside mu_); the caller
  // counted it in running_.
  void Launch(Batch batch);
  // A batch counted in running_ has returned from the backend.
  void Finished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records how long each task waited and the batch handed to the backend.
  void RecordLaunch(const Batch& batch, absl::Time now);

  const BatcherOptions options_;
  const int threads_;  // options_.num_threads, at least 1
  ExecutionBackend* const backend_;
  Metrics* const metrics_;

  mutable absl::Mutex mu_;
  absl::CondVar work_available_;
  absl::flat_hash_map<BatchKey, OpenBatch> open_ ABSL_GUARDED_BY(mu_);
  // Open batches' keys and numbers in opening order; an entry whose batch has
  // since closed is skipped when it comes to the front.
  std::deque<std::pair<BatchKey, uint64_t>> opening_order_ ABSL_GUARDED_BY(mu_);
  std::deque<ClosedBatch> closed_ ABSL_GUARDED_BY(mu_);
  uint64_t next_number_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  // Batches in the backend's Execute, on workers or (ScheduleOrRun) callers.
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_BATCHER_H_
