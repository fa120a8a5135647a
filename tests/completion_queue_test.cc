// The unary Primitives RPCs on gRPC's completion-queue API
// (--rpc_api=completion_queue), beyond what the *_cq_test twins of the other
// tests check: many calls at once on several queues each get their own
// answer; a call cancelled, or past its deadline, while the engine holds it
// is seen cancelled by the engine; a shutdown with calls in flight ends them
// all and returns (ASan's leak check sees no call left behind); a task the
// engine holds leaves its queue free for other calls.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/rpc.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "reference/reference.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;

// The CPU backend, except that Scan batches wait for the test's release;
// the test can ask whether the held tasks' calls were cancelled meanwhile.
class HoldingScans final : public ExecutionBackend {
 public:
  std::string name() const override { return "holding scans"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override {
    if (RpcOf(batch.front()->operation) == Rpc::kScan) {
      {
        absl::MutexLock lock(&mu_);
        for (const std::unique_ptr<Task>& task : batch) held_.push_back(task->is_cancelled);
      }
      release_.WaitForNotification();
    }
    cpu_.Execute(std::move(batch));
  }

  // Scan tasks that reached the backend.
  size_t held() const {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }
  // Whether every held task's call is cancelled.
  bool AllHeldCancelled() const {
    absl::MutexLock lock(&mu_);
    for (const std::function<bool()>& is_cancelled : held_) {
      if (!is_cancelled()) return false;
    }
    return !held_.empty();
  }
  void Release() { release_.Notify(); }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::function<bool()>> held_ ABSL_GUARDED_BY(mu_);
  absl::Notification release_;
  CpuBackend cpu_;
};

// Polls `condition` for up to `timeout`.
bool Eventually(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

ServerOptions QueuedOptions(int queues) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.rpc_api = ServerOptions::RpcApi::kCompletionQueue;
  options.completion_queues = queues;
  return options;
}

v1::ScanRequest ScanOf(const std::vector<int32_t>& values) {
  v1::ScanRequest request;
  request.mutable_input()->set_dtype(v1::INT32);
  request.mutable_input()->set_data(values.data(), values.size() * sizeof(int32_t));
  request.set_op(v1::SUM);
  return request;
}

std::vector<int32_t> ValuesOf(const v1::ScanResponse& response) {
  const std::string& data = response.output().data();
  std::vector<int32_t> values(data.size() / sizeof(int32_t));
  std::memcpy(values.data(), data.data(), values.size() * sizeof(int32_t));
  return values;
}

class CompletionQueueTest : public ::testing::Test {
 protected:
  void StartHolding(ServerOptions options = QueuedOptions(2)) {
    auto backend = std::make_unique<HoldingScans>();
    backend_ = backend.get();
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::move(backend));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Primitives::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials()));
  }

  // A Scan of `values` answers their prefix sums.
  void ExpectScanAnswers(const std::vector<int32_t>& values) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ScanResponse response;
    const grpc::Status status = stub_->Scan(&context, ScanOf(values), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(ValuesOf(response),
              reference::Scan<int32_t>(values, Op::kSum, /*exclusive=*/false));
  }

  HoldingScans* backend_ = nullptr;
  std::unique_ptr<PrimServer> server_;
  std::unique_ptr<v1::Primitives::Stub> stub_;
};

TEST(RpcApiTest, ParsesTheTwoNamesAndSaysWhatElseIsWrong) {
  EXPECT_EQ(*ParseRpcApi("callback"), ServerOptions::RpcApi::kCallback);
  EXPECT_EQ(*ParseRpcApi("completion_queue"), ServerOptions::RpcApi::kCompletionQueue);
  absl::StatusOr<ServerOptions::RpcApi> bad = ParseRpcApi("cq");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("'cq' is neither callback nor completion_queue"));
}

