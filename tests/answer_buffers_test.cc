// Large unary answers sent from pinned answer buffers (Task::answers,
// server/engine/pinned_payloads.h), as the CUDA backend sends them, here with a
// backend that runs the CPU reference and moves each large answer into an
// answer buffer the way the CUDA runners copy one there from the device, and
// that records what it pins as cudaHostRegister would
// (tests/answer_holding_backend.h). A stock client sees
// the answers the typed path gives, byte for byte; the buffers are reused,
// back in their pool once gRPC has sent them, and a pool with no room left
// makes answers go through strings as before, with no failure. A large
// scan's input left pending in gRPC's buffers (DeferredInputs) reaches the
// backend intact however it fills it.
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/cpu/cpu_backend.h"
#include "server/engine/pinned_payloads.h"
#include "server/rpc/request_validation.h"
#include "server/rpc/response_framing.h"
#include "server/server.h"
#include "tests/answer_holding_backend.h"
#include "tests/random_array.h"

namespace primserve {
namespace {

using testing::RandomArray;

using google::protobuf::util::MessageDifferencer;

constexpr size_t kMiB = size_t{1} << 20;

struct Served {
  std::unique_ptr<PrimServer> server;
  AnswerHoldingBackend* backend = nullptr;
  std::unique_ptr<v1::Primitives::Stub> stub;
};

Served Serve(size_t pinned_answer_bytes, size_t min_pending_bytes = 0) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.max_receive_message_bytes = 256 << 20;
  options.pinned_answer_bytes = pinned_answer_bytes;
  auto backend = std::make_unique<AnswerHoldingBackend>(min_pending_bytes);
  Served served;
  served.backend = backend.get();
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::move(backend));
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return served;
  served.server = *std::move(server);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  served.stub = v1::Primitives::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", served.server->port()), grpc::InsecureChannelCredentials(),
      args));
  return served;
}

