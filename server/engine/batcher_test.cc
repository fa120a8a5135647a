#include "server/engine/batcher.h"

#include <atomic>
#include <numeric>
#include <random>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "tests/http_testing.h"

namespace primserve {
namespace {

// Records each batch's size, optionally holds batches until released, and
// runs them on the CPU backend.
class RecordingBackend final : public ExecutionBackend {
 public:
  std::string name() const override { return "recording"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override {
    {
      absl::MutexLock lock(&mu_);
      batch_sizes_.push_back(batch.size());
    }
    if (gate_ != nullptr) gate_->WaitForNotification();
    cpu_.Execute(std::move(batch));
  }
  std::vector<size_t> batch_sizes() {
    absl::MutexLock lock(&mu_);
    return batch_sizes_;
  }
  void HoldUntil(absl::Notification* gate) { gate_ = gate; }

 private:
  CpuBackend cpu_;
  absl::Notification* gate_ = nullptr;
  absl::Mutex mu_;
  std::vector<size_t> batch_sizes_ ABSL_GUARDED_BY(mu_);
};

// Owns a request's data and records its answer.
struct Call {
  std::vector<int32_t> input;
  absl::Notification finished;
  absl::StatusOr<Result> result = absl::UnknownError("not answered");

  std::unique_ptr<Task> MakeTask(Op op = Op::kSum, absl::Time deadline = absl::InfiniteFuture()) {
    auto task = std::make_unique<Task>();
    ScanOperation scan;
    scan.input = ArrayView{DType::kInt32,
                           absl::string_view(reinterpret_cast<const char*>(input.data()),
                                             input.size() * sizeof(int32_t))};
    scan.op = op;
    task->operation = scan;
    task->deadline = deadline;
    task->done = [this](absl::StatusOr<Result> r) {
      result = std::move(r);
      finished.Notify();
    };
    return task;
  }

  // The inclusive sum scan this call must get back.
  std::vector<int32_t> Expected() const {
    std::vector<int32_t> out(input.size());
    std::partial_sum(input.begin(), input.end(), out.begin());
    return out;
  }

