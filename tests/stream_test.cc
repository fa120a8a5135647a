// The streaming RPCs against a real server (CPU backend, loopback): for every
// RPC and dtype, an array sent in random pieces (empty ones included, and as
// a single piece) gets answers that concatenate to the unary answer for the
// whole array; every streaming error gets its status and message, and the
// server answers the next request (a message that is no request included:
// the streams take raw buffers); a cancelled stream ends CANCELLED; and a
// client that stops reading stalls only its own stream. Values are small
// integers (PROD's in [-2, 2]), so float SUM and PROD are exact whatever the
// association, and answers compare byte for byte.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/engine/metrics.h"
#include "server/server.h"
#include "tests/http_testing.h"
#include "tests/rpc_api.h"
#include "tests/stream_calls.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;
using S = v1::Primitives::Stub;
using testing::Cut;
using testing::Join;

template <typename F>
void ForEachDType(F f) {
  f(int32_t{});
  f(int64_t{});
  f(uint32_t{});
  f(uint64_t{});
  f(float{});
  f(double{});
}

template <typename T>
std::vector<T> Random(std::mt19937& rng, size_t n, int range) {
  std::uniform_int_distribution<int> dist(-range, range);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

int RangeFor(v1::Op op) { return op == v1::PROD ? 2 : 50; }

// Random piece sizes adding up to n, empty pieces among them; a single piece
// one time in four.
std::vector<size_t> Pieces(std::mt19937& rng, size_t n) {
  if (rng() % 4 == 0) return {n};
  std::vector<size_t> sizes;
  for (size_t left = n; left > 0;) {
    const size_t size = rng() % 5 == 0 ? 0 : std::min<size_t>(left, 1 + rng() % 300);
    sizes.push_back(size);
    left -= size;
  }
  sizes.push_back(0);
  return sizes;
}

std::vector<uint64_t> Offsets(std::mt19937& rng, size_t n) {
  if (rng() % 2) return {};
  std::vector<uint64_t> offsets = {0};
  for (int i = 0, k = static_cast<int>(rng() % 20); i < k; ++i) offsets.push_back(rng() % (n + 1));
  std::sort(offsets.begin(), offsets.end());
  return offsets;
}

class StreamTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(std::make_unique<CpuBackend>()); }

  void Start(std::unique_ptr<ExecutionBackend> backend, ServerOptions options = {}) {
    options.address = "127.0.0.1:0";
    options.rpc_api = TestRpcApi();
    options.metrics = &metrics_;
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::move(backend));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Primitives::NewStub(channel_);
  }

  template <typename Request, typename Response>
  Response Unary(grpc::Status (S::*method)(grpc::ClientContext*, const Request&, Response*),
                 const Request& request) {
    return testing::Unary(*stub_, method, request);
  }

  // Writes the messages from another thread while reading every answer.
  template <typename Request, typename Response>
  grpc::Status Bidi(
      std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> (S::*method)(
          grpc::ClientContext*),
      const std::vector<Request>& messages, std::vector<Response>* answers) {
    grpc::ClientContext context;
    return testing::Bidi(*stub_, method, &context, messages, answers);
  }

  template <typename Request, typename Response>
  grpc::Status ClientStream(
      std::unique_ptr<grpc::ClientWriter<Request>> (S::*method)(grpc::ClientContext*, Response*),
      const std::vector<Request>& messages, Response* answer) {
    grpc::ClientContext context;
    return testing::ClientStream(*stub_, method, &context, messages, answer);
  }

  // A stream of `whole` in random pieces answers as the unary call does.
  template <typename Stream, typename Call, typename Request>
  void ExpectBidiEqualsUnary(Stream stream, Call unary, const Request& whole, size_t n,
                             std::mt19937& rng) {
    testing::ExpectBidiEqualsUnary(*stub_, stream, unary, whole, Pieces(rng, n), rng);
  }
  template <typename Stream, typename Call, typename Request>
  void ExpectClientStreamEqualsUnary(Stream stream, Call unary, const Request& whole, size_t n,
                                     std::mt19937& rng) {
    testing::ExpectClientStreamEqualsUnary(*stub_, stream, unary, whole, Pieces(rng, n), rng);
  }

  // Writes `messages`, as bytes, to the streaming method `rpc` and counts
  // the answers.
  grpc::Status RawStream(const std::string& rpc, const std::vector<std::string>& messages,
                         int* answers) {
    grpc::ClientContext context;
    const std::string method = absl::StrCat("/", v1::Primitives::service_full_name(), "/", rpc);
    std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
            channel_.get(),
            grpc::internal::RpcMethod(method.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING),
            &context));
    std::thread writer([&] {
      for (const std::string& m : messages) {
        grpc::Slice slice(m);
        if (!stream->Write(grpc::ByteBuffer(&slice, 1))) break;
      }
      stream->WritesDone();
    });
    grpc::ByteBuffer answer;
    *answers = 0;
    while (stream->Read(&answer)) ++*answers;
    writer.join();
    return stream->Finish();
  }

  // The server still answers: a small unary scan.
  void ExpectServing() {
    PrimitivesClient client(channel_);
    const std::vector<int32_t> input = {1, 2, 3};
    absl::StatusOr<std::vector<int32_t>> sums = client.Scan<int32_t>(input, Op::kSum);
    ASSERT_TRUE(sums.ok()) << sums.status();
    EXPECT_EQ(*sums, (std::vector<int32_t>{1, 3, 6}));
  }

  // The server's /metrics page, served from the first scrape on (serving it
  // costs seconds at teardown, so only the tests that read it pay).
  std::string Scrape() {
    if (metrics_.http_port() == 0) {
      EXPECT_TRUE(metrics_.ServeHttp("127.0.0.1:0").ok());
    }
    absl::StatusOr<testing::HttpResponse> page = testing::HttpGet(metrics_.http_port(), "/metrics");
    EXPECT_TRUE(page.ok()) << page.status();
    return page.ok() ? page->body : "";
  }

  // Nothing left of finished streams: no piece counts in flight (a cancelled
  // stream's pieces may still be finishing for a moment).
  void ExpectAtRest() {
    std::optional<double> in_flight;
    for (int i = 0; i < 100; ++i) {
      in_flight = testing::SampleValue(Scrape(), "primserve_requests_in_flight");
      if (in_flight == 0.0) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_EQ(in_flight, 0.0);
  }

  // Scan requests answered OK so far (a stream's pieces count one each).
  double ScansAnswered() {
    const std::string page = Scrape();
    double total = 0;
    for (absl::string_view line : absl::StrSplit(page, '\n')) {
      if (absl::StartsWith(line, "primserve_requests_total{") &&
          absl::StrContains(line, "rpc=\"Scan\"") && absl::StrContains(line, "code=\"OK\"")) {
        total += std::stod(std::string(line.substr(line.rfind(' ') + 1)));
      }
    }
    return total;
  }

  Metrics metrics_;  // outlives server_
  std::unique_ptr<PrimServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Primitives::Stub> stub_;
};

