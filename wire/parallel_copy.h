// Large copies out of the pieces gRPC received a payload in, spread over a
// fixed set of threads that every copy in the process shares. One core copies
// a few GB/s, a host's memory several times that: a 268 MB request copied on
// one core spends most of its time in the server there
// (perf/runs/2026-11-26-h100-data-path).
#ifndef PRIMSERVE_WIRE_PARALLEL_COPY_H_
#define PRIMSERVE_WIRE_PARALLEL_COPY_H_

#include <cstddef>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace primserve::wire {

// Bytes laid end to end in pieces (a payload's slices), read by offset. Views
// the pieces, which must outlive it.
class Gather {
 public:
  explicit Gather(const std::vector<absl::string_view>& pieces);

  size_t size() const { return size_; }
  // Copies bytes [offset, offset + n) of the whole (within size()) to `to`,
  // on this thread.
  void CopyTo(size_t offset, size_t n, char* to) const;

 private:
  std::vector<absl::string_view> pieces_;  // the non-empty ones
  std::vector<size_t> starts_;             // each piece's offset in the whole
  size_t size_ = 0;
};

class CopyPool {
 public:
  static constexpr size_t kDefaultChunkBytes = size_t{2} << 20;
  static constexpr size_t kDefaultMinParallelBytes = size_t{4} << 20;

  // Each copy is done by its caller and up to `threads` - 1 workers (0 or 1:
  // no workers; every copy on its caller). A copy of fewer than
  // `min_parallel_bytes` stays on its caller; a larger one is cut into chunks
  // of `chunk_bytes` (> 0) that the caller and the workers claim in turn.
  // Concurrent copies share the workers, oldest first, so the threads copying
  // at once are the callers plus threads - 1 at most.
  explicit CopyPool(int threads, size_t chunk_bytes = kDefaultChunkBytes,
                    size_t min_parallel_bytes = kDefaultMinParallelBytes);
  // No copy may be in flight.
  ~CopyPool();
  CopyPool(const CopyPool&) = delete;
  CopyPool& operator=(const CopyPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Copies bytes [offset, offset + n) of `from` (within its size) to `to`;
  // returns when every byte is there. Safe to call from any number of
  // threads at once.
  void Copy(const Gather& from, size_t offset, size_t n, char* to);

 private:
  struct Job;

  void Work();
  bool HasJobOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !jobs_.empty() || stopping_;
  }
  // Takes `job`, all of whose chunks are claimed, off the queue.
  void Retire(const std::shared_ptr<Job>& job);

  const size_t chunk_bytes_;
  const size_t min_parallel_bytes_;
  absl::Mutex mu_;
  // Copies with chunks left to claim, oldest first (maybe all claimed, until
  // retired).
  std::deque<std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// `pool`->Copy, or from.CopyTo on this thread where `pool` is null.
void Copy(CopyPool* pool, const Gather& from, size_t offset, size_t n, char* to);

}  // namespace primserve::wire

#endif  // PRIMSERVE_WIRE_PARALLEL_COPY_H_
