#include "server/engine/pinned_payloads.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace primserve {
namespace {

// Records what is pinned, as a CUDA backend's cudaHostRegister would.
class PinningBackend final : public ExecutionBackend {
 public:
  std::string name() const override { return "pinning"; }
  void Execute(std::vector<std::unique_ptr<Task>>) override {}
  absl::Status PinHostMemory(void* data, size_t bytes) override {
    if (refuse) return absl::InternalError("refused");
    EXPECT_EQ(pinned.count(data), 0u);
    pinned[data] = bytes;
    ++pins;
    return absl::OkStatus();
  }
  void UnpinHostMemory(void* data) override { EXPECT_EQ(pinned.erase(data), 1u); }
  bool PinsHostMemory() const override { return true; }

  std::map<void*, size_t> pinned;
  int pins = 0;
  bool refuse = false;
};

constexpr size_t kMiB = size_t{1} << 20;

TEST(PinnedPayloadsTest, SmallPayloadsTakeTheHeap) {
  PinningBackend backend;
  PinnedPayloads pool(&backend, 64 * kMiB);
  EXPECT_EQ(pool.Allocate(PinnedPayloads::kMinPinnedBytes - 1), nullptr);
  EXPECT_EQ(backend.pins, 0);
}

TEST(PinnedPayloadsTest, BuffersArePinnedOnceAndReused) {
  PinningBackend backend;
  PinnedPayloads pool(&backend, 64 * kMiB);
  char* first = nullptr;
  {
    wire::PayloadBuffer buffer = pool.Allocate(5 * kMiB + 3);
    ASSERT_NE(buffer, nullptr);
    first = buffer.get();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    std::memset(first, 7, 5 * kMiB + 3);  // all of it is ours to write
    EXPECT_EQ(backend.pinned.at(first), 6 * kMiB);
  }
  // Freed back to the pool, still pinned, and given again for a size it fits.
  EXPECT_EQ(backend.pinned.size(), 1u);
  wire::PayloadBuffer again = pool.Allocate(4 * kMiB);
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(backend.pins, 1);
  // One that would waste more than half is not reused: a second buffer.
  wire::PayloadBuffer small = pool.Allocate(kMiB);
  ASSERT_NE(small, nullptr);
  EXPECT_NE(small.get(), first);
  EXPECT_EQ(backend.pins, 2);
  EXPECT_EQ(pool.pinned_bytes(), 8 * kMiB);
}

TEST(PinnedPayloadsTest, TheLimitHoldsAndFreeBuffersMakeRoom) {
  PinningBackend backend;
  PinnedPayloads pool(&backend, 10 * kMiB);
  wire::PayloadBuffer a = pool.Allocate(6 * kMiB);
  ASSERT_NE(a, nullptr);
  // In use: no room for another 6 MiB, so the heap takes it.
  EXPECT_EQ(pool.Allocate(6 * kMiB), nullptr);
  a.reset();
  // Free but too large to reuse for 2 MiB: unpinned to make room.
  wire::PayloadBuffer b = pool.Allocate(2 * kMiB);
  ASSERT_NE(b, nullptr);
  wire::PayloadBuffer c = pool.Allocate(8 * kMiB);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(pool.pinned_bytes(), 10 * kMiB);
  EXPECT_LE(backend.pinned.size(), 2u);
}

TEST(PinnedPayloadsTest, ARefusedPinGivesNothingAndBuffersMayOutliveThePool) {
  PinningBackend backend;
  wire::PayloadBuffer kept;
  {
    PinnedPayloads pool(&backend, 64 * kMiB);
    kept = pool.Allocate(3 * kMiB);
    ASSERT_NE(kept, nullptr);
    backend.refuse = true;
    EXPECT_EQ(pool.Allocate(3 * kMiB), nullptr);
    backend.refuse = false;
  }
  EXPECT_EQ(backend.pinned.size(), 1u);
  kept.reset();  // after the pool: unpinned and freed
  EXPECT_TRUE(backend.pinned.empty());
}

TEST(PinnedPayloadsTest, AnswerBuffersGoBackWhenTheLastReferenceDoes) {
  PinningBackend backend;
  PinnedPayloads pool(&backend, 16 * kMiB);
  AnswerAllocator answers = pool.Answers();
  EXPECT_EQ(answers(PinnedPayloads::kMinPinnedBytes - 1), nullptr);
  std::shared_ptr<char> answer = answers(5 * kMiB);
  ASSERT_NE(answer, nullptr);
  char* const first = answer.get();
  EXPECT_EQ(pool.in_use_bytes(), 6 * kMiB);
  // A second reference (the slice gRPC sends) keeps it out of the pool.
  std::shared_ptr<const char> sent = answer;
  answer.reset();
  EXPECT_EQ(pool.in_use_bytes(), 6 * kMiB);
  sent.reset();
  EXPECT_EQ(pool.in_use_bytes(), 0u);
  // Reused, not pinned again.
  const int pins = backend.pins;
  std::shared_ptr<char> again = answers(5 * kMiB);
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(backend.pins, pins);
  // No room for more than the limit: null, and the caller takes a string.
  EXPECT_EQ(answers(12 * kMiB), nullptr);
}

TEST(PinnedPayloadsTest, TheGaugesFollowTheBytesInUseAndPinned) {
  PinningBackend backend;
  Metrics metrics;
  const HostPoolGauges gauges = metrics.PinnedHostPool("answers");
  {
    PinnedPayloads pool(&backend, 8 * kMiB, gauges);
    EXPECT_EQ(gauges.in_use->Value(), 0);
    EXPECT_EQ(gauges.pinned->Value(), 0);
    wire::PayloadBuffer first = pool.Allocate(3 * kMiB);
    wire::PayloadBuffer second = pool.Allocate(kMiB);
    EXPECT_EQ(gauges.in_use->Value(), 6 * kMiB);  // 2 MiB pages
    EXPECT_EQ(gauges.pinned->Value(), 6 * kMiB);
    first.reset();
    EXPECT_EQ(gauges.in_use->Value(), 2 * kMiB);
    EXPECT_EQ(gauges.pinned->Value(), 6 * kMiB);
    // No room for 6 MiB more: the free 4 MiB buffer is unpinned to make it.
    wire::PayloadBuffer third = pool.Allocate(5 * kMiB);
    EXPECT_EQ(gauges.in_use->Value(), 8 * kMiB);
    EXPECT_EQ(gauges.pinned->Value(), 8 * kMiB);
    second.reset();
    third.reset();
    EXPECT_EQ(gauges.in_use->Value(), 0);
    EXPECT_EQ(gauges.pinned->Value(), 8 * kMiB);
  }
  // The pool gave every buffer back.
  EXPECT_EQ(gauges.pinned->Value(), 0);
  EXPECT_TRUE(backend.pinned.empty());
}

// A buffer that could not fit even with every free one given back is
// refused at once: the free buffers stay pinned for the sizes that fit.
TEST(PinnedPayloadsTest, ARequestBeyondTheRoomLeftKeepsTheFreeBuffers) {
  PinningBackend backend;
  PinnedPayloads pool(&backend, 10 * kMiB);
  wire::PayloadBuffer a = pool.Allocate(4 * kMiB);
  wire::PayloadBuffer b = pool.Allocate(4 * kMiB);
  b.reset();
  EXPECT_EQ(pool.Allocate(7 * kMiB), nullptr);  // 8 MiB: 4 in use leave 6
  EXPECT_EQ(pool.pinned_bytes(), 8 * kMiB);
  EXPECT_EQ(backend.pins, 2);
  wire::PayloadBuffer again = pool.Allocate(4 * kMiB);  // the free one, reused
  EXPECT_EQ(backend.pins, 2);
}

}  // namespace
}  // namespace primserve