TEST_F(StreamTest, ScanStreamEqualsTheUnaryScan) {
  std::mt19937 rng(1);
  ForEachDType([&](auto zero) {
    using T = decltype(zero);
    for (v1::Op op : {v1::SUM, v1::PROD, v1::MIN, v1::MAX}) {
      for (bool exclusive : {false, true}) {
        const size_t n = rng() % 2000;
        v1::ScanRequest whole;
        *whole.mutable_input() = PackArray<T>(Random<T>(rng, n, RangeFor(op)));
        whole.set_op(op);
        whole.set_exclusive(exclusive);
        for (uint64_t o : Offsets(rng, n)) whole.add_segment_offsets(o);
        ExpectBidiEqualsUnary(&S::ScanStream, &S::Scan, whole, n, rng);
      }
    }
  });
}

TEST_F(StreamTest, SelectStreamEqualsTheUnarySelect) {
  std::mt19937 rng(2);
  ForEachDType([&](auto zero) {
    using T = decltype(zero);
    for (auto output : {v1::SelectRequest::VALUES, v1::SelectRequest::INDICES,
                        v1::SelectRequest::VALUES_AND_INDICES, v1::SelectRequest::COUNT}) {
      for (bool flagged : {false, true}) {
        const size_t n = rng() % 2000;
        v1::SelectRequest whole;
        *whole.mutable_input() = PackArray<T>(Random<T>(rng, n, 50));
        if (flagged) {
          *whole.mutable_flags() = PackArray<int64_t>(Random<int64_t>(rng, n, 1));
        } else {
          whole.mutable_predicate()->set_kind(v1::Predicate::GT);
          whole.mutable_predicate()->mutable_operand()->set_int_value(10);
        }
        whole.set_output(output);
        ExpectBidiEqualsUnary(&S::SelectStream, &S::Select, whole, n, rng);
      }
    }
  });
}

TEST_F(StreamTest, UniqueAndRunLengthEncodeStreamsEqualTheUnaryCalls) {
  std::mt19937 rng(3);
  ForEachDType([&](auto zero) {
    using T = decltype(zero);
    for (int round = 0; round < 3; ++round) {
      const size_t n = rng() % 2000;
      v1::UniqueRequest unique;
      *unique.mutable_input() = PackArray<T>(Random<T>(rng, n, 2));
      ExpectBidiEqualsUnary(&S::UniqueStream, &S::Unique, unique, n, rng);
      v1::RunLengthEncodeRequest runs;
      *runs.mutable_input() = PackArray<T>(Random<T>(rng, n, 2));
      ExpectBidiEqualsUnary(&S::RunLengthEncodeStream, &S::RunLengthEncode, runs, n, rng);
    }
  });
}

