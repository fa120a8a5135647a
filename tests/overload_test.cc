// A real server (CPU backend, loopback gRPC) pushed past its limits:
// - overload: more concurrent clients than its queue holds; every call ends
//   in a correct result or a fast RESOURCE_EXHAUSTED/UNAVAILABLE, none hangs,
//   and memory stays bounded;
// - deadlines shorter than the queue wait: DEADLINE_EXCEEDED on time, and the
//   expired requests are dropped from the queue, never run;
// - graceful shutdown under load: every call in flight finishes OK or gets
//   UNAVAILABLE/CANCELLED, and Shutdown returns within its grace period.
// The figures (offered and served load, rejections, p99, peak RSS) are
// printed for the record.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "reference/reference.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "tests/rpc_api.h"

namespace primserve {
namespace {

// The process's peak resident set (VmHWM), in MiB.
double PeakRssMib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  }
  return -1;
}

// Each client gets a channel of its own, with its own connection (gRPC shares
// connections between channels to one target unless told not to).
PrimitivesClient OwnClient(int port, absl::Duration timeout) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return PrimitivesClient(
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                grpc::InsecureChannelCredentials(), args),
      timeout);
}

std::vector<int64_t> RandomInput(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(n);
  for (int64_t& x : v) x = static_cast<int64_t>(rng() % 2001) - 1000;
  return v;
}

// Outcomes of calls, by status code, plus wrong answers and latencies.
class Tally {
 public:
  void Record(absl::StatusCode code, bool correct, absl::Duration latency) {
    absl::MutexLock lock(&mu_);
    ++codes_[code];
    if (code == absl::StatusCode::kOk) {
      if (!correct) ++wrong_;
      served_latencies_.push_back(latency);
    }
    max_latency_ = std::max(max_latency_, latency);
  }
  int count(absl::StatusCode code) const {
    absl::MutexLock lock(&mu_);
    auto it = codes_.find(code);
    return it == codes_.end() ? 0 : it->second;
  }
  int total() const {
    absl::MutexLock lock(&mu_);
    int sum = 0;
    for (const auto& [code, n] : codes_) sum += n;
    return sum;
  }
  int wrong() const {
    absl::MutexLock lock(&mu_);
    return wrong_;
  }
  absl::Duration max_latency() const {
    absl::MutexLock lock(&mu_);
    return max_latency_;
  }
  absl::Duration ServedPercentile(double p) const {
    absl::MutexLock lock(&mu_);
    if (served_latencies_.empty()) return absl::ZeroDuration();
    std::vector<absl::Duration> sorted = served_latencies_;
    std::sort(sorted.begin(), sorted.end());
    return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()))];
  }
  std::string Codes() const {
    absl::MutexLock lock(&mu_);
    std::string out;
    for (const auto& [code, n] : codes_) {
      absl::StrAppend(&out, out.empty() ? "" : ", ", absl::StatusCodeToString(code), " ", n);
    }
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<absl::StatusCode, int> codes_ ABSL_GUARDED_BY(mu_);
  int wrong_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Duration> served_latencies_ ABSL_GUARDED_BY(mu_);
  absl::Duration max_latency_ ABSL_GUARDED_BY(mu_);
};

// One scan call, checked against the reference and recorded.
void ScanAndRecord(PrimitivesClient& client, const std::vector<int64_t>& input,
                   const std::vector<int64_t>& expected, Tally& tally) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<int64_t>> out = client.Scan<int64_t>(input, Op::kSum);
  tally.Record(out.status().code(), out.ok() && *out == expected, absl::Now() - start);
}

