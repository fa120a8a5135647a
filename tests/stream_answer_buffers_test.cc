// Streamed and multiplexed answers in answer buffers (Task::answers), with a
// CPU backend that moves each large answer into one as the CUDA backend
// writes it there (tests/answer_holding_backend.h): every streaming RPC,
// sent in random pieces (empty ones and pieces with answers of a few MiB
// among them), has its pieces' answers stitched where they are held and
// sent from there, and they join into the unary answer for the whole array
// byte for byte; the buffers are back in their pool once a stream has ended,
// been cancelled or failed (the pool's gauge of bytes in use at 0); a pool with no room left makes answers go
// through strings, with the same answers; a Multiplex request's large answer
// is sent from its buffer too.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/engine/metrics.h"
#include "server/server.h"
#include "tests/answer_holding_backend.h"
#include "tests/random_array.h"
#include "tests/stream_calls.h"

namespace primserve {
namespace {

using S = v1::Primitives::Stub;
using testing::RandomArray;

constexpr size_t kMiB = size_t{1} << 20;

// Random piece sizes adding up to n: empty pieces, small ones (answers as
// strings) and ones of up to `large` elements (answers of MiBs, held).
std::vector<size_t> Pieces(std::mt19937_64& rng, size_t n, size_t large) {
  std::vector<size_t> sizes = {0};
  for (size_t left = n; left > 0;) {
    const int kind = static_cast<int>(rng() % 4);
    const size_t size = kind == 0 ? 0 : kind == 1 ? 1 + rng() % 1000 : large / 2 + rng() % large;
    sizes.push_back(std::min(size, left));
    left -= sizes.back();
  }
  sizes.push_back(0);
  return sizes;
}

class StreamAnswerBuffersTest : public ::testing::Test {
 protected:
  void Serve(size_t pinned_answer_bytes) {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.max_receive_message_bytes = 256 << 20;
    options.pinned_answer_bytes = pinned_answer_bytes;
    options.metrics = &metrics_;
    auto backend = std::make_unique<AnswerHoldingBackend>();
    backend_ = backend.get();
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::move(backend));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    stub_ = v1::Primitives::NewStub(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                  grpc::InsecureChannelCredentials(), args));
  }

  // `whole` through `stream` in random pieces answers as the unary call
  // does; `large` elements make a piece whose answers are held.
  template <typename Stream, typename Call, typename Request>
  void ExpectBidiEqualsUnary(Stream stream, Call unary, const Request& whole, size_t n,
                             size_t large) {
    testing::ExpectBidiEqualsUnary(*stub_, stream, unary, whole, Pieces(rng_, n, large), rng_);
  }
  template <typename Stream, typename Call, typename Request>
  void ExpectClientStreamEqualsUnary(Stream stream, Call unary, const Request& whole, size_t n,
                                     size_t large) {
    testing::ExpectClientStreamEqualsUnary(*stub_, stream, unary, whole, Pieces(rng_, n, large),
                                           rng_);
  }

  // Every answer buffer handed out is back in its pool, as the pool's
  // gauges say too (primserve_pinned_host_bytes{pool="answers"}).
  void ExpectAllReleased() {
    EXPECT_TRUE(backend_->AllReleased(absl::Seconds(10)));
    const HostPoolGauges answers = metrics_.PinnedHostPool("answers");
    EXPECT_EQ(answers.in_use->Value(), 0);
    EXPECT_GT(answers.pinned->Value(), 0);
  }

  std::mt19937_64 rng_{20261126};
  Metrics metrics_;  // outlives server_
  std::unique_ptr<PrimServer> server_;
  AnswerHoldingBackend* backend_ = nullptr;  // owned by server_
  std::unique_ptr<v1::Primitives::Stub> stub_;
};

// Elements of 4 bytes in a piece whose answer is about 1-3 MiB.
constexpr size_t kLarge = 2 * kMiB / 4;
constexpr size_t kN = 6 * kLarge;

