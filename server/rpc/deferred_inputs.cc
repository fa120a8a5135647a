#include "server/rpc/deferred_inputs.h"

#include <memory>
#include <utility>

namespace primserve {

// A payload's slices, to be copied range by range into `memory` by `copies`
// (null: the calling thread).
class DeferredInputs::Copy final : public PendingBytes {
 public:
  Copy(const wire::Payload& payload, wire::PayloadBuffer memory, wire::CopyPool* copies)
      : memory_(std::move(memory)), from_(payload.AsGather()), copies_(copies) {}
  char* data() const { return memory_.get(); }

  void Fill(size_t offset, size_t n) const override {
    wire::Copy(copies_, from_, offset, n, memory_.get() + offset);
  }

 private:
  const wire::PayloadBuffer memory_;
  const wire::Gather from_;
  wire::CopyPool* const copies_;
};

DeferredInputs::DeferredInputs(wire::PayloadAllocator allocator, size_t min_bytes,
                               wire::CopyPool* copies)
    : allocator_(std::move(allocator)), min_bytes_(min_bytes), copies_(copies) {}

DeferredInputs::~DeferredInputs() = default;

std::optional<ArrayView> DeferredInputs::Defer(const wire::Payload& payload, DType dtype) {
  if (!allocator_ || payload.size() < min_bytes_ || payload.slices().size() < 2) {
    return std::nullopt;
  }
  wire::PayloadBuffer memory = allocator_(payload.size());
  if (memory == nullptr) return std::nullopt;
  pending_.push_back(std::make_unique<Copy>(payload, std::move(memory), copies_));
  const Copy& copy = *pending_.back();
  return ArrayView{dtype, absl::string_view(copy.data(), payload.size()), &copy};
}

}  // namespace primserve