TEST_F(StreamTest, ReduceByKeyStreamEqualsTheUnaryReduceByKey) {
  std::mt19937 rng(4);
  ForEachDType([&](auto zero) {
    using V = decltype(zero);
    for (v1::Op op : {v1::SUM, v1::PROD, v1::MIN, v1::MAX}) {
      const size_t n = rng() % 2000;
      v1::ReduceByKeyRequest whole;
      // Keys of every dtype in turn, with long runs.
      ForEachDType([&](auto key_zero) {
        using K = decltype(key_zero);
        if (rng() % 6 != 0 && whole.has_keys()) return;
        *whole.mutable_keys() = PackArray<K>(Random<K>(rng, n, 1));
      });
      *whole.mutable_values() = PackArray<V>(Random<V>(rng, n, RangeFor(op)));
      whole.set_op(op);
      ExpectBidiEqualsUnary(&S::ReduceByKeyStream, &S::ReduceByKey, whole, n, rng);
    }
  });
}

TEST_F(StreamTest, ReduceStreamEqualsTheUnaryReduce) {
  std::mt19937 rng(5);
  ForEachDType([&](auto zero) {
    using T = decltype(zero);
    for (v1::Op op : {v1::SUM, v1::PROD, v1::MIN, v1::MAX, v1::ARGMIN, v1::ARGMAX}) {
      const size_t n = rng() % 2000;
      v1::ReduceRequest whole;
      *whole.mutable_input() = PackArray<T>(Random<T>(rng, n, RangeFor(op)));
      whole.set_op(op);
      for (uint64_t o : Offsets(rng, n)) whole.add_segment_offsets(o);
      ExpectClientStreamEqualsUnary(&S::ReduceStream, &S::Reduce, whole, n, rng);
    }
  });
}

TEST_F(StreamTest, AggregateByKeyStreamEqualsTheUnaryAggregateByKey) {
  std::mt19937 rng(6);
  ForEachDType([&](auto zero) {
    using V = decltype(zero);
    for (v1::Op op : {v1::SUM, v1::MIN, v1::MAX}) {
      const size_t n = rng() % 2000;
      const uint64_t num_keys = 1 + rng() % 50;
      std::vector<uint32_t> keys(n);
      for (uint32_t& k : keys) k = static_cast<uint32_t>(rng() % num_keys);
      v1::AggregateByKeyRequest whole;
      *whole.mutable_keys() = PackArray<uint32_t>(keys);
      *whole.mutable_values() = PackArray<V>(Random<V>(rng, n, 50));
      whole.set_op(op);
      whole.set_num_keys(num_keys);
      ExpectClientStreamEqualsUnary(&S::AggregateByKeyStream, &S::AggregateByKey, whole, n, rng);
    }
  });
}

TEST_F(StreamTest, TheClientsStreamingHelpersGiveTheUnaryAnswers) {
  std::mt19937 rng(9);
  PrimitivesClient client(channel_);
  for (size_t n : {0, 1, 999, 5000}) {
    const std::vector<double> input = Random<double>(rng, n, 50);
    for (size_t piece : {1, 7, 1000, 10000}) {
      const std::vector<uint64_t> offsets = Offsets(rng, n);
      absl::StatusOr<std::vector<double>> streamed =
          client.ScanStream<double>(input, Op::kMax, /*exclusive=*/true, piece, offsets);
      absl::StatusOr<std::vector<double>> unary =
          client.Scan<double>(input, Op::kMax, /*exclusive=*/true, offsets);
      ASSERT_TRUE(streamed.ok()) << streamed.status();
      ASSERT_TRUE(unary.ok()) << unary.status();
      EXPECT_EQ(*streamed, *unary);

      Predicate<double> below;
      below.kind = PredicateKind::kLt;
      below.operand = 3;
      absl::StatusOr<Selection<double>> selected = client.SelectStream<double>(
          input, below, piece, v1::SelectRequest::VALUES_AND_INDICES);
      absl::StatusOr<Selection<double>> want =
          client.Select<double>(input, below, v1::SelectRequest::VALUES_AND_INDICES);
      ASSERT_TRUE(selected.ok()) << selected.status();
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_EQ(selected->values, want->values);
      EXPECT_EQ(selected->indices, want->indices);
      EXPECT_EQ(selected->count, want->count);
    }
  }
  // The typed Scan streams above its threshold, with the same answer.
  const std::vector<int64_t> large = Random<int64_t>(rng, 3000, 50);
  absl::StatusOr<std::vector<int64_t>> unary = client.Scan<int64_t>(large, Op::kSum);
  client.SetStreaming(/*above_bytes=*/1024, /*piece_bytes=*/800);
  const double scans_before = ScansAnswered();
  absl::StatusOr<std::vector<int64_t>> streamed = client.Scan<int64_t>(large, Op::kSum);
  ASSERT_TRUE(unary.ok()) << unary.status();
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(*streamed, *unary);
  EXPECT_EQ(ScansAnswered() - scans_before, 30) << "3000 elements in pieces of 100";
  // A server error comes back as the helper's.
  const std::vector<int32_t> input = {1, 2, 3};
  absl::StatusOr<std::vector<int32_t>> refused =
      client.ScanStream<int32_t>(input, Op::kArgMax, false, 2);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("op ARGMAX does not apply to Scan"));
}

