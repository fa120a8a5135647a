#include "server/batcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace primserve {

Batcher::Batcher(const BatcherOptions& options, ExecutionBackend* backend, Metrics* metrics)
    : options_(options), backend_(backend), metrics_(metrics) {
  if (metrics_ != nullptr) metrics_->SetQueueCapacity(options_.max_enqueued_tasks);
  for (int i = 0; i < std::max(1, options_.num_threads); ++i) {
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
  if (items >= options_.large_request_items || options_.batch_timeout_micros <= 0) {
    Batch alone;
    alone.push_back(std::move(*task));
    ready_.push_back(std::move(alone));
    return absl::OkStatus();
  }
  OpenBatch& open = open_[key];
  if (!open.tasks.empty() && open.items + items > options_.max_batch_items) {
    ready_.push_back(std::move(open.tasks));
    open = OpenBatch{};
  }
  if (open.tasks.empty()) open.opened = now;
  open.items += items;
  open.tasks.push_back(std::move(*task));
  if (open.tasks.size() >= options_.max_batch_size || open.items >= options_.max_batch_items) {
    ready_.push_back(std::move(open.tasks));
    open_.erase(key);
  }
  return absl::OkStatus();
}

void Batcher::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

uint64_t Batcher::enqueued() const {
  absl::MutexLock lock(&mu_);
  return enqueued_;
}

bool Batcher::HasReadyWork() const { return !ready_.empty() || stopping_; }

absl::Time Batcher::NextExpiry() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [key, open] : open_) {
    next = std::min(next, open.opened + absl::Microseconds(options_.batch_timeout_micros));
  }
  return next;
}

void Batcher::CloseExpired(absl::Time now) {
  for (auto it = open_.begin(); it != open_.end();) {
    auto current = it++;
    const absl::Time expiry =
        current->second.opened + absl::Microseconds(options_.batch_timeout_micros);
    if (stopping_ || expiry <= now) {
      ready_.push_back(std::move(current->second.tasks));
      open_.erase(current);
    }
  }
}

Batcher::Batch Batcher::DropDead(Batch batch) {
  Batch alive;
  alive.reserve(batch.size());
  const absl::Time now = absl::Now();
  for (std::unique_ptr<Task>& task : batch) {
    if (task->is_cancelled && task->is_cancelled()) {
      if (metrics_ != nullptr) metrics_->Rejected(RejectReason::kCancelled);
      task->done(absl::CancelledError("the caller cancelled the request"));
    } else if (task->deadline <= now) {
      if (metrics_ != nullptr) metrics_->Rejected(RejectReason::kDeadline);
      task->done(absl::DeadlineExceededError("deadline passed while the request was queued"));
    } else {
      alive.push_back(std::move(task));
    }
  }
  return alive;
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
  while (true) {
    Batch batch;
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        CloseExpired(absl::Now());
        if (!ready_.empty()) break;
        if (stopping_ && open_.empty()) return;
        // Wake for ready work, for shutdown, or when the earliest open batch
        // is due, including one opened while waiting.
        const absl::Time expiry = NextExpiry();
        auto wake = [this, expiry]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return HasReadyWork() || NextExpiry() < expiry;
        };
        mu_.AwaitWithDeadline(absl::Condition(&wake), expiry);
      }
      batch = std::move(ready_.front());
      ready_.pop_front();
      enqueued_ -= batch.size();
      if (metrics_ != nullptr) metrics_->SetQueueDepth(enqueued_);
    }
    batch = DropDead(std::move(batch));
    if (batch.empty()) continue;
    if (metrics_ != nullptr) RecordLaunch(batch, absl::Now());
    backend_->Execute(std::move(batch));
  }
}

}  // namespace primserve