  std::vector<int32_t> Output() const {
    const HostArray& out = std::get<ScanResult>(*result).output;
    std::vector<int32_t> values(out.bytes.size() / sizeof(int32_t));
    std::memcpy(values.data(), out.bytes.data(), out.bytes.size());
    return values;
  }
};

std::vector<int32_t> RandomInts(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int32_t> dist(-1000, 1000);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

// Keeps the batcher's only worker busy: schedules a task of another kind
// (MIN scan) that the backend holds at `gate`, and waits until it runs.
void Occupy(Batcher& batcher, RecordingBackend& backend, absl::Notification& gate, Call& blocker) {
  backend.HoldUntil(&gate);
  blocker.input = {1, 2, 3};
  std::unique_ptr<Task> task = blocker.MakeTask(Op::kMin);
  ASSERT_TRUE(batcher.Schedule(&task).ok());
  while (backend.batch_sizes().empty()) absl::SleepFor(absl::Milliseconds(1));
}

TEST(BatcherTest, IdleEngineLaunchesAtOnce) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 2;
  options.max_batch_size = 100;
  options.batch_timeout_micros = 10'000'000;
  Batcher batcher(options, &backend);
  std::mt19937 rng(9);
  Call call;
  call.input = RandomInts(rng, 10);
  const absl::Time start = absl::Now();
  std::unique_ptr<Task> task = call.MakeTask();
  ASSERT_TRUE(batcher.Schedule(&task).ok());
  call.finished.WaitForNotification();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "waited for the batch timeout";
  EXPECT_EQ(call.Output(), call.Expected());
}

// ScheduleOrRun on an idle engine runs the task on the calling thread and
// answers before it returns.
TEST(BatcherTest, ScheduleOrRunOnAnIdleEngineAnswersOnTheCallersThread) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 2;
  options.batch_timeout_micros = 10'000'000;
  Batcher batcher(options, &backend);
  std::mt19937 rng(10);
  for (int i = 0; i < 3; ++i) {
    Call call;
    call.input = RandomInts(rng, 100);
    std::unique_ptr<Task> task = call.MakeTask();
    std::thread::id answered_on;
    task->done = [&call, &answered_on](absl::StatusOr<Result> r) {
      answered_on = std::this_thread::get_id();
      call.result = std::move(r);
      call.finished.Notify();
    };
    ASSERT_TRUE(batcher.ScheduleOrRun(&task).ok());
    ASSERT_TRUE(call.finished.HasBeenNotified()) << "not answered before ScheduleOrRun returned";
    EXPECT_EQ(answered_on, std::this_thread::get_id());
    EXPECT_EQ(call.Output(), call.Expected());
  }
  EXPECT_EQ(backend.batch_sizes(), (std::vector<size_t>{1, 1, 1}));
  EXPECT_EQ(batcher.enqueued(), 0u);
}

TEST(BatcherTest, WithoutRunWhenIdleScheduleOrRunHandsTasksToAWorker) {
  RecordingBackend backend;
  BatcherOptions options;
  options.run_when_idle = false;
  Batcher batcher(options, &backend);
  std::mt19937 rng(13);
  Call call;
  call.input = RandomInts(rng, 100);
  std::unique_ptr<Task> task = call.MakeTask();
  std::thread::id answered_on;
  task->done = [&call, &answered_on](absl::StatusOr<Result> r) {
    answered_on = std::this_thread::get_id();
    call.result = std::move(r);
    call.finished.Notify();
  };
  ASSERT_TRUE(batcher.ScheduleOrRun(&task).ok());
  call.finished.WaitForNotification();
  EXPECT_NE(answered_on, std::this_thread::get_id());
  EXPECT_EQ(call.Output(), call.Expected());
}

// While a batch runs, ScheduleOrRun queues like Schedule: tasks of one kind
// still fuse under load, and large tasks never run on the caller's thread.
TEST(BatcherTest, ScheduleOrRunQueuesWhileTheEngineIsBusy) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 1;
  options.max_batch_size = 4;
  options.batch_timeout_micros = 10'000'000;
  options.large_request_items = 1000;
  Batcher batcher(options, &backend);
  absl::Notification gate;
  Call blocker;
  Occupy(batcher, backend, gate, blocker);
  std::mt19937 rng(11);
  std::vector<Call> calls(4);
  for (Call& call : calls) {
    call.input = RandomInts(rng, 10);
    std::unique_ptr<Task> task = call.MakeTask();
    ASSERT_TRUE(batcher.ScheduleOrRun(&task).ok());
    EXPECT_FALSE(call.finished.HasBeenNotified());
  }
  gate.Notify();
  for (Call& call : calls) {
    call.finished.WaitForNotification();
    EXPECT_EQ(call.Output(), call.Expected());
  }
  blocker.finished.WaitForNotification();
  EXPECT_EQ(backend.batch_sizes(), (std::vector<size_t>{1, 4}));

  // Idle again, but a large task goes to a worker.
  Call large;
  large.input = RandomInts(rng, 1000);
  std::unique_ptr<Task> task = large.MakeTask();
  std::thread::id answered_on;
  task->done = [&large, &answered_on](absl::StatusOr<Result> r) {
    answered_on = std::this_thread::get_id();
    large.result = std::move(r);
    large.finished.Notify();
  };
  ASSERT_TRUE(batcher.ScheduleOrRun(&task).ok());
  large.finished.WaitForNotification();
  EXPECT_NE(answered_on, std::this_thread::get_id());
  EXPECT_EQ(large.Output(), large.Expected());
}

// A task run on its caller's thread counts against num_threads: with the
// only slot taken by one held there, queued tasks wait for it, then run.
TEST(BatcherTest, ACallersRunCountsAsOneOfTheThreads) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 1;
  options.batch_timeout_micros = 10'000'000;
  Batcher batcher(options, &backend);
  absl::Notification gate;
  backend.HoldUntil(&gate);
  std::mt19937 rng(12);
  Call held;
  held.input = RandomInts(rng, 10);
  std::thread caller([&] {
    std::unique_ptr<Task> task = held.MakeTask(Op::kMin);
    ASSERT_TRUE(batcher.ScheduleOrRun(&task).ok());
  });
  while (backend.batch_sizes().empty()) absl::SleepFor(absl::Milliseconds(1));
  std::vector<Call> calls(3);
  for (Call& call : calls) {
    call.input = RandomInts(rng, 10);
    std::unique_ptr<Task> task = call.MakeTask();
    ASSERT_TRUE(batcher.Schedule(&task).ok());
  }
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(backend.batch_sizes().size(), 1u) << "a worker ran beside the caller's run";
  gate.Notify();
  caller.join();
  for (Call& call : calls) {
    call.finished.WaitForNotification();
    EXPECT_EQ(call.Output(), call.Expected());
  }
  EXPECT_EQ(backend.batch_sizes(), (std::vector<size_t>{1, 3}));
}