TEST(OverloadTest, PastTheQueueLimitEveryCallEndsCorrectlyOrIsRejected) {
  constexpr int kClients = 48;
  constexpr int kCallsPerClient = 16;
  constexpr size_t kElements = size_t{1} << 15;  // 256 KiB each way
  constexpr absl::Duration kDeadline = absl::Seconds(30);
  constexpr double kRssLimitMib = 1536;

  ServerOptions options;
  options.rpc_api = TestRpcApi();
  options.address = "127.0.0.1:0";
  options.batcher.num_threads = 1;
  options.batcher.max_enqueued_tasks = 4;
  options.batcher.batch_timeout_micros = 0;  // each request alone: the queue fills
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::make_unique<CpuBackend>());
  ASSERT_TRUE(server.ok()) << server.status();

  Tally tally;
  std::vector<std::thread> clients;
  const absl::Time start = absl::Now();
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      PrimitivesClient client = OwnClient((*server)->port(), kDeadline);
      const std::vector<int64_t> input = RandomInput(c, kElements);
      const std::vector<int64_t> expected = reference::Scan<int64_t>(input, Op::kSum, false);
      for (int i = 0; i < kCallsPerClient; ++i) ScanAndRecord(client, input, expected, tally);
    });
  }
  for (std::thread& client : clients) client.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  const int offered = kClients * kCallsPerClient;
  const int served = tally.count(absl::StatusCode::kOk);
  const int rejected = tally.count(absl::StatusCode::kResourceExhausted) +
                       tally.count(absl::StatusCode::kUnavailable);
  const double peak_rss = PeakRssMib();
  std::printf(
      "overload: %d clients x %d calls of %zu int64 in %.2f s; offered %.0f/s, served %.0f/s "
      "(%d), rejected %d (%.0f%%); served p50 %s p99 %s, slowest call %s; peak RSS %.0f MiB; "
      "codes: %s\n",
      kClients, kCallsPerClient, kElements, seconds, offered / seconds, served / seconds, served,
      rejected, 100.0 * rejected / offered,
      absl::FormatDuration(tally.ServedPercentile(0.5)).c_str(),
      absl::FormatDuration(tally.ServedPercentile(0.99)).c_str(),
      absl::FormatDuration(tally.max_latency()).c_str(), peak_rss, tally.Codes().c_str());

  EXPECT_EQ(tally.total(), offered);
  EXPECT_EQ(served + rejected, offered) << tally.Codes();
  EXPECT_EQ(tally.wrong(), 0);
  EXPECT_GT(served, 0);
  EXPECT_GT(rejected, 0) << "the load never filled the queue, so this tested nothing";
  EXPECT_LT(tally.max_latency(), kDeadline);
  EXPECT_GT(peak_rss, 0);
  EXPECT_LT(peak_rss, kRssLimitMib);

  // Once the load is gone, the server serves normally.
  PrimitivesClient after = OwnClient((*server)->port(), absl::Seconds(10));
  const std::vector<int64_t> input = {5, -2, 7};
  absl::StatusOr<std::vector<int64_t>> out = after.Scan<int64_t>(input, Op::kSum);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, (std::vector<int64_t>{5, 3, 10}));
}

// Holds every batch until released and counts the tasks it ran.
class GatedBackend final : public ExecutionBackend {
 public:
  std::string name() const override { return "gated"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override {
    if (started_.fetch_add(batch.size()) == 0) first_started_.Notify();
    release_.WaitForNotification();
    cpu_.Execute(std::move(batch));
  }
  void Release() { release_.Notify(); }
  absl::Notification& first_started() { return first_started_; }
  int started() const { return started_.load(); }

 private:
  CpuBackend cpu_;
  absl::Notification first_started_;
  absl::Notification release_;
  std::atomic<int> started_{0};
};

TEST(OverloadTest, DeadlinesShorterThanTheQueueWaitExpireAndAreNeverRun) {
  constexpr int kShortCalls = 8;
  constexpr absl::Duration kShortDeadline = absl::Milliseconds(300);
  constexpr absl::Duration kSlack = absl::Seconds(2);

  ServerOptions options;
  options.rpc_api = TestRpcApi();
  options.address = "127.0.0.1:0";
  options.batcher.num_threads = 1;
  options.batcher.batch_timeout_micros = 0;
  auto backend = std::make_unique<GatedBackend>();
  GatedBackend* gated = backend.get();
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::move(backend));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const std::vector<int64_t> input = {1, 2, 3};
  const std::vector<int64_t> expected = {1, 3, 6};

