// Hostile callers against a real server (CPU backend, loopback gRPC): the
// cheap ways to make the server hold memory are closed. Echo is off unless
// asked for and then bounded like a primitive's answer; compressed requests
// are refused before they are inflated.
#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/primserve/v1/echo.grpc.pb.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/cpu_backend.h"
#include "server/server.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<PrimServer> StartServer(const ServerOptions& base) {
  ServerOptions options = base;
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

}  // namespace
}  // namespace primserve
