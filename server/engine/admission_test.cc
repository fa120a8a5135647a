#include "server/engine/admission.h"

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;

// Holds what it is given until the test completes it.
class HoldingScheduler final : public Scheduler {
 public:
  absl::Status Schedule(std::unique_ptr<Task>* task) override {
    absl::MutexLock lock(&mu_);
    if (!refusal_.ok()) return refusal_;
    held_.push_back(std::move(*task));
    return absl::OkStatus();
  }
  // Counts the calls, then holds the task as Schedule does.
  absl::Status ScheduleOrRun(std::unique_ptr<Task>* task) override {
    or_run_calls_.fetch_add(1);
    return Schedule(task);
  }
  int or_run_calls() const { return or_run_calls_.load(); }
  // Peers of the held tasks, in the order they arrived.
  std::vector<std::string> HeldPeers() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> peers;
    for (const auto& task : held_) peers.push_back(task->peer);
    return peers;
  }
  // Answers the oldest held task; false if none.
  bool CompleteOldest(Result result = ScanResult{}) {
    std::unique_ptr<Task> task;
    {
      absl::MutexLock lock(&mu_);
      if (held_.empty()) return false;
      task = std::move(held_.front());
      held_.erase(held_.begin());
    }
    task->done(std::move(result));
    return true;
  }
  void Refuse(absl::Status status) {
    absl::MutexLock lock(&mu_);
    refusal_ = status;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Task>> held_;
  absl::Status refusal_;
  std::atomic<int> or_run_calls_{0};
};

// Answers every task on the calling thread, inside ScheduleOrRun (a batcher
// whose engine is idle).
class RunningScheduler final : public Scheduler {
 public:
  absl::Status Schedule(std::unique_ptr<Task>* task) override {
    return absl::InternalError("only ScheduleOrRun is expected");
  }
  absl::Status ScheduleOrRun(std::unique_ptr<Task>* task) override {
    std::unique_ptr<Task> taken = std::move(*task);
    taken->done(ScanResult{});
    return absl::OkStatus();
  }
};

// Random bytes, so that no test passes on zeros.
std::string RandomBytes(size_t n) {
  std::mt19937 random(std::random_device{}());
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

struct Outcome {
  std::atomic<int> calls{0};
  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);
};

// A Scan task of `data` (int32) from `peer` that records its answer.
std::unique_ptr<Task> ScanTask(const std::string& peer, const std::string& data,
                               Outcome* outcome) {
  auto task = std::make_unique<Task>();
  ScanOperation scan;
  scan.input = ArrayView{DType::kInt32, data};
  task->operation = scan;
  task->peer = peer;
  task->done = [outcome](absl::StatusOr<Result> result) {
    absl::MutexLock lock(&outcome->mu);
    outcome->status = result.status();
    outcome->calls.fetch_add(1);
  };
  return task;
}

absl::Status StatusOf(Outcome& outcome) {
  absl::MutexLock lock(&outcome.mu);
  return outcome.status;
}

TEST(AdmissionTest, CostIsRequestPlusLargestAnswerPlusOverhead) {
  const std::string data = RandomBytes(4000);
  ScanOperation scan;
  scan.input = ArrayView{DType::kInt32, data};
  AggregateByKeyOperation aggregate;
  aggregate.keys = ArrayView{DType::kInt32, absl::string_view(data).substr(0, 8)};
  aggregate.values = ArrayView{DType::kFloat64, absl::string_view(data).substr(0, 16)};
  aggregate.num_keys = uint64_t{1} << 24;
  EXPECT_EQ(AdmissionCost(scan), 4000 + 4000 + 4096);
  EXPECT_EQ(AdmissionCost(aggregate), 8 + 16 + (uint64_t{8} << 24) + 4096);
}

TEST(AdmissionTest, PeerKeyDropsThePort) {
  EXPECT_EQ(PeerKey("ipv4:10.1.2.3:50000"), "ipv4:10.1.2.3");
  EXPECT_EQ(PeerKey("ipv6:[::1]:41000"), "ipv6:[::1]");
  EXPECT_EQ(PeerKey("unix:/run/primserve.sock"), "unix:/run/primserve.sock");
  EXPECT_EQ(PeerKey(""), "");
}

