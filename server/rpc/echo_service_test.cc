// The Echo service over a real loopback gRPC connection.
#include "server/rpc/echo_service.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"

namespace primserve {
namespace {

class EchoServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.SetMaxReceiveMessageSize(-1);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    stub_ = v1::Echo::NewStub(grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                                        grpc::InsecureChannelCredentials(), args));
  }
  void TearDown() override { server_->Shutdown(); }

  grpc::Status Echo(const v1::EchoRequest& request, v1::EchoResponse* response) {
    grpc::ClientContext context;
    return stub_->Echo(&context, request, response);
  }

  // Above the 5 MB payload test, which must pass gRPC's 4 MB default.
  static constexpr uint64_t kMaxResponseBytes = uint64_t{8} << 20;
  EchoService service_{kMaxResponseBytes};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Echo::Stub> stub_;
};

v1::Array Int32Array(const std::string& data) {
  v1::Array array;
  array.set_dtype(v1::INT32);
  array.set_data(data);
  return array;
}

// Bytes that differ from one position to the next, so a shuffle would show.
std::string Pattern(size_t size, char first) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(first + i * 7);
  return bytes;
}

// Larger than gRPC's default 4 MB message limit, which both ends lift.
TEST_F(EchoServiceTest, ReturnsThePayloadByDefault) {
  v1::EchoRequest request;
  const std::string data = Pattern(5 << 20, 1);
  *request.add_arrays() = Int32Array(data);
  v1::EchoResponse response;
  ASSERT_TRUE(Echo(request, &response).ok());
  EXPECT_EQ(response.payload(), data);
}

TEST_F(EchoServiceTest, ConcatenatesSeveralArrays) {
  v1::EchoRequest request;
  *request.add_arrays() = Int32Array(Pattern(8, 1));
  *request.add_arrays() = Int32Array(Pattern(12, 50));
  v1::EchoResponse response;
  ASSERT_TRUE(Echo(request, &response).ok());
  EXPECT_EQ(response.payload(), Pattern(8, 1) + Pattern(12, 50));
}

TEST_F(EchoServiceTest, CutsOrPadsToResponseBytes) {
  v1::EchoRequest request;
  *request.add_arrays() = Int32Array(Pattern(8, 1));
  *request.add_arrays() = Int32Array(Pattern(12, 50));
  request.set_response_bytes(10);
  v1::EchoResponse response;
  ASSERT_TRUE(Echo(request, &response).ok());
  EXPECT_EQ(response.payload(), Pattern(8, 1) + Pattern(2, 50));

  request.set_response_bytes(30);
  ASSERT_TRUE(Echo(request, &response).ok());
  EXPECT_EQ(response.payload(), Pattern(8, 1) + Pattern(12, 50) + std::string(10, '\0'));

  request.clear_arrays();
  request.set_response_bytes(0);
  ASSERT_TRUE(Echo(request, &response).ok());
  EXPECT_EQ(response.payload(), "");
}

// A 6-byte request must not buy a 2 GiB answer: the server's response limit
// binds Echo as it binds a primitive.
TEST_F(EchoServiceTest, RefusesResponsesOverTheResponseLimit) {
  v1::EchoRequest request;
  request.set_response_bytes(kMaxResponseBytes);
  v1::EchoResponse response;
  ASSERT_TRUE(Echo(request, &response).ok());
  EXPECT_EQ(response.payload().size(), kMaxResponseBytes);

  for (uint64_t over : {kMaxResponseBytes + 1, (uint64_t{1} << 31) - 1025}) {
    request.set_response_bytes(over);
    const grpc::Status status = Echo(request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over;
    EXPECT_NE(status.error_message().find("--max_response_bytes"), std::string::npos)
        << status.error_message();
  }
}

// The payload a request carries counts too when no size is asked for.
TEST_F(EchoServiceTest, RefusesAnEchoedPayloadOverTheResponseLimit) {
  v1::EchoRequest request;
  *request.add_arrays() = Int32Array(Pattern(kMaxResponseBytes + 4, 3));
  v1::EchoResponse response;
  EXPECT_EQ(Echo(request, &response).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

// EchoStream answers each message as Echo would, in order; a message over
// the limit ends the stream with RESOURCE_EXHAUSTED.
TEST_F(EchoServiceTest, EchoStreamAnswersEachMessageInOrder) {
  grpc::ClientContext context;
  auto stream = stub_->EchoStream(&context);
  std::vector<std::string> expected;
  for (int i = 0; i < 6; ++i) {
    v1::EchoRequest request;
    const std::string data = Pattern(size_t{1} << (2 * i + 4), static_cast<char>(i));
    *request.add_arrays() = Int32Array(data);
    *request.add_arrays() = Int32Array(Pattern(12, 'a'));
    std::string answer = data + Pattern(12, 'a');
    if (i % 2 == 1) {
      request.set_response_bytes(answer.size() / 2 + 4 * i);
      answer.resize(request.response_bytes());
    }
    ASSERT_TRUE(stream->Write(request));
    v1::EchoResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.payload(), answer) << "message " << i;
  }
  v1::EchoRequest over;
  over.set_response_bytes(kMaxResponseBytes + 1);
  ASSERT_TRUE(stream->Write(over));
  v1::EchoResponse response;
  EXPECT_FALSE(stream->Read(&response));
  stream->WritesDone();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // The service goes on.
  v1::EchoRequest small;
  *small.add_arrays() = Int32Array(Pattern(8, 'z'));
  ASSERT_TRUE(Echo(small, &response).ok());
  EXPECT_EQ(response.payload(), Pattern(8, 'z'));
}

}  // namespace
}  // namespace primserve