// Two messages of a scan stream, the second changed by `change`.
std::vector<v1::ScanRequest> ScanPieces(void (*change)(v1::ScanRequest*)) {
  std::vector<v1::ScanRequest> messages(2);
  *messages[0].mutable_input() = PackArray<int32_t>(std::vector<int32_t>{1, 2, 3});
  messages[0].set_op(v1::SUM);
  *messages[1].mutable_input() = PackArray<int32_t>(std::vector<int32_t>{4, 5});
  messages[1].mutable_input()->clear_dtype();
  change(&messages[1]);
  return messages;
}

TEST_F(StreamTest, EachStreamingErrorHasItsStatusAndTheServerGoesOn) {
  struct Case {
    std::string name;
    std::vector<v1::ScanRequest> messages;
    grpc::StatusCode code;
    std::string message;
  };
  std::vector<Case> cases = {
      {"changed op", ScanPieces([](v1::ScanRequest* m) { m->set_op(v1::MAX); }),
       grpc::StatusCode::INVALID_ARGUMENT,
       "stream message 1 (from element 3): op differs from the stream's first message"},
      {"changed exclusive", ScanPieces([](v1::ScanRequest* m) { m->set_exclusive(true); }),
       grpc::StatusCode::INVALID_ARGUMENT, "exclusive differs from the stream's first message"},
      {"changed offsets", ScanPieces([](v1::ScanRequest* m) { m->add_segment_offsets(0); }),
       grpc::StatusCode::INVALID_ARGUMENT,
       "segment_offsets differs from the stream's first message"},
      {"changed dtype",
       ScanPieces([](v1::ScanRequest* m) { m->mutable_input()->set_dtype(v1::UINT32); }),
       grpc::StatusCode::INVALID_ARGUMENT, "input.dtype differs from the stream's first message"},
      {"partial element",
       ScanPieces([](v1::ScanRequest* m) { m->mutable_input()->set_data("abc"); }),
       grpc::StatusCode::INVALID_ARGUMENT,
       "stream message 1 (from element 3): input.data has 3 bytes, not a multiple of the 4-byte"},
      {"offset past the end",
       ScanPieces([](v1::ScanRequest*) {}), grpc::StatusCode::INVALID_ARGUMENT,
       "segment_offsets[1] = 6 is past the end of the stream's input (5 elements)"},
      {"no message", {}, grpc::StatusCode::INVALID_ARGUMENT, "the stream carried no message"},
  };
  cases[5].messages[0].add_segment_offsets(0);
  cases[5].messages[0].add_segment_offsets(6);
  for (const Case& c : cases) {
    std::vector<v1::ScanResponse> answers;
    const grpc::Status status = Bidi(&S::ScanStream, c.messages, &answers);
    EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message)) << c.name;
    ExpectAtRest();
    ExpectServing();
  }

  // Two arrays of unequal pieces.
  std::vector<v1::ReduceByKeyRequest> unequal(2);
  *unequal[0].mutable_keys() = PackArray<int32_t>(std::vector<int32_t>{1, 1});
  *unequal[0].mutable_values() = PackArray<int32_t>(std::vector<int32_t>{1, 2});
  unequal[0].set_op(v1::SUM);
  *unequal[1].mutable_keys() = PackArray<int32_t>(std::vector<int32_t>{1, 2, 3});
  *unequal[1].mutable_values() = PackArray<int32_t>(std::vector<int32_t>{1, 2});
  std::vector<v1::ReduceByKeyResponse> keyed;
  grpc::Status status = Bidi(&S::ReduceByKeyStream, unequal, &keyed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("stream message 1 (from element 2): values has 2 elements but keys has 3"));
  ExpectServing();

  // Partition.
  std::vector<v1::SelectRequest> partition(1);
  *partition[0].mutable_input() = PackArray<int32_t>(std::vector<int32_t>{1, 0, 2});
  partition[0].mutable_predicate()->set_kind(v1::Predicate::NONZERO);
  partition[0].set_partition(true);
  std::vector<v1::SelectResponse> selected;
  status = Bidi(&S::SelectStream, partition, &selected);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("partition is not supported by SelectStream"));
  EXPECT_TRUE(selected.empty());

  // A later message switching from a predicate to flags.
  std::vector<v1::SelectRequest> switched(2);
  *switched[0].mutable_input() = PackArray<int32_t>(std::vector<int32_t>{1, 0, 2});
  switched[0].mutable_predicate()->set_kind(v1::Predicate::NONZERO);
  *switched[1].mutable_input() = PackArray<int32_t>(std::vector<int32_t>{1});
  *switched[1].mutable_flags() = PackArray<int32_t>(std::vector<int32_t>{1});
  status = Bidi(&S::SelectStream, switched, &selected);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("flags is set but the stream's first message has no flags"));

  // A key out of range in a later piece of an AggregateByKeyStream.
  std::vector<v1::AggregateByKeyRequest> aggregate(2);
  *aggregate[0].mutable_keys() = PackArray<int32_t>(std::vector<int32_t>{0, 1});
  *aggregate[0].mutable_values() = PackArray<int32_t>(std::vector<int32_t>{5, 6});
  aggregate[0].set_op(v1::SUM);
  aggregate[0].set_num_keys(2);
  *aggregate[1].mutable_keys() = PackArray<int32_t>(std::vector<int32_t>{1, 7});
  *aggregate[1].mutable_values() = PackArray<int32_t>(std::vector<int32_t>{5, 6});
  v1::AggregateByKeyResponse aggregated;
  status = ClientStream(&S::AggregateByKeyStream, aggregate, &aggregated);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("stream message 1 (from element 2): "));
  ExpectAtRest();
  ExpectServing();
}

