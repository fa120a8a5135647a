// SIGTERM to the real primserve binary (CPU backend) under load (issue #6).
// Callers, each on its own connection, loop over Scans and Reduces; the test
// signals the process mid-load, waits for it to exit, then has every caller
// make one more call. It asserts that:
// - every call ended OK with the reference's answer, UNAVAILABLE or
//   CANCELLED: nothing else (a call that hung until its deadline would show
//   DEADLINE_EXCEEDED). CANCELLED comes even well within the grace: gRPC
//   cancels, without running it, a call whose request it was still receiving
//   when shutdown began;
// - the process exited with status 0 in time (the figures are printed);
// - calls made after the exit fail with UNAVAILABLE.
// Two cases: small and large requests that drain well within a long grace;
// and large uploads over a slow link that outlive a short grace, which the
// server must cut to exit on time.
//
// Usage: sigterm_test <primserve binary>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "reference/reference.h"
#include "tests/child_process.h"

namespace primserve {
namespace {

std::string g_primserve;  // argv[1]

// Deadline of every call: far beyond any drain, so hitting it means a hang.
constexpr absl::Duration kCallDeadline = absl::Seconds(60);

// primserve on a free loopback port, its output in a log file; SIGKILLed if
// it outlives the test.
class ServerProcess {
 public:
  explicit ServerProcess(double grace_seconds)
      : child_({g_primserve, "--backend=cpu", "--host=127.0.0.1", "--port=0",
                "--metrics_port=-1", absl::StrCat("--shutdown_grace_seconds=", grace_seconds)},
               LogPath()) {}

  // The gRPC port, once the server logs it; 0 if it exits or logs none in
  // `limit`.
  int WaitForPort(absl::Duration limit) {
    const std::string listening = "primserve listening on 127.0.0.1:";
    for (const absl::Time give_up = absl::Now() + limit; child_.running() && absl::Now() < give_up;
         absl::SleepFor(absl::Milliseconds(20))) {
      const std::string text = log();
      const size_t at = text.find(listening);
      if (at == std::string::npos) continue;
      const size_t start = at + listening.size();
      int port = 0;
      if (absl::SimpleAtoi(text.substr(start, text.find_first_not_of("0123456789", start) - start),
                           &port)) {
        return port;
      }
    }
    return 0;
  }

  ChildProcess::Exit Terminate(absl::Duration limit) { return child_.Terminate(limit); }
  std::string log() const { return child_.log(); }

 private:
  static std::string LogPath() {
    static std::atomic<int> servers{0};
    const char* dir = std::getenv("TEST_TMPDIR");
    return absl::StrCat(dir != nullptr ? dir : "/tmp", "/primserve-", servers++, ".log");
  }

  ChildProcess child_;
};

// Forwards loopback connections to a port, passing each one's uploads at a
// limited rate: a slow link, on which a large request stays in flight for
// seconds while holding a few MiB. Downloads pass unthrottled. When either
// side closes, the proxy resets the client's connection.
class ThrottlingProxy {
 public:
  ThrottlingProxy(int target_port, int upload_bytes_per_second)
      : target_port_(target_port), rate_(upload_bytes_per_second) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = Loopback(0);
    socklen_t length = sizeof(address);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        listen(listener_, 64) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return;
    }
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~ThrottlingProxy() {
    shutdown(listener_, SHUT_RDWR);  // wakes accept()
    if (acceptor_.joinable()) acceptor_.join();
    close(listener_);
    std::vector<std::thread> pumps;
    {
      absl::MutexLock lock(&mu_);
      for (const std::unique_ptr<Link>& link : links_) {
        if (link->pumping > 0) Cut(*link);
      }
      pumps.swap(pumps_);
    }
    for (std::thread& pump : pumps) pump.join();
  }

  int port() const { return port_; }  // 0 if it could not listen

 private:
  // One proxied connection; its sockets are open while a pump runs.
  struct Link {
    int client;
    int upstream;
    int pumping = 2;
  };

  static sockaddr_in Loopback(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    return address;
  }

  static void Cut(const Link& link) {
    shutdown(link.client, SHUT_RDWR);
    shutdown(link.upstream, SHUT_RDWR);
  }

  static bool SendAll(int fd, const char* data, size_t size) {
    while (size > 0) {
      const ssize_t sent = send(fd, data, size, MSG_NOSIGNAL);
      if (sent <= 0) return false;
      data += sent;
      size -= sent;
    }
    return true;
  }

