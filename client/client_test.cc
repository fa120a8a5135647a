// PrimitivesClient's typed helpers against a real server (CPU backend,
// loopback, --reproducible_floats off): SetReproducible(true) sets
// `reproducible` in Scan, ScanStream, Reduce, ReduceByKey and AggregateByKey.
// The CPU backend in reproducible mode follows the GPU kernels' association
// (reference/gpu_order.h), so a float SUM scan or reduce of mixed magnitudes
// gets those bits, not the plain sequential ones, and a streamed scan gets
// the unary one's bits in any piece sizes.
//
// Every typed helper against the CPU reference on random data (integers,
// exact), at lengths around and well past wire::kMinSlicePayload (16 KiB:
// payloads from there on go as slices of their own, over the caller's memory
// on the way out and left in gRPC's slices on the way back), none of them
// round, and empty; errors come back with the server's code and message.
#include "client/client.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "reference/gpu_order.h"
#include "reference/reference.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "wire/framing.h"

namespace primserve {
namespace {

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Values over many magnitudes and both signs: any change in the order of
// float additions shows in the low bits.
std::vector<float> MixedMagnitudes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> values(n);
  for (float& x : values) x = std::ldexp(mantissa(rng), exponent(rng));
  return values;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    server_ = PrimServer::Start(options, std::make_unique<CpuBackend>()).value();
    channel_ = PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", server_->port()));
  }

  std::unique_ptr<PrimServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ClientTest, ReproducibleIsOffByDefault) {
  PrimitivesClient client(channel_);
  EXPECT_FALSE(client.reproducible());
  client.SetReproducible(true);
  EXPECT_TRUE(client.reproducible());
}

TEST_F(ClientTest, ReproducibleScanGetsTheKernelsBitsUnaryAndStreamed) {
  // More than two tiles (8192 float32s each), not a multiple of one.
  const std::vector<float> input = MixedMagnitudes(300001, 1);
  std::vector<float> gpu_order(input.size());
  reference::GpuOrderScan<float>(input, absl::MakeSpan(gpu_order), Op::kSum, false);

  PrimitivesClient plain(channel_);
  absl::StatusOr<std::vector<float>> sequential = plain.Scan<float>(input, Op::kSum);
  ASSERT_TRUE(sequential.ok()) << sequential.status();
  // The two orders do differ on this input, so the flag is what is tested.
  ASSERT_FALSE(SameBits(*sequential, gpu_order));

  PrimitivesClient client(channel_);
  client.SetReproducible(true);
  absl::StatusOr<std::vector<float>> unary = client.Scan<float>(input, Op::kSum);
  ASSERT_TRUE(unary.ok()) << unary.status();
  EXPECT_TRUE(SameBits(*unary, gpu_order));
  absl::StatusOr<std::vector<float>> again = client.Scan<float>(input, Op::kSum);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(SameBits(*again, *unary));

  for (size_t piece : {size_t{1000}, size_t{8192}, size_t{12345}, size_t{100000}}) {
    absl::StatusOr<std::vector<float>> streamed =
        client.ScanStream<float>(input, Op::kSum, false, piece);
    ASSERT_TRUE(streamed.ok()) << streamed.status();
    EXPECT_TRUE(SameBits(*streamed, *unary)) << "piece " << piece;
  }
  // Through Scan's own streaming threshold too.
  client.SetStreaming(input.size() * sizeof(float) / 3, 7777 * sizeof(float));
  absl::StatusOr<std::vector<float>> streamed = client.Scan<float>(input, Op::kSum);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_TRUE(SameBits(*streamed, *unary));
}

TEST_F(ClientTest, ReproducibleReduceGetsTheKernelsBits) {
  const std::vector<float> input = MixedMagnitudes(300001, 2);
  const float gpu_order = reference::GpuOrderReduce<float>(input, Op::kSum);
  PrimitivesClient client(channel_);
  client.SetReproducible(true);
  absl::StatusOr<Reduction<float>> reduced = client.Reduce<float>(input, Op::kSum);
  ASSERT_TRUE(reduced.ok()) << reduced.status();
  ASSERT_EQ(reduced->values.size(), 1u);
  EXPECT_TRUE(reference::GpuOrderSameBits(reduced->values[0], gpu_order))
      << reduced->values[0] << " vs " << gpu_order;
}

