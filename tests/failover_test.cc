// Replicas behind the client's own balancing (issue 16): one channel from
// PrimitivesClient::Connect over several servers, with its default options
// (round_robin, client-side health checking, retries on UNAVAILABLE).
//
// - HealthCheckingTest: two in-process servers, one of which turns unhealthy
//   (health NOT_SERVING, as after a sticky CUDA error) while still answering.
//   With health checking it gets no more calls; without, it keeps getting its
//   share, which shows the check is what keeps calls away.
// - FailoverTest: three real primserve processes (CPU backend) under steady
//   load from one client channel over an ipv4: list. One gets SIGTERM
//   mid-load, one SIGKILL, and the killed one comes back on its port. Every
//   answer is checked against the CPU reference. No call may fail around the
//   SIGTERM; around the SIGKILL, only calls in flight at the kill may, and
//   only with UNAVAILABLE. The test prints calls and failures per phase, and
//   how the load spread, from each server's primserve_requests_total.
//
// Usage: failover_test <primserve binary>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "reference/reference.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "tests/child_process.h"
#include "tests/http_testing.h"

namespace primserve {
namespace {

std::string g_primserve;  // argv[1]

// "ipv4:127.0.0.1:p0,127.0.0.1:p1,...": every server is one address.
std::string Ipv4Target(const std::vector<int>& ports) {
  std::vector<std::string> addresses;
  for (const int port : ports) addresses.push_back(absl::StrCat("127.0.0.1:", port));
  return absl::StrCat("ipv4:", absl::StrJoin(addresses, ","));
}

// An input with the reference's answers to an inclusive SUM scan and reduce.
struct Input {
  Input(uint64_t seed, size_t n) : values(n) {
    std::mt19937_64 rng(seed);
    for (int64_t& x : values) x = static_cast<int64_t>(rng() % 2001) - 1000;
    scan = reference::Scan<int64_t>(values, Op::kSum, false);
    sum = reference::Reduce<int64_t>(values, Op::kSum).values;
  }
  std::vector<int64_t> values;
  std::vector<int64_t> scan;
  std::vector<int64_t> sum;
};

std::vector<Input> MakeInputs() {
  std::vector<Input> inputs;
  std::mt19937_64 rng(std::random_device{}());
  // 4k to 128k elements: 32 KiB to 1 MiB each way, a millisecond or so each.
  for (size_t n = 4096; n <= 131072; n *= 2) inputs.emplace_back(rng(), n + rng() % 1000);
  return inputs;
}

// ---------------------------------------------------------------------------
// Client-side health checking, with in-process servers.

// A CPU backend that counts the requests it runs and whose health the test
// sets.
class CountingBackend final : public ExecutionBackend {
 public:
  std::string name() const override { return "counting"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override {
    requests_ += static_cast<int>(batch.size());
    cpu_.Execute(std::move(batch));
  }
  absl::Status Health() const override {
    return broken_ ? absl::UnavailableError("injected sticky error") : absl::OkStatus();
  }

  void Break() { broken_ = true; }
  int TakeRequests() { return requests_.exchange(0); }

 private:
  CpuBackend cpu_;
  std::atomic<bool> broken_{false};
  std::atomic<int> requests_{0};
};

// Requests each of two servers ran out of `calls` (all must succeed) made
// after the second went NOT_SERVING.
std::pair<int, int> CallsAfterOneTurnsUnhealthy(bool health_check, int calls) {
  std::vector<std::unique_ptr<PrimServer>> servers;
  std::vector<CountingBackend*> backends;
  std::vector<int> ports;
  for (int i = 0; i < 2; ++i) {
    auto backend = std::make_unique<CountingBackend>();
    backends.push_back(backend.get());
    ServerOptions options;
    options.address = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::move(backend));
    if (!server.ok()) {
      ADD_FAILURE() << server.status();
      return {-1, -1};
    }
    ports.push_back((*server)->port());
    servers.push_back(*std::move(server));
  }
  ConnectOptions options;
  options.health_check = health_check;
  PrimitivesClient client(PrimitivesClient::Connect(Ipv4Target(ports), options),
                          absl::Seconds(30));
  const Input input(1, 1000);
  auto call_all = [&](int n) {
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<std::vector<int64_t>> out = client.Scan<int64_t>(input.values, Op::kSum);
      EXPECT_TRUE(out.ok()) << out.status();
      EXPECT_TRUE(!out.ok() || *out == input.scan) << "wrong answer";
    }
  };
  // Until both are connected and taking calls.
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10); absl::Now() < give_up;) {
    call_all(10);
    const int first = backends[0]->TakeRequests();
    const int second = backends[1]->TakeRequests();
    if (first > 0 && second > 0) break;
  }
  backends[1]->Break();
  // The server polls its backend's health each second; a client of its own
  // (pick_first, one server) sees the switch.
  PrimitivesClient probe(PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", ports[1])));
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10);
       probe.IsServing() && absl::Now() < give_up;) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_FALSE(probe.IsServing());
  absl::SleepFor(absl::Seconds(1));  // the health Watch stream's update, pushed at once
  backends[0]->TakeRequests();
  backends[1]->TakeRequests();
  call_all(calls);
  return {backends[0]->TakeRequests(), backends[1]->TakeRequests()};
}

