// The Multiplex RPC against a real server (CPU backend, loopback): many
// requests of every RPC on one stream get exactly the unary answers, matched
// by id; answers come back out of order; one bad request gets its own code
// while the stream goes on; an id already in flight is refused; a message
// that is no request (so has no id) ends the stream with INVALID_ARGUMENT
// once the requests before it are answered; a client that stops reading
// stalls only its own stream; and streams that end while their last answers
// arrive from the scheduler's threads finish cleanly (run under ASan).
#include <atomic>
#include <cstdint>
#include <thread>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "tests/holding_backend.h"
#include "tests/rpc_api.h"
#include "tests/unary_answer.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::vector<T> Random(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int> dist(-50, 50);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// A random request of a random RPC.
v1::MultiplexRequest RandomRequest(std::mt19937& rng, uint64_t id) {
  v1::MultiplexRequest m;
  m.set_id(id);
  const size_t n = rng() % 200;
  switch (rng() % 8) {
    case 0: {
      auto* r = m.mutable_scan();
      *r->mutable_input() = PackArray<int32_t>(Random<int32_t>(rng, n));
      r->set_op(v1::SUM);
      r->set_exclusive(rng() % 2);
      break;
    }
    case 1: {
      auto* r = m.mutable_reduce();
      *r->mutable_input() = PackArray<double>(Random<double>(rng, n));
      r->set_op(v1::ARGMAX);
      break;
    }
    case 2: {
      auto* r = m.mutable_select();
      *r->mutable_input() = PackArray<int64_t>(Random<int64_t>(rng, n));
      r->mutable_predicate()->set_kind(v1::Predicate::GT);
      r->mutable_predicate()->mutable_operand()->set_int_value(static_cast<int>(rng() % 20));
      r->set_output(v1::SelectRequest::VALUES_AND_INDICES);
      break;
    }
    case 3:
      *m.mutable_unique()->mutable_input() = PackArray<uint32_t>(Random<uint32_t>(rng, n));
      break;
    case 4:
      *m.mutable_run_length_encode()->mutable_input() = PackArray<float>(Random<float>(rng, n));
      break;
    case 5: {
      auto* r = m.mutable_reduce_by_key();
      std::vector<int32_t> keys(n);
      for (size_t i = 0; i < n; ++i) keys[i] = static_cast<int32_t>(i / 3);
      *r->mutable_keys() = PackArray<int32_t>(keys);
      *r->mutable_values() = PackArray<int64_t>(Random<int64_t>(rng, n));
      r->set_op(v1::MAX);
      break;
    }
    case 6: {
      auto* r = m.mutable_sort();
      *r->mutable_keys() = PackArray<float>(Random<float>(rng, n));
      *r->mutable_values() = PackArray<int32_t>(Random<int32_t>(rng, n));
      r->set_descending(rng() % 2);
      r->set_return_indices(rng() % 2);
      break;
    }
    default: {
      auto* r = m.mutable_aggregate_by_key();
      std::vector<uint64_t> keys(n);
      for (uint64_t& k : keys) k = rng() % 10;
      *r->mutable_keys() = PackArray<uint64_t>(keys);
      *r->mutable_values() = PackArray<float>(Random<float>(rng, n));
      r->set_op(v1::MIN);
      r->set_num_keys(10);
      break;
    }
  }
  return m;
}

class MultiplexTest : public ::testing::Test {
 protected:
  void Start(std::unique_ptr<ExecutionBackend> backend, uint64_t window = 1024,
             uint64_t window_bytes = uint64_t{64} << 20) {
    ServerOptions options;
    options.rpc_api = TestRpcApi();
    options.address = "127.0.0.1:0";
    options.limits.multiplex_window = window;
    options.limits.multiplex_window_bytes = window_bytes;
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::move(backend));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Primitives::NewStub(channel_);
  }

  // The unary answer to the request inside `m`, as the stream should give it.
  v1::MultiplexResponse Unary(const v1::MultiplexRequest& m) {
    grpc::Status status;
    v1::MultiplexResponse want = UnaryAnswer(*stub_, m, &status);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return want;
  }

  std::unique_ptr<PrimServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Primitives::Stub> stub_;
};

