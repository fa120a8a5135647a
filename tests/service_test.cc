// The service end to end: a real server on an ephemeral loopback port with the
// CPU backend, called through the client library over gRPC.
#include <atomic>
#include <cmath>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "reference/reference.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "tests/rpc_api.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMaxElements = uint64_t{1} << 23;

class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options;
    options.rpc_api = TestRpcApi();
    options.address = "127.0.0.1:0";
    options.limits.max_elements = kMaxElements;
    options.max_receive_message_bytes = 256 << 20;
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::make_unique<CpuBackend>());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    client_ = new PrimitivesClient(
        PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", server_->port())));
  }
  static void TearDownTestSuite() {
    delete client_;
    delete server_;
  }

  // After a bad request, the server still answers a good one correctly.
  static void ExpectStillServing() {
    const std::vector<int64_t> input = {5, -2, 7};
    absl::StatusOr<std::vector<int64_t>> out =
        client_->Scan<int64_t>(input, Op::kSum, /*exclusive=*/false);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, (std::vector<int64_t>{5, 3, 10}));
  }

  static void ExpectError(const absl::Status& status, absl::StatusCode code,
                          const std::string& message_part) {
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message_part));
    ExpectStillServing();
  }

  static PrimServer* server_;
  static PrimitivesClient* client_;
};

PrimServer* ServiceTest::server_ = nullptr;
PrimitivesClient* ServiceTest::client_ = nullptr;

template <typename T>
std::vector<T> RandomValues(std::mt19937_64& rng, size_t n) {
  std::vector<T> v(n);
  for (T& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      x = std::uniform_real_distribution<T>(-1, 1)(rng);
    } else {
      x = static_cast<T>(rng() % 201) - static_cast<T>(std::is_signed_v<T> ? 100 : 0);
    }
  }
  return v;
}

TEST_F(ServiceTest, HealthIsServing) { EXPECT_TRUE(client_->IsServing()); }

TEST_F(ServiceTest, ScanInclusiveExclusiveAndSegmented) {
  const std::vector<int32_t> input = {3, 1, 4, 1, 5, 9, 2, 6};
  EXPECT_EQ(*client_->Scan<int32_t>(input, Op::kSum), (std::vector<int32_t>{3, 4, 8, 9, 14, 23, 25, 31}));
  EXPECT_EQ(*client_->Scan<int32_t>(input, Op::kMax, /*exclusive=*/true),
            (std::vector<int32_t>{INT32_MIN, 3, 3, 4, 4, 5, 9, 9}));
  const std::vector<uint64_t> segments = {0, 3, 3, 6};
  EXPECT_EQ(*client_->Scan<int32_t>(input, Op::kSum, false, segments),
            (std::vector<int32_t>{3, 4, 8, 1, 6, 15, 2, 8}));
  const std::vector<double> floats = {1.5, 2.0, 0.5};
  EXPECT_EQ(*client_->Scan<double>(floats, Op::kProd), (std::vector<double>{1.5, 3.0, 1.5}));
}

TEST_F(ServiceTest, ReduceWithArgAndEmptySegments) {
  const std::vector<float> input = {2, -1, 7, 7, -1, 3};
  absl::StatusOr<Reduction<float>> argmax =
      client_->Reduce<float>(input, Op::kArgMax, std::vector<uint64_t>{0, 2, 2});
  ASSERT_TRUE(argmax.ok()) << argmax.status();
  EXPECT_EQ(argmax->values[0], 2);
  EXPECT_EQ(argmax->values[1], -INFINITY);  // empty segment: identity
  EXPECT_EQ(argmax->values[2], 7);
  EXPECT_EQ(argmax->indices, (std::vector<int64_t>{0, -1, 2}));
  absl::StatusOr<Reduction<float>> sum = client_->Reduce<float>(input, Op::kSum);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->values, (std::vector<float>{17}));
  EXPECT_TRUE(sum->indices.empty());
}