TEST_F(StreamAnswerBuffersTest, EveryStreamStitchedInAnswerBuffersIsTheUnaryAnswer) {
  Serve(size_t{1} << 30);
  ASSERT_NE(server_, nullptr);
  for (v1::DType dtype : {v1::INT32, v1::FLOAT64}) {
    SCOPED_TRACE(absl::StrCat("dtype ", dtype));
    for (bool segmented : {false, true}) {
      v1::ScanRequest scan;
      *scan.mutable_input() = RandomArray(rng_, dtype, kN, 100);
      scan.set_op(v1::SUM);
      scan.set_exclusive(segmented);
      if (segmented) {
        for (uint64_t at = 0; at < kN; at += 1 + rng_() % (kN / 8)) scan.add_segment_offsets(at);
      }
      ExpectBidiEqualsUnary(&S::ScanStream, &S::Scan, scan, kN, kLarge);
    }

    v1::SelectRequest select;
    *select.mutable_input() = RandomArray(rng_, dtype, kN, 100);
    select.mutable_predicate()->set_kind(v1::Predicate::GT);
    select.mutable_predicate()->mutable_operand()->set_int_value(-30);
    select.set_output(v1::SelectRequest::VALUES_AND_INDICES);
    ExpectBidiEqualsUnary(&S::SelectStream, &S::Select, select, kN, kLarge);

    // Few distinct values: a piece often starts with its predecessor's last
    // (a duplicate dropped, a run continued), and often not (a run held back
    // put in front of the next piece's).
    v1::UniqueRequest unique;
    *unique.mutable_input() = RandomArray(rng_, dtype, kN, 3);
    ExpectBidiEqualsUnary(&S::UniqueStream, &S::Unique, unique, kN, 2 * kLarge);

    v1::RunLengthEncodeRequest rle;
    *rle.mutable_input() = RandomArray(rng_, dtype, kN, 3);
    ExpectBidiEqualsUnary(&S::RunLengthEncodeStream, &S::RunLengthEncode, rle, kN, 2 * kLarge);

    for (v1::DType key_dtype : {v1::INT32, v1::UINT64}) {
      v1::ReduceByKeyRequest by_key;
      *by_key.mutable_keys() = RandomArray(rng_, key_dtype, kN, 3);
      *by_key.mutable_values() = RandomArray(rng_, dtype, kN, 100);
      by_key.set_op(v1::SUM);
      ExpectBidiEqualsUnary(&S::ReduceByKeyStream, &S::ReduceByKey, by_key, kN, 2 * kLarge);
    }

    // A value and an index for every 4 elements: the pieces' partials held.
    v1::ReduceRequest reduce;
    *reduce.mutable_input() = RandomArray(rng_, dtype, kN, 100);
    reduce.set_op(v1::ARGMAX);
    for (uint64_t at = 0; at < kN; at += 4) reduce.add_segment_offsets(at);
    ExpectClientStreamEqualsUnary(&S::ReduceStream, &S::Reduce, reduce, kN, 2 * kLarge);

    // One value per key: every piece's aggregate held, the first one kept
    // and the others combined into it.
    v1::AggregateByKeyRequest aggregate;
    const uint64_t num_keys = kLarge;
    std::vector<uint32_t> keys(kN);
    for (uint32_t& k : keys) k = static_cast<uint32_t>(rng_() % num_keys);
    *aggregate.mutable_keys() = PackArray<uint32_t>(keys);
    *aggregate.mutable_values() = RandomArray(rng_, dtype, kN, 100);
    aggregate.set_op(v1::MAX);
    aggregate.set_num_keys(num_keys);
    ExpectClientStreamEqualsUnary(&S::AggregateByKeyStream, &S::AggregateByKey, aggregate, kN,
                                  kLarge);
  }
  EXPECT_GT(backend_->held(), 50);
  EXPECT_EQ(backend_->not_held(), 0);
  ExpectAllReleased();
}

TEST_F(StreamAnswerBuffersTest, AnExhaustedPoolSendsThePiecesAnswersAsStringsAlike) {
  // Room for about one piece's answer at a time: most find none free.
  Serve(6 * kMiB);
  ASSERT_NE(server_, nullptr);
  for (int round = 0; round < 2; ++round) {
    v1::ScanRequest scan;
    *scan.mutable_input() = RandomArray(rng_, v1::INT64, kN, 100);
    scan.set_op(v1::MAX);
    ExpectBidiEqualsUnary(&S::ScanStream, &S::Scan, scan, kN, kLarge);

    v1::RunLengthEncodeRequest rle;
    *rle.mutable_input() = RandomArray(rng_, v1::INT64, kN, 3);
    ExpectBidiEqualsUnary(&S::RunLengthEncodeStream, &S::RunLengthEncode, rle, kN, kLarge);

    v1::UniqueRequest unique;
    *unique.mutable_input() = RandomArray(rng_, v1::UINT32, kN, 3);
    ExpectBidiEqualsUnary(&S::UniqueStream, &S::Unique, unique, kN, 2 * kLarge);
  }
  EXPECT_GT(backend_->held(), 0);
  EXPECT_GT(backend_->not_held(), 0);
  ExpectAllReleased();
}

TEST_F(StreamAnswerBuffersTest, ACancelledStreamGivesItsBuffersBack) {
  Serve(size_t{1} << 30);
  ASSERT_NE(server_, nullptr);
  grpc::ClientContext context;
  auto stream = stub_->ScanStream(&context);
  v1::ScanRequest first;
  *first.mutable_input() = RandomArray(rng_, v1::INT32, kLarge, 100);
  first.set_op(v1::SUM);
  ASSERT_TRUE(stream->Write(first));
  v1::ScanResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.output().data().size(), kLarge * 4);
  // More pieces in flight, their answers unread, then the client goes.
  for (int i = 0; i < 3; ++i) {
    v1::ScanRequest more;
    *more.mutable_input() = RandomArray(rng_, v1::INT32, kLarge, 100);
    if (!stream->Write(more)) break;
  }
  context.TryCancel();
  while (stream->Read(&answer)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_GE(backend_->held(), 1);
  ExpectAllReleased();
}