TEST_F(ClientTest, ReproducibleKeyedCallsSendTheFlag) {
  const std::vector<float> values = MixedMagnitudes(50000, 3);
  std::vector<int32_t> sorted_keys(values.size()), keys(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    sorted_keys[i] = static_cast<int32_t>(i / 1000);
    keys[i] = static_cast<int32_t>((i * 7919) % 37);
  }
  PrimitivesClient client(channel_);
  client.SetReproducible(true);

  // The typed answers are the raw calls' with reproducible set.
  v1::ReduceByKeyRequest by_key;
  *by_key.mutable_keys() = PackArray<int32_t>(sorted_keys);
  *by_key.mutable_values() = PackArray<float>(values);
  by_key.set_op(v1::SUM);
  by_key.set_reproducible(true);
  absl::StatusOr<v1::ReduceByKeyResponse> raw_by_key = client.Call(by_key);
  ASSERT_TRUE(raw_by_key.ok()) << raw_by_key.status();
  absl::StatusOr<KeyedReduction<int32_t, float>> reduced =
      client.ReduceByKey<int32_t, float>(sorted_keys, values, Op::kSum);
  ASSERT_TRUE(reduced.ok()) << reduced.status();
  EXPECT_EQ(reduced->keys.size(), 50u);
  EXPECT_TRUE(SameBits(reduced->values, UnpackArray<float>(raw_by_key->values()).value()));

  v1::AggregateByKeyRequest aggregate;
  *aggregate.mutable_keys() = PackArray<int32_t>(keys);
  *aggregate.mutable_values() = PackArray<float>(values);
  aggregate.set_op(v1::SUM);
  aggregate.set_num_keys(37);
  aggregate.set_reproducible(true);
  absl::StatusOr<v1::AggregateByKeyResponse> raw_aggregate = client.Call(aggregate);
  ASSERT_TRUE(raw_aggregate.ok()) << raw_aggregate.status();
  absl::StatusOr<std::vector<float>> aggregated =
      client.AggregateByKey<int32_t, float>(keys, values, Op::kSum, 37);
  ASSERT_TRUE(aggregated.ok()) << aggregated.status();
  EXPECT_TRUE(SameBits(*aggregated, UnpackArray<float>(raw_aggregate->values()).value()));
  absl::StatusOr<std::vector<float>> again =
      client.AggregateByKey<int32_t, float>(keys, values, Op::kSum, 37);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(SameBits(*again, *aggregated));
}

TEST_F(ClientTest, ReproducibleLeavesIntegersExact) {
  std::vector<int64_t> input(100000);
  std::mt19937_64 rng(4);
  for (int64_t& x : input) x = static_cast<int64_t>(rng() % 2001) - 1000;
  PrimitivesClient plain(channel_);
  PrimitivesClient client(channel_);
  client.SetReproducible(true);
  absl::StatusOr<std::vector<int64_t>> want = plain.Scan<int64_t>(input, Op::kSum);
  absl::StatusOr<std::vector<int64_t>> got = client.Scan<int64_t>(input, Op::kSum);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(*got, *want);
  absl::StatusOr<Reduction<int64_t>> sum = client.Reduce<int64_t>(input, Op::kSum);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->values[0], want->back());
}

// Lengths in elements: empty, tiny, either side of 16 KiB for 4- and 8-byte
// elements, and large; none a multiple of anything nice but the boundaries.
const size_t kLengths[] = {0, 1, 3, 2047, 2049, 4095, 4096, 4097, 100003, 1048583};

static_assert(wire::kMinSlicePayload == 16 * 1024, "kLengths straddle 16 KiB");

// Random elements in [lo, hi].
template <typename T>
std::vector<T> RandomValues(size_t n, uint64_t seed, int64_t lo, int64_t hi) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(lo, hi);
  std::vector<T> values(n);
  for (T& x : values) x = static_cast<T>(pick(rng));
  return values;
}

