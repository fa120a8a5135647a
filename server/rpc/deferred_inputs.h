#ifndef PRIMSERVE_SERVER_RPC_DEFERRED_INPUTS_H_
#define PRIMSERVE_SERVER_RPC_DEFERRED_INPUTS_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "server/engine/task.h"
#include "wire/parallel_copy.h"
#include "wire/received.h"

namespace primserve {

// A request's large arrays left in gRPC's receive slices when it is parsed,
// to be copied into pinned memory range by range by the backend as it works
// (ArrayView::pending), instead of whole before the request is scheduled:
// the one copy then overlaps the work on the device. Owns that memory and
// the pending copies; must outlive the operation.
class DeferredInputs {
 public:
  // `allocator` gives the memory (page-locked: server/engine/pinned_payloads.h);
  // payloads of fewer than `min_bytes` bytes, those that lie in one slice
  // (used in place), and those it gives no memory for are made contiguous
  // at once as usual (wire::Payload::Contiguous). `copies` (not owned; null:
  // the thread that fills) makes the pending copies.
  DeferredInputs(wire::PayloadAllocator allocator, size_t min_bytes,
                 wire::CopyPool* copies = nullptr);
  ~DeferredInputs();
  DeferredInputs(const DeferredInputs&) = delete;
  DeferredInputs& operator=(const DeferredInputs&) = delete;

  // `payload` as an ArrayView of `dtype` whose bytes are pending, or
  // nullopt. `payload` must outlive this.
  std::optional<ArrayView> Defer(const wire::Payload& payload, DType dtype);

 private:
  class Copy;
  const wire::PayloadAllocator allocator_;
  const size_t min_bytes_;
  wire::CopyPool* const copies_;
  std::vector<std::unique_ptr<Copy>> pending_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_DEFERRED_INPUTS_H_