TEST_F(MultiplexTest, EveryAnswerEqualsTheUnaryOneMatchedById) {
  Start(std::make_unique<CpuBackend>());
  std::mt19937 rng(1);
  constexpr int kRequests = 500;
  std::vector<v1::MultiplexRequest> requests;
  for (int i = 0; i < kRequests; ++i) requests.push_back(RandomRequest(rng, 1000 + 7 * i));
  grpc::ClientContext context;
  auto stream = stub_->Multiplex(&context);
  for (const auto& r : requests) ASSERT_TRUE(stream->Write(r));
  ASSERT_TRUE(stream->WritesDone());
  absl::flat_hash_map<uint64_t, v1::MultiplexResponse> answers;
  v1::MultiplexResponse answer;
  while (stream->Read(&answer)) {
    EXPECT_TRUE(answers.emplace(answer.id(), answer).second) << "two answers for " << answer.id();
  }
  const grpc::Status status = stream->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), requests.size());
  for (const auto& r : requests) {
    const v1::MultiplexResponse& got = answers[r.id()];
    EXPECT_EQ(got.code(), 0) << got.message();
    EXPECT_EQ(got.SerializeAsString(), Unary(r).SerializeAsString()) << "id " << r.id();
  }
}

TEST_F(MultiplexTest, AnswersComeBackAsEachFinishes) {
  auto backend = std::make_unique<HoldingBackend>(Rpc::kReduce);
  HoldingBackend* holding = backend.get();
  Start(std::move(backend));
  std::mt19937 rng(2);
  grpc::ClientContext context;
  auto stream = stub_->Multiplex(&context);
  v1::MultiplexRequest slow;
  slow.set_id(1);
  *slow.mutable_reduce()->mutable_input() = PackArray<int32_t>(Random<int32_t>(rng, 100));
  slow.mutable_reduce()->set_op(v1::SUM);
  v1::MultiplexRequest fast;
  fast.set_id(2);
  *fast.mutable_scan()->mutable_input() = PackArray<int32_t>(Random<int32_t>(rng, 100));
  fast.mutable_scan()->set_op(v1::SUM);
  ASSERT_TRUE(stream->Write(slow));
  holding->arrived_.WaitForNotification();
  ASSERT_TRUE(stream->Write(fast));
  v1::MultiplexResponse first, second;
  ASSERT_TRUE(stream->Read(&first));
  EXPECT_EQ(first.id(), 2u);
  holding->release_.Notify();
  ASSERT_TRUE(stream->Read(&second));
  EXPECT_EQ(second.id(), 1u);
  EXPECT_EQ(second.SerializeAsString(), Unary(slow).SerializeAsString());
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(MultiplexTest, ABadRequestGetsItsOwnCodeAndTheStreamGoesOn) {
  Start(std::make_unique<CpuBackend>());
  std::mt19937 rng(3);
  grpc::ClientContext context;
  auto stream = stub_->Multiplex(&context);
  std::vector<v1::MultiplexRequest> good;
  for (int i = 0; i < 20; ++i) good.push_back(RandomRequest(rng, i));
  v1::MultiplexRequest bad;
  bad.set_id(99);
  bad.mutable_scan()->mutable_input()->set_dtype(v1::INT32);
  bad.mutable_scan()->mutable_input()->set_data("abc");  // not whole elements
  bad.mutable_scan()->set_op(v1::SUM);
  v1::MultiplexRequest empty;
  empty.set_id(100);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(stream->Write(good[i]));
  ASSERT_TRUE(stream->Write(bad));
  ASSERT_TRUE(stream->Write(empty));
  for (int i = 10; i < 20; ++i) ASSERT_TRUE(stream->Write(good[i]));
  ASSERT_TRUE(stream->WritesDone());
  absl::flat_hash_map<uint64_t, v1::MultiplexResponse> answers;
  v1::MultiplexResponse answer;
  while (stream->Read(&answer)) answers[answer.id()] = answer;
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(answers.size(), 22u);
  EXPECT_EQ(answers[99].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(answers[99].message(), HasSubstr("input.data has 3 bytes"));
  EXPECT_EQ(answers[99].response_case(), v1::MultiplexResponse::RESPONSE_NOT_SET);
  EXPECT_EQ(answers[100].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(answers[100].message(), HasSubstr("request is not set"));
  for (const auto& r : good) {
    EXPECT_EQ(answers[r.id()].SerializeAsString(), Unary(r).SerializeAsString());
  }
}

TEST_F(MultiplexTest, AMessageThatIsNoRequestEndsTheStreamAfterTheAnswersBeforeIt) {
  Start(std::make_unique<CpuBackend>());
  std::mt19937 rng(6);
  std::vector<v1::MultiplexRequest> good;
  for (int i = 0; i < 5; ++i) good.push_back(RandomRequest(rng, i));
  grpc::ClientContext context;
  const std::string method =
      absl::StrCat("/", v1::Primitives::service_full_name(), "/Multiplex");
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel_.get(),
          grpc::internal::RpcMethod(method.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING),
          &context));
  std::vector<std::string> messages;
  for (const auto& r : good) messages.push_back(r.SerializeAsString());
  messages.push_back(std::string("\x12\x05" "ab", 4));  // scan says 5 bytes follow; 2 do
  messages.push_back(RandomRequest(rng, 77).SerializeAsString());
  for (const std::string& m : messages) {
    grpc::Slice slice(m);
    if (!stream->Write(grpc::ByteBuffer(&slice, 1))) break;
  }
  stream->WritesDone();
  absl::flat_hash_map<uint64_t, v1::MultiplexResponse> answers;
  grpc::ByteBuffer raw;
  while (stream->Read(&raw)) {
    v1::MultiplexResponse answer;
    ASSERT_TRUE(grpc::SerializationTraits<v1::MultiplexResponse>::Deserialize(&raw, &answer).ok());
    answers[answer.id()] = answer;
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("Multiplex message 5: the request is not a valid "
                        "primserve.v1.MultiplexRequest"));
  // Every request before it answered, as the unary call answers; none after.
  ASSERT_EQ(answers.size(), good.size());
  for (const auto& r : good) {
    EXPECT_EQ(answers[r.id()].SerializeAsString(), Unary(r).SerializeAsString());
  }
  // The server goes on.
  v1::MultiplexRequest next = RandomRequest(rng, 8);
  grpc::ClientContext next_context;
  auto next_stream = stub_->Multiplex(&next_context);
  ASSERT_TRUE(next_stream->Write(next));
  ASSERT_TRUE(next_stream->WritesDone());
  v1::MultiplexResponse answer;
  ASSERT_TRUE(next_stream->Read(&answer));
  EXPECT_EQ(answer.SerializeAsString(), Unary(next).SerializeAsString());
  EXPECT_TRUE(next_stream->Finish().ok());
}

TEST_F(MultiplexTest, AnIdInFlightIsRefusedForTheNewRequestOnly) {
  auto backend = std::make_unique<HoldingBackend>(Rpc::kReduce);
  HoldingBackend* holding = backend.get();
  Start(std::move(backend));
  std::mt19937 rng(4);
  grpc::ClientContext context;
  auto stream = stub_->Multiplex(&context);
  v1::MultiplexRequest held;
  held.set_id(7);
  *held.mutable_reduce()->mutable_input() = PackArray<int64_t>(Random<int64_t>(rng, 50));
  held.mutable_reduce()->set_op(v1::MAX);
  ASSERT_TRUE(stream->Write(held));
  holding->arrived_.WaitForNotification();
  v1::MultiplexRequest again = RandomRequest(rng, 7);
  ASSERT_TRUE(stream->Write(again));
  v1::MultiplexResponse refused, answered;
  ASSERT_TRUE(stream->Read(&refused));
  EXPECT_EQ(refused.id(), 7u);
  EXPECT_EQ(refused.code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.message(), HasSubstr("id 7 is already in flight"));
  holding->release_.Notify();
  ASSERT_TRUE(stream->Read(&answered));
  EXPECT_EQ(answered.SerializeAsString(), Unary(held).SerializeAsString());
  // Answered: the id may be used again.
  ASSERT_TRUE(stream->Write(again));
  ASSERT_TRUE(stream->Read(&answered));
  EXPECT_EQ(answered.SerializeAsString(), Unary(again).SerializeAsString());
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(MultiplexTest, AClientThatStopsReadingStallsOnlyItsOwnStream) {
  Start(std::make_unique<CpuBackend>(), /*window=*/4);
  std::mt19937 rng(5);
  grpc::ClientContext context;
  auto stream = stub_->Multiplex(&context);
  // Far more than the window and than the socket buffers hold: the writer
  // thread blocks once the server stops reading.
  constexpr int kRequests = 2000;
  std::vector<v1::MultiplexRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    v1::MultiplexRequest m;
    m.set_id(i);
    *m.mutable_scan()->mutable_input() = PackArray<int32_t>(Random<int32_t>(rng, 4096));
    m.mutable_scan()->set_op(v1::SUM);
    requests.push_back(std::move(m));
  }
  absl::Notification written;
  std::thread writer([&] {
    for (const auto& r : requests) {
      if (!stream->Write(r)) break;
    }
    stream->WritesDone();
    written.Notify();
  });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(written.HasBeenNotified()) << "the server read the whole stream unanswered";
  // Other callers are served meanwhile.
  PrimitivesClient other(channel_);
  const std::vector<int32_t> input = {1, 2, 3};
  absl::StatusOr<std::vector<int32_t>> sums = other.Scan<int32_t>(input, Op::kSum);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, (std::vector<int32_t>{1, 3, 6}));
  // Reading resumes the stream; every answer arrives.
  int answered = 0;
  v1::MultiplexResponse answer;
  while (stream->Read(&answer)) {
    EXPECT_EQ(answer.code(), 0) << answer.message();
    ++answered;
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, kRequests);
}

