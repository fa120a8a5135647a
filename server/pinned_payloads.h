// Host buffers for request payloads that a backend copies to a device: page-
// locked once and reused, so that a large request's bytes go from gRPC's
// receive buffers into memory the GPU reads directly (one copy on the host,
// then DMA) instead of through a second copy into staging. Below
// kMinPinnedBytes, and beyond the pool's limit, it gives nothing and the
// payload takes ordinary heap memory.
#ifndef PRIMSERVE_SERVER_PINNED_PAYLOADS_H_
#define PRIMSERVE_SERVER_PINNED_PAYLOADS_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/backend.h"
#include "wire/received.h"

namespace primserve {

class PinnedPayloads {
 public:
  static constexpr size_t kMinPinnedBytes = size_t{1} << 20;

  // Keeps at most `max_bytes` pinned, in use or free. `backend` (not owned)
  // pins and unpins, and must outlive every buffer handed out.
  PinnedPayloads(ExecutionBackend* backend, size_t max_bytes);
  ~PinnedPayloads();

  // A pinned buffer of at least `bytes`, or null (too small to be worth it,
  // or no room within the limit). Thread-safe; the buffer goes back to the
  // pool when its deleter runs, which may outlive the pool itself.
  wire::PayloadBuffer Allocate(size_t bytes);
  // As a wire::PayloadAllocator.
  wire::PayloadAllocator Allocator();

  size_t pinned_bytes() const;

 private:
  struct Buffer {
    char* data = nullptr;
    size_t capacity = 0;
  };
  struct State {
    ExecutionBackend* backend;
    size_t max_bytes;
    mutable absl::Mutex mu;
    std::vector<Buffer> free ABSL_GUARDED_BY(mu);
    size_t pinned ABSL_GUARDED_BY(mu) = 0;  // in use and free
    bool closed ABSL_GUARDED_BY(mu) = false;
  };
  static void Release(const std::shared_ptr<State>& state, Buffer buffer);
  static void Destroy(State& state, Buffer buffer);

  std::shared_ptr<State> state_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_PINNED_PAYLOADS_H_
