#include "client/loadgen/loops.h"

#include <atomic>
#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace primserve {
namespace {

// Counts the calls in flight; Wait() returns when none is.
class InFlight {
 public:
  void Add() {
    absl::MutexLock lock(&mu_);
    ++count_;
  }
  // Unless at `limit`, adds one and returns true.
  bool AddBelow(int limit) {
    absl::MutexLock lock(&mu_);
    if (count_ >= limit) return false;
    ++count_;
    return true;
  }
  void Remove() {
    absl::MutexLock lock(&mu_);
    --count_;
  }
  void Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* count) { return *count == 0; }, &count_));
  }

 private:
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

bool ShouldVerify(const Options& options, uint64_t call) {
  return options.verify_every > 0 && call % options.verify_every == 0;
}

// Closed loop: `concurrency` slots each send a request, wait for its end and
// send the next, until the window closes.
LevelStats RunClosedLoop(const Target& target, int concurrency, const Options& options) {
  Recorder recorder(absl::Now(), options.warmup, options.measure);
  InFlight in_flight;
  std::atomic<uint64_t> next_call{0};
  std::function<void(int)> send = [&](int slot) {
    const uint64_t call = next_call++;
    const absl::Time sent = absl::Now();
    target.Start(slot % options.channels, call % target.num_requests(), ShouldVerify(options, call),
                 [&, slot, sent](const CallOutcome& outcome) {
                   const absl::Time ended = absl::Now();
                   recorder.Record(sent, ended, outcome);
                   if (ended < recorder.end()) return send(slot);
                   in_flight.Remove();
                 });
  };
  for (int slot = 0; slot < concurrency; ++slot) {
    in_flight.Add();
    send(slot);
  }
  in_flight.Wait();
  return recorder.Take();
}

// Open loop: a request every 1/rate seconds, on schedule, until the window
// closes. Latency counts from when a request was due, so a client that falls
// behind does not hide the server's queueing.
LevelStats RunOpenLoop(const Target& target, double rate, const Options& options) {
  const absl::Time start = absl::Now();
  Recorder recorder(start, options.warmup, options.measure);
  InFlight in_flight;
  for (uint64_t call = 0;; ++call) {
    const absl::Time due = start + absl::Seconds(call / rate);
    if (due >= recorder.end()) break;
    const absl::Duration wait = due - absl::Now();
    if (wait > absl::ZeroDuration()) absl::SleepFor(wait);
    if (!in_flight.AddBelow(options.max_outstanding)) {
      recorder.RecordNotSent(due);
      continue;
    }
    target.Start(call % options.channels, call % target.num_requests(), ShouldVerify(options, call),
                 [&, due](const CallOutcome& outcome) {
                   recorder.Record(due, absl::Now(), outcome);
                   in_flight.Remove();
                 });
  }
  in_flight.Wait();
  return recorder.Take();
}

}  // namespace

LevelStats RunLevel(const Target& target, double level, const Options& options) {
  return options.open_loop ? RunOpenLoop(target, level, options)
                           : RunClosedLoop(target, static_cast<int>(level), options);
}

}  // namespace primserve