// Sorted segment starts over n elements: 0, then random points (repeats and
// n itself allowed, i.e. empty segments).
std::vector<uint64_t> RandomSegments(size_t n, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> starts = {0};
  for (size_t i = 1; i < count; ++i) starts.push_back(n == 0 ? 0 : rng() % (n + 1));
  std::sort(starts.begin(), starts.end());
  return starts;
}

template <typename T>
class TypedClientTest : public ClientTest {};

using ElementTypes = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t>;
TYPED_TEST_SUITE(TypedClientTest, ElementTypes);

TYPED_TEST(TypedClientTest, ScanEqualsTheReference) {
  using T = TypeParam;
  PrimitivesClient client(this->channel_);
  for (size_t n : kLengths) {
    const std::vector<T> input = RandomValues<T>(n, n + 1, 0, 1000);
    for (Op op : {Op::kSum, Op::kMin, Op::kMax}) {
      for (bool exclusive : {false, true}) {
        absl::StatusOr<std::vector<T>> got = client.Scan<T>(input, op, exclusive);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(*got, reference::Scan<T>(input, op, exclusive))
            << "n " << n << " op " << static_cast<int>(op) << " exclusive " << exclusive;
      }
    }
    const std::vector<uint64_t> segments = RandomSegments(n, 7, n + 2);
    absl::StatusOr<std::vector<T>> got = client.Scan<T>(input, Op::kSum, false, segments);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, reference::Scan<T>(input, Op::kSum, false, segments)) << "n " << n;
  }
}

TYPED_TEST(TypedClientTest, ScanStreamEqualsTheReference) {
  using T = TypeParam;
  PrimitivesClient client(this->channel_);
  for (size_t n : kLengths) {
    const std::vector<T> input = RandomValues<T>(n, n + 3, 0, 1000);
    const std::vector<T> want = reference::Scan<T>(input, Op::kSum, false);
    for (size_t piece : {size_t{4099}, size_t{65537}, n + 1}) {
      absl::StatusOr<std::vector<T>> got = client.ScanStream<T>(input, Op::kSum, false, piece);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, want) << "n " << n << " piece " << piece;
    }
  }
  // Scan itself streams above its threshold.
  const std::vector<T> input = RandomValues<T>(300007, 5, 0, 1000);
  client.SetStreaming(100000 * sizeof(T), 33333 * sizeof(T));
  absl::StatusOr<std::vector<T>> got = client.Scan<T>(input, Op::kMax, true);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, reference::Scan<T>(input, Op::kMax, true));
}

TYPED_TEST(TypedClientTest, ReduceEqualsTheReference) {
  using T = TypeParam;
  PrimitivesClient client(this->channel_);
  for (size_t n : kLengths) {
    const std::vector<T> input = RandomValues<T>(n, n + 4, 0, 1000);
    for (Op op : {Op::kSum, Op::kMin, Op::kMax, Op::kArgMin, Op::kArgMax}) {
      for (size_t segments : {size_t{0}, size_t{5}}) {
        const std::vector<uint64_t> starts =
            segments == 0 ? std::vector<uint64_t>{} : RandomSegments(n, segments, n + 5);
        absl::StatusOr<Reduction<T>> got = client.Reduce<T>(input, op, starts);
        ASSERT_TRUE(got.ok()) << got.status();
        const reference::ReduceResult<T> want = reference::Reduce<T>(input, op, starts);
        EXPECT_EQ(got->values, want.values) << "n " << n << " op " << static_cast<int>(op);
        EXPECT_EQ(got->indices, want.indices) << "n " << n << " op " << static_cast<int>(op);
      }
    }
  }
}

