// PrimitivesClient's typed helpers against a real server (CPU backend,
// loopback, --reproducible_floats off): SetReproducible(true) sets
// `reproducible` in Scan, ScanStream, Reduce, ReduceByKey and AggregateByKey.
// The CPU backend in reproducible mode follows the GPU kernels' association
// (reference/gpu_order.h), so a float SUM scan or reduce of mixed magnitudes
// gets those bits, not the plain sequential ones, and a streamed scan gets
// the unary one's bits in any piece sizes.
#include "client/client.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reference/gpu_order.h"
#include "server/cpu_backend.h"
#include "server/server.h"

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

}  // namespace
}  // namespace primserve