// The answer the typed path gives (ToOperation, the CPU backend,
// ToResponse): the oracle.
template <typename Request, typename Response>
Response Expected(const Request& request) {
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
void ExpectSameAnswer(Served& served, Method method, const Request& request) {
  grpc::ClientContext context;
  Response response;
  const grpc::Status status = ((*served.stub).*method)(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const Response expected = Expected<Request, Response>(request);
  EXPECT_EQ(response.SerializeAsString(), expected.SerializeAsString())
      << request.GetTypeName();
  EXPECT_TRUE(MessageDifferencer::Equals(response, expected)) << request.GetTypeName();
}

v1::ScanRequest LargeScan(std::mt19937_64& rng, size_t n) {
  v1::ScanRequest scan;
  *scan.mutable_input() = RandomArray(rng, v1::INT32, n, 1000);
  scan.set_op(v1::SUM);
  return scan;
}

// 2^21 + 3 elements: answers of 8 to 16 MB, each above the pool's threshold.
constexpr size_t kN = (size_t{1} << 21) + 3;

TEST(AnswerBuffersTest, EveryLargeAnswerIsTheTypedPathsByteForByte) {
  Served served = Serve(size_t{1} << 30);
  ASSERT_NE(served.server, nullptr);
  std::mt19937_64 rng(20261126);
  for (v1::DType dtype : {v1::INT32, v1::FLOAT64}) {
    SCOPED_TRACE(absl::StrCat("dtype ", dtype));
    v1::ScanRequest scan = LargeScan(rng, kN);
    *scan.mutable_input() = RandomArray(rng, dtype, kN, 1000);
    scan.set_exclusive(true);
    ExpectSameAnswer<v1::ScanRequest, v1::ScanResponse>(served, &v1::Primitives::Stub::Scan, scan);

    v1::ReduceRequest reduce;
    *reduce.mutable_input() = RandomArray(rng, dtype, kN, 1000);
    reduce.set_op(v1::ARGMIN);
    for (size_t i = 0; i < kN; i += 4) reduce.add_segment_offsets(i);
    ExpectSameAnswer<v1::ReduceRequest, v1::ReduceResponse>(served,
                                                            &v1::Primitives::Stub::Reduce, reduce);

    v1::SelectRequest select;
    *select.mutable_input() = RandomArray(rng, dtype, kN, 1000);
    select.mutable_predicate()->set_kind(v1::Predicate::GT);
    select.mutable_predicate()->mutable_operand()->set_int_value(-400);
    select.set_output(v1::SelectRequest::VALUES_AND_INDICES);
    ExpectSameAnswer<v1::SelectRequest, v1::SelectResponse>(served,
                                                            &v1::Primitives::Stub::Select, select);

    v1::UniqueRequest unique;
    *unique.mutable_input() = RandomArray(rng, dtype, kN, 3);
    ExpectSameAnswer<v1::UniqueRequest, v1::UniqueResponse>(served,
                                                            &v1::Primitives::Stub::Unique, unique);

    v1::RunLengthEncodeRequest rle;
    *rle.mutable_input() = RandomArray(rng, dtype, kN, 3);
    ExpectSameAnswer<v1::RunLengthEncodeRequest, v1::RunLengthEncodeResponse>(
        served, &v1::Primitives::Stub::RunLengthEncode, rle);

    v1::ReduceByKeyRequest by_key;
    *by_key.mutable_keys() = RandomArray(rng, v1::INT64, kN, 3);
    *by_key.mutable_values() = RandomArray(rng, dtype, kN, 1000);
    by_key.set_op(v1::SUM);
    ExpectSameAnswer<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>(
        served, &v1::Primitives::Stub::ReduceByKey, by_key);

    v1::AggregateByKeyRequest aggregate;
    *aggregate.mutable_keys() = RandomArray(rng, v1::INT32, kN, 1000);
    for (size_t i = 0; i < kN; ++i) {  // keys in [0, num_keys)
      int32_t key;
      std::memcpy(&key, &aggregate.keys().data()[i * 4], 4);
      key += 500;
      std::memcpy(&(*aggregate.mutable_keys()->mutable_data())[i * 4], &key, 4);
    }
    *aggregate.mutable_values() = RandomArray(rng, dtype, kN, 1000);
    aggregate.set_op(v1::MAX);
    aggregate.set_num_keys(kN);  // a large answer: one value per key
    ExpectSameAnswer<v1::AggregateByKeyRequest, v1::AggregateByKeyResponse>(
        served, &v1::Primitives::Stub::AggregateByKey, aggregate);
  }
  // Every array above held: scan, reduce (values, indices), select (values,
  // indices), unique, RLE (values, lengths), reduce-by-key (keys, values),
  // aggregate-by-key: 11 per dtype.
  EXPECT_EQ(served.backend->held(), 22);
  EXPECT_EQ(served.backend->not_held(), 0);
  EXPECT_TRUE(served.backend->AllReleased(absl::Seconds(10)));
}

TEST(AnswerBuffersTest, BuffersAreReusedAndBackInThePoolOnceSent) {
  Served served = Serve(size_t{1} << 30);
  ASSERT_NE(served.server, nullptr);
  std::mt19937_64 rng(11);
  int pins_after_first = 0;
  for (int call = 0; call < 6; ++call) {
    ExpectSameAnswer<v1::ScanRequest, v1::ScanResponse>(served, &v1::Primitives::Stub::Scan,
                                                        LargeScan(rng, kN));
    // Released once gRPC has sent it: the next call finds it free.
    ASSERT_TRUE(served.backend->AllReleased(absl::Seconds(10))) << "call " << call;
    if (call == 0) pins_after_first = served.backend->pins();
  }
  EXPECT_EQ(served.backend->held(), 6);
  // The request's payload buffer and the answer's, each pinned once by the
  // first call and reused by every later one.
  EXPECT_EQ(pins_after_first, 2);
  EXPECT_EQ(served.backend->pins(), 2);
}

TEST(AnswerBuffersTest, AnExhaustedPoolSendsAnswersAsBeforeAndTheCallSucceeds) {
  // Room for the first answer of 8 MB only while nothing else holds it.
  Served served = Serve(10 * kMiB);
  ASSERT_NE(served.server, nullptr);
  std::mt19937_64 rng(12);
  // Two answers in one response: the second finds the pool spent.
  v1::ReduceByKeyRequest by_key;
  *by_key.mutable_keys() = RandomArray(rng, v1::INT32, kN, 1 << 20);
  *by_key.mutable_values() = RandomArray(rng, v1::INT32, kN, 1000);
  by_key.set_op(v1::MAX);
  ExpectSameAnswer<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>(
      served, &v1::Primitives::Stub::ReduceByKey, by_key);
  EXPECT_EQ(served.backend->held(), 1);
  EXPECT_EQ(served.backend->not_held(), 1);
  // Larger than the whole pool: through a string, answered all the same.
  ExpectSameAnswer<v1::ScanRequest, v1::ScanResponse>(served, &v1::Primitives::Stub::Scan,
                                                      LargeScan(rng, 3 * kN));
  EXPECT_EQ(served.backend->not_held(), 2);
  EXPECT_TRUE(served.backend->AllReleased(absl::Seconds(10)));
}

TEST(AnswerBuffersTest, WithoutAPoolAnswersGoAsBefore) {
  Served served = Serve(0);
  ASSERT_NE(served.server, nullptr);
  std::mt19937_64 rng(13);
  ExpectSameAnswer<v1::ScanRequest, v1::ScanResponse>(served, &v1::Primitives::Stub::Scan,
                                                      LargeScan(rng, kN));
  EXPECT_EQ(served.backend->held(), 0);
  EXPECT_EQ(served.backend->not_held(), 1);
  EXPECT_EQ(served.backend->pins(), 1);  // the request's payload only
}

TEST(AnswerBuffersTest, APendingScanInputIsCopiedOnceRangeByRangeAsReceived) {
  Served served = Serve(size_t{1} << 30, /*min_pending_bytes=*/kMiB);
  ASSERT_NE(served.server, nullptr);
  std::mt19937_64 rng(14);
  for (size_t n : {kN, 3 * kN + 1}) {
    ExpectSameAnswer<v1::ScanRequest, v1::ScanResponse>(served, &v1::Primitives::Stub::Scan,
                                                        LargeScan(rng, n));
  }
  // Below the backend's threshold, and another RPC: contiguous at once.
  ExpectSameAnswer<v1::ScanRequest, v1::ScanResponse>(served, &v1::Primitives::Stub::Scan,
                                                      LargeScan(rng, 1000));
  v1::UniqueRequest unique;
  *unique.mutable_input() = RandomArray(rng, v1::INT32, kN, 3);
  ExpectSameAnswer<v1::UniqueRequest, v1::UniqueResponse>(served, &v1::Primitives::Stub::Unique,
                                                          unique);
  EXPECT_EQ(served.backend->pending(), 2);
}

}  // namespace
}  // namespace primserve