// The window counts bytes too: with room for 8192 requests but only 256 KiB
// of them, a client that stops reading stalls its stream long before its
// 64 MiB of requests are all read (counting requests alone, every one was).
TEST_F(MultiplexTest, AClientThatStopsReadingStallsItsStreamByBytes) {
  Start(std::make_unique<CpuBackend>(), /*window=*/8192, /*window_bytes=*/256 << 10);
  std::mt19937 rng(6);
  grpc::ClientContext context;
  auto stream = stub_->Multiplex(&context);
  constexpr int kRequests = 4096;
  v1::MultiplexRequest m;
  *m.mutable_scan()->mutable_input() = PackArray<int32_t>(Random<int32_t>(rng, 4096));
  m.mutable_scan()->set_op(v1::SUM);
  absl::Notification written;
  std::thread writer([&] {
    for (int i = 0; i < kRequests; ++i) {
      m.set_id(i);
      if (!stream->Write(m)) break;
    }
    stream->WritesDone();
    written.Notify();
  });
  absl::SleepFor(absl::Seconds(1));
  EXPECT_FALSE(written.HasBeenNotified()) << "the server read 64 MiB for a client reading nothing";
  int answered = 0;
  v1::MultiplexResponse answer;
  while (stream->Read(&answer)) {
    EXPECT_EQ(answer.code(), 0) << answer.message();
    ++answered;
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, kRequests);
}

