// An execution backend for tests of answers sent from answer buffers
// (Task::answers, server/engine/pinned_payloads.h), as the CUDA backend sends them:
// the CPU reference, with each large answer moved into the task's answer
// buffers where it gets one (the way the CUDA runners copy one there from the
// device), and host memory "pinned" as cudaHostRegister would, recorded. With
// `min_pending_bytes`, it takes large scans' inputs pending and fills them in
// uneven ranges first, as the CUDA pipeline fills its chunks.
#ifndef PRIMSERVE_TESTS_ANSWER_HOLDING_BACKEND_H_
#define PRIMSERVE_TESTS_ANSWER_HOLDING_BACKEND_H_

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/engine/backend.h"
#include "server/engine/pinned_payloads.h"

namespace primserve {

class AnswerHoldingBackend final : public ExecutionBackend {
 public:
  explicit AnswerHoldingBackend(size_t min_pending_bytes = 0)
      : min_pending_bytes_(min_pending_bytes) {}

  std::string name() const override { return "holding"; }
  size_t MinPendingInputBytes() const override { return min_pending_bytes_; }

  void Execute(std::vector<std::unique_ptr<Task>> batch) override {
    for (std::unique_ptr<Task>& task : batch) {
      if (auto* scan = std::get_if<ScanOperation>(&task->operation);
          scan != nullptr && scan->input.pending != nullptr) {
        const size_t size = scan->input.bytes.size();
        for (size_t at = 0, range = 1; at < size; at += range, range = range * 3 + 4097) {
          scan->input.pending->Fill(at, std::min(range, size - at));
        }
        absl::MutexLock lock(&mu_);
        ++pending_;
      }
      // The CPU backend below would hold scans' and reduces' answers itself;
      // this backend holds every large answer, as the CUDA runners do.
      task->done = [this, done = std::move(task->done),
                    answers = std::exchange(task->answers, nullptr)](
                       absl::StatusOr<Result> result) mutable {
        if (result.ok()) ForEachArray(*result, [&](HostArray& array) { Hold(array, answers); });
        done(std::move(result));
      };
    }
    cpu_.Execute(std::move(batch));
  }

  absl::Status PinHostMemory(void* data, size_t bytes) override {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(pinned_.count(data), 0u);
    pinned_[data] = bytes;
    ++pins_;
    return absl::OkStatus();
  }
  void UnpinHostMemory(void* data) override {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(pinned_.erase(data), 1u);
  }
  bool PinsHostMemory() const override { return true; }

  int pins() const {
    absl::MutexLock lock(&mu_);
    return pins_;
  }
  // Answers moved into an answer buffer, and large ones that found none.
  int held() const {
    absl::MutexLock lock(&mu_);
    return held_;
  }
  int not_held() const {
    absl::MutexLock lock(&mu_);
    return not_held_;
  }
  int pending() const {
    absl::MutexLock lock(&mu_);
    return pending_;
  }
  // Whether every answer buffer handed out has gone back to its pool,
  // waiting up to `wait` for gRPC to finish with the last ones.
  bool AllReleased(absl::Duration wait) {
    const absl::Time until = absl::Now() + wait;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        bool all = true;
        for (const std::weak_ptr<const char>& buffer : handed_out_) all &= buffer.expired();
        if (all) return true;
      }
      if (absl::Now() > until) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

 private:
  // The answer, wherever the CPU backend left it (a string, or memory of its
  // own), copied into an answer buffer as a CUDA runner copies one there.
  void Hold(HostArray& array, const AnswerAllocator& answers) {
    const absl::string_view data = array.data();
    if (data.size() < PinnedPayloads::kMinPinnedBytes) return;
    std::shared_ptr<char> buffer = answers ? answers(data.size()) : nullptr;
    absl::MutexLock lock(&mu_);
    if (buffer == nullptr) {
      ++not_held_;
      return;
    }
    std::memcpy(buffer.get(), data.data(), data.size());
    array.held_bytes = data.size();
    array.held_room = 0;
    array.held = std::move(buffer);
    std::string().swap(array.bytes);
    handed_out_.push_back(array.held);
    ++held_;
  }

  const size_t min_pending_bytes_;
  CpuBackend cpu_;
  mutable absl::Mutex mu_;
  std::map<void*, size_t> pinned_ ABSL_GUARDED_BY(mu_);
  int pins_ ABSL_GUARDED_BY(mu_) = 0;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  int not_held_ ABSL_GUARDED_BY(mu_) = 0;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::weak_ptr<const char>> handed_out_ ABSL_GUARDED_BY(mu_);
};

}  // namespace primserve

#endif  // PRIMSERVE_TESTS_ANSWER_HOLDING_BACKEND_H_