// A heavy peer with many requests waiting does not delay a light one: the
// light one's request goes on at once, and then the peers alternate.
TEST(AdmissionTest, PeersTakeTurnsWithinTheirBounds) {
  const std::string data = RandomBytes(1 << 16);
  const uint64_t cost = 2 * data.size() + 4096;
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_peer_in_flight_bytes = cost;  // one each
  options.max_in_flight_bytes = 2 * cost;   // two in all
  FairAdmission admission(options, &next);
  Outcome heavy[4], light[2];
  for (Outcome& o : heavy) {
    auto task = ScanTask("heavy", data, &o);
    ASSERT_TRUE(admission.Schedule(&task).ok());
    EXPECT_EQ(task, nullptr);
  }
  for (Outcome& o : light) {
    auto task = ScanTask("light", data, &o);
    ASSERT_TRUE(admission.Schedule(&task).ok());
  }
  EXPECT_EQ(next.HeldPeers(), (std::vector<std::string>{"heavy", "light"}));
  EXPECT_EQ(admission.queued(), 4u);
  EXPECT_EQ(admission.in_flight_bytes(), 2 * cost);
  ASSERT_TRUE(next.CompleteOldest());  // heavy 1
  EXPECT_EQ(next.HeldPeers(), (std::vector<std::string>{"light", "heavy"}));
  ASSERT_TRUE(next.CompleteOldest());  // light 1
  EXPECT_EQ(next.HeldPeers(), (std::vector<std::string>{"heavy", "light"}));
  while (next.CompleteOldest()) {
  }
  for (Outcome& o : heavy) EXPECT_EQ(o.calls.load(), 1);
  for (Outcome& o : light) EXPECT_EQ(o.calls.load(), 1);
  EXPECT_EQ(admission.queued(), 0u);
  EXPECT_EQ(admission.in_flight_bytes(), 0u);
}

// A request costing more than any bound still runs, alone.
TEST(AdmissionTest, AnOversizedRequestRunsAlone) {
  const std::string data = RandomBytes(1 << 16);
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_peer_in_flight_bytes = 1000;
  options.max_in_flight_bytes = 1000;
  FairAdmission admission(options, &next);
  Outcome first, second;
  auto task = ScanTask("a", data, &first);
  ASSERT_TRUE(admission.Schedule(&task).ok());
  task = ScanTask("b", data, &second);
  ASSERT_TRUE(admission.Schedule(&task).ok());
  EXPECT_EQ(next.HeldPeers(), std::vector<std::string>{"a"});
  ASSERT_TRUE(next.CompleteOldest());
  EXPECT_EQ(next.HeldPeers(), std::vector<std::string>{"b"});
  ASSERT_TRUE(next.CompleteOldest());
  EXPECT_EQ(first.calls.load() + second.calls.load(), 2);
}

TEST(AdmissionTest, AFullPeerQueueIsRefusedWithoutTakingTheTask) {
  const std::string data = RandomBytes(1024);
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_peer_in_flight_bytes = 1;
  options.max_peer_queued_tasks = 2;
  FairAdmission admission(options, &next);
  Outcome outcomes[4];
  for (int i = 0; i < 3; ++i) {  // one in flight, two waiting
    auto task = ScanTask("p", data, &outcomes[i]);
    ASSERT_TRUE(admission.Schedule(&task).ok());
  }
  auto task = ScanTask("p", data, &outcomes[3]);
  const absl::Status refused = admission.Schedule(&task);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  ASSERT_NE(task, nullptr);
  EXPECT_EQ(outcomes[3].calls.load(), 0);
  // Another peer is not affected.
  task = ScanTask("q", data, &outcomes[3]);
  EXPECT_TRUE(admission.Schedule(&task).ok());
  while (next.CompleteOldest()) {
  }
  for (Outcome& o : outcomes) EXPECT_EQ(o.calls.load(), 1);
}

