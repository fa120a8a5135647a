// The /metrics endpoint against clients that connect and then stall: idle
// connections and requests trickled a byte at a time, reconnecting when cut,
// must neither block scrapes nor hold a serving thread past the timeout.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/engine/metrics.h"
#include "tests/http_testing.h"

namespace primserve {
namespace {

// A TCP connection to 127.0.0.1:port, or -1. Reads time out after `timeout`.
int Connect(int port, absl::Duration timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

class MetricsHttpTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(metrics_.ServeHttp("127.0.0.1:0").ok()); }

  Metrics metrics_;
};

// A request that never ends is cut once the request timeout has passed.
TEST_F(MetricsHttpTest, AStalledRequestIsClosedAfterTheTimeout) {
  const int fd = Connect(metrics_.http_port(), absl::Seconds(20));
  ASSERT_GE(fd, 0);
  const std::string partial = "GET /metr";
  ASSERT_EQ(write(fd, partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
  const absl::Time start = absl::Now();
  char byte;
  const ssize_t n = read(fd, &byte, 1);  // 0 (closed) or an error status page
  const absl::Duration held = absl::Now() - start;
  close(fd);
  EXPECT_GE(n, 0);
  EXPECT_LT(held, Metrics::kHttpRequestTimeout + absl::Seconds(2));
}

// Idle connections, and requests trickled a byte every 100 ms that reconnect
// when cut (the attack that kept every scrape failing for 78 s against one
// serving thread), held open while scrapes run: every scrape answers fast.
TEST_F(MetricsHttpTest, IdleAndTricklingConnectionsDoNotBlockScrapes) {
  const int port = metrics_.http_port();
  constexpr int kIdle = 3;
  constexpr int kTricklers = 3;
  static_assert(kIdle + kTricklers < Metrics::kHttpThreads, "a thread must stay free");
  std::vector<int> idle;
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(Connect(port, absl::Seconds(1)));
    ASSERT_GE(idle.back(), 0);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> reconnects{0};
  std::vector<std::thread> tricklers;
  for (int i = 0; i < kTricklers; ++i) {
    tricklers.emplace_back([&] {
      const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
      while (!stop.load()) {
        const int fd = Connect(port, absl::Seconds(1));
        if (fd < 0) return;
        for (size_t sent = 0; !stop.load(); ++sent) {
          const char byte = sent < request.size() ? request[sent] : 'a';
          if (send(fd, &byte, 1, MSG_NOSIGNAL) != 1) break;
          absl::SleepFor(absl::Milliseconds(100));
        }
        close(fd);
        reconnects.fetch_add(1);
      }
    });
  }

  // Past the request timeout, so that the tricklers are cut and come back.
  const absl::Time end = absl::Now() + Metrics::kHttpRequestTimeout + absl::Seconds(1.5);
  int scrapes = 0;
  absl::Duration slowest;
  while (absl::Now() < end) {
    const absl::Time start = absl::Now();
    absl::StatusOr<testing::HttpResponse> response = testing::HttpGet(port, "/metrics");
    const absl::Duration took = absl::Now() - start;
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 200);
    slowest = std::max(slowest, took);
    ++scrapes;
    absl::SleepFor(absl::Milliseconds(100));
  }
  stop.store(true);
  for (std::thread& t : tricklers) t.join();
  for (int fd : idle) close(fd);
  EXPECT_GE(reconnects.load(), kTricklers) << "the tricklers were never cut";
  EXPECT_LT(slowest, absl::Milliseconds(500)) << scrapes << " scrapes";
  std::printf("%d scrapes beside %d idle and %d trickling connections (%d reconnects): slowest %s\n",
              scrapes, kIdle, kTricklers, reconnects.load(), absl::FormatDuration(slowest).c_str());
}

// Issue 27's attack: 60 idle connections, and 10 more that reconnect each
// time they are cut, held past the request timeout: every scrape answers
// within 1 s.
TEST_F(MetricsHttpTest, SixtyIdleAndReconnectingConnectionsDoNotBlockScrapes) {
  const int port = metrics_.http_port();
  constexpr int kIdle = 60;
  constexpr int kReconnecting = 10;
  std::vector<int> idle;
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(Connect(port, absl::Seconds(1)));
    ASSERT_GE(idle.back(), 0);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> reconnects{0};
  std::vector<std::thread> reconnecting;
  for (int i = 0; i < kReconnecting; ++i) {
    reconnecting.emplace_back([&] {
      while (!stop.load()) {
        const int fd = Connect(port, absl::Milliseconds(200));
        if (fd < 0) return;
        char byte;
        // Until the server cuts it (read returns 0), or the test ends.
        while (!stop.load() && read(fd, &byte, 1) < 0) {
        }
        close(fd);
        reconnects.fetch_add(1);
      }
    });
  }
  const absl::Time end = absl::Now() + Metrics::kHttpRequestTimeout + absl::Seconds(1.5);
  int scrapes = 0;
  absl::Duration slowest;
  while (absl::Now() < end) {
    const absl::Time start = absl::Now();
    absl::StatusOr<testing::HttpResponse> response = testing::HttpGet(port, "/metrics");
    const absl::Duration took = absl::Now() - start;
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 200);
    slowest = std::max(slowest, took);
    ++scrapes;
    absl::SleepFor(absl::Milliseconds(100));
  }
  stop.store(true);
  for (std::thread& t : reconnecting) t.join();
  for (int fd : idle) close(fd);
  EXPECT_GE(reconnects.load(), kReconnecting) << "the idle connections were never cut";
  EXPECT_LT(slowest, absl::Seconds(1)) << scrapes << " scrapes";
  std::printf("%d scrapes beside %d idle and %d reconnecting connections (%d reconnects): "
              "slowest %s\n",
              scrapes, kIdle, kReconnecting, reconnects.load(),
              absl::FormatDuration(slowest).c_str());
}

}  // namespace
}  // namespace primserve
