#include "server/engine/batcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace primserve {

Batcher::Batcher(const BatcherOptions& options, ExecutionBackend* backend, Metrics* metrics)
    : options_(options),
      threads_(std::max(1, options.num_threads)),
      backend_(backend),
      metrics_(metrics) {
  if (metrics_ != nullptr) metrics_->SetQueueCapacity(options_.max_enqueued_tasks);
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < threads_; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

Batcher::~Batcher() { Shutdown(); }

absl::Status Batcher::Schedule(std::unique_ptr<Task>* task) {
  const uint64_t items = ItemCount((*task)->operation);
  const BatchKey key = BatchKeyOf((*task)->operation);
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("server is shutting down");
  if (enqueued_ >= options_.max_enqueued_tasks) {
    if (metrics_ != nullptr) metrics_->Rejected(RejectReason::kQueueFull);
    return absl::ResourceExhaustedError(
        absl::StrCat("queue full: ", enqueued_, " requests waiting (max_enqueued_tasks)"));
  }
  (*task)->enqueued_at = now;
  ++enqueued_;
  if (metrics_ != nullptr) metrics_->SetQueueDepth(enqueued_);
  work_available_.Signal();
  if (items >= options_.large_request_items || options_.batch_timeout_micros <= 0) {
    Batch alone;
    alone.push_back(std::move(*task));
    closed_.push_back(ClosedBatch{std::move(alone), next_number_++});
    return absl::OkStatus();
  }
  auto open = open_.find(key);
  if (open != open_.end() &&
      (open->second.items + items > options_.max_batch_items ||
       now - open->second.opened >= absl::Microseconds(options_.batch_timeout_micros))) {
    Close(open);
    open = open_.end();
  }
  if (open == open_.end()) {
    open = open_.emplace(key, OpenBatch{{}, 0, now, next_number_++}).first;
    opening_order_.emplace_back(key, open->second.number);
  }
  open->second.items += items;
  open->second.tasks.push_back(std::move(*task));
  if (open->second.tasks.size() >= options_.max_batch_size ||
      open->second.items >= options_.max_batch_items) {
    Close(open);
  }
  return absl::OkStatus();
}

absl::Status Batcher::ScheduleOrRun(std::unique_ptr<Task>* task) {
  if (options_.run_when_idle && ItemCount((*task)->operation) < options_.large_request_items) {
    const absl::Time now = absl::Now();
    bool run_here;
    {
      absl::MutexLock lock(&mu_);
      run_here = !stopping_ && enqueued_ == 0 && running_ == 0;
      if (run_here) ++running_;
    }
    if (run_here) {
      (*task)->enqueued_at = now;
      Batch alone;
      alone.push_back(std::move(*task));
      Launch(std::move(alone));
      absl::MutexLock lock(&mu_);
      Finished();
      return absl::OkStatus();
    }
  }
  return Schedule(task);
}

void Batcher::Close(absl::flat_hash_map<BatchKey, OpenBatch>::iterator open) {
  closed_.push_back(ClosedBatch{std::move(open->second.tasks), open->second.number});
  open_.erase(open);
}

void Batcher::Shutdown() {
  std::vector<std::thread> workers;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    workers.swap(workers_);
    work_available_.SignalAll();
  }
  for (std::thread& worker : workers) worker.join();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* running) ABSL_NO_THREAD_SAFETY_ANALYSIS { return *running == 0; }, &running_));
}

uint64_t Batcher::enqueued() const {
  absl::MutexLock lock(&mu_);
  return enqueued_;
}

std::optional<Batcher::Batch> Batcher::TakeOldest() {
  while (true) {
    if (stopping_ && enqueued_ == 0) return std::nullopt;
    if (running_ >= threads_) {
      work_available_.Wait(&mu_);
      continue;
    }
    // Drop the front entries of batches that have closed since they opened.
    while (!opening_order_.empty()) {
      const auto& [key, number] = opening_order_.front();
      auto open = open_.find(key);
      if (open != open_.end() && open->second.number == number) break;
      opening_order_.pop_front();
    }
    const bool take_open =
        !opening_order_.empty() &&
        (closed_.empty() || opening_order_.front().second < closed_.front().number);
    if (take_open) {
      auto open = open_.find(opening_order_.front().first);
      opening_order_.pop_front();
      Batch batch = std::move(open->second.tasks);
      open_.erase(open);
      return batch;
    }
    if (!closed_.empty()) {
      Batch batch = std::move(closed_.front().tasks);
      closed_.pop_front();
      return batch;
    }
    if (stopping_) return std::nullopt;
    work_available_.Wait(&mu_);
  }
}

void Batcher::DropDead(Batch* batch) {
  const absl::Time now = absl::Now();
  size_t alive = 0;
  for (std::unique_ptr<Task>& task : *batch) {
    if (task->is_cancelled && task->is_cancelled()) {
      if (metrics_ != nullptr) metrics_->Rejected(RejectReason::kCancelled);
      task->done(absl::CancelledError("the caller cancelled the request"));
    } else if (task->deadline <= now) {
      if (metrics_ != nullptr) metrics_->Rejected(RejectReason::kDeadline);
      task->done(absl::DeadlineExceededError("deadline passed while the request was queued"));
    } else {
      (*batch)[alive++] = std::move(task);
    }
  }
  batch->resize(alive);
}

void Batcher::Launch(Batch batch) {
  DropDead(&batch);
  if (batch.empty()) return;
  if (metrics_ != nullptr) RecordLaunch(batch, absl::Now());
  backend_->Execute(std::move(batch));
}

void Batcher::Finished() {
  --running_;
  // A worker held back by the bound on running batches may go now.
  if (enqueued_ > 0) work_available_.Signal();
}

void Batcher::RecordLaunch(const Batch& batch, absl::Time now) {
  uint64_t items = 0;
  for (const std::unique_ptr<Task>& task : batch) {
    metrics_->ObserveStage(RpcOf(task->operation), Stage::kQueue, now - task->enqueued_at);
    items += ItemCount(task->operation);
  }
  metrics_->BatchLaunched(batch.size(), items);
}

void Batcher::WorkerLoop() {
  bool ran = false;
  while (true) {
    Batch batch;
    {
      absl::MutexLock lock(&mu_);
      if (ran) Finished();
      std::optional<Batch> oldest = TakeOldest();
      if (!oldest) return;
      batch = *std::move(oldest);
      enqueued_ -= batch.size();
      ++running_;
      if (metrics_ != nullptr) metrics_->SetQueueDepth(enqueued_);
    }
    Launch(std::move(batch));
    ran = true;
  }
}

}  // namespace primserve