// 16 callers on 4 connections, 4 queues, three RPCs of random sizes and
// contents: each answer is its own request's, as the reference computes it.
TEST(CompletionQueueCallsTest, ManyCallsAtOnceEachGetTheirOwnAnswer) {
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(QueuedOptions(4), std::make_unique<CpuBackend>());
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string target = absl::StrCat("127.0.0.1:", (*server)->port());
  std::vector<std::unique_ptr<PrimitivesClient>> clients;
  for (int i = 0; i < 4; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("primserve.test.connection", i);  // a connection of its own
    clients.push_back(std::make_unique<PrimitivesClient>(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
  }
  constexpr int kCallers = 16;
  constexpr int kCallsEach = 60;
  std::atomic<int> wrong{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      std::mt19937_64 rng(1000 + c);
      PrimitivesClient& client = *clients[c % clients.size()];
      for (int i = 0; i < kCallsEach; ++i) {
        const size_t n = 1 + rng() % 3000;
        switch (i % 3) {
          case 0: {
            std::vector<int32_t> values(n);
            for (int32_t& v : values) v = static_cast<int32_t>(rng() % 2001) - 1000;
            absl::StatusOr<std::vector<int32_t>> out = client.Scan<int32_t>(values, Op::kSum);
            if (!out.ok()) {
              ++failed;
            } else if (*out != reference::Scan<int32_t>(values, Op::kSum, false)) {
              ++wrong;
            }
            break;
          }
          case 1: {
            std::vector<int64_t> values(n);
            for (int64_t& v : values) v = static_cast<int64_t>(rng() >> 20) - (int64_t{1} << 43);
            absl::StatusOr<Reduction<int64_t>> out = client.Reduce<int64_t>(values, Op::kMax);
            if (!out.ok()) {
              ++failed;
            } else if (out->values != reference::Reduce<int64_t>(values, Op::kMax).values) {
              ++wrong;
            }
            break;
          }
          default: {
            std::vector<uint32_t> values(n);
            for (uint32_t& v : values) v = static_cast<uint32_t>(rng());
            absl::StatusOr<std::vector<uint32_t>> out =
                client.Scan<uint32_t>(values, Op::kMin, /*exclusive=*/true);
            if (!out.ok()) {
              ++failed;
            } else if (*out != reference::Scan<uint32_t>(values, Op::kMin, true)) {
              ++wrong;
            }
          }
        }
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

// A queue's thread never runs a task, even where an idle engine would run
// it on the callback thread (--run_small_requests_inline, on here): with one
// queue, a Scan the engine holds leaves the queue free for the next call.
TEST_F(CompletionQueueTest, ATaskTheEngineHoldsLeavesItsQueueFree) {
  ServerOptions options = QueuedOptions(1);
  ASSERT_TRUE(options.batcher.run_when_idle);
  StartHolding(options);
  grpc::Status held_status;
  v1::ScanResponse held_response;
  std::thread held([&] {
    grpc::ClientContext context;
    held_status = stub_->Scan(&context, ScanOf({3, 1, 4}), &held_response);
  });
  ASSERT_TRUE(Eventually([&] { return backend_->held() == 1; }, absl::Seconds(10)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ReduceRequest reduce;
  const std::vector<int32_t> values = {3, 1, 4, 1, 5};
  reduce.mutable_input()->set_dtype(v1::INT32);
  reduce.mutable_input()->set_data(values.data(), values.size() * sizeof(int32_t));
  reduce.set_op(v1::SUM);
  v1::ReduceResponse reduced;
  const grpc::Status status = stub_->Reduce(&context, reduce, &reduced);
  ASSERT_TRUE(status.ok()) << status.error_message();
  int32_t sum = 0;
  ASSERT_EQ(reduced.values().data().size(), sizeof(sum));
  std::memcpy(&sum, reduced.values().data().data(), sizeof(sum));
  EXPECT_EQ(sum, 14);
  backend_->Release();
  held.join();
  ASSERT_TRUE(held_status.ok()) << held_status.error_message();
  EXPECT_EQ(ValuesOf(held_response), (std::vector<int32_t>{3, 4, 8}));
}

// A refused request is answered with its reason on this path too.
TEST_F(CompletionQueueTest, ARefusedRequestGetsItsReason) {
  StartHolding();
  backend_->Release();
  v1::ScanRequest request = ScanOf({1, 2, 3});
  request.mutable_input()->set_data("12345");  // not a whole number of int32s
  grpc::ClientContext context;
  v1::ScanResponse response;
  const grpc::Status status = stub_->Scan(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(status.error_message().empty());
  ExpectScanAnswers({4, -1, 9});
}

TEST_F(CompletionQueueTest, ACallCancelledInTheEngineIsSeenCancelled) {
  StartHolding();
  grpc::ClientContext context;
  grpc::Status status;
  std::thread call([&] {
    v1::ScanResponse response;
    status = stub_->Scan(&context, ScanOf({1, 2, 3}), &response);
  });
  ASSERT_TRUE(Eventually([&] { return backend_->held() == 1; }, absl::Seconds(10)));
  EXPECT_FALSE(backend_->AllHeldCancelled());
  context.TryCancel();
  call.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(Eventually([&] { return backend_->AllHeldCancelled(); }, absl::Seconds(10)));
  backend_->Release();
  ExpectScanAnswers({7, 8, -20, 3});
}

TEST_F(CompletionQueueTest, ACallPastItsDeadlineInTheEngineIsSeenCancelled) {
  StartHolding();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  grpc::Status status;
  std::thread call([&] {
    v1::ScanResponse response;
    status = stub_->Scan(&context, ScanOf({1, 2, 3}), &response);
  });
  ASSERT_TRUE(Eventually([&] { return backend_->held() == 1; }, absl::Seconds(10)));
  call.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(Eventually([&] { return backend_->AllHeldCancelled(); }, absl::Seconds(10)));
  backend_->Release();
  ExpectScanAnswers({2, 2, 2});
}

// Calls held in the engine, and more waiting behind them, when the server
// shuts down: every call ends, with its answer or an error, and Shutdown
// returns once the engine lets go.
TEST_F(CompletionQueueTest, AShutdownWithCallsInFlightEndsThemAllAndReturns) {
  ServerOptions options = QueuedOptions(2);
  options.batcher.num_threads = 1;  // one held batch; the rest wait behind it
  StartHolding(options);
  constexpr int kCalls = 12;
  std::vector<grpc::Status> statuses(kCalls);
  std::vector<v1::ScanResponse> responses(kCalls);
  std::vector<std::thread> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.emplace_back([&, i] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      statuses[i] = stub_->Scan(&context, ScanOf({i, i, i}), &responses[i]);
    });
  }
  ASSERT_TRUE(Eventually([&] { return backend_->held() >= 1; }, absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(200));  // the others reach the server
  absl::Notification shut_down;
  std::thread shutdown([&] {
    server_->Shutdown(absl::Milliseconds(200));
    shut_down.Notify();
  });
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_FALSE(shut_down.HasBeenNotified());  // the held batch is still out
  backend_->Release();
  EXPECT_TRUE(shut_down.WaitForNotificationWithTimeout(absl::Seconds(30)));
  shutdown.join();
  for (std::thread& call : calls) call.join();
  for (int i = 0; i < kCalls; ++i) {
    if (statuses[i].ok()) {
      EXPECT_EQ(ValuesOf(responses[i]), (std::vector<int32_t>{i, 2 * i, 3 * i}));
    } else {
      EXPECT_THAT(statuses[i].error_code(),
                  ::testing::AnyOf(grpc::StatusCode::CANCELLED, grpc::StatusCode::UNAVAILABLE))
          << statuses[i].error_message();
    }
  }
  server_.reset();
}

// Shutting down an idle server, and one that never served a call, returns.
TEST(CompletionQueueCallsTest, AnIdleServerShutsDown) {
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(QueuedOptions(3), std::make_unique<CpuBackend>());
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Shutdown(absl::ZeroDuration());
  server->reset();
}

}  // namespace
}  // namespace primserve
