// Host buffers for request payloads that a backend copies to a device, and
// for answers it copies back: page-locked once and reused, so that a large
// request's bytes go from gRPC's receive buffers into memory the GPU reads
// directly (one copy on the host, then DMA) instead of through a second copy
// into staging, and a large answer goes from the device into memory gRPC
// sends from (no copy on the host at all). Below kMinPinnedBytes, and beyond
// the pool's limit, it gives nothing and the bytes take ordinary heap memory.
#ifndef PRIMSERVE_SERVER_ENGINE_PINNED_PAYLOADS_H_
#define PRIMSERVE_SERVER_ENGINE_PINNED_PAYLOADS_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/engine/backend.h"
#include "server/engine/metrics.h"
#include "wire/received.h"

namespace primserve {

class PinnedPayloads {
 public:
  static constexpr size_t kMinPinnedBytes = size_t{1} << 20;

  // Keeps at most `max_bytes` pinned, in use or free. `backend` (not owned)
  // pins and unpins, and must outlive every buffer handed out. `gauges`
  // (may be empty; their Metrics must outlive the pool) are kept at the
  // pool's in-use and pinned bytes while it lives.
  PinnedPayloads(ExecutionBackend* backend, size_t max_bytes, HostPoolGauges gauges = {});
  ~PinnedPayloads();

  // A pinned buffer of at least `bytes`, or null (too small to be worth it,
  // or no room within the limit). Thread-safe; the buffer goes back to the
  // pool when its deleter runs, which may outlive the pool itself.
  wire::PayloadBuffer Allocate(size_t bytes);
  // As a wire::PayloadAllocator.
  wire::PayloadAllocator Allocator();
  // As a Task's AnswerAllocator: the buffer goes back to the pool when its
  // last reference goes (gRPC is done sending it).
  AnswerAllocator Answers();

  // Bytes pinned (in use and free), and in use.
  size_t pinned_bytes() const;
  size_t in_use_bytes() const;

 private:
  struct Buffer {
    char* data = nullptr;
    size_t capacity = 0;
  };
  struct State {
    ExecutionBackend* backend;
    size_t max_bytes;
    HostPoolGauges gauges;
    mutable absl::Mutex mu;
    std::vector<Buffer> free ABSL_GUARDED_BY(mu);
    size_t pinned ABSL_GUARDED_BY(mu) = 0;  // in use and free
    size_t in_use ABSL_GUARDED_BY(mu) = 0;
    bool closed ABSL_GUARDED_BY(mu) = false;
  };
  static void Release(const std::shared_ptr<State>& state, Buffer buffer);
  static void Destroy(State& state, Buffer buffer);
  // Sets the gauges to the state's bytes (none once the pool is closed).
  static void Publish(const State& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu);

  std::shared_ptr<State> state_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_PINNED_PAYLOADS_H_
