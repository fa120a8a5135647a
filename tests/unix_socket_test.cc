// --unix_socket: the server also answers on a Unix domain socket, for clients
// on the same host, and refuses to start when it cannot listen there.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"

namespace primserve {
namespace {

// A fresh directory with a short path: a socket's path must fit 107 bytes,
// which Bazel's TEST_TMPDIR can exceed.
std::string TempDir() {
  char dir[] = "/tmp/primserve-sock-XXXXXX";
  return mkdtemp(dir) != nullptr ? dir : "/tmp";
}

TEST(UnixSocketTest, AnswersOnTheSocketAsOnTcp) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  const std::string dir = TempDir();
  options.unix_socket = absl::StrCat(dir, "/primserve.sock");
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::make_unique<CpuBackend>());
  ASSERT_TRUE(server.ok()) << server.status();
  PrimitivesClient local(PrimitivesClient::Connect(absl::StrCat("unix:", options.unix_socket)));
  PrimitivesClient tcp(PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", (*server)->port())));
  const std::vector<int64_t> input = {3, -7, 11, 2};
  absl::StatusOr<std::vector<int64_t>> over_socket = local.Scan<int64_t>(input, Op::kMax);
  ASSERT_TRUE(over_socket.ok()) << over_socket.status();
  EXPECT_EQ(*over_socket, (std::vector<int64_t>{3, 3, 11, 11}));
  absl::StatusOr<std::vector<int64_t>> over_tcp = tcp.Scan<int64_t>(input, Op::kMax);
  ASSERT_TRUE(over_tcp.ok()) << over_tcp.status();
  EXPECT_EQ(*over_tcp, *over_socket);
  EXPECT_TRUE(local.IsServing());
  server->reset();
  std::remove(options.unix_socket.c_str());
  rmdir(dir.c_str());
}

TEST(UnixSocketTest, APathItCannotBindStopsTheStart) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.unix_socket = "/nonexistent-primserve-dir/primserve.sock";
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::make_unique<CpuBackend>());
  ASSERT_EQ(server.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(server.status().message()),
              ::testing::HasSubstr(absl::StrCat("unix:", options.unix_socket)));
}

}  // namespace
}  // namespace primserve