  void AcceptLoop() {
    while (true) {
      const int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) {
        if (errno == EINTR) continue;
        return;  // the listener was shut down
      }
      const int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const sockaddr_in target = Loopback(target_port_);
      if (connect(upstream, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) != 0) {
        close(upstream);
        close(client);  // the client sees the refusal as a closed connection
        continue;
      }
      absl::MutexLock lock(&mu_);
      Link* link = links_.emplace_back(new Link{client, upstream}).get();
      pumps_.emplace_back([this, link] { Pump(*link, link->client, link->upstream, rate_); });
      pumps_.emplace_back([this, link] { Pump(*link, link->upstream, link->client, 0); });
    }
  }

  // Copies `from` to `to` at `bytes_per_second` (0: as fast as they go)
  // until either side closes. Then cuts the link, which ends the other
  // direction's pump too; the last pump closes the sockets.
  void Pump(Link& link, int from, int to, int bytes_per_second) {
    char buffer[16 << 10];
    ssize_t n;
    while ((n = read(from, buffer, sizeof(buffer))) > 0 && SendAll(to, buffer, n)) {
      if (bytes_per_second > 0) absl::SleepFor(absl::Seconds(double(n) / bytes_per_second));
    }
    absl::MutexLock lock(&mu_);
    Cut(link);
    if (--link.pumping == 0) {
      // A reset, not a FIN: a gRPC client blocked writing its request does
      // not notice a FIN, while the server's own socket would reset it.
      const linger reset = {1, 0};
      setsockopt(link.client, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      close(link.client);
      close(link.upstream);
    }
  }

  const int target_port_;
  const int rate_;
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Link>> links_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> pumps_ ABSL_GUARDED_BY(mu_);
};

// An input with the reference's answers to an inclusive SUM scan and reduce.
struct Input {
  Input(uint64_t seed, size_t n) : values(n) {
    std::mt19937_64 rng(seed);
    for (int64_t& x : values) x = static_cast<int64_t>(rng() % 2001) - 1000;
    scan = reference::Scan<int64_t>(values, Op::kSum, false);
    sum = reference::Reduce<int64_t>(values, Op::kSum).values;
  }
  bool large() const { return values.size() >= kLargeElements; }

  static constexpr size_t kLargeElements = size_t{1} << 20;  // 8 MiB each way for a scan
  std::vector<int64_t> values;
  std::vector<int64_t> scan;
  std::vector<int64_t> sum;
};

struct Outcome {
  absl::StatusCode code;
  bool correct;  // OK with the reference's answer
  bool large;
  bool after_exit;  // made once the process had exited
  absl::Time issued;
  absl::Time ended;
};

// Callers, each on its own connection to `port`, calling in a loop through
// the inputs, Scans and Reduces in turn, until each has made one call after
// ServerExited(). Every call is recorded.
class Load {
 public:
  Load(int port, int callers, std::vector<const Input*> inputs) : inputs_(std::move(inputs)) {
    for (int c = 0; c < callers; ++c) {
      callers_.emplace_back([this, port, c] { Call(port, c); });
    }
  }
  // Had the test stopped early, each caller stops after one more call.
  ~Load() {
    ServerExited();
    Finish();
  }

  int served() const { return served_.load(); }  // OK with the right answer
  int in_flight() const { return in_flight_.load(); }
  int large_in_flight() const { return large_in_flight_.load(); }
  void ServerExited() { exited_ = true; }

  // Joins the callers; every call they made.
  std::vector<Outcome> Finish() {
    for (std::thread& caller : callers_) caller.join();
    callers_.clear();
    absl::MutexLock lock(&mu_);
    return outcomes_;
  }