// Many short streams at once, each ending (WritesDone) while its answers
// come from several threads (the batcher's, and gRPC's when a task runs on
// its caller's thread): an answer queued on one thread may be written, and
// the stream finished and its reactor deleted, by another. The interleaving
// that once touched a deleted reactor is rare (CI's ASan run of
// shared_memory_test met it once); this makes 800 such endings.
TEST_F(MultiplexTest, ShortStreamsEndingAsTheirAnswersArriveAllFinishCleanly) {
  Start(std::make_unique<CpuBackend>());
  constexpr int kThreads = 8;
  constexpr int kStreamsPerThread = 100;
  constexpr int kRequestsPerStream = 6;
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      for (int s = 0; s < kStreamsPerThread; ++s) {
        grpc::ClientContext context;
        auto stream = stub_->Multiplex(&context);
        for (int i = 0; i < kRequestsPerStream; ++i) {
          v1::MultiplexRequest m;
          m.set_id(i);
          const std::vector<int32_t> input = Random<int32_t>(rng, 1 + rng() % 64);
          *m.mutable_scan()->mutable_input() = PackArray<int32_t>(input);
          m.mutable_scan()->set_op(v1::SUM);
          EXPECT_TRUE(stream->Write(m));
        }
        EXPECT_TRUE(stream->WritesDone());
        std::vector<bool> seen(kRequestsPerStream, false);
        v1::MultiplexResponse answer;
        while (stream->Read(&answer)) {
          EXPECT_EQ(answer.code(), 0) << answer.message();
          ASSERT_LT(answer.id(), seen.size());
          EXPECT_FALSE(seen[answer.id()]) << "two answers for " << answer.id();
          seen[answer.id()] = true;
          answered.fetch_add(1);
        }
        const grpc::Status status = stream->Finish();
        EXPECT_TRUE(status.ok()) << status.error_message();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(answered.load(), kThreads * kStreamsPerThread * kRequestsPerStream);
}

}  // namespace
}  // namespace primserve