TEST_F(ServiceTest, SelectPredicateFlagsPartitionAndCount) {
  const std::vector<int64_t> input = {5, -3, 8, 0, 12, -7};
  Predicate<int64_t> gt{PredicateKind::kGt, 0, 0};
  absl::StatusOr<Selection<int64_t>> kept =
      client_->Select<int64_t>(input, gt, v1::SelectRequest::VALUES_AND_INDICES);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->values, (std::vector<int64_t>{5, 8, 12}));
  EXPECT_EQ(kept->indices, (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(kept->count, 3u);

  absl::StatusOr<Selection<int64_t>> parts =
      client_->Select<int64_t>(input, gt, v1::SelectRequest::VALUES, /*partition=*/true);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->values, (std::vector<int64_t>{5, 8, 12, -3, 0, -7}));
  EXPECT_EQ(parts->count, 3u);

  const std::vector<uint32_t> flags = {0, 1, 0, 1, 1, 0};
  absl::StatusOr<Selection<int64_t>> flagged =
      client_->SelectFlagged<int64_t, uint32_t>(input, flags, v1::SelectRequest::COUNT);
  ASSERT_TRUE(flagged.ok());
  EXPECT_EQ(flagged->count, 3u);
  EXPECT_TRUE(flagged->values.empty());

  Predicate<int64_t> in_range{PredicateKind::kInRange, -3, 8};
  absl::StatusOr<Selection<int64_t>> ranged = client_->Select<int64_t>(input, in_range);
  ASSERT_TRUE(ranged.ok());
  EXPECT_EQ(ranged->values, (std::vector<int64_t>{5, -3, 0}));
}

TEST_F(ServiceTest, UniqueRunLengthsAndKeyedReductions) {
  const std::vector<uint32_t> input = {4, 4, 1, 1, 1, 4, 9};
  EXPECT_EQ(*client_->Unique<uint32_t>(input), (std::vector<uint32_t>{4, 1, 4, 9}));
  absl::StatusOr<RunLengths<uint32_t>> runs = client_->RunLengthEncode<uint32_t>(input);
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->values, (std::vector<uint32_t>{4, 1, 4, 9}));
  EXPECT_EQ(runs->lengths, (std::vector<int64_t>{2, 3, 1, 1}));

  const std::vector<double> values = {1, 2, 3, 4, 5, 6, 7};
  absl::StatusOr<KeyedReduction<uint32_t, double>> by_key =
      client_->ReduceByKey<uint32_t, double>(input, values, Op::kSum);
  ASSERT_TRUE(by_key.ok()) << by_key.status();
  EXPECT_EQ(by_key->keys, (std::vector<uint32_t>{4, 1, 4, 9}));
  EXPECT_EQ(by_key->values, (std::vector<double>{3, 12, 6, 7}));

  const std::vector<int32_t> keys = {2, 0, 2, 3, 0};
  const std::vector<int32_t> weights = {10, 1, 5, 7, 2};
  EXPECT_EQ(*(client_->AggregateByKey<int32_t, int32_t>(keys, weights, Op::kSum, 5)),
            (std::vector<int32_t>{3, 0, 15, 7, 0}));
  EXPECT_EQ(*(client_->AggregateByKey<int32_t, int32_t>(keys, weights, Op::kMin, 4)),
            (std::vector<int32_t>{1, INT32_MAX, 5, 7}));
}

TEST_F(ServiceTest, EmptyAndSingleElementInputs) {
  const std::vector<float> empty;
  EXPECT_TRUE(client_->Scan<float>(empty, Op::kSum)->empty());
  absl::StatusOr<Reduction<float>> r = client_->Reduce<float>(empty, Op::kArgMin);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->values, (std::vector<float>{INFINITY}));
  EXPECT_EQ(r->indices, (std::vector<int64_t>{-1}));
  EXPECT_EQ(client_->Select<float>(empty, Predicate<float>{})->count, 0u);
  EXPECT_TRUE(client_->Unique<float>(empty)->empty());
  EXPECT_TRUE(client_->RunLengthEncode<float>(empty)->values.empty());
  EXPECT_EQ(*(client_->AggregateByKey<int32_t, float>({}, empty, Op::kMax, 2)),
            (std::vector<float>{-INFINITY, -INFINITY}));

  const std::vector<int32_t> one = {42};
  EXPECT_EQ(*client_->Scan<int32_t>(one, Op::kSum, /*exclusive=*/true), (std::vector<int32_t>{0}));
  EXPECT_EQ(client_->Reduce<int32_t>(one, Op::kProd)->values, (std::vector<int32_t>{42}));
  EXPECT_EQ(client_->RunLengthEncode<int32_t>(one)->lengths, (std::vector<int64_t>{1}));
}