TEST(BatcherTest, FusesSameKindUpToMaxBatchSize) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 1;
  options.max_batch_size = 8;
  options.batch_timeout_micros = 10'000'000;  // only size closes a batch
  Batcher batcher(options, &backend);
  absl::Notification gate;
  Call blocker;
  Occupy(batcher, backend, gate, blocker);
  std::mt19937 rng(1);
  std::vector<Call> calls(16);
  for (Call& call : calls) {
    call.input = RandomInts(rng, 100);
    std::unique_ptr<Task> task = call.MakeTask();
    ASSERT_TRUE(batcher.Schedule(&task).ok());
    EXPECT_EQ(task, nullptr);
  }
  gate.Notify();
  for (Call& call : calls) {
    call.finished.WaitForNotification();
    ASSERT_TRUE(call.result.ok()) << call.result.status();
    EXPECT_EQ(call.Output(), call.Expected());
  }
  EXPECT_EQ(backend.batch_sizes(), (std::vector<size_t>{1, 8, 8}));
}

TEST(BatcherTest, GatheringStopsAtTheTimeoutWhileBusy) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 1;
  options.max_batch_size = 100;
  options.batch_timeout_micros = 20'000;
  Batcher batcher(options, &backend);
  absl::Notification gate;
  Call blocker;
  Occupy(batcher, backend, gate, blocker);
  std::mt19937 rng(2);
  std::vector<Call> calls(3);
  for (Call& call : calls) call.input = RandomInts(rng, 10);
  for (int i = 0; i < 2; ++i) {
    std::unique_ptr<Task> task = calls[i].MakeTask();
    ASSERT_TRUE(batcher.Schedule(&task).ok());
  }
  absl::SleepFor(absl::Milliseconds(30));  // the open batch is past its ceiling
  std::unique_ptr<Task> late = calls[2].MakeTask();
  ASSERT_TRUE(batcher.Schedule(&late).ok());
  gate.Notify();
  for (Call& call : calls) call.finished.WaitForNotification();
  EXPECT_EQ(backend.batch_sizes(), (std::vector<size_t>{1, 2, 1}));
  for (Call& call : calls) EXPECT_EQ(call.Output(), call.Expected());
}

TEST(BatcherTest, FlushesOnItemLimitAndSeparatesKinds) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 1;
  options.max_batch_items = 250;
  options.batch_timeout_micros = 10'000'000;
  Batcher batcher(options, &backend);
  absl::Notification gate;
  Call blocker;
  Occupy(batcher, backend, gate, blocker);
  std::mt19937 rng(3);
  std::vector<Call> sums(3), maxes(2);
  for (Call& call : sums) {
    call.input = RandomInts(rng, 100);  // the third overflows 250: new batch
    std::unique_ptr<Task> task = call.MakeTask(Op::kSum);
    ASSERT_TRUE(batcher.Schedule(&task).ok());
  }
  for (Call& call : maxes) {
    call.input = RandomInts(rng, 10);
    std::unique_ptr<Task> task = call.MakeTask(Op::kMax);
    ASSERT_TRUE(batcher.Schedule(&task).ok());
  }
  gate.Notify();
  for (Call& call : sums) call.finished.WaitForNotification();
  for (Call& call : maxes) call.finished.WaitForNotification();
  std::vector<size_t> sizes = backend.batch_sizes();
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<size_t>{1, 1, 2, 2}));  // blocker, sums 2 + 1, maxes 2
  for (Call& call : sums) EXPECT_EQ(call.Output(), call.Expected());
}

TEST(BatcherTest, LargeRequestsRunAlone) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 1;
  options.large_request_items = 1000;
  options.batch_timeout_micros = 10'000'000;
  Batcher batcher(options, &backend);
  std::mt19937 rng(4);
  Call call;
  call.input = RandomInts(rng, 1000);
  std::unique_ptr<Task> task = call.MakeTask();
  ASSERT_TRUE(batcher.Schedule(&task).ok());
  call.finished.WaitForNotification();  // would take 10 s if it waited
  EXPECT_EQ(call.Output(), call.Expected());
}

