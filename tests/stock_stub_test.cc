// The unary RPCs and Echo take raw buffers (wire/): requests are parsed with
// their arrays left in gRPC's slices and answers are framed around the
// memory that holds them. A stock client must not see a difference: through
// the generated protobuf stub, every RPC's answer equals the one the typed
// path (ToOperation, the CPU backend, ToResponse) gives for the same
// request, field for field, for arrays small enough to be copied into the
// framing and large enough to span many slices.
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/primserve/v1/echo.grpc.pb.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/cpu/cpu_backend.h"
#include "server/rpc/request_validation.h"
#include "server/rpc/response_framing.h"
#include "server/server.h"
#include "tests/random_array.h"

namespace primserve {
namespace {

using testing::RandomArray;

using google::protobuf::util::MessageDifferencer;

class StockStubTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.echo = true;
    options.max_receive_message_bytes = 256 << 20;
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::make_unique<CpuBackend>());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    channel_ = new std::shared_ptr<grpc::Channel>(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials(), args));
  }
  static void TearDownTestSuite() {
    delete channel_;
    delete server_;
  }

  // The answer the typed path gives: the oracle for the raw one.
  template <typename Request, typename Response>
  static Response Expected(const Request& request) {
    absl::StatusOr<Operation> operation = ToOperation(request, RequestLimits{});
    EXPECT_TRUE(operation.ok()) << operation.status();
    Response response;
    if (!operation.ok()) return response;
    auto task = std::make_unique<Task>();
    task->operation = *std::move(operation);
    absl::Status status = absl::UnknownError("not run");
    task->done = [&](absl::StatusOr<Result> result) {
      status = result.ok() ? ToResponse(*std::move(result), &response) : result.status();
    };
    std::vector<std::unique_ptr<Task>> batch;
    batch.push_back(std::move(task));
    CpuBackend().Execute(std::move(batch));
    EXPECT_TRUE(status.ok()) << status;
    return response;
  }

  template <typename Request, typename Response, typename Method>
  static void ExpectSameAnswer(Method method, const Request& request) {
    auto stub = v1::Primitives::NewStub(*channel_);
    grpc::ClientContext context;
    Response response;
    const grpc::Status status = ((*stub).*method)(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const Response expected = Expected<Request, Response>(request);
    EXPECT_TRUE(MessageDifferencer::Equals(response, expected))
        << request.GetTypeName() << " of " << request.ByteSizeLong() << " bytes";
  }

  static PrimServer* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
};

PrimServer* StockStubTest::server_ = nullptr;
std::shared_ptr<grpc::Channel>* StockStubTest::channel_ = nullptr;

// 0 and 1 elements, one below and one above the framing's slice threshold,
// and one spanning many of gRPC's receive slices.
const std::vector<size_t> kSizes = {0, 1, 1001, 70001, 3000017};