  // A call with a long deadline occupies the only worker.
  Tally blocker;
  std::thread blocking([&] {
    PrimitivesClient client = OwnClient(port, absl::Seconds(60));
    ScanAndRecord(client, input, expected, blocker);
  });
  gated->first_started().WaitForNotification();

  // Calls behind it give up before the worker is free.
  Tally expired;
  std::vector<std::thread> short_calls;
  for (int i = 0; i < kShortCalls; ++i) {
    short_calls.emplace_back([&] {
      PrimitivesClient client = OwnClient(port, kShortDeadline);
      ScanAndRecord(client, input, expected, expired);
    });
  }
  for (std::thread& t : short_calls) t.join();
  EXPECT_EQ(expired.count(absl::StatusCode::kDeadlineExceeded), kShortCalls) << expired.Codes();
  EXPECT_LT(expired.max_latency(), kShortDeadline + kSlack);

  // The server learns of the expiry a little after the clients do: from its
  // own copy of the deadline (sent as a timeout) or from their cancellation.
  absl::SleepFor(absl::Milliseconds(500));
  gated->Release();
  blocking.join();
  EXPECT_EQ(blocker.count(absl::StatusCode::kOk), 1) << blocker.Codes();
  EXPECT_EQ(blocker.wrong(), 0);

  // The expired calls were dropped from the queue: the backend ran only the
  // blocker, and runs the next call.
  Tally next;
  PrimitivesClient client = OwnClient(port, absl::Seconds(10));
  ScanAndRecord(client, input, expected, next);
  EXPECT_EQ(next.count(absl::StatusCode::kOk), 1) << next.Codes();
  EXPECT_EQ(next.wrong(), 0);
  EXPECT_EQ(gated->started(), 2);
  std::printf("deadlines: %d calls with %s deadlines queued behind a held batch all got "
              "DEADLINE_EXCEEDED (slowest after %s); none ran\n",
              kShortCalls, absl::FormatDuration(kShortDeadline).c_str(),
              absl::FormatDuration(expired.max_latency()).c_str());
}

TEST(OverloadTest, GracefulShutdownUnderLoadLosesNoCall) {
  constexpr int kClients = 16;
  constexpr size_t kElements = size_t{1} << 14;
  constexpr absl::Duration kGrace = absl::Seconds(2);
  constexpr absl::Duration kSlack = absl::Seconds(2);

  ServerOptions options;
  options.rpc_api = TestRpcApi();
  options.address = "127.0.0.1:0";
  options.batcher.num_threads = 2;
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::make_unique<CpuBackend>());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  // Clients call until the server refuses them; every call is recorded.
  Tally tally;
  std::atomic<int> served_before_shutdown{0};
  std::atomic<bool> shutting_down{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      PrimitivesClient client = OwnClient(port, absl::Seconds(20));
      const std::vector<int64_t> input = RandomInput(100 + c, kElements);
      const std::vector<int64_t> expected = reference::Scan<int64_t>(input, Op::kSum, false);
      while (true) {
        const absl::Time start = absl::Now();
        absl::StatusOr<std::vector<int64_t>> out = client.Scan<int64_t>(input, Op::kSum);
        tally.Record(out.status().code(), out.ok() && *out == expected, absl::Now() - start);
        if (!out.ok()) break;
        if (!shutting_down) ++served_before_shutdown;
      }
    });
  }
  const absl::Time load_deadline = absl::Now() + absl::Seconds(30);
  while (served_before_shutdown < 4 * kClients && absl::Now() < load_deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GE(served_before_shutdown, 4 * kClients) << "the server never got loaded";

  shutting_down = true;
  const absl::Time shutdown_start = absl::Now();
  (*server)->Shutdown(kGrace);
  const absl::Duration shutdown_took = absl::Now() - shutdown_start;
  for (std::thread& client : clients) client.join();

  const int ok = tally.count(absl::StatusCode::kOk);
  const int unavailable = tally.count(absl::StatusCode::kUnavailable);
  const int cancelled = tally.count(absl::StatusCode::kCancelled);
  std::printf("shutdown: %d clients; Shutdown(%s) took %s; calls: %d OK, %d UNAVAILABLE, "
              "%d CANCELLED (codes: %s)\n",
              kClients, absl::FormatDuration(kGrace).c_str(),
              absl::FormatDuration(shutdown_took).c_str(), ok, unavailable, cancelled,
              tally.Codes().c_str());
  EXPECT_LT(shutdown_took, kGrace + kSlack);
  EXPECT_EQ(ok + unavailable + cancelled, tally.total()) << tally.Codes();
  EXPECT_EQ(unavailable + cancelled, kClients);  // each client's last call, and only that
  EXPECT_EQ(tally.wrong(), 0);
}