TEST(BatcherTest, FullQueueRejectsAtOnceAndKeepsAccepted) {
  RecordingBackend backend;
  absl::Notification gate;
  backend.HoldUntil(&gate);
  BatcherOptions options;
  options.num_threads = 1;
  options.max_enqueued_tasks = 4;
  options.batch_timeout_micros = 0;  // every task is its own batch
  Batcher batcher(options, &backend);
  std::mt19937 rng(5);
  std::vector<Call> calls(5);
  for (Call& call : calls) call.input = RandomInts(rng, 10);
  // The first task is taken by the worker (held at the gate), then 4 fill the queue.
  std::unique_ptr<Task> first = calls[0].MakeTask();
  ASSERT_TRUE(batcher.Schedule(&first).ok());
  while (batcher.enqueued() != 0) absl::SleepFor(absl::Milliseconds(1));
  for (int i = 1; i < 5; ++i) {
    std::unique_ptr<Task> task = calls[i].MakeTask();
    ASSERT_TRUE(batcher.Schedule(&task).ok());
  }
  Call rejected;
  rejected.input = RandomInts(rng, 10);
  std::unique_ptr<Task> extra = rejected.MakeTask();
  absl::Status status = batcher.Schedule(&extra);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(extra, nullptr) << "a rejected task stays with the caller";
  gate.Notify();
  for (Call& call : calls) {
    call.finished.WaitForNotification();
    ASSERT_TRUE(call.result.ok());
    EXPECT_EQ(call.Output(), call.Expected());
  }
  EXPECT_FALSE(rejected.finished.HasBeenNotified());
}

TEST(BatcherTest, ExpiredAndCancelledTasksDoNotDisturbTheirBatch) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 1;
  options.max_batch_size = 3;
  options.batch_timeout_micros = 10'000'000;
  Batcher batcher(options, &backend);
  absl::Notification gate;
  Call blocker;
  Occupy(batcher, backend, gate, blocker);
  std::mt19937 rng(6);
  Call live, expired, cancelled;
  for (Call* c : {&live, &expired, &cancelled}) c->input = RandomInts(rng, 50);
  std::unique_ptr<Task> t1 = live.MakeTask();
  std::unique_ptr<Task> t2 = expired.MakeTask(Op::kSum, absl::Now() - absl::Seconds(1));
  std::unique_ptr<Task> t3 = cancelled.MakeTask();
  t3->is_cancelled = [] { return true; };
  ASSERT_TRUE(batcher.Schedule(&t1).ok());
  ASSERT_TRUE(batcher.Schedule(&t2).ok());
  ASSERT_TRUE(batcher.Schedule(&t3).ok());
  gate.Notify();
  for (Call* c : {&live, &expired, &cancelled}) c->finished.WaitForNotification();
  EXPECT_EQ(expired.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(cancelled.result.status().code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(live.result.ok());
  EXPECT_EQ(live.Output(), live.Expected());
  EXPECT_EQ(backend.batch_sizes(), (std::vector<size_t>{1, 1}));  // blocker, then live alone
}

TEST(BatcherTest, RoutesEveryAnswerToItsCaller) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 3;
  options.max_batch_size = 16;
  options.batch_timeout_micros = 500;
  Batcher batcher(options, &backend);
  constexpr int kThreads = 8, kCallsPerThread = 200;
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      for (int i = 0; i < kCallsPerThread; ++i) {
        Call call;
        call.input = RandomInts(rng, 1 + rng() % 300);
        std::unique_ptr<Task> task = call.MakeTask();
        if (!batcher.Schedule(&task).ok()) {
          ++failed;
          continue;
        }
        call.finished.WaitForNotification();
        if (!call.result.ok()) {
          ++failed;
        } else if (call.Output() != call.Expected()) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(failed, 0);
  size_t total = 0;
  for (size_t size : backend.batch_sizes()) total += size;
  EXPECT_EQ(total, size_t{kThreads * kCallsPerThread});
}

TEST(BatcherTest, ShutdownRunsAcceptedTasksAndRefusesNewOnes) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 1;
  options.batch_timeout_micros = 10'000'000;
  Batcher batcher(options, &backend);
  std::mt19937 rng(7);
  Call call;
  call.input = RandomInts(rng, 10);
  std::unique_ptr<Task> task = call.MakeTask();
  ASSERT_TRUE(batcher.Schedule(&task).ok());
  batcher.Shutdown();  // must not wait the 10 s timeout
  ASSERT_TRUE(call.finished.HasBeenNotified());
  EXPECT_EQ(call.Output(), call.Expected());
  Call late;
  late.input = RandomInts(rng, 10);
  std::unique_ptr<Task> late_task = late.MakeTask();
  EXPECT_EQ(batcher.Schedule(&late_task).code(), absl::StatusCode::kUnavailable);
}