TEST(HealthCheckingTest, UnhealthyServerGetsNoCalls) {
  constexpr int kCalls = 40;
  const auto [healthy, unhealthy] = CallsAfterOneTurnsUnhealthy(/*health_check=*/true, kCalls);
  std::printf("health checking on: %d calls to the SERVING server, %d to the NOT_SERVING one\n",
              healthy, unhealthy);
  EXPECT_EQ(healthy, kCalls);
  EXPECT_EQ(unhealthy, 0);
}

TEST(HealthCheckingTest, WithoutItAnUnhealthyServerKeepsGettingCalls) {
  constexpr int kCalls = 40;
  const auto [healthy, unhealthy] = CallsAfterOneTurnsUnhealthy(/*health_check=*/false, kCalls);
  std::printf("health checking off: %d calls to the SERVING server, %d to the NOT_SERVING one\n",
              healthy, unhealthy);
  EXPECT_EQ(healthy + unhealthy, kCalls);
  EXPECT_GT(unhealthy, kCalls / 4);
}

// ---------------------------------------------------------------------------
// Failover between real server processes.

// The decimal number right after `prefix` in `text`, if any.
std::optional<int> NumberAfter(absl::string_view text, absl::string_view prefix) {
  const size_t at = text.find(prefix);
  if (at == absl::string_view::npos) return std::nullopt;
  const size_t start = at + prefix.size();
  const size_t end = text.find_first_not_of("0123456789", start);
  int number = 0;
  if (!absl::SimpleAtoi(text.substr(start, end - start), &number)) return std::nullopt;
  return number;
}

// A primserve process on loopback: gRPC on `port` (0: a free one), metrics on
// a free port.
class ServerProcess {
 public:
  ServerProcess(int index, int port)
      : child_({g_primserve, "--backend=cpu", "--host=127.0.0.1", absl::StrCat("--port=", port),
                "--metrics_host=127.0.0.1", "--metrics_port=0", "--shutdown_grace_seconds=5"},
               LogPath(index)) {}

  // Waits for the log to show both ports; false if it does not in `limit`.
  bool WaitUntilListening(absl::Duration limit) {
    for (const absl::Time give_up = absl::Now() + limit; child_.running() && absl::Now() < give_up;
         absl::SleepFor(absl::Milliseconds(20))) {
      const std::string log = child_.log();
      const std::optional<int> port = NumberAfter(log, "primserve listening on 127.0.0.1:");
      const std::optional<int> metrics = NumberAfter(log, "metrics at http://127.0.0.1:");
      if (port && metrics) {
        port_ = *port;
        metrics_port_ = *metrics;
        return true;
      }
    }
    return false;
  }

  int port() const { return port_; }
  ChildProcess& child() { return child_; }

