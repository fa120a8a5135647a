// Hostile callers against a real server (CPU backend, loopback gRPC): the
// cheap ways to make the server hold memory are closed. Echo is off unless
// asked for and then bounded like a primitive's answer; compressed requests
// are refused before they are inflated; and a caller flooding expensive
// requests waits behind itself while a light caller stays fast.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "proto/primserve/v1/echo.grpc.pb.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "tests/rpc_api.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<PrimServer> StartServer(const ServerOptions& base) {
  ServerOptions options = base;
  options.rpc_api = TestRpcApi();
  options.address = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::make_unique<CpuBackend>());
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::shared_ptr<grpc::Channel> Connect(int port, grpc::ChannelArguments args = {}) {
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials(), args);
}

grpc::Status CallEcho(v1::Echo::Stub& stub, uint64_t response_bytes) {
  v1::EchoRequest request;
  request.set_response_bytes(response_bytes);
  v1::EchoResponse response;
  grpc::ClientContext context;
  return stub.Echo(&context, request, &response);
}

TEST(HostileTest, EchoIsNotServedByDefault) {
  std::unique_ptr<PrimServer> server = StartServer({});
  ASSERT_NE(server, nullptr);
  auto stub = v1::Echo::NewStub(Connect(server->port()));
  EXPECT_EQ(CallEcho(*stub, 16).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

// The 6-byte request that asked for 2 GiB (and took 4.1 GB of RSS) is refused
// by the same limit that binds a primitive's answer.
TEST(HostileTest, EchoWhenOnIsBoundedByTheResponseLimit) {
  ServerOptions options;
  options.rpc_api = TestRpcApi();
  options.echo = true;
  options.limits.max_response_bytes = uint64_t{1} << 20;
  std::unique_ptr<PrimServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = v1::Echo::NewStub(Connect(server->port()));
  EXPECT_TRUE(CallEcho(*stub, uint64_t{1} << 20).ok());
  const grpc::Status status = CallEcho(*stub, (uint64_t{1} << 31) - 1025);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("--max_response_bytes"));
}

// A Scan of 4M random int32 in a run of zeros: gzip shrinks the zeros about
// 1000-fold, which is the amplification an attacker wants.
v1::ScanRequest CompressibleScan() {
  v1::ScanRequest request;
  request.set_op(v1::SUM);
  request.mutable_input()->set_dtype(v1::INT32);
  std::string data(size_t{4} << 22, '\0');
  std::mt19937 random(std::random_device{}());
  for (size_t i = 0; i < 4096; ++i) data[random() % data.size()] = static_cast<char>(random());
  request.mutable_input()->set_data(std::move(data));
  return request;
}

TEST(HostileTest, CompressedRequestsAreRefused) {
  std::unique_ptr<PrimServer> server = StartServer({});
  ASSERT_NE(server, nullptr);
  const v1::ScanRequest request = CompressibleScan();
  for (grpc_compression_algorithm algorithm : {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    grpc::ChannelArguments args;
    args.SetCompressionAlgorithm(algorithm);
    auto stub = v1::Primitives::NewStub(Connect(server->port(), args));
    v1::ScanResponse response;
    grpc::ClientContext context;
    const grpc::Status status = stub->Scan(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << algorithm;
    EXPECT_THAT(status.error_message(), HasSubstr("disabled")) << algorithm;
  }
  // Uncompressed, the same request is answered.
  auto stub = v1::Primitives::NewStub(Connect(server->port()));
  v1::ScanResponse response;
  grpc::ClientContext context;
  const grpc::Status status = stub->Scan(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.output().data().size(), request.input().data().size());
}

bool Ipv6LoopbackWorks() {
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return ok;
}

// AggregateByKey into 2^log2_keys float64 groups from one random pair: 31
// bytes of request, 8 x 2^log2_keys bytes of answer (2^22: 32 MiB and tens of
// milliseconds of work; the flood used 2^24).
v1::AggregateByKeyRequest HeavyRequest(int log2_keys = 22) {
  v1::AggregateByKeyRequest request;
  request.set_op(v1::SUM);
  request.set_num_keys(uint64_t{1} << log2_keys);
  std::mt19937 random(std::random_device{}());
  const int32_t key = static_cast<int32_t>(random() % request.num_keys());
  const double value = static_cast<double>(random() % 1000);
  request.mutable_keys()->set_dtype(v1::INT32);
  request.mutable_keys()->set_data(std::string(reinterpret_cast<const char*>(&key), 4));
  request.mutable_values()->set_dtype(v1::FLOAT64);
  request.mutable_values()->set_data(std::string(reinterpret_cast<const char*>(&value), 8));
  return request;
}

struct LightFigures {
  absl::Duration p50, p99, max;
  // The p99 a caller sending one request a millisecond would see: a call
  // that took L also counts L - 1 ms, L - 2 ms, ... for the calls that would
  // have waited behind it (coordinated omission corrected), so that one
  // long stall weighs by its length rather than as one call among many.
  absl::Duration paced_p99;
  int calls = 0;
  int failed = 0;
  int heavy_done = 0;
};

// One expensive call of the heavy caller, ended at `deadline`; true if it
// was answered.
using HeavyCall = std::function<bool(v1::Primitives::Stub&, absl::Time deadline)>;

// AggregateByKeys of HeavyRequest(log2_keys).
HeavyCall HeavyAggregate(int log2_keys) {
  auto request = std::make_shared<const v1::AggregateByKeyRequest>(HeavyRequest(log2_keys));
  return [request](v1::Primitives::Stub& stub, absl::Time deadline) {
    v1::AggregateByKeyResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    return stub.AggregateByKey(&context, *request, &response).ok();
  };
}

// A heavy caller keeps `heavy_calls` expensive requests outstanding from
// 127.0.0.1 while a light caller on [::1] sends 100-element Reduces one after
// another; returns the light caller's latencies.
LightFigures LightBesideHeavy(ServerOptions options, int heavy_calls,
                              const HeavyCall& heavy_call) {
  options.address = "[::]:0";
  options.rpc_api = TestRpcApi();
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::make_unique<CpuBackend>());
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  const int port = (*server)->port();
  auto heavy_stub = v1::Primitives::NewStub(
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(),
                                [] {
                                  grpc::ChannelArguments args;
                                  args.SetMaxReceiveMessageSize(-1);
                                  return args;
                                }()));
  auto light_stub = v1::Primitives::NewStub(grpc::CreateChannel(
      absl::StrCat("[::1]:", port), grpc::InsecureChannelCredentials()));

  // The heavy calls end with the light caller's window, so that what the
  // flood left queued does not outlast the measurement.
  const absl::Time light_start =
      absl::Now() + (heavy_calls > 0 ? absl::Seconds(1) : absl::ZeroDuration());
  const absl::Time end = light_start + absl::Seconds(3);
  std::atomic<int> heavy_done{0};
  std::vector<std::thread> heavy;
  for (int i = 0; i < heavy_calls; ++i) {
    heavy.emplace_back([&] {
      while (absl::Now() < end) {
        if (heavy_call(*heavy_stub, end)) heavy_done.fetch_add(1);
      }
    });
  }
  absl::SleepFor(light_start - absl::Now());  // the flood is queued

  v1::ReduceRequest light;
  light.set_op(v1::SUM);
  std::vector<int32_t> values(100);
  std::mt19937 random(std::random_device{}());
  int64_t sum = 0;
  for (int32_t& v : values) sum += v = static_cast<int32_t>(random() % 1000);
  light.mutable_input()->set_dtype(v1::INT32);
  light.mutable_input()->set_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
  constexpr absl::Duration kPace = absl::Milliseconds(1);
  std::vector<absl::Duration> latencies, paced;
  LightFigures figures;
  while (absl::Now() < end) {
    v1::ReduceResponse response;
    grpc::ClientContext context;
    // A light call stuck behind the flood fails here rather than holding
    // the test.
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    const absl::Time start = absl::Now();
    const grpc::Status status = light_stub->Reduce(&context, light, &response);
    const absl::Duration latency = absl::Now() - start;
    latencies.push_back(latency);
    for (absl::Duration d = latency; d > absl::ZeroDuration(); d -= kPace) paced.push_back(d);
    if (!status.ok()) {
      ++figures.failed;
      continue;
    }
    int32_t got = 0;
    std::memcpy(&got, response.values().data().data(), 4);
    EXPECT_EQ(got, sum);
  }
  for (std::thread& t : heavy) t.join();
  std::sort(latencies.begin(), latencies.end());
  std::sort(paced.begin(), paced.end());
  figures.calls = static_cast<int>(latencies.size());
  figures.p50 = latencies[latencies.size() / 2];
  figures.p99 = latencies[latencies.size() * 99 / 100];
  figures.max = latencies.back();
  figures.paced_p99 = paced[paced.size() * 99 / 100];
  figures.heavy_done = heavy_done.load();
  return figures;
}

void Print(const char* name, const LightFigures& f) {
  std::printf(
      "%s: light p50 %s p99 %s max %s, paced p99 %s, over %d calls (%d failed); heavy "
      "answered %d\n",
      name, absl::FormatDuration(f.p50).c_str(), absl::FormatDuration(f.p99).c_str(),
      absl::FormatDuration(f.max).c_str(), absl::FormatDuration(f.paced_p99).c_str(), f.calls,
      f.failed, f.heavy_done);
}

// The light caller's p99 stays under 50 ms while the heavy one has 16 requests
// of 32 MiB answers outstanding (each caller may run one such request at a
// time here, so the heavy one holds one of the 4 batch threads and one of the
// machine's 2 cores). The same flood with no per-caller bound is printed
// beside it for comparison.
TEST(HostileTest, ALightCallerStaysFastBesideAHeavyOne) {
  if (!Ipv6LoopbackWorks()) GTEST_SKIP() << "two loopback peers need ::1";
  AdmissionOptions fair;
  const uint64_t heavy_cost = (uint64_t{8} << 22) + 4096 + 12;
  fair.max_peer_in_flight_bytes = heavy_cost;
  AdmissionOptions unbounded;
  unbounded.max_peer_in_flight_bytes = UINT64_MAX / 2;
  unbounded.max_in_flight_bytes = UINT64_MAX / 2;
  ServerOptions options;
  options.rpc_api = TestRpcApi();
  options.batcher.num_threads = 4;
  options.admission = unbounded;
  const LightFigures before = LightBesideHeavy(options, 16, HeavyAggregate(22));
  options.admission = fair;
  const LightFigures after = LightBesideHeavy(options, 16, HeavyAggregate(22));
  Print("no per-caller bound", before);
  Print("fair admission", after);
  EXPECT_LT(after.p99, absl::Milliseconds(50));
  EXPECT_GT(after.heavy_done, 0);
}

// Fair by default (issue 27): with every option at its default, another
// caller's 16 concurrent AggregateByKeys of 64 MiB answers keep the light
// caller's paced p99 (LightFigures) within 10x its paced p99 alone, or 100 ms
// on this loaded 2-core machine. The old per-caller default (1 GiB: all 16
// in flight, their answers made and sent at once) is printed beside it; on
// the 2-core CI machine it fails the same bound (perf/runs/2026-11-28-cpu-
// hostile/README.md has the figures of both). The 16 MiB
// Scans no longer starve anyone since the CPU backend scans on every core,
// and a light caller's plain p99 hides a stall of half a second among
// thousands of fast calls: hence the larger answers and the paced p99.
TEST(HostileTest, TheDefaultsKeepALightCallerFast) {
  if (!Ipv6LoopbackWorks()) GTEST_SKIP() << "two loopback peers need ::1";
  const ServerOptions defaults;
  const HeavyCall heavy = HeavyAggregate(23);
  const LightFigures idle = LightBesideHeavy(defaults, 0, heavy);
  ServerOptions old_defaults;
  old_defaults.admission.max_peer_in_flight_bytes = uint64_t{1} << 30;
  const LightFigures before = LightBesideHeavy(old_defaults, 16, heavy);
  const LightFigures after = LightBesideHeavy(defaults, 16, heavy);
  Print("alone", idle);
  Print("old defaults (1 GiB per caller)", before);
  Print("defaults", after);
  EXPECT_LT(after.paced_p99, std::max(10 * idle.paced_p99, absl::Milliseconds(100)));
  EXPECT_EQ(after.failed, 0);
  EXPECT_GT(after.heavy_done, 0);
}

// Behind a proxy every caller shares its address; with caller_header the
// header the proxy sets tells them apart. Caller A's three heavy requests at
// once: one runs, one waits, the third is refused (one waiting per caller
// here); caller B, on the same connection, is answered meanwhile.
TEST(HostileTest, TheCallerHeaderSeparatesCallersSharingAnAddress) {
  ServerOptions options;
  options.rpc_api = TestRpcApi();
  options.caller_header = "x-forwarded-for";
  options.admission.max_peer_in_flight_bytes = 1;  // one running per caller
  options.admission.max_peer_queued_tasks = 1;
  std::unique_ptr<PrimServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = v1::Primitives::NewStub(Connect(server->port()));
  const v1::AggregateByKeyRequest heavy = HeavyRequest(24);
  std::vector<grpc::Status> a(3);
  std::vector<std::thread> callers;
  for (grpc::Status& status : a) {
    callers.emplace_back([&] {
      v1::AggregateByKeyResponse response;
      grpc::ClientContext context;
      context.AddMetadata("x-forwarded-for", "10.0.0.1");
      status = stub->AggregateByKey(&context, heavy, &response);
    });
  }
  absl::SleepFor(absl::Milliseconds(100));
  v1::ReduceRequest light;
  light.set_op(v1::SUM);
  light.mutable_input()->set_dtype(v1::INT32);
  light.mutable_input()->set_data(std::string("\x07\0\0\0\x05\0\0\0", 8));
  v1::ReduceResponse response;
  grpc::ClientContext context;
  context.AddMetadata("x-forwarded-for", "10.0.0.2");
  const grpc::Status b = stub->Reduce(&context, light, &response);
  for (std::thread& t : callers) t.join();
  EXPECT_TRUE(b.ok()) << b.error_message();
  int refused = 0;
  for (const grpc::Status& status : a) {
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      EXPECT_THAT(status.error_message(), HasSubstr("requests waiting for their turn"));
      ++refused;
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
  }
  EXPECT_EQ(refused, 1);
}

}  // namespace
}  // namespace primserve