TEST(BatcherTest, ShutdownFromSeveralThreadsAtOnce) {
  RecordingBackend backend;
  BatcherOptions options;
  options.num_threads = 3;
  Batcher batcher(options, &backend);
  std::mt19937 rng(10);
  std::vector<Call> calls(50);
  for (Call& call : calls) {
    call.input = RandomInts(rng, 20);
    std::unique_ptr<Task> task = call.MakeTask();
    ASSERT_TRUE(batcher.Schedule(&task).ok());
  }
  std::vector<std::thread> stoppers;
  for (int i = 0; i < 3; ++i) stoppers.emplace_back([&] { batcher.Shutdown(); });
  for (std::thread& t : stoppers) t.join();
  for (Call& call : calls) {
    call.finished.WaitForNotification();
    ASSERT_TRUE(call.result.ok()) << call.result.status();
    EXPECT_EQ(call.Output(), call.Expected());
  }
}

TEST(BatcherTest, RecordsQueueBatchesAndRejections) {
  Metrics metrics;
  ASSERT_TRUE(metrics.ServeHttp("127.0.0.1:0").ok());
  auto sample = [&](const std::string& series) {
    absl::StatusOr<testing::HttpResponse> scrape =
        testing::HttpGet(metrics.http_port(), "/metrics");
    EXPECT_TRUE(scrape.ok()) << scrape.status();
    return scrape.ok() ? testing::SampleValue(scrape->body, series).value_or(-1) : -1;
  };
  RecordingBackend backend;
  absl::Notification gate;
  backend.HoldUntil(&gate);
  BatcherOptions options;
  options.num_threads = 1;
  options.max_batch_size = 3;
  options.max_enqueued_tasks = 3;
  options.batch_timeout_micros = 10'000'000;  // only size closes a batch
  Batcher batcher(options, &backend, &metrics);
  std::mt19937 rng(8);
  std::vector<Call> calls(4);
  for (Call& call : calls) call.input = RandomInts(rng, 50);

  // The worker takes the first task at once and is held at the gate with it.
  std::unique_ptr<Task> first = calls[0].MakeTask();
  ASSERT_TRUE(batcher.Schedule(&first).ok());
  while (backend.batch_sizes().empty()) absl::SleepFor(absl::Milliseconds(1));
  // A batch of an expired, a cancelled and a live task fills the queue; a
  // fourth is refused.
  std::unique_ptr<Task> tasks[] = {calls[1].MakeTask(Op::kSum, absl::Now() - absl::Seconds(1)),
                                   calls[2].MakeTask(), calls[3].MakeTask()};
  tasks[1]->is_cancelled = [] { return true; };
  for (std::unique_ptr<Task>& task : tasks) ASSERT_TRUE(batcher.Schedule(&task).ok());
  Call refused;
  refused.input = RandomInts(rng, 50);
  std::unique_ptr<Task> extra = refused.MakeTask();
  EXPECT_EQ(batcher.Schedule(&extra).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(sample("primserve_queue_depth"), 3);
  EXPECT_EQ(sample("primserve_queue_capacity"), 3);
  EXPECT_EQ(sample(R"(primserve_rejections_total{reason="queue_full"})"), 1);
  EXPECT_EQ(sample("primserve_batches_total"), 1);

  gate.Notify();
  batcher.Shutdown();
  EXPECT_EQ(sample("primserve_queue_depth"), 0);
  EXPECT_EQ(sample(R"(primserve_rejections_total{reason="deadline"})"), 1);
  EXPECT_EQ(sample(R"(primserve_rejections_total{reason="cancelled"})"), 1);
  EXPECT_EQ(sample("primserve_batches_total"), 2);
  EXPECT_EQ(sample("primserve_batch_size_requests_sum"), 2);
  EXPECT_EQ(sample("primserve_batch_size_elements_sum"), 100);
  EXPECT_EQ(sample(R"(primserve_request_duration_seconds_count{rpc="Scan",stage="queue"})"), 2);
}

}  // namespace
}  // namespace primserve
