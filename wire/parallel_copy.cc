#include "wire/parallel_copy.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

namespace primserve::wire {

Gather::Gather(const std::vector<absl::string_view>& pieces) {
  for (absl::string_view piece : pieces) {
    if (piece.empty()) continue;
    pieces_.push_back(piece);
    starts_.push_back(size_);
    size_ += piece.size();
  }
}

void Gather::CopyTo(size_t offset, size_t n, char* to) const {
  if (n == 0) return;
  // The last piece that starts at or before `offset`.
  size_t i = std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin() - 1;
  while (n > 0) {
    const size_t skip = offset - starts_[i];
    const size_t take = std::min(n, pieces_[i].size() - skip);
    std::memcpy(to, pieces_[i].data() + skip, take);
    to += take;
    offset += take;
    n -= take;
    ++i;
  }
}

// One copy cut into chunks: chunk k is bytes [k * chunk, (k + 1) * chunk)
// of the range, whoever claims it first copies it.
struct CopyPool::Job {
  Job(const Gather& from, size_t offset, size_t n, char* to, size_t chunk)
      : from(from), offset(offset), n(n), to(to), chunk(chunk), chunks((n + chunk - 1) / chunk) {}

  // Claims and copies chunks until every one is claimed; then records how
  // many this thread copied.
  void Work() {
    size_t copied = 0;
    for (size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < chunks; ++copied) {
      const size_t begin = k * chunk;
      from.CopyTo(offset + begin, std::min(chunk, n - begin), to + begin);
    }
    if (copied == 0) return;
    absl::MutexLock lock(&mu);
    done += copied;
  }
  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done == chunks; }

  const Gather& from;
  const size_t offset;
  const size_t n;
  char* const to;
  const size_t chunk;
  const size_t chunks;
  std::atomic<size_t> next{0};  // the next chunk to claim
  absl::Mutex mu;
  size_t done ABSL_GUARDED_BY(mu) = 0;  // chunks copied
};

CopyPool::CopyPool(int threads, size_t chunk_bytes, size_t min_parallel_bytes)
    : chunk_bytes_(std::max<size_t>(chunk_bytes, 1)), min_parallel_bytes_(min_parallel_bytes) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { Work(); });
}

CopyPool::~CopyPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

void CopyPool::Work() {
  while (true) {
    std::shared_ptr<Job> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &CopyPool::HasJobOrStopping));
      if (jobs_.empty()) return;  // stopping
      job = jobs_.front();
    }
    job->Work();
    Retire(job);
  }
}

void CopyPool::Retire(const std::shared_ptr<Job>& job) {
  absl::MutexLock lock(&mu_);
  const auto it = std::find(jobs_.begin(), jobs_.end(), job);
  if (it != jobs_.end()) jobs_.erase(it);
}

void CopyPool::Copy(const Gather& from, size_t offset, size_t n, char* to) {
  if (workers_.empty() || n < min_parallel_bytes_ || n <= chunk_bytes_) {
    from.CopyTo(offset, n, to);
    return;
  }
  // Shared: a worker may still hold it after the last chunk is copied.
  const auto job = std::make_shared<Job>(from, offset, n, to, chunk_bytes_);
  {
    absl::MutexLock lock(&mu_);
    jobs_.push_back(job);
  }
  job->Work();
  Retire(job);
  job->mu.LockWhen(absl::Condition(job.get(), &Job::Done));
  job->mu.Unlock();
}

void Copy(CopyPool* pool, const Gather& from, size_t offset, size_t n, char* to) {
  if (pool != nullptr) {
    pool->Copy(from, offset, n, to);
  } else {
    from.CopyTo(offset, n, to);
  }
}

}  // namespace primserve::wire