  // Its primserve_requests_in_flight gauge; nullopt when the scrape fails.
  std::optional<double> RequestsInFlight() const {
    const std::optional<std::string> metrics = Scrape();
    if (!metrics) return std::nullopt;
    return testing::SampleValue(*metrics, "primserve_requests_in_flight");
  }

  // The sum of primserve_requests_total over its series; nullopt when the
  // scrape fails.
  std::optional<double> Requests() const {
    const std::optional<std::string> metrics = Scrape();
    if (!metrics) return std::nullopt;
    double total = 0;
    for (absl::string_view line : absl::StrSplit(*metrics, '\n')) {
      if (!absl::ConsumePrefix(&line, "primserve_requests_total{")) continue;
      double value = 0;
      if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) total += value;
    }
    return total;
  }

 private:
  std::optional<std::string> Scrape() const {
    absl::StatusOr<testing::HttpResponse> scrape = testing::HttpGet(metrics_port_, "/metrics");
    if (!scrape.ok() || scrape->status != 200) return std::nullopt;
    return scrape->body;
  }

  static std::string LogPath(int index) {
    static std::atomic<int> starts{0};
    const char* dir = std::getenv("TEST_TMPDIR");
    return absl::StrCat(dir != nullptr ? dir : "/tmp", "/primserve-", index, "-", starts++, ".log");
  }

  ChildProcess child_;
  int port_ = 0;
  int metrics_port_ = 0;
};

struct Outcome {
  int phase;  // at issue
  absl::StatusCode code;
  bool correct;  // OK with the reference's answer
};

// Callers sharing one channel, each making a call every few milliseconds (a
// steady load well below what the servers can take), Scans and Reduces in
// turn, until Stop(). Every call is recorded with the phase it began in.
class SteadyLoad {
 public:
  SteadyLoad(std::shared_ptr<grpc::Channel> channel, int callers, const std::vector<Input>* inputs)
      : client_(std::move(channel), absl::Seconds(30)), inputs_(inputs) {
    for (int c = 0; c < callers; ++c) callers_.emplace_back([this, c] { Call(c); });
  }
  ~SteadyLoad() { Stop(); }

  void set_phase(int phase) { phase_ = phase; }
  int in_flight() const { return in_flight_.load(); }

  std::vector<Outcome> Stop() {
    stop_ = true;
    for (std::thread& caller : callers_) caller.join();
    callers_.clear();
    absl::MutexLock lock(&mu_);
    return outcomes_;
  }

