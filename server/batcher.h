// The dynamic batcher: queues small tasks of one kind (same BatchKey) and hands
// them to the backend together, so the backend can fuse them into one
// segmented launch. A batch leaves when it reaches max_batch_size requests or
// max_batch_items elements, or when its oldest task has waited
// batch_timeout_micros. Large tasks bypass batching. Knows nothing of gRPC or
// CUDA.
#ifndef PRIMSERVE_SERVER_BATCHER_H_
#define PRIMSERVE_SERVER_BATCHER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/backend.h"
#include "server/metrics.h"
#include "server/scheduler.h"

namespace primserve {

struct BatcherOptions {
  // Threads that hand batches to the backend (batches running at once).
  int num_threads = 4;
  // Most requests fused into one batch.
  uint64_t max_batch_size = 256;
  // Most elements in one batch; a task that would overflow it starts a new one.
  uint64_t max_batch_items = uint64_t{1} << 22;
  // Longest a task waits for its batch to fill. 0 disables batching.
  int64_t batch_timeout_micros = 200;
  // Tasks accepted but not yet handed to the backend; beyond it Schedule
  // answers RESOURCE_EXHAUSTED.
  uint64_t max_enqueued_tasks = 4096;
  // Tasks of at least this many elements run alone, unbatched.
  uint64_t large_request_items = uint64_t{1} << 18;
};

class Batcher final : public Scheduler {
 public:
  // Records queue waits, batch sizes, queue depth and its rejections into
  // `metrics` unless it is null.
  Batcher(const BatcherOptions& options, ExecutionBackend* backend, Metrics* metrics = nullptr);
  ~Batcher() override;  // Shutdown()

  absl::Status Schedule(std::unique_ptr<Task>* task) override;

  // Refuses new tasks, runs every task already accepted, joins the threads.
  void Shutdown();

  // Tasks accepted and not yet handed to the backend.
  uint64_t enqueued() const;

 private:
  using Batch = std::vector<std::unique_ptr<Task>>;
  struct OpenBatch {
    Batch tasks;
    uint64_t items = 0;
    absl::Time opened;
  };

  void WorkerLoop();
  bool HasReadyWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves open batches whose time is up (all of them when stopping) to ready_.
  void CloseExpired(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time NextExpiry() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers tasks whose deadline passed or whose caller left; returns the rest.
  Batch DropDead(Batch batch);
  // Records how long each task waited and the batch handed to the backend.
  void RecordLaunch(const Batch& batch, absl::Time now);

  const BatcherOptions options_;
  ExecutionBackend* const backend_;
  Metrics* const metrics_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<BatchKey, OpenBatch> open_ ABSL_GUARDED_BY(mu_);
  std::deque<Batch> ready_ ABSL_GUARDED_BY(mu_);
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_BATCHER_H_