 private:
  void Call(int port, int caller) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    // A connection of its own: gRPC shares one between channels to a target.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    PrimitivesClient client(grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                                      grpc::InsecureChannelCredentials(), args),
                            kCallDeadline);
    for (size_t i = caller;; ++i) {
      const Input& input = *inputs_[i % inputs_.size()];
      const bool scan = (i / inputs_.size()) % 2 == 0;
      Outcome outcome{absl::StatusCode::kOk, false, input.large(), exited_.load(), absl::Now(),
                      absl::InfinitePast()};
      ++in_flight_;
      if (outcome.large) ++large_in_flight_;
      if (scan) {
        absl::StatusOr<std::vector<int64_t>> out = client.Scan<int64_t>(input.values, Op::kSum);
        outcome.code = out.status().code();
        outcome.correct = out.ok() && *out == input.scan;
      } else {
        absl::StatusOr<Reduction<int64_t>> out = client.Reduce<int64_t>(input.values, Op::kSum);
        outcome.code = out.status().code();
        outcome.correct = out.ok() && out->values == input.sum;
      }
      outcome.ended = absl::Now();
      --in_flight_;
      if (outcome.large) --large_in_flight_;
      if (outcome.correct) ++served_;
      {
        absl::MutexLock lock(&mu_);
        outcomes_.push_back(outcome);
      }
      if (outcome.after_exit) return;
      // Refused while the server drains: do not spin on its CPUs.
      if (outcome.code != absl::StatusCode::kOk) absl::SleepFor(absl::Milliseconds(20));
    }
  }

  const std::vector<const Input*> inputs_;
  std::vector<std::thread> callers_;
  std::atomic<bool> exited_{false};
  std::atomic<int> served_{0};
  std::atomic<int> in_flight_{0};
  std::atomic<int> large_in_flight_{0};
  absl::Mutex mu_;
  std::vector<Outcome> outcomes_ ABSL_GUARDED_BY(mu_);
};

// What the calls came to, relative to the signal.
struct Summary {
  Summary(const std::vector<Outcome>& outcomes, absl::Time signalled) {
    for (const Outcome& o : outcomes) {
      ++codes[o.code];
      if (o.code == absl::StatusCode::kOk && !o.correct) ++wrong;
      slowest = std::max(slowest, o.ended - o.issued);
      if (o.after_exit) {
        ++after_exit;
        if (o.code == absl::StatusCode::kUnavailable) ++after_exit_unavailable;
      } else if (o.issued < signalled && o.ended > signalled) {
        ++in_flight;
        if (o.correct) ++in_flight_ok;
        if (o.correct && o.large) ++in_flight_large_ok;
      }
    }
    ok = count(absl::StatusCode::kOk);
    unavailable = count(absl::StatusCode::kUnavailable);
    cancelled = count(absl::StatusCode::kCancelled);
    other = static_cast<int>(outcomes.size()) - ok - unavailable - cancelled;
  }

  int count(absl::StatusCode code) const {
    auto it = codes.find(code);
    return it == codes.end() ? 0 : it->second;
  }

  std::string Codes() const {
    std::string out;
    for (const auto& [code, n] : codes) {
      absl::StrAppend(&out, out.empty() ? "" : ", ", absl::StatusCodeToString(code), " ", n);
    }
    return out;
  }

  std::map<absl::StatusCode, int> codes;
  int ok = 0, unavailable = 0, cancelled = 0, other = 0, wrong = 0;
  int in_flight = 0, in_flight_ok = 0, in_flight_large_ok = 0;  // at the signal
  int after_exit = 0, after_exit_unavailable = 0;
  absl::Duration slowest;
};

// Polls `condition` until it holds, for up to `limit`.
bool Eventually(const std::function<bool()>& condition, absl::Duration limit) {
  for (const absl::Time give_up = absl::Now() + limit; !condition();
       absl::SleepFor(absl::Milliseconds(1))) {
    if (absl::Now() > give_up) return false;
  }
  return true;
}

std::string Describe(const ChildProcess::Exit& exit) {
  if (!exit.exited) return "did not exit (SIGKILLed)";
  if (WIFSIGNALED(exit.status)) return absl::StrCat("killed by signal ", WTERMSIG(exit.status));
  return absl::StrCat("exit status ", WEXITSTATUS(exit.status));
}

// `bound`: the most SIGTERM to exit may take.
void Print(const char* name, absl::Duration grace, absl::Duration bound,
           const ChildProcess::Exit& exit, const Summary& s) {
  std::printf(
      "%s: grace %s; SIGTERM to exit %s, bound %s (%s); %d calls: %d OK (%d wrong), "
      "%d UNAVAILABLE, "
      "%d CANCELLED, %d other [%s]; at the signal %d in flight, %d of them finished OK "
      "(%d large); after the exit %d calls, %d UNAVAILABLE; slowest call %s\n",
      name, absl::FormatDuration(grace).c_str(), absl::FormatDuration(exit.took).c_str(),
      absl::FormatDuration(bound).c_str(), Describe(exit).c_str(),
      s.ok + s.unavailable + s.cancelled + s.other, s.ok, s.wrong, s.unavailable, s.cancelled,
      s.other, s.Codes().c_str(), s.in_flight, s.in_flight_ok, s.in_flight_large_ok, s.after_exit,
      s.after_exit_unavailable, absl::FormatDuration(s.slowest).c_str());
}