TEST(OverloadTest, ShutdownCancelsWhatOutlastsTheGraceAndDropsTheQueue) {
  constexpr int kQueuedCalls = 4;
  constexpr absl::Duration kGrace = absl::Seconds(1);
  constexpr absl::Duration kHeldFor = absl::Milliseconds(1500);  // past the grace
  constexpr absl::Duration kSlack = absl::Seconds(2);

  ServerOptions options;
  options.rpc_api = TestRpcApi();
  options.address = "127.0.0.1:0";
  options.batcher.num_threads = 1;
  options.batcher.batch_timeout_micros = 0;
  auto backend = std::make_unique<GatedBackend>();
  GatedBackend* gated = backend.get();
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::move(backend));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const std::vector<int64_t> input = {1, 2, 3};
  const std::vector<int64_t> expected = {1, 3, 6};

  Tally tally;
  std::vector<std::thread> calls;
  calls.emplace_back([&] {
    PrimitivesClient client = OwnClient(port, absl::Seconds(60));
    ScanAndRecord(client, input, expected, tally);
  });
  gated->first_started().WaitForNotification();
  for (int i = 0; i < kQueuedCalls; ++i) {
    calls.emplace_back([&] {
      PrimitivesClient client = OwnClient(port, absl::Seconds(60));
      ScanAndRecord(client, input, expected, tally);
    });
  }
  absl::SleepFor(absl::Milliseconds(200));  // the queued calls reach the queue

  const absl::Time shutdown_start = absl::Now();
  std::thread release([&] {
    absl::SleepFor(kHeldFor);
    gated->Release();
  });
  (*server)->Shutdown(kGrace);
  const absl::Duration shutdown_took = absl::Now() - shutdown_start;
  release.join();
  for (std::thread& call : calls) call.join();
  std::printf("held shutdown: Shutdown(%s) with a batch held for %s took %s; codes: %s; "
              "backend ran %d\n",
              absl::FormatDuration(kGrace).c_str(), absl::FormatDuration(kHeldFor).c_str(),
              absl::FormatDuration(shutdown_took).c_str(), tally.Codes().c_str(),
              gated->started());
  EXPECT_GE(shutdown_took, kGrace);
  EXPECT_LT(shutdown_took, kHeldFor + kSlack);
  EXPECT_EQ(tally.total(), 1 + kQueuedCalls);
  EXPECT_EQ(tally.count(absl::StatusCode::kCancelled) +
                tally.count(absl::StatusCode::kUnavailable),
            1 + kQueuedCalls)
      << tally.Codes();
  EXPECT_EQ(gated->started(), 1);  // the queued calls never ran
}

}  // namespace
}  // namespace primserve