TEST_F(StreamTest, AMessageThatIsNoRequestEndsItsStreamAndTheServerGoesOn) {
  v1::ScanRequest first;
  *first.mutable_input() = PackArray<int32_t>(std::vector<int32_t>{1, 2, 3});
  first.set_op(v1::SUM);
  v1::ScanRequest later;
  *later.mutable_input() = PackArray<int32_t>(std::vector<int32_t>{4, 5});
  // Field 1 (input) says 5 bytes follow; 2 do.
  const std::string garbage("\x0a\x05" "ab", 4);
  int answers = 0;
  grpc::Status status = RawStream(
      "ScanStream", {first.SerializeAsString(), garbage, later.SerializeAsString()}, &answers);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("stream message 1 (from element 3): the request is not a valid "
                        "primserve.v1.ScanRequest"));
  EXPECT_LE(answers, 1);
  ExpectAtRest();
  ExpectServing();

  // The first message, of a stream with one answer.
  status = RawStream("ReduceStream", {garbage}, &answers);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("stream message 0 (from element 0): the request is not a valid "
                        "primserve.v1.ReduceRequest"));
  EXPECT_EQ(answers, 0);
  ExpectAtRest();
  ExpectServing();

  // The same stream of valid messages is answered whole.
  status = RawStream("ScanStream", {first.SerializeAsString(), later.SerializeAsString()},
                     &answers);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(answers, 2);
}

TEST_F(StreamTest, ACancelledStreamEndsCancelledAndTheServerGoesOn) {
  std::mt19937 rng(7);
  grpc::ClientContext context;
  auto stream = stub_->ScanStream(&context);
  v1::ScanRequest first;
  *first.mutable_input() = PackArray<int32_t>(Random<int32_t>(rng, 1000, 50));
  first.set_op(v1::SUM);
  ASSERT_TRUE(stream->Write(first));
  v1::ScanResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.output().data().size(), 4000u);
  v1::ScanRequest more;
  *more.mutable_input() = PackArray<int32_t>(Random<int32_t>(rng, 1000, 50));
  ASSERT_TRUE(stream->Write(more));
  context.TryCancel();
  while (stream->Read(&answer)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ExpectServing();
  ExpectAtRest();
}

TEST_F(StreamTest, AStreamPastItsDeadlineEndsAndTheServerGoesOn) {
  std::mt19937 rng(10);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(500)));
  v1::ReduceResponse answer;
  auto stream = stub_->ReduceStream(&context, &answer);
  v1::ReduceRequest first;
  *first.mutable_input() = PackArray<int32_t>(Random<int32_t>(rng, 1000, 50));
  first.set_op(v1::SUM);
  ASSERT_TRUE(stream->Write(first));
  // The client sends nothing more and never ends the stream.
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ExpectServing();
  ExpectAtRest();
}