TEST_F(StreamAnswerBuffersTest, AFailedStreamGivesItsBuffersBack) {
  Serve(size_t{1} << 30);
  ASSERT_NE(server_, nullptr);
  // A bad piece after held ones: the stream ends INVALID_ARGUMENT.
  v1::RunLengthEncodeRequest rle;
  *rle.mutable_input() = RandomArray(rng_, v1::INT32, 3 * kLarge, 3);
  std::vector<v1::RunLengthEncodeRequest> messages =
      testing::Cut(rle, {kLarge + 17, kLarge - 17, kLarge}, rng_);
  v1::RunLengthEncodeRequest bad;
  bad.mutable_input()->set_data("abc");  // not a whole element
  messages.insert(messages.begin() + 2, bad);
  grpc::ClientContext rle_context;
  std::vector<v1::RunLengthEncodeResponse> answers;
  EXPECT_EQ(testing::Bidi(*stub_, &S::RunLengthEncodeStream, &rle_context, messages, &answers)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // An AggregateByKeyStream whose second piece fails in the backend (a key
  // out of range) while the first piece's held aggregate waits for it.
  v1::AggregateByKeyRequest aggregate;
  std::vector<uint32_t> keys(2 * kLarge, 1);
  keys[kLarge + 5] = kLarge;
  *aggregate.mutable_keys() = PackArray<uint32_t>(keys);
  *aggregate.mutable_values() = RandomArray(rng_, v1::INT32, 2 * kLarge, 100);
  aggregate.set_op(v1::SUM);
  aggregate.set_num_keys(kLarge);
  grpc::ClientContext context;
  v1::AggregateByKeyResponse response;
  EXPECT_EQ(testing::ClientStream(*stub_, &S::AggregateByKeyStream, &context,
                                  testing::Cut(aggregate, {kLarge, kLarge}, rng_), &response)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_GE(backend_->held(), 2);
  ExpectAllReleased();
}

TEST_F(StreamAnswerBuffersTest, AMultiplexedLargeAnswerIsSentFromItsBuffer) {
  Serve(size_t{1} << 30);
  ASSERT_NE(server_, nullptr);
  grpc::ClientContext context;
  auto stream = stub_->Multiplex(&context);
  std::vector<v1::MultiplexRequest> requests(3);
  *requests[0].mutable_scan()->mutable_input() = RandomArray(rng_, v1::INT32, 2 * kLarge, 100);
  requests[0].mutable_scan()->set_op(v1::SUM);
  *requests[1].mutable_select()->mutable_input() = RandomArray(rng_, v1::FLOAT64, kLarge, 100);
  requests[1].mutable_select()->mutable_predicate()->set_kind(v1::Predicate::LT);
  requests[1].mutable_select()->mutable_predicate()->mutable_operand()->set_int_value(20);
  requests[1].mutable_select()->set_output(v1::SelectRequest::VALUES_AND_INDICES);
  *requests[2].mutable_scan()->mutable_input() = RandomArray(rng_, v1::INT32, 100, 100);
  requests[2].mutable_scan()->set_op(v1::MAX);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].set_id(i);
    ASSERT_TRUE(stream->Write(requests[i]));
  }
  stream->WritesDone();
  std::vector<v1::MultiplexResponse> answers(requests.size());
  v1::MultiplexResponse answer;
  while (stream->Read(&answer)) {
    ASSERT_LT(answer.id(), answers.size());
    answers[answer.id()] = answer;
  }
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answers[0].scan().SerializeAsString(),
            testing::Unary(*stub_, &S::Scan, requests[0].scan()).SerializeAsString());
  EXPECT_EQ(answers[1].select().SerializeAsString(),
            testing::Unary(*stub_, &S::Select, requests[1].select()).SerializeAsString());
  EXPECT_EQ(answers[2].scan().SerializeAsString(),
            testing::Unary(*stub_, &S::Scan, requests[2].scan()).SerializeAsString());
  for (const v1::MultiplexResponse& a : answers) EXPECT_EQ(a.code(), 0) << a.message();
  // The scan's output and the select's values and indices, each held
  // through Multiplex and again through the unary calls; the small scan not.
  EXPECT_EQ(backend_->held(), 6);
  EXPECT_EQ(backend_->not_held(), 0);
  ExpectAllReleased();
}

}  // namespace
}  // namespace primserve