 private:
  void Call(int caller) {
    for (size_t i = caller; !stop_; ++i) {
      const Input& input = (*inputs_)[i % inputs_->size()];
      Outcome outcome{phase_.load(), absl::StatusCode::kOk, false};
      ++in_flight_;
      if ((i / inputs_->size()) % 2 == 0) {
        absl::StatusOr<std::vector<int64_t>> out = client_.Scan<int64_t>(input.values, Op::kSum);
        outcome.code = out.status().code();
        outcome.correct = out.ok() && *out == input.scan;
      } else {
        absl::StatusOr<Reduction<int64_t>> out = client_.Reduce<int64_t>(input.values, Op::kSum);
        outcome.code = out.status().code();
        outcome.correct = out.ok() && out->values == input.sum;
      }
      --in_flight_;
      {
        absl::MutexLock lock(&mu_);
        outcomes_.push_back(outcome);
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  PrimitivesClient client_;
  const std::vector<Input>* inputs_;
  std::vector<std::thread> callers_;
  std::atomic<bool> stop_{false};
  std::atomic<int> phase_{0};
  std::atomic<int> in_flight_{0};
  absl::Mutex mu_;
  std::vector<Outcome> outcomes_ ABSL_GUARDED_BY(mu_);
};

TEST(FailoverTest, SigtermSigkillAndComeBack) {
  constexpr int kServers = 3;
  constexpr int kCallers = 6;
  const std::vector<Input> inputs = MakeInputs();
  std::vector<std::unique_ptr<ServerProcess>> servers;
  std::vector<int> ports;
  for (int i = 0; i < kServers; ++i) {
    servers.push_back(std::make_unique<ServerProcess>(i, 0));
    ASSERT_TRUE(servers.back()->WaitUntilListening(absl::Seconds(20)))
        << "server " << i << " did not start:\n" << servers.back()->child().log();
    ports.push_back(servers.back()->port());
  }
  const std::string target = Ipv4Target(ports);
  std::printf("target %s\nservice config %s\n", target.c_str(),
              PrimitivesClient::ServiceConfig(ConnectOptions()).c_str());
  const absl::Time started = absl::Now();

  // Phases, and each server's request counter at each phase's start and end
  // (nullopt while it is down).
  const std::vector<std::string> phase_names = {
      "3 servers", "server 0 SIGTERMed", "server 1 SIGKILLed", "server 1 back", "steady again"};
  std::vector<std::vector<std::optional<double>>> counters;
  auto scrape = [&] {
    std::vector<std::optional<double>> row;
    for (const auto& server : servers) {
      row.push_back(server->child().running() ? server->Requests() : std::nullopt);
    }
    counters.push_back(row);
  };

  SteadyLoad load(PrimitivesClient::Connect(target), kCallers, &inputs);
  // Until every server has answered, then 3 s more.
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10); absl::Now() < give_up;
       absl::SleepFor(absl::Milliseconds(100))) {
    bool all = true;
    for (const auto& server : servers) all = all && server->Requests().value_or(0) > 0;
    if (all) break;
  }
  scrape();
  absl::SleepFor(absl::Seconds(3));
  scrape();

  // SIGTERMed while it has calls in flight, as for the SIGKILL below.
  load.set_phase(1);
  double drained_in_flight = 0;
  for (const absl::Time give_up = absl::Now() + absl::Seconds(5); absl::Now() < give_up;) {
    drained_in_flight = servers[0]->RequestsInFlight().value_or(0);
    if (drained_in_flight >= 1) break;
  }
  const ChildProcess::Exit drained = servers[0]->child().Terminate(absl::Seconds(15));
  absl::SleepFor(absl::Seconds(2));
  scrape();

  // Killed while it has calls in flight: its own gauge, scraped just before.
  load.set_phase(2);
  int in_flight_at_kill = 0;
  double killed_in_flight = 0;
  for (const absl::Time give_up = absl::Now() + absl::Seconds(5); absl::Now() < give_up;) {
    in_flight_at_kill = load.in_flight();
    killed_in_flight = servers[1]->RequestsInFlight().value_or(0);
    if (killed_in_flight >= 1) break;
  }
  servers[1]->child().Kill();
  absl::SleepFor(absl::Seconds(3));
  scrape();

  // Back on its port: the client's reconnect backoff (at most 5 s by
  // default) finds it.
  load.set_phase(3);
  servers[1] = std::make_unique<ServerProcess>(1, ports[1]);
  ASSERT_TRUE(servers[1]->WaitUntilListening(absl::Seconds(20)))
      << "server 1 did not restart:\n" << servers[1]->child().log();
  const absl::Time restarted = absl::Now();
  while (servers[1]->Requests().value_or(0) == 0 && absl::Now() - restarted < absl::Seconds(15)) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const absl::Duration rejoined_after = absl::Now() - restarted;
  scrape();
  load.set_phase(4);
  absl::SleepFor(absl::Seconds(3));
  scrape();
  const std::vector<Outcome> outcomes = load.Stop();
  const absl::Duration took = absl::Now() - started;

  // Per phase: calls, failures by code, wrong answers; the load per server.
  struct Tally {
    int calls = 0, wrong = 0;
    std::map<absl::StatusCode, int> failed;
    int failures() const {
      int n = 0;
      for (const auto& [code, count] : failed) n += count;
      return n;
    }
  };
  std::vector<Tally> tallies(phase_names.size());
  for (const Outcome& o : outcomes) {
    Tally& t = tallies[o.phase];
    ++t.calls;
    if (o.code != absl::StatusCode::kOk) ++t.failed[o.code];
    if (o.code == absl::StatusCode::kOk && !o.correct) ++t.wrong;
  }
  // counters[p] .. counters[p + 1] bound phase p (the first row is taken once
  // all three answered).
  std::printf("%-20s %6s %7s %6s   requests per server (primserve_requests_total)\n", "phase",
              "calls", "failed", "wrong");
  for (size_t p = 0; p < phase_names.size(); ++p) {
    std::vector<std::string> spread;
    for (int s = 0; s < kServers; ++s) {
      const std::optional<double> from = counters[p][s], to = counters[p + 1][s];
      if (!to) {
        spread.push_back(absl::StrCat("s", s, from ? ": (exited, uncounted)" : ": down"));
      } else {
        // A restarted process counts from zero.
        const double start = from && *from <= *to ? *from : 0;
        spread.push_back(absl::StrCat("s", s, ": ", *to - start));
      }
    }
    std::vector<std::string> codes;
    for (const auto& [code, count] : tallies[p].failed) {
      codes.push_back(absl::StrCat(absl::StatusCodeToString(code), "=", count));
    }
    std::printf("%-20s %6d %7d %6d   %s%s\n", phase_names[p].c_str(), tallies[p].calls,
                tallies[p].failures(), tallies[p].wrong, absl::StrJoin(spread, ", ").c_str(),
                codes.empty() ? "" : absl::StrCat("  (", absl::StrJoin(codes, " "), ")").c_str());
  }
  std::printf("SIGTERM: server 0 had %g calls in flight (its primserve_requests_in_flight just "
              "before); it drained and exited %.3f s later (status %d)\n"
              "SIGKILL: server 1 had %g calls in flight (its primserve_requests_in_flight just "
              "before), the client %d over both servers\n"
              "server 1 took calls %.3f s after its restart; %d calls in %.1f s\n",
              drained_in_flight, absl::ToDoubleSeconds(drained.took), drained.status,
              killed_in_flight,
              in_flight_at_kill, absl::ToDoubleSeconds(rejoined_after),
              static_cast<int>(outcomes.size()), absl::ToDoubleSeconds(took));

  for (const Tally& t : tallies) EXPECT_EQ(t.wrong, 0);
  EXPECT_TRUE(drained.exited && WIFEXITED(drained.status) && WEXITSTATUS(drained.status) == 0);
  EXPECT_EQ(tallies[0].failures(), 0);
  EXPECT_EQ(tallies[1].failures(), 0) << "calls failed around the SIGTERM";
  EXPECT_GE(drained_in_flight, 1) << "no call was in flight on the SIGTERMed server";
  EXPECT_GE(killed_in_flight, 1) << "no call was in flight on the killed server";
  EXPECT_LE(tallies[2].failures(), in_flight_at_kill);
  EXPECT_EQ(tallies[2].failures(), tallies[2].failed[absl::StatusCode::kUnavailable])
      << "a call around the SIGKILL failed with other than UNAVAILABLE";
  EXPECT_EQ(tallies[3].failures() + tallies[4].failures(), 0);
  // Round robin: each live server takes about an equal share.
  auto share = [&](int phase, int server) {
    double total = 0;
    for (int s = 0; s < kServers; ++s) {
      if (counters[phase + 1][s]) {
        total += *counters[phase + 1][s] - counters[phase][s].value_or(0);
      }
    }
    return (*counters[phase + 1][server] - counters[phase][server].value_or(0)) / total;
  };
  for (int s = 0; s < kServers; ++s) EXPECT_GT(share(0, s), 0.2) << "server " << s;
  EXPECT_GT(share(4, 1), 0.3) << "the restarted server gets its share";
  EXPECT_GT(share(4, 2), 0.3);
  EXPECT_LT(took, absl::Seconds(60));
}

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <primserve binary>\n", argv[0]);
    return 2;
  }
  primserve::g_primserve = argv[1];
  return RUN_ALL_TESTS();
}