TEST_F(StreamTest, AClientThatStopsReadingStallsOnlyItsOwnStream) {
  std::mt19937 rng(8);
  grpc::ClientContext context;
  auto stream = stub_->ScanStream(&context);
  // Far more than the window and the socket buffers hold: the writer blocks
  // once the server stops reading.
  constexpr int kPieces = 400;
  std::vector<int32_t> whole;
  std::vector<v1::ScanRequest> messages(kPieces);
  for (int i = 0; i < kPieces; ++i) {
    const std::vector<int32_t> piece = Random<int32_t>(rng, 16384, 50);
    whole.insert(whole.end(), piece.begin(), piece.end());
    *messages[i].mutable_input() = PackArray<int32_t>(piece);
  }
  messages[0].set_op(v1::SUM);
  absl::Notification written;
  std::thread writer([&] {
    for (const auto& m : messages) {
      if (!stream->Write(m)) break;
    }
    stream->WritesDone();
    written.Notify();
  });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(written.HasBeenNotified()) << "the server read the whole stream unanswered";
  ExpectServing();
  // Reading resumes the stream; every answer arrives, and they are the scan.
  std::vector<v1::ScanResponse> answers;
  v1::ScanResponse answer;
  while (stream->Read(&answer)) answers.push_back(answer);
  writer.join();
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answers.size(), static_cast<size_t>(kPieces));
  // The inclusive sum, wrapping as the server's does.
  std::vector<int32_t> want(whole.size());
  uint32_t sum = 0;
  for (size_t i = 0; i < whole.size(); ++i) want[i] = static_cast<int32_t>(sum += whole[i]);
  EXPECT_TRUE(Join(answers).output().data() == PackArray<int32_t>(want).data());
  ExpectAtRest();
}

// Floats that round differently in every association: a scan or reduction
// of them gives the same bits only in the same order of combination.
template <typename T>
std::vector<T> Rough(std::mt19937& rng, size_t n, v1::Op op) {
  std::uniform_real_distribution<double> sum(-1000, 1000);
  std::uniform_real_distribution<double> prod(0.999, 1.001);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(op == v1::PROD ? prod(rng) : sum(rng));
  return v;
}

// Piece sizes adding up to n, from empty to thousands of elements.
std::vector<size_t> LargePieces(std::mt19937& rng, size_t n) {
  if (rng() % 5 == 0) return {n};
  std::vector<size_t> sizes;
  for (size_t left = n; left > 0;) {
    const size_t size = rng() % 6 == 0 ? 0 : std::min<size_t>(left, 1 + rng() % 9000);
    sizes.push_back(size);
    left -= size;
  }
  return sizes;
}

// Elements in each answer's output.
std::vector<size_t> AnswerSizes(const std::vector<v1::ScanResponse>& answers, size_t element) {
  std::vector<size_t> sizes;
  for (const v1::ScanResponse& a : answers) sizes.push_back(a.output().data().size() / element);
  return sizes;
}

// A server whose requests are all reproducible (--reproducible_floats).
ServerOptions ReproducibleServer() {
  ServerOptions options;
  options.rpc_api = TestRpcApi();
  options.limits.reproducible_floats = true;
  return options;
}

// A reproducible float SUM/PROD ScanStream (--reproducible_floats) answers
// whole tiles of what it has received (the CPU backend cuts where the CUDA
// one does: 8192 float32s, 4096 float64s), one more answer with the rest,
// and joins to the unary scan bit for bit.
TEST_F(StreamTest, AReproducibleFloatScanStreamAnswersWholeTilesWithTheUnaryBits) {
  Start(std::make_unique<CpuBackend>(), ReproducibleServer());
  std::mt19937 rng(31);
  ForEachDType([&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      const size_t granule = 32768 / sizeof(T);
      for (v1::Op op : {v1::SUM, v1::PROD}) {
        for (bool exclusive : {false, true}) {
          const size_t n = 2 * granule + rng() % (3 * granule);
          v1::ScanRequest whole;
          *whole.mutable_input() = PackArray<T>(Rough<T>(rng, n, op));
          whole.set_op(op);
          whole.set_exclusive(exclusive);
          const std::vector<size_t> pieces = LargePieces(rng, n);
          std::vector<v1::ScanResponse> answers;
          const grpc::Status status = Bidi(&S::ScanStream, Cut(whole, pieces, rng), &answers);
          ASSERT_TRUE(status.ok()) << status.error_message();
          EXPECT_EQ(Join(answers).SerializeAsString(), Unary(&S::Scan, whole).SerializeAsString())
              << n << " elements in " << pieces.size() << " pieces";
          const std::vector<size_t> sizes = AnswerSizes(answers, sizeof(T));
          ASSERT_EQ(sizes.size(), pieces.size() + (n % granule != 0 ? 1 : 0));
          size_t received = 0;
          size_t answered = 0;
          for (size_t i = 0; i < pieces.size(); ++i) {
            received += pieces[i];
            answered += sizes[i];
            EXPECT_EQ(answered, received / granule * granule) << "answer " << i;
          }
        }
      }
    }
  });
}

