#include "server/engine/pinned_payloads.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace primserve {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

PinnedPayloads::PinnedPayloads(ExecutionBackend* backend, size_t max_bytes,
                               HostPoolGauges gauges)
    : state_(std::make_shared<State>()) {
  state_->backend = backend;
  state_->max_bytes = max_bytes;
  state_->gauges = gauges;
  absl::MutexLock lock(&state_->mu);
  Publish(*state_);
}

PinnedPayloads::~PinnedPayloads() {
  absl::MutexLock lock(&state_->mu);
  for (Buffer& buffer : state_->free) Destroy(*state_, buffer);
  state_->free.clear();
  state_->closed = true;
}

void PinnedPayloads::Publish(const State& state) {
  if (state.closed || state.gauges.in_use == nullptr) return;
  state.gauges.in_use->Set(static_cast<double>(state.in_use));
  state.gauges.pinned->Set(static_cast<double>(state.pinned));
}

void PinnedPayloads::Destroy(State& state, Buffer buffer) {
  state.backend->UnpinHostMemory(buffer.data);
  std::free(buffer.data);
  state.pinned -= buffer.capacity;
  Publish(state);
}

void PinnedPayloads::Release(const std::shared_ptr<State>& state, Buffer buffer) {
  absl::MutexLock lock(&state->mu);
  state->in_use -= buffer.capacity;
  if (state->closed) {
    Destroy(*state, buffer);
  } else {
    state->free.push_back(buffer);
    Publish(*state);
  }
}

wire::PayloadBuffer PinnedPayloads::Allocate(size_t bytes) {
  if (bytes < kMinPinnedBytes) return nullptr;
  const size_t capacity = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Called with the lock held.
  const auto hand_out = [state = state_](Buffer buffer) {
    state->in_use += buffer.capacity;
    Publish(*state);
    return wire::PayloadBuffer(buffer.data, [state, buffer](char*) { Release(state, buffer); });
  };
  absl::MutexLock lock(&state_->mu);
  // The smallest free buffer that fits without wasting more than half.
  auto best = state_->free.end();
  for (auto it = state_->free.begin(); it != state_->free.end(); ++it) {
    if (it->capacity >= capacity && it->capacity <= 2 * capacity &&
        (best == state_->free.end() || it->capacity < best->capacity)) {
      best = it;
    }
  }
  if (best != state_->free.end()) {
    const Buffer buffer = *best;
    state_->free.erase(best);
    return hand_out(buffer);
  }
  // No room even with every free buffer given back: keep them for what fits.
  if (state_->in_use + capacity > state_->max_bytes) return nullptr;
  // Room for a new one: free buffers that do not fit give theirs back,
  // largest first.
  std::sort(state_->free.begin(), state_->free.end(),
            [](const Buffer& a, const Buffer& b) { return a.capacity < b.capacity; });
  while (state_->pinned + capacity > state_->max_bytes && !state_->free.empty()) {
    Destroy(*state_, state_->free.back());
    state_->free.pop_back();
  }
  if (state_->pinned + capacity > state_->max_bytes) return nullptr;
  char* data = static_cast<char*>(std::aligned_alloc(kHugePage, capacity));
  if (data == nullptr) return nullptr;
  madvise(data, capacity, MADV_HUGEPAGE);
  if (!state_->backend->PinHostMemory(data, capacity).ok()) {
    std::free(data);
    return nullptr;
  }
  state_->pinned += capacity;
  return hand_out(Buffer{data, capacity});
}

wire::PayloadAllocator PinnedPayloads::Allocator() {
  return [this](size_t bytes) { return Allocate(bytes); };
}

AnswerAllocator PinnedPayloads::Answers() {
  return [this](size_t bytes) -> std::shared_ptr<char> {
    wire::PayloadBuffer buffer = Allocate(bytes);
    if (buffer == nullptr) return nullptr;
    return std::shared_ptr<char>(std::move(buffer));
  };
}

size_t PinnedPayloads::pinned_bytes() const {
  absl::MutexLock lock(&state_->mu);
  return state_->pinned;
}

size_t PinnedPayloads::in_use_bytes() const {
  absl::MutexLock lock(&state_->mu);
  return state_->in_use;
}

}  // namespace primserve
