// MultiplexSession against a real CPU server: requests of several kinds (a
// pipeline among them) sent from two threads at once are each answered as
// their unary call is, at the index Send gave them; a refused request gets
// its own status while the others are answered; nothing is sent after
// Finish; a session left without Finish ends its stream when destroyed.
#include "client/multiplex_session.h"

#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "client/client.h"
#include "client/pipeline.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "tests/unary_answer.h"

namespace primserve {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

// Request `i` of a mix: Scan, Reduce, Gather and a Pipeline over small
// random int32 arrays.
v1::MultiplexRequest Request(std::mt19937& rng, size_t i) {
  std::uniform_int_distribution<int32_t> value(-50, 50);
  std::vector<int32_t> a(1 + rng() % 300);
  for (int32_t& x : a) x = value(rng);
  v1::MultiplexRequest m;
  switch (i % 4) {
    case 0:
      *m.mutable_scan()->mutable_input() = PackArray<int32_t>(a);
      m.mutable_scan()->set_op(v1::SUM);
      break;
    case 1:
      *m.mutable_reduce()->mutable_input() = PackArray<int32_t>(a);
      m.mutable_reduce()->set_op(v1::ARGMAX);
      break;
    case 2: {
      std::vector<int64_t> positions(a.size());
      for (int64_t& p : positions) p = static_cast<int64_t>(rng() % a.size());
      *m.mutable_gather()->mutable_values() = PackArray<int32_t>(a);
      *m.mutable_gather()->mutable_indices() = PackArray<int64_t>(positions);
      break;
    }
    default: {
      PipelineBuilder p;
      v1::SelectRequest kept;
      *kept.mutable_input() = PackArray<int32_t>(a);
      kept.mutable_predicate()->set_kind(v1::Predicate::GT);
      kept.mutable_predicate()->mutable_operand()->set_int_value(0);
      const uint32_t rows = p.Add(kept);
      v1::ScanRequest sums;
      *sums.mutable_input() = PipelineBuilder::Output(rows, v1::StepOutput::VALUES);
      sums.set_op(v1::SUM);
      p.Add(sums, /*returned=*/true);
      *m.mutable_pipeline() = p.request();
    }
  }
  return m;
}

class MultiplexSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    server_ = PrimServer::Start(options, std::make_unique<CpuBackend>()).value();
    channel_ = PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", server_->port()));
    client_ = std::make_unique<PrimitivesClient>(channel_, absl::Seconds(30));
    stub_ = v1::Primitives::NewStub(channel_);
  }

  // The unary answer to `request`, as the session's answer `index` reads.
  absl::StatusOr<v1::MultiplexResponse> Unary(v1::MultiplexRequest request, size_t index) {
    request.set_id(index);
    grpc::Status status;
    v1::MultiplexResponse answer = UnaryAnswer(*stub_, request, &status);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
    }
    return answer;
  }

  std::unique_ptr<PrimServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<PrimitivesClient> client_;
  std::unique_ptr<v1::Primitives::Stub> stub_;
};

TEST_F(MultiplexSessionTest, EachAnswerIsItsUnaryCallsAtTheIndexSendGave) {
  constexpr size_t kPerThread = 100;
  std::vector<std::vector<std::pair<size_t, v1::MultiplexRequest>>> sent(2);
  MultiplexSession session(*client_);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < sent.size(); ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t + 1));
      for (size_t i = 0; i < kPerThread; ++i) {
        v1::MultiplexRequest request = Request(rng, i);
        if (t == 1 && i == 5) request.mutable_reduce()->add_segment_offsets(1 << 20);  // refused
        absl::StatusOr<size_t> index = session.Send(request);
        ASSERT_TRUE(index.ok()) << index.status();
        sent[t].emplace_back(*index, std::move(request));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<absl::StatusOr<v1::MultiplexResponse>> answers = session.Finish();
  ASSERT_EQ(answers.size(), 2 * kPerThread);
  size_t refused = 0;
  for (const auto& thread_sent : sent) {
    for (const auto& [index, request] : thread_sent) {
      const absl::StatusOr<v1::MultiplexResponse> expected = Unary(request, index);
      const absl::StatusOr<v1::MultiplexResponse>& answer = answers[index];
      ASSERT_EQ(answer.status().code(), expected.status().code()) << answer.status();
      if (!answer.ok()) {
        EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(answer.status().message(), HasSubstr("segment_offsets"));
        ++refused;
        continue;
      }
      EXPECT_TRUE(MessageDifferencer::Equals(*answer, *expected)) << request.request_case();
    }
  }
  EXPECT_EQ(refused, 1u);
  // Finished: nothing more is sent, and nothing more is answered.
  std::mt19937 rng(3);
  EXPECT_EQ(session.Send(Request(rng, 0)).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(session.Finish().empty());
}

TEST_F(MultiplexSessionTest, ASessionLeftUnfinishedEndsItsStreamWhenDestroyed) {
  std::mt19937 rng(4);
  {
    MultiplexSession session(*client_);
    for (size_t i = 0; i < 20; ++i) ASSERT_TRUE(session.Send(Request(rng, i)).ok());
  }
  // The server took the stream's end: the next session is answered.
  MultiplexSession next(*client_);
  const v1::MultiplexRequest request = Request(rng, 0);
  ASSERT_TRUE(next.Send(request).ok());
  std::vector<absl::StatusOr<v1::MultiplexResponse>> answers = next.Finish();
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_TRUE(answers[0].ok()) << answers[0].status();
  EXPECT_TRUE(MessageDifferencer::Equals(*answers[0], *Unary(request, 0)));
}

}  // namespace
}  // namespace primserve