TYPED_TEST(TypedClientTest, SelectEqualsTheReference) {
  using T = TypeParam;
  PrimitivesClient client(this->channel_);
  for (size_t n : kLengths) {
    const std::vector<T> input = RandomValues<T>(n, n + 6, 0, 1000);
    Predicate<T> predicate;
    predicate.kind = PredicateKind::kInRange;
    predicate.operand = 100;
    predicate.upper = 700;
    const std::vector<bool> keep = reference::EvaluatePredicate<T>(input, predicate);
    const std::vector<int32_t> flags = RandomValues<int32_t>(n, n + 7, 0, 2);
    const std::vector<bool> flagged = reference::EvaluateFlags<int32_t>(flags);
    for (bool partition : {false, true}) {
      const reference::SelectResult<T> want = reference::Select<T>(input, keep, partition);
      absl::StatusOr<Selection<T>> got = client.Select<T>(
          input, predicate, v1::SelectRequest::VALUES_AND_INDICES, partition);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->values, want.values) << "n " << n;
      EXPECT_EQ(got->indices, want.indices) << "n " << n;
      EXPECT_EQ(got->count, want.count) << "n " << n;

      absl::StatusOr<Selection<T>> values_only =
          client.Select<T>(input, predicate, v1::SelectRequest::VALUES, partition);
      ASSERT_TRUE(values_only.ok()) << values_only.status();
      EXPECT_EQ(values_only->values, want.values) << "n " << n;
      EXPECT_TRUE(values_only->indices.empty());

      const reference::SelectResult<T> want_flagged =
          reference::Select<T>(input, flagged, partition);
      absl::StatusOr<Selection<T>> by_flags = client.SelectFlagged<T, int32_t>(
          input, flags, v1::SelectRequest::VALUES_AND_INDICES, partition);
      ASSERT_TRUE(by_flags.ok()) << by_flags.status();
      EXPECT_EQ(by_flags->values, want_flagged.values) << "n " << n;
      EXPECT_EQ(by_flags->indices, want_flagged.indices) << "n " << n;
      EXPECT_EQ(by_flags->count, want_flagged.count) << "n " << n;
    }
    absl::StatusOr<Selection<T>> count =
        client.Select<T>(input, predicate, v1::SelectRequest::COUNT);
    ASSERT_TRUE(count.ok()) << count.status();
    EXPECT_EQ(count->count, std::count(keep.begin(), keep.end(), true));
    EXPECT_TRUE(count->values.empty() && count->indices.empty());
  }
}

TYPED_TEST(TypedClientTest, SelectStreamEqualsTheReference) {
  using T = TypeParam;
  PrimitivesClient client(this->channel_);
  for (size_t n : kLengths) {
    const std::vector<T> input = RandomValues<T>(n, n + 8, 0, 1000);
    Predicate<T> predicate;
    predicate.kind = PredicateKind::kGe;
    predicate.operand = 500;
    const reference::SelectResult<T> want = reference::Select<T>(
        input, reference::EvaluatePredicate<T>(input, predicate), false);
    for (size_t piece : {size_t{4097}, n + 1}) {
      absl::StatusOr<Selection<T>> got = client.SelectStream<T>(
          input, predicate, piece, v1::SelectRequest::VALUES_AND_INDICES);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->values, want.values) << "n " << n << " piece " << piece;
      EXPECT_EQ(got->indices, want.indices) << "n " << n << " piece " << piece;
      EXPECT_EQ(got->count, want.count) << "n " << n << " piece " << piece;
    }
  }
}

TYPED_TEST(TypedClientTest, UniqueAndRunLengthEncodeEqualTheReference) {
  using T = TypeParam;
  PrimitivesClient client(this->channel_);
  for (size_t n : kLengths) {
    // Few distinct values: runs of every length.
    const std::vector<T> input = RandomValues<T>(n, n + 9, 0, 2);
    absl::StatusOr<std::vector<T>> unique = client.Unique<T>(input);
    ASSERT_TRUE(unique.ok()) << unique.status();
    EXPECT_EQ(*unique, reference::Unique<T>(input)) << "n " << n;

    absl::StatusOr<RunLengths<T>> runs = client.RunLengthEncode<T>(input);
    ASSERT_TRUE(runs.ok()) << runs.status();
    const reference::Runs<T> want = reference::RunLengthEncode<T>(input);
    EXPECT_EQ(runs->values, want.values) << "n " << n;
    EXPECT_EQ(runs->lengths, want.lengths) << "n " << n;
  }
}