// Waiting requests are answered when their deadline passes or their caller
// leaves, not when their turn comes.
TEST(AdmissionTest, WaitingRequestsEndAtTheirDeadlineOrCancellation) {
  const std::string data = RandomBytes(1024);
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_peer_in_flight_bytes = 1;
  FairAdmission admission(options, &next);
  Outcome running, timed, cancelled;
  auto task = ScanTask("p", data, &running);
  ASSERT_TRUE(admission.Schedule(&task).ok());
  task = ScanTask("p", data, &timed);
  task->deadline = absl::Now() + absl::Milliseconds(50);
  ASSERT_TRUE(admission.Schedule(&task).ok());
  std::atomic<bool> gone{false};
  task = ScanTask("p", data, &cancelled);
  task->is_cancelled = [&gone] { return gone.load(); };
  ASSERT_TRUE(admission.Schedule(&task).ok());
  gone.store(true);
  const absl::Time limit = absl::Now() + absl::Seconds(5);
  while ((timed.calls.load() == 0 || cancelled.calls.load() == 0) && absl::Now() < limit) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(StatusOf(timed).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(StatusOf(cancelled).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(admission.queued(), 0u);
  EXPECT_EQ(running.calls.load(), 0);
  ASSERT_TRUE(next.CompleteOldest());
  EXPECT_EQ(running.calls.load(), 1);
}

// ScheduleOrRun hands a task admitted at once, with no other in flight, to
// the next scheduler's ScheduleOrRun; one that had to wait its turn, or came
// while another was in flight, goes on through Schedule.
TEST(AdmissionTest, ScheduleOrRunPassesOnOnlyTasksAdmittedAtOnce) {
  const std::string data = RandomBytes(1024);
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_peer_in_flight_bytes = AdmissionCost(ScanOperation{ArrayView{DType::kInt32, data}});
  FairAdmission admission(options, &next);
  Outcome outcomes[2];
  auto first = ScanTask("p", data, &outcomes[0]);
  auto second = ScanTask("p", data, &outcomes[1]);
  ASSERT_TRUE(admission.ScheduleOrRun(&first).ok());
  ASSERT_TRUE(admission.ScheduleOrRun(&second).ok());
  EXPECT_EQ(next.or_run_calls(), 1);
  EXPECT_EQ(admission.queued(), 1u);
  // Another caller's task fits, but one is in flight.
  Outcome other;
  auto third = ScanTask("q", data, &other);
  ASSERT_TRUE(admission.ScheduleOrRun(&third).ok());
  EXPECT_EQ(next.or_run_calls(), 1);
  EXPECT_EQ(next.HeldPeers(), (std::vector<std::string>{"p", "q"}));
  ASSERT_TRUE(next.CompleteOldest());
  EXPECT_EQ(next.HeldPeers(), (std::vector<std::string>{"q", "p"}));
  EXPECT_EQ(next.or_run_calls(), 1);
  ASSERT_TRUE(next.CompleteOldest());
  ASSERT_TRUE(next.CompleteOldest());
  EXPECT_EQ(outcomes[0].calls.load(), 1);
  EXPECT_EQ(outcomes[1].calls.load(), 1);
  EXPECT_EQ(other.calls.load(), 1);
  EXPECT_EQ(admission.in_flight_bytes(), 0u);
}

// A task answered inside ScheduleOrRun frees its cost before it returns.
TEST(AdmissionTest, ATaskRunByTheCallerFreesItsCost) {
  const std::string data = RandomBytes(1024);
  RunningScheduler next;
  FairAdmission admission(AdmissionOptions{}, &next);
  for (int i = 0; i < 3; ++i) {
    Outcome outcome;
    auto task = ScanTask("p", data, &outcome);
    ASSERT_TRUE(admission.ScheduleOrRun(&task).ok());
    EXPECT_EQ(outcome.calls.load(), 1);
    EXPECT_TRUE(StatusOf(outcome).ok());
    EXPECT_EQ(admission.in_flight_bytes(), 0u);
  }
}

TEST(AdmissionTest, ARefusalDownstreamAnswersTheTaskAndFreesItsCost) {
  const std::string data = RandomBytes(1024);
  HoldingScheduler next;
  next.Refuse(absl::ResourceExhaustedError("queue full"));
  FairAdmission admission(AdmissionOptions{}, &next);
  Outcome outcome;
  auto task = ScanTask("p", data, &outcome);
  ASSERT_TRUE(admission.Schedule(&task).ok());
  EXPECT_EQ(outcome.calls.load(), 1);
  EXPECT_EQ(StatusOf(outcome).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(admission.in_flight_bytes(), 0u);
}

// A long queue refused downstream in one go (the batcher's queue full) is
// answered in a loop, not a chain of nested calls as deep as the queue.
TEST(AdmissionTest, AQueueRefusedDownstreamIsAnsweredWithoutDeepRecursion) {
  const std::string data = RandomBytes(64);
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_peer_in_flight_bytes = 1;
  options.max_peer_queued_tasks = 1 << 20;
  options.max_peer_queued_bytes = UINT64_MAX;
  FairAdmission admission(options, &next);
  constexpr int kWaiting = 200000;
  std::vector<Outcome> outcomes(kWaiting + 1);
  for (Outcome& o : outcomes) {
    auto task = ScanTask("p", data, &o);
    ASSERT_TRUE(admission.Schedule(&task).ok());
  }
  next.Refuse(absl::ResourceExhaustedError("queue full"));
  ASSERT_TRUE(next.CompleteOldest());
  EXPECT_EQ(outcomes[0].calls.load(), 1);
  for (int i = 1; i <= kWaiting; ++i) {
    ASSERT_EQ(outcomes[i].calls.load(), 1) << i;
    ASSERT_EQ(StatusOf(outcomes[i]).code(), absl::StatusCode::kResourceExhausted) << i;
  }
  EXPECT_EQ(admission.queued(), 0u);
  EXPECT_EQ(admission.in_flight_bytes(), 0u);
}

// Issue 27: an answer handed to the transport stays counted until the
// transport says it was sent; meanwhile its caller's new requests are refused
// (its unsent answers are over the bound), another caller's are not.
TEST(AdmissionTest, AnAnswerStaysCountedUntilSent) {
  const std::string data = RandomBytes(1024);
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_peer_unsent_bytes = 1;
  Outcome first, refused, other;  // outlive admission
  FairAdmission admission(options, &next);
  auto task = ScanTask("p", data, &first);
  const uint64_t cost = AdmissionCost(task->operation);
  auto sent = std::make_shared<AnswerSent>();
  task->sent = sent;
  ASSERT_TRUE(admission.Schedule(&task).ok());
  ASSERT_TRUE(next.CompleteOldest(ScanResult{HostArray{DType::kInt32, data}}));
  EXPECT_TRUE(StatusOf(first).ok());
  EXPECT_EQ(admission.in_flight_bytes(), cost);
  EXPECT_EQ(admission.unsent_bytes(), data.size());

  auto again = ScanTask("p", data, &refused);
  const absl::Status status = admission.Schedule(&again);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(status.message()), HasSubstr("answers it has not read yet"));
  EXPECT_EQ(refused.calls.load(), 0);
  auto elsewhere = ScanTask("q", data, &other);
  EXPECT_TRUE(admission.Schedule(&elsewhere).ok());

  sent->Signal();
  EXPECT_EQ(admission.unsent_bytes(), 0u);
  EXPECT_EQ(admission.in_flight_bytes(), cost);  // q's, still held downstream
  auto now = ScanTask("p", data, &refused);
  EXPECT_TRUE(admission.Schedule(&now).ok());
}

// An answer written in place (a CUDA region) waits in no transport buffer:
// it keeps its cost in flight until sent, but counts nothing as unsent, so
// its caller's next request is not refused meanwhile (a CUDA IPC scan at
// concurrency 1 was, now and then, before).
TEST(AdmissionTest, AnAnswerWrittenInPlaceIsNotUnsent) {
  const std::string data = RandomBytes(1024);
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_peer_unsent_bytes = 1;
  Outcome first, second;  // outlive admission
  FairAdmission admission(options, &next);
  auto task = ScanTask("p", data, &first);
  const uint64_t cost = AdmissionCost(task->operation);
  auto sent = std::make_shared<AnswerSent>();
  task->sent = sent;
  ASSERT_TRUE(admission.Schedule(&task).ok());
  HostArray in_place{DType::kInt32};
  in_place.bytes_in_place = data.size();
  ASSERT_TRUE(next.CompleteOldest(ScanResult{in_place}));
  EXPECT_EQ(admission.unsent_bytes(), 0u);
  EXPECT_EQ(admission.in_flight_bytes(), cost);
  auto again = ScanTask("p", data, &second);
  EXPECT_TRUE(admission.Schedule(&again).ok());
  sent->Signal();
  EXPECT_EQ(admission.unsent_bytes(), 0u);
}

// Requests waiting their turn are bounded by their bytes too: past
// max_peer_queued_bytes a caller's next request is refused, while one request
// waits whatever its size.
TEST(AdmissionTest, WaitingBytesAreBoundedPerCaller) {
  const std::string data = RandomBytes(1 << 20);
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_peer_in_flight_bytes = 1;  // one running per caller
  options.max_peer_queued_bytes = 1;
  std::vector<Outcome> outcomes(3);  // outlive admission, which answers the waiting one
  FairAdmission admission(options, &next);
  for (int i = 0; i < 2; ++i) {
    auto task = ScanTask("p", data, &outcomes[i]);
    ASSERT_TRUE(admission.Schedule(&task).ok()) << i;  // runs, then waits
  }
  auto task = ScanTask("p", data, &outcomes[2]);
  const absl::Status status = admission.Schedule(&task);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(status.message()), HasSubstr("bytes of requests waiting"));
  EXPECT_EQ(admission.queued(), 1u);
}

// And everyone's together: past max_queued_bytes a request that must wait is
// refused whoever sends it (many callers, each within its own bound), while
// one admitted at once still runs; what waited and left frees its bytes.
TEST(AdmissionTest, WaitingBytesAreBoundedInTotal) {
  const std::string data = RandomBytes(1 << 20);
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_in_flight_bytes = 1;  // one running in all
  options.max_queued_bytes = (3 << 20) / 2;  // one waiting request of 1 MiB
  std::vector<Outcome> outcomes(4);
  FairAdmission admission(options, &next);
  auto task = ScanTask("a", data, &outcomes[0]);
  ASSERT_TRUE(admission.Schedule(&task).ok());  // runs
  task = ScanTask("b", data, &outcomes[1]);
  ASSERT_TRUE(admission.Schedule(&task).ok());  // waits
  EXPECT_EQ(admission.queued_bytes(), data.size() + 4096);
  task = ScanTask("c", data, &outcomes[2]);
  const absl::Status status = admission.Schedule(&task);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("the server already holds 1052672 bytes of requests waiting"));
  ASSERT_TRUE(next.CompleteOldest());  // b is admitted: nothing waits
  EXPECT_EQ(admission.queued_bytes(), 0u);
  task = ScanTask("c", data, &outcomes[3]);
  EXPECT_TRUE(admission.Schedule(&task).ok());
}