TEST_F(ServiceTest, LargeInputsMatchTheReference) {
  std::mt19937_64 rng(20261121);
  const std::vector<int32_t> input = RandomValues<int32_t>(rng, size_t{1} << 22);
  absl::StatusOr<std::vector<int32_t>> scanned = client_->Scan<int32_t>(input, Op::kSum);
  ASSERT_TRUE(scanned.ok()) << scanned.status();
  EXPECT_EQ(*scanned, reference::Scan<int32_t>(input, Op::kSum, false));
  Predicate<int32_t> positive{PredicateKind::kGt, 0, 0};
  absl::StatusOr<Selection<int32_t>> kept =
      client_->Select<int32_t>(input, positive, v1::SelectRequest::VALUES_AND_INDICES, true);
  ASSERT_TRUE(kept.ok());
  reference::SelectResult<int32_t> expected = reference::Select<int32_t>(
      input, reference::EvaluatePredicate<int32_t>(input, positive), true);
  EXPECT_EQ(kept->values, expected.values);
  EXPECT_EQ(kept->indices, expected.indices);
  EXPECT_EQ(kept->count, expected.count);
}

TEST_F(ServiceTest, ConcurrentCallersGetTheirOwnAnswers) {
  constexpr int kThreads = 16, kCalls = 40;
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      for (int i = 0; i < kCalls; ++i) {
        const std::vector<int64_t> input = RandomValues<int64_t>(rng, 1 + rng() % 2000);
        const Op op = static_cast<Op>(1 + rng() % 4);
        const bool exclusive = rng() % 2;
        absl::StatusOr<std::vector<int64_t>> out = client_->Scan<int64_t>(input, op, exclusive);
        if (!out.ok()) {
          ++failed;
        } else if (*out != reference::Scan<int64_t>(input, op, exclusive)) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
}

// --- Bad input: a specific code and message, and the server carries on. ---

v1::ScanRequest GoodScan() {
  v1::ScanRequest request;
  const std::vector<int32_t> input = {1, 2, 3, 4};
  *request.mutable_input() = PackArray<int32_t>(input);
  request.set_op(v1::SUM);
  return request;
}

TEST_F(ServiceTest, RejectsMalformedArrays) {
  v1::ScanRequest request = GoodScan();
  request.mutable_input()->set_dtype(v1::DTYPE_UNSPECIFIED);
  ExpectError(client_->Call(request).status(), absl::StatusCode::kInvalidArgument,
              "input.dtype is missing");

  request = GoodScan();
  request.mutable_input()->set_dtype(static_cast<v1::DType>(99));
  ExpectError(client_->Call(request).status(), absl::StatusCode::kInvalidArgument,
              "input.dtype 99 is not a known DType");

  request = GoodScan();
  request.mutable_input()->mutable_data()->append("xyz");
  ExpectError(client_->Call(request).status(), absl::StatusCode::kInvalidArgument,
              "input.data has 19 bytes, not a multiple of the 4-byte INT32 element");
}

TEST_F(ServiceTest, RejectsBadSegments) {
  v1::ScanRequest request = GoodScan();
  request.add_segment_offsets(1);
  ExpectError(client_->Call(request).status(), absl::StatusCode::kInvalidArgument,
              "the first segment must start at 0");

  request = GoodScan();
  for (uint64_t offset : {0, 3, 2}) request.add_segment_offsets(offset);
  ExpectError(client_->Call(request).status(), absl::StatusCode::kInvalidArgument,
              "segment_offsets[2] = 2 is less than segment_offsets[1] = 3");

  v1::ReduceRequest reduce;
  *reduce.mutable_input() = GoodScan().input();
  reduce.set_op(v1::MIN);
  for (uint64_t offset : {0, 5}) reduce.add_segment_offsets(offset);
  ExpectError(client_->Call(reduce).status(), absl::StatusCode::kInvalidArgument,
              "segment_offsets[1] = 5 is past the end of the input (4 elements)");
}

TEST_F(ServiceTest, RejectsOpsThatDoNotApply) {
  v1::ScanRequest scan = GoodScan();
  scan.set_op(v1::OP_UNSPECIFIED);
  ExpectError(client_->Call(scan).status(), absl::StatusCode::kInvalidArgument, "op is missing");
  scan.set_op(v1::ARGMIN);
  ExpectError(client_->Call(scan).status(), absl::StatusCode::kInvalidArgument,
              "op ARGMIN does not apply to Scan");
  scan.set_op(static_cast<v1::Op>(42));
  ExpectError(client_->Call(scan).status(), absl::StatusCode::kInvalidArgument,
              "op 42 is not a known Op");

  v1::AggregateByKeyRequest aggregate;
  *aggregate.mutable_keys() = PackArray<int32_t>(std::vector<int32_t>{0, 1});
  *aggregate.mutable_values() = PackArray<int32_t>(std::vector<int32_t>{5, 6});
  aggregate.set_num_keys(2);
  aggregate.set_op(v1::PROD);
  ExpectError(client_->Call(aggregate).status(), absl::StatusCode::kInvalidArgument,
              "op PROD does not apply to AggregateByKey");

  v1::ReduceByKeyRequest by_key;
  *by_key.mutable_keys() = aggregate.keys();
  *by_key.mutable_values() = aggregate.values();
  by_key.set_op(v1::ARGMAX);
  ExpectError(client_->Call(by_key).status(), absl::StatusCode::kInvalidArgument,
              "op ARGMAX does not apply to ReduceByKey");
}

TEST_F(ServiceTest, RejectsLengthMismatches) {
  v1::SelectRequest select;
  *select.mutable_input() = GoodScan().input();
  *select.mutable_flags() = PackArray<int32_t>(std::vector<int32_t>{1, 0});
  ExpectError(client_->Call(select).status(), absl::StatusCode::kInvalidArgument,
              "flags has 2 elements but input has 4");

  *select.mutable_flags() = PackArray<float>(std::vector<float>{1, 0, 1, 0});
  ExpectError(client_->Call(select).status(), absl::StatusCode::kInvalidArgument,
              "flags must be of an integer dtype");

  v1::ReduceByKeyRequest by_key;
  *by_key.mutable_keys() = PackArray<int32_t>(std::vector<int32_t>{1, 1, 2});
  *by_key.mutable_values() = PackArray<int32_t>(std::vector<int32_t>{1});
  by_key.set_op(v1::SUM);
  ExpectError(client_->Call(by_key).status(), absl::StatusCode::kInvalidArgument,
              "values has 1 elements but keys has 3");
}

TEST_F(ServiceTest, RejectsBadPredicates) {
  v1::SelectRequest select;
  *select.mutable_input() = GoodScan().input();
  ExpectError(client_->Call(select).status(), absl::StatusCode::kInvalidArgument,
              "a criterion is required");

  select.mutable_predicate()->set_kind(v1::Predicate::KIND_UNSPECIFIED);
  ExpectError(client_->Call(select).status(), absl::StatusCode::kInvalidArgument,
              "predicate.kind is missing");

  select.mutable_predicate()->set_kind(v1::Predicate::LT);
  ExpectError(client_->Call(select).status(), absl::StatusCode::kInvalidArgument,
              "predicate.operand is required for LT");

  select.mutable_predicate()->mutable_operand()->set_float_value(2.5);
  ExpectError(client_->Call(select).status(), absl::StatusCode::kInvalidArgument,
              "predicate.operand is a float_value but the input is INT32");

  select.mutable_predicate()->mutable_operand()->set_int_value(int64_t{1} << 40);
  ExpectError(client_->Call(select).status(), absl::StatusCode::kInvalidArgument,
              "does not fit INT32");

  select.mutable_predicate()->set_kind(v1::Predicate::IN_RANGE);
  select.mutable_predicate()->mutable_operand()->set_int_value(1);
  ExpectError(client_->Call(select).status(), absl::StatusCode::kInvalidArgument,
              "predicate.upper is required for IN_RANGE");

  select.mutable_predicate()->mutable_upper()->set_uint_value(3);
  absl::StatusOr<v1::SelectResponse> ok = client_->Call(select);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->count(), 2u);  // 1 and 2 are in [1, 3)
}