// With --reproducible_floats off (the default), a float SUM ScanStream answers each piece
// as it comes (stitched on the host); a request's `reproducible` still asks
// for whole tiles.
TEST_F(StreamTest, TheServerFlagAndTheRequestFlagChooseHowAFloatScanStreamIsCut) {
  ServerOptions options;
  options.rpc_api = TestRpcApi();
  options.limits.reproducible_floats = false;
  Start(std::make_unique<CpuBackend>(), options);
  std::mt19937 rng(32);
  const size_t n = 30000;
  v1::ScanRequest whole;
  *whole.mutable_input() = PackArray<float>(Rough<float>(rng, n, v1::SUM));
  whole.set_op(v1::SUM);
  std::vector<size_t> pieces = {1000, 9000, 0, 15000, 5000};
  std::vector<v1::ScanResponse> answers;
  ASSERT_TRUE(Bidi(&S::ScanStream, Cut(whole, pieces, rng), &answers).ok());
  EXPECT_EQ(AnswerSizes(answers, sizeof(float)), pieces) << "one answer per piece";
  whole.set_reproducible(true);
  answers.clear();
  ASSERT_TRUE(Bidi(&S::ScanStream, Cut(whole, pieces, rng), &answers).ok());
  EXPECT_EQ(AnswerSizes(answers, sizeof(float)),
            (std::vector<size_t>{0, 8192, 0, 16384, 0, n - 24576}));
  EXPECT_EQ(Join(answers).SerializeAsString(), Unary(&S::Scan, whole).SerializeAsString());
}

// A reproducible float ReduceStream (and a segmented ScanStream) is gathered
// and run whole at its end: the unary answer's bits, whatever the pieces;
// reduced piece by piece and combined on the host it is not.
TEST_F(StreamTest, AReproducibleReduceStreamIsTheUnaryReduceBitForBit) {
  Start(std::make_unique<CpuBackend>(), ReproducibleServer());
  std::mt19937 rng(33);
  int piecewise_differs = 0;
  for (int round = 0; round < 6; ++round) {
    const size_t n = 20000 + rng() % 20000;
    v1::ReduceRequest whole;
    *whole.mutable_input() = PackArray<double>(Rough<double>(rng, n, v1::SUM));
    whole.set_op(v1::SUM);
    if (round % 2) {
      for (uint64_t o : {uint64_t{0}, uint64_t{n / 3}, uint64_t{n / 2}}) whole.add_segment_offsets(o);
    }
    const std::vector<size_t> pieces = LargePieces(rng, n);
    v1::ReduceResponse answer;
    ASSERT_TRUE(ClientStream(&S::ReduceStream, Cut(whole, pieces, rng), &answer).ok());
    const v1::ReduceResponse unary = Unary(&S::Reduce, whole);
    EXPECT_EQ(answer.SerializeAsString(), unary.SerializeAsString());

    v1::ScanRequest segmented;
    *segmented.mutable_input() = whole.input();
    segmented.set_op(v1::SUM);
    for (uint64_t o : {uint64_t{0}, uint64_t{n / 4}, uint64_t{n / 4}, uint64_t{n - 1}}) {
      segmented.add_segment_offsets(o);
    }
    std::vector<v1::ScanResponse> answers;
    ASSERT_TRUE(Bidi(&S::ScanStream, Cut(segmented, pieces, rng), &answers).ok());
    EXPECT_EQ(Join(answers).SerializeAsString(),
              Unary(&S::Scan, segmented).SerializeAsString());
    const std::vector<size_t> sizes = AnswerSizes(answers, sizeof(double));
    ASSERT_EQ(sizes.size(), pieces.size() + 1);
    EXPECT_EQ(sizes.back(), n) << "every piece answered empty, the whole at the end";

    // The same pieces reduced one by one (a server without
    // --reproducible_floats) associate otherwise.
    ServerOptions options;
    options.rpc_api = TestRpcApi();
    options.limits.reproducible_floats = false;
    Start(std::make_unique<CpuBackend>(), options);
    v1::ReduceResponse piecewise;
    ASSERT_TRUE(ClientStream(&S::ReduceStream, Cut(whole, pieces, rng), &piecewise).ok());
    piecewise_differs += pieces.size() > 2 && piecewise.SerializeAsString() !=
                                                  unary.SerializeAsString();
    Start(std::make_unique<CpuBackend>(), ReproducibleServer());
  }
  EXPECT_GT(piecewise_differs, 0) << "the rough values must round by association";
}