TEST(AdmissionTest, ShutdownAnswersTheWaitingAndRefusesNewRequests) {
  const std::string data = RandomBytes(1024);
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_peer_in_flight_bytes = 1;
  FairAdmission admission(options, &next);
  Outcome running, waiting, late;
  auto task = ScanTask("p", data, &running);
  ASSERT_TRUE(admission.Schedule(&task).ok());
  task = ScanTask("p", data, &waiting);
  ASSERT_TRUE(admission.Schedule(&task).ok());
  admission.Shutdown();
  EXPECT_EQ(StatusOf(waiting).code(), absl::StatusCode::kUnavailable);
  task = ScanTask("p", data, &late);
  EXPECT_EQ(admission.Schedule(&task).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(next.CompleteOldest());  // tasks handed on still finish
  EXPECT_EQ(running.calls.load(), 1);
  EXPECT_EQ(late.calls.load(), 0);
}

// Many callers on many threads while another thread completes: every task is
// answered exactly once and every byte of cost comes back (TSan runs this).
TEST(AdmissionTest, ConcurrentCallersEachAnsweredOnce) {
  const std::string data = RandomBytes(4096);
  HoldingScheduler next;
  AdmissionOptions options;
  options.max_peer_in_flight_bytes = 3 * AdmissionCost(ScanOperation{{DType::kInt32, data}});
  options.max_in_flight_bytes = 2 * options.max_peer_in_flight_bytes;
  options.max_peer_queued_tasks = 1 << 20;
  FairAdmission admission(options, &next);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 300;
  std::vector<Outcome> outcomes(kThreads * kPerThread);
  std::atomic<bool> stop{false};
  std::thread completer([&] {
    while (!stop.load()) {
      if (!next.CompleteOldest()) std::this_thread::yield();
    }
  });
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto task = ScanTask(absl::StrCat("peer", (t + i) % 3), data, &outcomes[t * kPerThread + i]);
        if (i % 7 == 0) task->deadline = absl::Now();
        EXPECT_TRUE(admission.Schedule(&task).ok());
      }
    });
  }
  for (std::thread& t : callers) t.join();
  const absl::Time limit = absl::Now() + absl::Seconds(20);
  auto all_done = [&] {
    for (Outcome& o : outcomes) {
      if (o.calls.load() == 0) return false;
    }
    return true;
  };
  while (!all_done() && absl::Now() < limit) absl::SleepFor(absl::Milliseconds(5));
  stop.store(true);
  completer.join();
  for (Outcome& o : outcomes) EXPECT_EQ(o.calls.load(), 1);
  EXPECT_EQ(admission.queued(), 0u);
  EXPECT_EQ(admission.in_flight_bytes(), 0u);
}

}  // namespace
}  // namespace primserve
