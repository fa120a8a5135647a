// Copies between pageable host memory (a gRPC message's bytes) and device
// memory (a resident buffer) through pinned bounce chunks, for the Buffers
// service's Write and Read on the CUDA backend. A pageable cudaMemcpy runs on
// the legacy default stream, which waits for every kernel on the device, and
// the driver stages it through its own small buffers one piece at a time;
// here each chunk's host memcpy overlaps the previous chunk's DMA on a
// non-blocking stream of the buffer's device, and no kernel is waited for.
//
// The pool holds `slots` pairs of `chunk_bytes` pinned chunks; a copy takes a
// slot for its length (several Write and Read streams run at once, one slot
// each). When every slot is taken the copy is a plain cudaMemcpy instead of a
// wait, so the pool bounds pinned memory without queueing anyone.
#ifndef PRIMSERVE_SERVER_CUDA_BOUNCE_H_
#define PRIMSERVE_SERVER_CUDA_BOUNCE_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace primserve::cuda {

class BouncePool final {
 public:
  // No pinned memory until the first copy (slots are made as needed).
  BouncePool(size_t slots, size_t chunk_bytes);
  ~BouncePool();
  BouncePool(const BouncePool&) = delete;
  BouncePool& operator=(const BouncePool&) = delete;

  // `bytes` from host `from` to device memory `to`, on `device`; and back.
  // Done (the data in place) when they return.
  absl::Status ToDevice(int device, char* to, const char* from, size_t bytes);
  absl::Status ToHost(int device, char* to, const char* from, size_t bytes);

  // Copies that found no free slot and went through cudaMemcpy (tests).
  size_t fallbacks() const;

 private:
  struct Slot;

  // A free slot, made on first need up to the limit; null when all are taken
  // (or pinned memory cannot be had).
  Slot* Take();
  void Give(Slot* slot);

  const size_t max_slots_;
  const size_t chunk_bytes_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<Slot*> free_ ABSL_GUARDED_BY(mu_);
  size_t fallbacks_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_BOUNCE_H_