TYPED_TEST(TypedClientTest, KeyedCallsEqualTheReference) {
  using V = TypeParam;
  PrimitivesClient client(this->channel_);
  for (size_t n : kLengths) {
    const std::vector<V> values = RandomValues<V>(n, n + 10, 0, 1000);
    // Runs of equal keys (ReduceByKey) and keys in [0, 37) (AggregateByKey).
    std::vector<int64_t> sorted_keys = RandomValues<int64_t>(n, n + 11, 0, n / 3);
    std::sort(sorted_keys.begin(), sorted_keys.end());
    const std::vector<uint32_t> keys = RandomValues<uint32_t>(n, n + 12, 0, 36);
    for (Op op : {Op::kSum, Op::kMin, Op::kMax}) {
      absl::StatusOr<KeyedReduction<int64_t, V>> reduced =
          client.ReduceByKey<int64_t, V>(sorted_keys, values, op);
      ASSERT_TRUE(reduced.ok()) << reduced.status();
      const reference::KeyedValues<int64_t, V> want =
          reference::ReduceByKey<int64_t, V>(sorted_keys, values, op);
      EXPECT_EQ(reduced->keys, want.keys) << "n " << n;
      EXPECT_EQ(reduced->values, want.values) << "n " << n;

      absl::StatusOr<std::vector<V>> aggregated =
          client.AggregateByKey<uint32_t, V>(keys, values, op, 37);
      ASSERT_TRUE(aggregated.ok()) << aggregated.status();
      const std::vector<V> want_aggregated =
          reference::AggregateByKey<uint32_t, V>(keys, values, op, 37).value();
      EXPECT_EQ(*aggregated, want_aggregated) << "n " << n;
    }
  }
}

TYPED_TEST(TypedClientTest, UniqueRunAndKeyedStreamsEqualTheReference) {
  using T = TypeParam;
  PrimitivesClient client(this->channel_);
  for (size_t n : kLengths) {
    const std::vector<T> input = RandomValues<T>(n, n + 13, 0, 2);
    std::vector<int32_t> keys = RandomValues<int32_t>(n, n + 14, 0, n / 3);
    std::sort(keys.begin(), keys.end());
    const std::vector<T> values = RandomValues<T>(n, n + 15, 0, 1000);
    const reference::Runs<T> want_runs = reference::RunLengthEncode<T>(input);
    const reference::KeyedValues<int32_t, T> want_keyed =
        reference::ReduceByKey<int32_t, T>(keys, values, Op::kMax);
    for (size_t piece : {size_t{1}, size_t{4099}, n + 1}) {
      if (piece == 1 && n > 100) continue;  // a message an element: short arrays only
      absl::StatusOr<std::vector<T>> unique = client.UniqueStream<T>(input, piece);
      ASSERT_TRUE(unique.ok()) << unique.status();
      EXPECT_EQ(*unique, reference::Unique<T>(input)) << "n " << n << " piece " << piece;
      absl::StatusOr<RunLengths<T>> runs = client.RunLengthEncodeStream<T>(input, piece);
      ASSERT_TRUE(runs.ok()) << runs.status();
      EXPECT_EQ(runs->values, want_runs.values) << "n " << n << " piece " << piece;
      EXPECT_EQ(runs->lengths, want_runs.lengths) << "n " << n << " piece " << piece;
      absl::StatusOr<KeyedReduction<int32_t, T>> keyed =
          client.ReduceByKeyStream<int32_t, T>(keys, values, Op::kMax, piece);
      ASSERT_TRUE(keyed.ok()) << keyed.status();
      EXPECT_EQ(keyed->keys, want_keyed.keys) << "n " << n << " piece " << piece;
      EXPECT_EQ(keyed->values, want_keyed.values) << "n " << n << " piece " << piece;
    }
  }
  // Select, Unique, RunLengthEncode and ReduceByKey stream above their
  // threshold too; a partitioning Select stays unary (a stream has none).
  const size_t n = 300007;
  const std::vector<T> input = RandomValues<T>(n, 16, 0, 3);
  std::vector<int32_t> keys = RandomValues<int32_t>(n, 17, 0, n / 4);
  std::sort(keys.begin(), keys.end());
  const std::vector<T> values = RandomValues<T>(n, 18, 0, 1000);
  client.SetStreaming(100000 * sizeof(T), 33333 * sizeof(T));
  Predicate<T> predicate;
  predicate.kind = PredicateKind::kNe;
  predicate.operand = 1;
  const std::vector<bool> pass = reference::EvaluatePredicate<T>(input, predicate);
  for (bool partition : {false, true}) {
    absl::StatusOr<Selection<T>> selected =
        client.Select<T>(input, predicate, v1::SelectRequest::VALUES_AND_INDICES, partition);
    ASSERT_TRUE(selected.ok()) << selected.status();
    const reference::SelectResult<T> want = reference::Select<T>(input, pass, partition);
    EXPECT_EQ(selected->values, want.values) << "partition " << partition;
    EXPECT_EQ(selected->indices, want.indices) << "partition " << partition;
    EXPECT_EQ(selected->count, want.count) << "partition " << partition;
  }
  absl::StatusOr<std::vector<T>> unique = client.Unique<T>(input);
  ASSERT_TRUE(unique.ok()) << unique.status();
  EXPECT_EQ(*unique, reference::Unique<T>(input));
  absl::StatusOr<RunLengths<T>> runs = client.RunLengthEncode<T>(input);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ(runs->lengths, reference::RunLengthEncode<T>(input).lengths);
  absl::StatusOr<KeyedReduction<int32_t, T>> keyed =
      client.ReduceByKey<int32_t, T>(keys, values, Op::kSum);
  ASSERT_TRUE(keyed.ok()) << keyed.status();
  const reference::KeyedValues<int32_t, T> want_keyed =
      reference::ReduceByKey<int32_t, T>(keys, values, Op::kSum);
  EXPECT_EQ(keyed->keys, want_keyed.keys);
  EXPECT_EQ(keyed->values, want_keyed.values);  // small integers: exact in any order
}