TEST_F(StockStubTest, EveryUnaryRpcAnswersAsTheTypedPathDoes) {
  std::mt19937_64 rng(20261125);
  for (size_t n : kSizes) {
    for (v1::DType dtype : {v1::INT32, v1::INT64, v1::FLOAT32, v1::FLOAT64}) {
      SCOPED_TRACE(absl::StrCat("n = ", n, ", dtype ", dtype));
      v1::ScanRequest scan;
      *scan.mutable_input() = RandomArray(rng, dtype, n, 7);
      scan.set_op(v1::SUM);
      scan.set_exclusive(n % 2 == 1);
      ExpectSameAnswer<v1::ScanRequest, v1::ScanResponse>(&v1::Primitives::Stub::Scan, scan);

      v1::ReduceRequest reduce;
      *reduce.mutable_input() = RandomArray(rng, dtype, n, 7);
      reduce.set_op(v1::ARGMAX);
      reduce.add_segment_offsets(0);
      reduce.add_segment_offsets(n / 3);
      reduce.add_segment_offsets(n);
      ExpectSameAnswer<v1::ReduceRequest, v1::ReduceResponse>(&v1::Primitives::Stub::Reduce,
                                                              reduce);

      v1::SelectRequest select;
      *select.mutable_input() = RandomArray(rng, dtype, n, 7);
      *select.mutable_flags() = RandomArray(rng, v1::INT32, n, 7);
      select.set_output(v1::SelectRequest::VALUES_AND_INDICES);
      select.set_partition(true);
      ExpectSameAnswer<v1::SelectRequest, v1::SelectResponse>(&v1::Primitives::Stub::Select,
                                                              select);

      v1::UniqueRequest unique;
      *unique.mutable_input() = RandomArray(rng, dtype, n, 7);
      ExpectSameAnswer<v1::UniqueRequest, v1::UniqueResponse>(&v1::Primitives::Stub::Unique,
                                                              unique);

      v1::RunLengthEncodeRequest rle;
      *rle.mutable_input() = RandomArray(rng, dtype, n, 7);
      ExpectSameAnswer<v1::RunLengthEncodeRequest, v1::RunLengthEncodeResponse>(
          &v1::Primitives::Stub::RunLengthEncode, rle);

      v1::ReduceByKeyRequest by_key;
      *by_key.mutable_keys() = RandomArray(rng, v1::INT64, n, 7);
      *by_key.mutable_values() = RandomArray(rng, dtype, n, 7);
      by_key.set_op(v1::MIN);
      ExpectSameAnswer<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>(
          &v1::Primitives::Stub::ReduceByKey, by_key);

      v1::AggregateByKeyRequest aggregate;
      aggregate.mutable_keys()->set_dtype(v1::UINT32);
      std::vector<uint32_t> keys(n);
      for (uint32_t& key : keys) key = rng() % 9;
      aggregate.mutable_keys()->set_data(reinterpret_cast<const char*>(keys.data()), n * 4);
      *aggregate.mutable_values() = RandomArray(rng, dtype, n, 7);
      aggregate.set_op(v1::MAX);
      aggregate.set_num_keys(9);
      ExpectSameAnswer<v1::AggregateByKeyRequest, v1::AggregateByKeyResponse>(
          &v1::Primitives::Stub::AggregateByKey, aggregate);
    }
  }
}

TEST_F(StockStubTest, EchoSendsTheReceivedBytesBackCutOrPadded) {
  std::mt19937_64 rng(7);
  auto stub = v1::Echo::NewStub(*channel_);
  for (size_t n : kSizes) {
    v1::EchoRequest request;
    std::string sent;
    for (int i = 0; i < 3; ++i) {
      *request.add_arrays() = RandomArray(rng, v1::INT64, n + i, 7);
      sent += request.arrays(i).data();
    }
    for (std::optional<uint64_t> size :
         {std::optional<uint64_t>(), std::optional<uint64_t>(sent.size() / 2),
          std::optional<uint64_t>(sent.size() + 12345)}) {
      if (size.has_value()) {
        request.set_response_bytes(*size);
      } else {
        request.clear_response_bytes();
      }
      grpc::ClientContext context;
      v1::EchoResponse response;
      const grpc::Status status = stub->Echo(&context, request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      std::string expected = sent;
      expected.resize(size.value_or(sent.size()), '\0');
      EXPECT_EQ(response.payload(), expected) << "n = " << n;
    }
  }
}

TEST_F(StockStubTest, BytesThatAreNoRequestAreRefusedAndTheNextCallIsAnswered) {
  grpc::GenericStub generic(*channel_);
  // A length past the end, a truncated varint, and an end-group tag.
  for (const std::string& bytes : {std::string("\x0a\x7f\x08\x01", 4), std::string("\x10\xff", 2),
                                   std::string("\x0c", 1)}) {
    grpc::ClientContext context;
    grpc::Slice slice(bytes);
    const grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    absl::Notification done;
    grpc::Status status;
    generic.UnaryCall(&context, "/primserve.v1.Primitives/Scan", grpc::StubOptions(), &request,
                      &response, [&](grpc::Status s) {
                        status = std::move(s);
                        done.Notify();
                      });
    done.WaitForNotification();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find("not a valid primserve.v1.ScanRequest"),
              std::string::npos);
  }
  v1::ScanRequest scan;
  scan.mutable_input()->set_dtype(v1::INT64);
  const int64_t values[] = {4, 5};
  scan.mutable_input()->set_data(reinterpret_cast<const char*>(values), sizeof(values));
  scan.set_op(v1::SUM);
  ExpectSameAnswer<v1::ScanRequest, v1::ScanResponse>(&v1::Primitives::Stub::Scan, scan);
}

}  // namespace
}  // namespace primserve