TEST_F(ServiceTest, RejectsBadKeys) {
  v1::AggregateByKeyRequest request;
  *request.mutable_keys() = PackArray<int64_t>(std::vector<int64_t>{0, 3, 1, -2});
  *request.mutable_values() = PackArray<float>(std::vector<float>{1, 2, 3, 4});
  request.set_op(v1::SUM);
  request.set_num_keys(4);
  ExpectError(client_->Call(request).status(), absl::StatusCode::kInvalidArgument,
              "keys[3] = -2");

  request.set_num_keys(0);
  ExpectError(client_->Call(request).status(), absl::StatusCode::kInvalidArgument,
              "num_keys must be at least 1");

  request.set_num_keys(kMaxElements + 1);
  ExpectError(client_->Call(request).status(), absl::StatusCode::kResourceExhausted,
              "num_keys = 8388609 is over the server's limit");

  *request.mutable_keys() = PackArray<float>(std::vector<float>{0, 1, 1, 0});
  request.set_num_keys(2);
  ExpectError(client_->Call(request).status(), absl::StatusCode::kInvalidArgument,
              "keys must be of an integer dtype");
}

TEST_F(ServiceTest, RejectsRequestsOverTheLimits) {
  v1::ScanRequest request;
  request.mutable_input()->set_dtype(v1::UINT32);
  request.mutable_input()->mutable_data()->assign((kMaxElements + 1) * 4, '\1');
  request.set_op(v1::SUM);
  ExpectError(client_->Call(request).status(), absl::StatusCode::kResourceExhausted,
              "input has 8388609 elements, over the server's limit of 8388608");

  // Over the receive limit: gRPC refuses the message before it is read.
  request.mutable_input()->mutable_data()->assign((256 << 20) + 8, '\1');
  absl::Status status = client_->Call(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  ExpectStillServing();
}

// What reaches the backend: each operation's `reproducible`, recorded.
class RecordingBackend final : public ExecutionBackend {
 public:
  std::string name() const override { return "recording"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override {
    for (const std::unique_ptr<Task>& task : batch) {
      {
        absl::MutexLock lock(&mu_);
        seen_.push_back(std::visit(
            Overloaded{[](const ScanOperation& o) { return o.reproducible; },
                       [](const ReduceOperation& o) { return o.reproducible; },
                       [](const ReduceByKeyOperation& o) { return o.reproducible; },
                       [](const AggregateByKeyOperation& o) { return o.reproducible; },
                       [](const auto&) { return false; }},
            task->operation));
      }
    }
    cpu_.Execute(std::move(batch));
  }
  std::vector<bool> Take() {
    absl::MutexLock lock(&mu_);
    return std::exchange(seen_, {});
  }

 private:
  CpuBackend cpu_;
  absl::Mutex mu_;
  std::vector<bool> seen_;
};

// --reproducible_floats (off by default) makes every request reproducible;
// off, only those that ask. Reproducible or not, the CPU backend's answers
// are its sequential ones.
TEST(ReproducibleFlagTest, TheServerDefaultAndTheRequestFlagReachTheBackend) {
  for (bool server_default : {true, false}) {
    auto backend = std::make_unique<RecordingBackend>();
    RecordingBackend* recording = backend.get();
    ServerOptions options;
    options.rpc_api = TestRpcApi();
    options.address = "127.0.0.1:0";
    options.limits.reproducible_floats = server_default;
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::move(backend));
    ASSERT_TRUE(server.ok()) << server.status();
    auto stub = v1::Primitives::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));
    const std::vector<float> values = {0.1f, 0.2f, 0.3f};
    for (bool asked : {false, true}) {
      v1::ScanRequest scan;
      *scan.mutable_input() = PackArray<float>(values);
      scan.set_op(v1::SUM);
      scan.set_reproducible(asked);
      v1::ReduceRequest reduce;
      *reduce.mutable_input() = PackArray<float>(values);
      reduce.set_op(v1::PROD);
      reduce.set_reproducible(asked);
      v1::ReduceByKeyRequest by_key;
      *by_key.mutable_keys() = PackArray<int32_t>(std::vector<int32_t>{1, 1, 2});
      *by_key.mutable_values() = PackArray<float>(values);
      by_key.set_op(v1::SUM);
      by_key.set_reproducible(asked);
      v1::AggregateByKeyRequest aggregate;
      *aggregate.mutable_keys() = PackArray<int32_t>(std::vector<int32_t>{1, 0, 1});
      *aggregate.mutable_values() = PackArray<float>(values);
      aggregate.set_op(v1::SUM);
      aggregate.set_num_keys(2);
      aggregate.set_reproducible(asked);
      grpc::ClientContext c1, c2, c3, c4;
      v1::ScanResponse r1;
      v1::ReduceResponse r2;
      v1::ReduceByKeyResponse r3;
      v1::AggregateByKeyResponse r4;
      ASSERT_TRUE(stub->Scan(&c1, scan, &r1).ok());
      ASSERT_TRUE(stub->Reduce(&c2, reduce, &r2).ok());
      ASSERT_TRUE(stub->ReduceByKey(&c3, by_key, &r3).ok());
      ASSERT_TRUE(stub->AggregateByKey(&c4, aggregate, &r4).ok());
      EXPECT_EQ(*UnpackArray<float>(r1.output()),
                (std::vector<float>{0.1f, 0.1f + 0.2f, 0.1f + 0.2f + 0.3f}));
      EXPECT_EQ(recording->Take(), std::vector<bool>(4, server_default || asked))
          << "server default " << server_default << ", asked " << asked;
    }
  }
}

}  // namespace
}  // namespace primserve