// A typed call's error is the raw call's: the server's code and message.
void ExpectSameError(const absl::Status& typed, const absl::Status& raw) {
  EXPECT_FALSE(raw.ok());
  EXPECT_EQ(typed.code(), raw.code()) << typed;
  EXPECT_EQ(typed.message(), raw.message());
}

TEST_F(ClientTest, ErrorsKeepTheServersCodeAndMessage) {
  PrimitivesClient client(channel_);
  for (size_t n : {size_t{5}, size_t{100003}}) {
    const std::vector<int32_t> input = RandomValues<int32_t>(n, n, 0, 1000);

    // Scan refuses ARGMIN.
    v1::ScanRequest scan;
    *scan.mutable_input() = PackArray<int32_t>(input);
    scan.set_op(v1::ARGMIN);
    absl::Status typed = client.Scan<int32_t>(input, Op::kArgMin).status();
    EXPECT_EQ(typed.code(), absl::StatusCode::kInvalidArgument) << typed;
    ExpectSameError(typed, client.Call(scan).status());
    // A stream's error names the message it is about, then says the same.
    const absl::Status streamed =
        client.ScanStream<int32_t>(input, Op::kArgMin, false, 1000).status();
    EXPECT_EQ(streamed.code(), absl::StatusCode::kInvalidArgument) << streamed;
    EXPECT_TRUE(absl::StrContains(streamed.message(), client.Call(scan).status().message()))
        << streamed;

    // Keys and values of different lengths.
    const std::vector<int32_t> shorter(input.begin(), input.end() - 1);
    v1::ReduceByKeyRequest by_key;
    *by_key.mutable_keys() = PackArray<int32_t>(input);
    *by_key.mutable_values() = PackArray<int32_t>(shorter);
    by_key.set_op(v1::SUM);
    ExpectSameError(client.ReduceByKey<int32_t, int32_t>(input, shorter, Op::kSum).status(),
                    client.Call(by_key).status());

    // A key out of range, near the end.
    std::vector<int32_t> keys = RandomValues<int32_t>(n, n + 1, 0, 9);
    keys[n - 2] = 10;
    v1::AggregateByKeyRequest aggregate;
    *aggregate.mutable_keys() = PackArray<int32_t>(keys);
    *aggregate.mutable_values() = PackArray<int32_t>(input);
    aggregate.set_op(v1::SUM);
    aggregate.set_num_keys(10);
    typed = client.AggregateByKey<int32_t, int32_t>(keys, input, Op::kSum, 10).status();
    EXPECT_EQ(typed.code(), absl::StatusCode::kInvalidArgument) << typed;
    ExpectSameError(typed, client.Call(aggregate).status());

    // Flags of another length.
    v1::SelectRequest select;
    *select.mutable_input() = PackArray<int32_t>(input);
    *select.mutable_flags() = PackArray<int32_t>(shorter);
    select.set_output(v1::SelectRequest::VALUES);
    ExpectSameError(client.SelectFlagged<int32_t, int32_t>(input, shorter).status(),
                    client.Call(select).status());
  }
  // The deadline holds. It has passed before the call starts: gRPC rounds a
  // deadline up to the next millisecond, so a 1 ns timeout can still let a
  // fast local answer arrive in time.
  PrimitivesClient hurried(channel_, absl::Milliseconds(-10));
  const std::vector<int32_t> input(100003, 1);
  EXPECT_EQ(hurried.Scan<int32_t>(input, Op::kSum).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(hurried.ScanStream<int32_t>(input, Op::kSum, false, 1000).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// A Scan that answers UNAVAILABLE to its first call and then echoes its
// input: what a retry gets.
class FlakyScan final : public v1::Primitives::CallbackService {
 public:
  grpc::ServerUnaryReactor* Scan(grpc::CallbackServerContext* context,
                                 const v1::ScanRequest* request,
                                 v1::ScanResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (calls.fetch_add(1) == 0) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "not yet"));
    } else {
      *response->mutable_output() = request->input();
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }
  std::atomic<int> calls{0};
};

// The typed calls go through the channel's retry policy as the generated
// stub's do, and a retry resends the caller's bytes (framed over its memory).
TEST(ClientRetryTest, TypedCallsAreRetriedWithTheSameBytes) {
  for (int max_attempts : {4, 1}) {
    FlakyScan service;
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);
    ConnectOptions options;
    options.health_check = false;
    options.max_attempts = max_attempts;
    options.initial_backoff = absl::Milliseconds(1);
    PrimitivesClient client(
        PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", port), options));
    const std::vector<int32_t> input = RandomValues<int32_t>(100003, 9, -1000, 1000);
    absl::StatusOr<std::vector<int32_t>> echoed = client.Scan<int32_t>(input, Op::kSum);
    if (max_attempts > 1) {
      ASSERT_TRUE(echoed.ok()) << echoed.status();
      EXPECT_EQ(*echoed, input);
      EXPECT_EQ(service.calls.load(), 2);
    } else {
      EXPECT_EQ(echoed.status().code(), absl::StatusCode::kUnavailable);
      EXPECT_EQ(echoed.status().message(), "not yet");
      EXPECT_EQ(service.calls.load(), 1);
    }
    server->Shutdown();
  }
}

// Floats travel as bytes: the bits come back as the reference makes them.
TEST_F(ClientTest, FloatsComeBackBitForBit) {
  PrimitivesClient client(channel_);
  for (size_t n : kLengths) {
    const std::vector<double> input = [&] {
      std::vector<float> f = MixedMagnitudes(n, static_cast<uint32_t>(n));
      return std::vector<double>(f.begin(), f.end());
    }();
    absl::StatusOr<std::vector<double>> got = client.Scan<double>(input, Op::kMin);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(SameBits(*got, reference::Scan<double>(input, Op::kMin, false))) << "n " << n;
    absl::StatusOr<std::vector<double>> unique = client.Unique<double>(input);
    ASSERT_TRUE(unique.ok()) << unique.status();
    EXPECT_TRUE(SameBits(*unique, reference::Unique<double>(input))) << "n " << n;
  }
}

}  // namespace
}  // namespace primserve