// Reproducible keyed streams are gathered too: a float SUM ReduceByKeyStream
// and AggregateByKeyStream give the unary answers' bits whatever the pieces
// (each piece answered empty, the whole at the end); stitched piece by piece
// on a server without the flag they do not.
TEST_F(StreamTest, ReproducibleKeyedStreamsAreTheUnaryAnswersBitForBit) {
  std::mt19937 rng(35);
  int piecewise_differs = 0;
  for (int round = 0; round < 6; ++round) {
    Start(std::make_unique<CpuBackend>(), ReproducibleServer());
    const size_t n = 20000 + rng() % 20000;
    std::vector<int32_t> keys(n);
    for (size_t i = 0, key = 0; i < n; ++key) {
      for (size_t run = 1 + rng() % 6000; run > 0 && i < n; --run) keys[i++] = key % 50;
    }
    v1::ReduceByKeyRequest by_key;
    *by_key.mutable_keys() = PackArray<int32_t>(keys);
    *by_key.mutable_values() = PackArray<float>(Rough<float>(rng, n, v1::SUM));
    by_key.set_op(v1::SUM);
    v1::AggregateByKeyRequest aggregate;
    *aggregate.mutable_keys() = by_key.keys();
    *aggregate.mutable_values() = by_key.values();
    aggregate.set_op(v1::SUM);
    aggregate.set_num_keys(50);
    const std::vector<size_t> pieces = LargePieces(rng, n);

    std::vector<v1::ReduceByKeyResponse> answers;
    ASSERT_TRUE(Bidi(&S::ReduceByKeyStream, Cut(by_key, pieces, rng), &answers).ok());
    const v1::ReduceByKeyResponse unary_by_key = Unary(&S::ReduceByKey, by_key);
    EXPECT_EQ(Join(answers).SerializeAsString(), unary_by_key.SerializeAsString());
    ASSERT_EQ(answers.size(), pieces.size() + 1);
    for (size_t i = 0; i < pieces.size(); ++i) {
      EXPECT_TRUE(answers[i].values().data().empty()) << "piece " << i << " answered empty";
    }
    v1::AggregateByKeyResponse aggregated;
    ASSERT_TRUE(
        ClientStream(&S::AggregateByKeyStream, Cut(aggregate, pieces, rng), &aggregated).ok());
    const v1::AggregateByKeyResponse unary_aggregate = Unary(&S::AggregateByKey, aggregate);
    EXPECT_EQ(aggregated.SerializeAsString(), unary_aggregate.SerializeAsString());

    // The same pieces stitched on the host (no flag) associate otherwise.
    Start(std::make_unique<CpuBackend>());
    std::vector<v1::ReduceByKeyResponse> stitched;
    ASSERT_TRUE(Bidi(&S::ReduceByKeyStream, Cut(by_key, pieces, rng), &stitched).ok());
    v1::AggregateByKeyResponse piecewise;
    ASSERT_TRUE(
        ClientStream(&S::AggregateByKeyStream, Cut(aggregate, pieces, rng), &piecewise).ok());
    piecewise_differs +=
        Join(stitched).SerializeAsString() != unary_by_key.SerializeAsString() ||
        piecewise.SerializeAsString() != unary_aggregate.SerializeAsString();
  }
  EXPECT_GT(piecewise_differs, 0) << "the rough values must round by association";
}

// A gathered stream holds at most one request's elements: past that it ends
// RESOURCE_EXHAUSTED saying why; integer streams are not gathered.
TEST_F(StreamTest, AGatheredStreamStopsAtOneRequestsLimit) {
  ServerOptions options = ReproducibleServer();
  options.limits.max_elements = 1000;
  Start(std::make_unique<CpuBackend>(), options);
  std::mt19937 rng(34);
  v1::ReduceRequest whole;
  *whole.mutable_input() = PackArray<float>(Rough<float>(rng, 1500, v1::SUM));
  whole.set_op(v1::SUM);
  v1::ReduceResponse answer;
  const grpc::Status status = ClientStream(&S::ReduceStream, Cut(whole, {500, 500, 500}, rng),
                                           &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("stream message 2 (from element 1000): a reproducible float SUM/PROD "
                        "ReduceStream is gathered whole"));
  EXPECT_THAT(status.error_message(), HasSubstr("holds at most 1000 elements"));
  // The same stream of int32s is stitched piece by piece (each under the
  // limit), so it may be longer than one request.
  const std::vector<int32_t> ints = Random<int32_t>(rng, 1500, 50);
  *whole.mutable_input() = PackArray<int32_t>(ints);
  ASSERT_TRUE(ClientStream(&S::ReduceStream, Cut(whole, {500, 500, 500}, rng), &answer).ok());
  int32_t sum = 0;
  for (int32_t x : ints) sum += x;
  EXPECT_EQ(*UnpackArray<int32_t>(answer.values()), std::vector<int32_t>{sum});
  ExpectServing();
}

}  // namespace
}  // namespace primserve