TEST(SigtermTest, CallsInFlightFinishOthersAreRefusedAndTheProcessExitsWithinTheGrace) {
  constexpr int kCallers = 16;
  // Half of them call with large inputs at any time; a large call gRPC is
  // still receiving at the signal is cancelled, so several must be in flight
  // for one to be past that and finish.
  constexpr int kLargeInFlight = 6;
  // Far above the drain and teardown (under 1.5 s on 2 loaded cores): the
  // process must exit within the grace, nothing in flight running out of it.
  constexpr absl::Duration kGrace = absl::Seconds(5);

  const Input small_a(1, 1000), large_a(2, Input::kLargeElements), small_b(3, 1000),
      large_b(4, Input::kLargeElements);
  ServerProcess server(absl::ToDoubleSeconds(kGrace));
  const int port = server.WaitForPort(absl::Seconds(30));
  ASSERT_NE(port, 0) << server.log();

  Load load(port, kCallers, {&small_a, &large_a, &small_b, &large_b});
  // Loaded: calls have been served, and large ones are in flight.
  ASSERT_TRUE(Eventually(
      [&] { return load.served() >= 2 * kCallers && load.large_in_flight() >= kLargeInFlight; },
      absl::Seconds(60)))
      << "served " << load.served() << "\n" << server.log();

  const absl::Time signalled = absl::Now();
  const ChildProcess::Exit exit = server.Terminate(kGrace + absl::Seconds(30));
  load.ServerExited();
  const Summary s(load.Finish(), signalled);
  Print("drain", kGrace, kGrace, exit, s);

  EXPECT_TRUE(exit.exited && WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 0)
      << Describe(exit) << "\n" << server.log();
  EXPECT_LT(exit.took, kGrace) << "the load did not drain within the grace";
  EXPECT_EQ(s.other, 0) << s.Codes();
  EXPECT_EQ(s.wrong, 0);
  EXPECT_GT(s.in_flight_large_ok, 0) << "no large call in flight at the signal finished";
  EXPECT_EQ(s.after_exit, kCallers);
  EXPECT_EQ(s.after_exit_unavailable, kCallers) << s.Codes();
}

TEST(SigtermTest, UploadsOutlivingAShortGraceAreCutAndTheProcessExitsOnTime) {
  constexpr int kCallers = 6;
  // 8 MiB requests at 1 MiB/s: each upload needs 8 s, far beyond the grace
  // plus the margin.
  constexpr int kUploadBytesPerSecond = 1 << 20;
  constexpr absl::Duration kGrace = absl::Seconds(1);
  // After the grace the server cancels what is left, and nothing has reached
  // its queue: exiting is quick even on a loaded machine.
  constexpr absl::Duration kMargin = absl::Seconds(2);

  const Input large_a(5, Input::kLargeElements), large_b(6, Input::kLargeElements);
  ServerProcess server(absl::ToDoubleSeconds(kGrace));
  const int port = server.WaitForPort(absl::Seconds(30));
  ASSERT_NE(port, 0) << server.log();
  ThrottlingProxy link(port, kUploadBytesPerSecond);
  ASSERT_NE(link.port(), 0);

  Load load(link.port(), kCallers, {&large_a, &large_b});
  ASSERT_TRUE(Eventually([&] { return load.in_flight() == kCallers; }, absl::Seconds(30)));
  absl::SleepFor(absl::Milliseconds(500));  // uploads under way

  const absl::Time signalled = absl::Now();
  const ChildProcess::Exit exit = server.Terminate(kGrace + absl::Seconds(30));
  load.ServerExited();
  const Summary s(load.Finish(), signalled);
  Print("cut", kGrace, kGrace + kMargin, exit, s);

  EXPECT_TRUE(exit.exited && WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 0)
      << Describe(exit) << "\n" << server.log();
  EXPECT_GE(exit.took, kGrace) << "the calls in flight did not get their grace";
  EXPECT_LT(exit.took, kGrace + kMargin);
  EXPECT_EQ(s.in_flight, kCallers);
  EXPECT_EQ(s.in_flight_ok, 0) << "an upload finished: the link is not slow enough";
  EXPECT_EQ(s.other, 0) << s.Codes();
  EXPECT_EQ(s.wrong, 0);
  EXPECT_EQ(s.after_exit, kCallers);
  EXPECT_EQ(s.after_exit_unavailable, kCallers) << s.Codes();
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
