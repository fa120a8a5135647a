// The C++ client's resident buffers against real CPU-backend servers:
// - the typed calls with buffer refs (whole and sub-ranges) for every array
//   they take answer as the inline calls do, and Into stores their outputs
//   in buffers that Get reads back;
// - given two servers as one target, Put spreads buffers over both and every
//   call naming one (inputs, outputs, Get, Write, Free, pipelines, requests
//   of a MultiplexSession) reaches the instance at its location, answering
//   as the same call made there directly; a request naming buffers of both
//   instances is refused before sending, naming both; a buffer whose
//   instance went away is NOT_FOUND saying so.
#include "client/buffers_client.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/buffer_routes.h"
#include "client/client.h"
#include "client/multiplex_session.h"
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

std::unique_ptr<PrimServer> StartServer() {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  return PrimServer::Start(options, std::make_unique<CpuBackend>()).value();
}

std::vector<int32_t> Values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> value(-50, 50);
  std::vector<int32_t> values(n);
  for (int32_t& x : values) x = value(rng);
  return values;
}

// Keys in runs of equal values, in [0, 16).
std::vector<int32_t> Keys(size_t n) {
  std::vector<int32_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = static_cast<int32_t>((i / 7) % 16);
  return keys;
}

std::vector<int32_t> Sub(const std::vector<int32_t>& v, size_t offset, size_t length) {
  return std::vector<int32_t>(v.begin() + offset, v.begin() + offset + length);
}

class TypedCallsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer();
    channel_ = PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", server_->port()));
  }

  std::unique_ptr<PrimServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(TypedCallsTest, BufferInputsAnswerAsInlineArrays) {
  PrimitivesClient client(channel_);
  BuffersClient buffers({channel_});
  const std::vector<int32_t> x = Values(5000, 1), keys = Keys(5000);
  std::vector<int32_t> flags(x.size());
  for (size_t i = 0; i < x.size(); ++i) flags[i] = x[i] > 10;
  ASSERT_TRUE(buffers.Put<int32_t>("x", x).ok());
  ASSERT_TRUE(buffers.Put<int32_t>("keys", keys).ok());
  ASSERT_TRUE(buffers.Put<int32_t>("flags", flags).ok());

  // The whole buffer, and elements [100, 3100).
  struct Range {
    v1::BufferRef x, keys, flags;
    std::vector<int32_t> inline_x, inline_keys, inline_flags;
  };
  const std::vector<Range> ranges = {
      {BufferRef("x"), BufferRef("keys"), BufferRef("flags"), x, keys, flags},
      {BufferRef("x", 100, 3000), BufferRef("keys", 100, 3000), BufferRef("flags", 100, 3000),
       Sub(x, 100, 3000), Sub(keys, 100, 3000), Sub(flags, 100, 3000)},
  };
  const Predicate<int32_t> positive{PredicateKind::kGt, 0, 0};
  for (const Range& r : ranges) {
    EXPECT_EQ(client.Scan<int32_t>(r.x, Op::kSum, true).value(),
              client.Scan<int32_t>(r.inline_x, Op::kSum, true).value());
    EXPECT_EQ(client.Reduce<int32_t>(r.x, Op::kArgMax).value().indices,
              client.Reduce<int32_t>(r.inline_x, Op::kArgMax).value().indices);
    EXPECT_EQ(client.Select<int32_t>(r.x, positive, v1::SelectRequest::VALUES_AND_INDICES).value().indices,
              client.Select<int32_t>(r.inline_x, positive, v1::SelectRequest::VALUES_AND_INDICES)
                  .value()
                  .indices);
    const auto flagged = client.SelectFlagged<int32_t, int32_t>(r.x, r.flags);
    const auto inline_flagged = client.SelectFlagged<int32_t, int32_t>(r.inline_x, r.inline_flags);
    EXPECT_EQ(flagged.value().values, inline_flagged.value().values);
    EXPECT_EQ(client.Unique<int32_t>(r.keys).value(),
              client.Unique<int32_t>(r.inline_keys).value());
    EXPECT_EQ(client.RunLengthEncode<int32_t>(r.keys).value().lengths,
              client.RunLengthEncode<int32_t>(r.inline_keys).value().lengths);
    const auto by_key = client.ReduceByKey<int32_t, int32_t>(r.keys, r.x, Op::kMax);
    const auto inline_by_key =
        client.ReduceByKey<int32_t, int32_t>(r.inline_keys, r.inline_x, Op::kMax);
    EXPECT_EQ(by_key.value().values, inline_by_key.value().values);
    // One array from a buffer, the other inline.
    const auto aggregated = client.AggregateByKey<int32_t, int32_t>(r.keys, r.inline_x, Op::kSum, 16);
    const auto inline_aggregated =
        client.AggregateByKey<int32_t, int32_t>(r.inline_keys, r.inline_x, Op::kSum, 16);
    EXPECT_EQ(aggregated.value(), inline_aggregated.value());
    const Sorted<int32_t, int32_t> sorted =
        client.Sort<int32_t, int32_t>(r.x, r.keys, true, true).value();
    const Sorted<int32_t, int32_t> expected =
        client.Sort<int32_t, int32_t>(r.inline_x, r.inline_keys, true, true).value();
    EXPECT_EQ(sorted.keys, expected.keys);
    EXPECT_EQ(sorted.values, expected.values);
    EXPECT_EQ(sorted.indices, expected.indices);
  }
  // A buffer of another dtype is the server's INVALID_ARGUMENT.
  absl::StatusOr<std::vector<int64_t>> wrong = client.Scan<int64_t>(BufferRef("x"), Op::kSum);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument) << wrong.status();
}

TEST_F(TypedCallsTest, IntoStoresOutputsThatGetReadsBack) {
  PrimitivesClient client(channel_);
  BuffersClient buffers({channel_});
  const std::vector<int32_t> x = Values(3000, 2);
  ASSERT_TRUE(buffers.Put<int32_t>("x", x).ok());
  const std::vector<int32_t> inline_scan = client.Scan<int32_t>(x, Op::kSum).value();

  v1::OutputBuffers into;
  into.set_values("sums");
  // From a buffer into a buffer: nothing comes back inline.
  absl::StatusOr<std::vector<int32_t>> stored =
      client.Into(into).Scan<int32_t>(BufferRef("x"), Op::kSum);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(stored->empty());
  EXPECT_EQ(buffers.Get<int32_t>("sums").value(), inline_scan);

  // In place, from an inline array into the input's buffer, and a Sort's
  // keys and indices into two buffers (replacing "sums").
  into.set_values("x");
  ASSERT_TRUE(client.Into(into).Scan<int32_t>(x, Op::kSum).ok());
  EXPECT_EQ(buffers.Get<int32_t>("x").value(), inline_scan);
  v1::OutputBuffers sorted_into;
  sorted_into.set_keys("sorted");
  sorted_into.set_indices("sums");
  ASSERT_TRUE(client.Into(sorted_into).Sort<int32_t>(BufferRef("x"), {}, false, true).ok());
  const Sorted<int32_t, int32_t> sorted =
      client.Sort<int32_t>(inline_scan, {}, false, true).value();
  EXPECT_EQ(buffers.Get<int32_t>("sorted").value(), sorted.keys);
  EXPECT_EQ(buffers.Get<int64_t>("sums").value(), sorted.indices);
  // Outputs into buffers never go through a streaming RPC, whatever the
  // threshold.
  PrimitivesClient streaming(channel_);
  streaming.SetStreaming(16, 64);
  into.set_values("big");
  ASSERT_TRUE(streaming.Into(into).Scan<int32_t>(x, Op::kSum).ok());
  EXPECT_EQ(buffers.Get<int32_t>("big").value(), inline_scan);
}

TEST_F(TypedCallsTest, ReadIntoFillsMemoryNothingTouchedInStripes) {
  std::vector<std::shared_ptr<grpc::Channel>> channels(3, channel_);
  BuffersClient buffers(channels);
  const std::vector<int32_t> x = Values(100003, 5);
  ASSERT_TRUE(buffers.Put<int32_t>("x", x).ok());
  const v1::BufferInfo info = buffers.Info("x").value();
  // Poisoned, so that a range no stripe wrote shows.
  std::vector<int32_t> out(x.size() + 1, -7);
  ASSERT_TRUE(buffers.ReadInto(info, reinterpret_cast<char*>(out.data())).ok());
  EXPECT_TRUE(std::equal(x.begin(), x.end(), out.begin()));
  EXPECT_EQ(out.back(), -7) << "wrote past the buffer's length";
  // A description of a buffer the caller does not hold reads nothing.
  v1::BufferInfo gone = info;
  gone.set_name("gone");
  EXPECT_EQ(buffers.ReadInto(gone, reinterpret_cast<char*>(out.data())).code(),
            absl::StatusCode::kNotFound);
}

TEST(TargetAddressesTest, ListsAndDnsNamesGiveTheirServers) {
  EXPECT_EQ(TargetAddresses("ipv4:10.0.0.1:50051,10.0.0.2:50052"),
            (std::vector<std::string>{"10.0.0.1:50051", "10.0.0.2:50052"}));
  EXPECT_EQ(TargetAddresses("ipv6:[::1]:50051"), std::vector<std::string>{"[::1]:50051"});
  EXPECT_THAT(TargetAddresses("dns:///localhost:50051"),
              ::testing::AnyOf(::testing::Contains("127.0.0.1:50051"),
                               ::testing::Contains("[::1]:50051")));
  EXPECT_TRUE(TargetAddresses("localhost:50051").empty());
  EXPECT_FALSE(TargetSpreads("localhost:50051"));
  EXPECT_TRUE(TargetSpreads("dns:///primserve-headless:50051"));
}

// Two servers behind one target, a client routing its buffers.
class RoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    servers_.push_back(StartServer());
    servers_.push_back(StartServer());
    for (const auto& server : servers_) {
      locations_.push_back(absl::StrCat("127.0.0.1:", server->port()));
    }
    const std::string target = absl::StrCat("ipv4:", locations_[0], ",", locations_[1]);
    ASSERT_TRUE(TargetSpreads(target));
    EXPECT_EQ(TargetAddresses(target), locations_);
    ConnectOptions options;
    home_ = PrimitivesClient::Connect(target, options);
    routes_ = PrimitivesClient::Routes(target, home_, options);
    std::vector<std::shared_ptr<grpc::Channel>> stripes;
    for (int i = 0; i < 3; ++i) {
      options.channel_index = i + 1;
      stripes.push_back(PrimitivesClient::Connect(target, options));
    }
    buffers_ = std::make_unique<BuffersClient>(stripes, routes_);
    client_ = std::make_unique<PrimitivesClient>(home_);
    client_->RouteBuffers(routes_);
  }

  // The names of the caller's buffers on server `i`, asked of it directly.
  std::set<std::string> NamesOn(size_t i) {
    BuffersClient direct({PrimitivesClient::Connect(locations_[i])});
    std::set<std::string> names;
    absl::StatusOr<v1::ListBuffersResponse> list = direct.List();
    EXPECT_TRUE(list.ok()) << list.status();
    if (!list.ok()) return names;
    for (const v1::BufferInfo& info : list->buffers()) names.insert(info.name());
    return names;
  }

  // Puts buffers until one lands on each server; returns their names by
  // server (round_robin spreads the Creates once both connections are up).
  std::vector<std::string> OnePerServer(const std::vector<int32_t>& values) {
    std::vector<std::string> on(2);
    for (int i = 0; i < 100 && (on[0].empty() || on[1].empty()); ++i) {
      const std::string name = absl::StrCat("b", i);
      const v1::BufferInfo info = buffers_->Put<int32_t>(name, values).value();
      for (size_t s = 0; s < 2; ++s) {
        if (info.location() == locations_[s] && on[s].empty()) on[s] = name;
      }
    }
    return on;
  }

  // The unary answer of server `i` alone to `request`, as a session's
  // answer `index` reads.
  v1::MultiplexResponse DirectAnswer(size_t i, v1::MultiplexRequest request, size_t index) {
    request.set_id(index);
    std::unique_ptr<v1::Primitives::Stub> stub =
        v1::Primitives::NewStub(PrimitivesClient::Connect(locations_[i]));
    grpc::Status status;
    v1::MultiplexResponse answer = UnaryAnswer(*stub, request, &status);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return answer;
  }

  std::vector<std::unique_ptr<PrimServer>> servers_;
  std::vector<std::string> locations_;
  std::shared_ptr<grpc::Channel> home_;
  std::shared_ptr<BufferRoutes> routes_;
  std::unique_ptr<BuffersClient> buffers_;
  std::unique_ptr<PrimitivesClient> client_;
};

TEST_F(RoutesTest, EveryCallNamingABufferReachesItsInstance) {
  const std::vector<int32_t> x = Values(20000, 3);
  const std::vector<int32_t> sums = client_->Scan<int32_t>(x, Op::kSum).value();
  const std::vector<std::string> on = OnePerServer(x);
  ASSERT_FALSE(on[0].empty());
  ASSERT_FALSE(on[1].empty());
  for (size_t s = 0; s < 2; ++s) {
    const std::string& name = on[s];
    EXPECT_EQ(NamesOn(s).count(name), 1u);
    EXPECT_EQ(NamesOn(1 - s).count(name), 0u);
    // Several calls, so that round_robin would have sent some to the other.
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(client_->Scan<int32_t>(BufferRef(name), Op::kSum).value(), sums);
      EXPECT_EQ(buffers_->Get<int32_t>(name).value(), x);
    }
    // An output stored next to its input, then read from there by name.
    v1::OutputBuffers into;
    into.set_values(name + ".sums");
    ASSERT_TRUE(client_->Into(into).Scan<int32_t>(BufferRef(name), Op::kSum).ok());
    EXPECT_EQ(NamesOn(s).count(name + ".sums"), 1u);
    EXPECT_EQ(client_->Reduce<int32_t>(BufferRef(name + ".sums"), Op::kMax).value().values,
              client_->Reduce<int32_t>(sums, Op::kMax).value().values);
    // A raw call routes too.
    v1::ReduceRequest raw;
    *raw.mutable_input()->mutable_buffer() = BufferRef(name);
    raw.set_op(v1::SUM);
    EXPECT_TRUE(client_->Call(raw).ok());
    // Write lands on the instance.
    const std::vector<int32_t> seven(10, 7);
    ASSERT_TRUE(buffers_->Write(name, 5,
                                absl::string_view(reinterpret_cast<const char*>(seven.data()),
                                                  seven.size() * sizeof(int32_t)))
                    .ok());
    EXPECT_EQ(buffers_->Get<int32_t>(name).value()[5], 7);
  }
  // One request reads buffers of one instance.
  absl::StatusOr<KeyedReduction<int32_t, int32_t>> across =
      client_->ReduceByKey<int32_t, int32_t>(BufferRef(on[0]), BufferRef(on[1]), Op::kSum);
  EXPECT_EQ(across.status().code(), absl::StatusCode::kInvalidArgument) << across.status();
  EXPECT_THAT(across.status().message(), HasSubstr("different instances"));
  // Outputs of an inline call land on some instance and are found there.
  v1::OutputBuffers into;
  into.set_values("fresh");
  ASSERT_TRUE(client_->Into(into).Scan<int32_t>(x, Op::kSum).ok());
  EXPECT_EQ(NamesOn(0).count("fresh") + NamesOn(1).count("fresh"), 1u);
  EXPECT_EQ(buffers_->Get<int32_t>("fresh").value(), sums);
  // Free reaches the instance.
  for (size_t s = 0; s < 2; ++s) {
    ASSERT_TRUE(buffers_->Free(on[s]).ok());
    EXPECT_EQ(NamesOn(s).count(on[s]), 0u);
  }
}

// The rows of buffer `values` where buffer `where` is > 0, summed, as a
// pipeline; `kept` (if not empty) stores those rows in that buffer.
PipelineBuilder KeptSum(const std::string& where, const std::string& values,
                        const std::string& kept = "") {
  PipelineBuilder p;
  v1::SelectRequest rows;
  *rows.mutable_input()->mutable_buffer() = BufferRef(where);
  rows.mutable_predicate()->set_kind(v1::Predicate::GT);
  rows.mutable_predicate()->mutable_operand()->set_int_value(0);
  rows.set_output(v1::SelectRequest::INDICES);
  const uint32_t step = p.Add(rows);
  v1::GatherRequest gather;
  *gather.mutable_values()->mutable_buffer() = BufferRef(values);
  *gather.mutable_indices() = PipelineBuilder::Output(step, v1::StepOutput::INDICES);
  if (!kept.empty()) gather.mutable_output_buffers()->set_values(kept);
  const uint32_t gathered = p.Add(gather, /*returned=*/!kept.empty());
  v1::ReduceRequest sum;
  *sum.mutable_input() = PipelineBuilder::Output(gathered, v1::StepOutput::VALUES);
  sum.set_op(v1::SUM);
  p.Add(sum, /*returned=*/true);
  return p;
}

TEST_F(RoutesTest, PipelinesReachTheInstanceHoldingTheirBuffers) {
  const std::vector<int32_t> x = Values(20000, 5);
  const std::vector<std::string> on = OnePerServer(x);
  ASSERT_FALSE(on[0].empty());
  ASSERT_FALSE(on[1].empty());
  for (size_t s = 0; s < 2; ++s) {
    // A second column next to the first: its running sums.
    v1::OutputBuffers into;
    into.set_values(on[s] + ".sums");
    ASSERT_TRUE(client_->Into(into).Scan<int32_t>(BufferRef(on[s]), Op::kSum).ok());
    PrimitivesClient direct(PrimitivesClient::Connect(locations_[s]));
    const v1::PipelineResponse there = KeptSum(on[s], on[s] + ".sums").Run(direct).value();
    // Several calls, so that round_robin would have sent some to the other.
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<v1::PipelineResponse> routed = KeptSum(on[s], on[s] + ".sums").Run(*client_);
      ASSERT_TRUE(routed.ok()) << routed.status();
      EXPECT_TRUE(MessageDifferencer::Equals(*routed, there));
    }
    // A step's output stored in a buffer lands with the inputs and is found there.
    const std::string kept = on[s] + ".kept";
    ASSERT_TRUE(KeptSum(on[s], on[s] + ".sums", kept).Run(*client_).ok());
    EXPECT_EQ(NamesOn(s).count(kept), 1u);
    std::vector<int32_t> expected;
    int32_t sum = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      sum += x[i];
      if (x[i] > 0) expected.push_back(sum);
    }
    EXPECT_EQ(buffers_->Get<int32_t>(kept).value(), expected);
  }
  // One request reads buffers of one instance: refused before sending, naming both.
  absl::StatusOr<v1::PipelineResponse> across = KeptSum(on[0], on[1]).Run(*client_);
  EXPECT_EQ(across.status().code(), absl::StatusCode::kInvalidArgument) << across.status();
  EXPECT_THAT(across.status().message(), HasSubstr("different instances"));
  EXPECT_THAT(across.status().message(), HasSubstr(locations_[0]));
  EXPECT_THAT(across.status().message(), HasSubstr(locations_[1]));
  // The next one is answered.
  EXPECT_TRUE(KeptSum(on[1], on[1]).Run(*client_).ok());
}

TEST_F(RoutesTest, AMultiplexSessionSpansInstances) {
  const std::vector<int32_t> x = Values(20000, 6);
  const std::vector<std::string> on = OnePerServer(x);
  ASSERT_FALSE(on[0].empty());
  ASSERT_FALSE(on[1].empty());
  // Requests naming the buffer of server s, then one naming none.
  const auto requests = [&](size_t s) {
    std::vector<v1::MultiplexRequest> made(4);
    *made[0].mutable_scan()->mutable_input()->mutable_buffer() = BufferRef(on[s]);
    made[0].mutable_scan()->set_op(v1::SUM);
    *made[1].mutable_reduce()->mutable_input()->mutable_buffer() = BufferRef(on[s], 10, 100);
    made[1].mutable_reduce()->set_op(v1::MAX);
    *made[2].mutable_pipeline() = KeptSum(on[s], on[s]).request();
    *made[3].mutable_scan()->mutable_input() = PackArray<int32_t>(x);
    made[3].mutable_scan()->set_op(v1::SUM);
    return made;
  };
  MultiplexSession session(*client_);
  std::vector<std::pair<size_t, v1::MultiplexResponse>> expected;  // index, answer
  for (int round = 0; round < 3; ++round) {
    for (size_t s = 0; s < 2; ++s) {
      for (const v1::MultiplexRequest& request : requests(s)) {
        const size_t index = session.Send(request).value();
        expected.emplace_back(index, DirectAnswer(s, request, index));
      }
    }
  }
  // One request reads buffers of one instance: refused at Send, naming both.
  v1::MultiplexRequest across;
  *across.mutable_pipeline() = KeptSum(on[0], on[1]).request();
  absl::StatusOr<size_t> refused = session.Send(across);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr(locations_[0]));
  EXPECT_THAT(refused.status().message(), HasSubstr(locations_[1]));
  v1::MultiplexRequest unknown;
  *unknown.mutable_scan()->mutable_input()->mutable_buffer() = BufferRef("never-made");
  unknown.mutable_scan()->set_op(v1::SUM);
  EXPECT_EQ(session.Send(unknown).status().code(), absl::StatusCode::kNotFound);
  // An output a multiplexed pipeline stores is remembered where it landed.
  v1::MultiplexRequest store;
  *store.mutable_pipeline() = KeptSum(on[1], on[1], "mx-kept").request();
  const size_t stored = session.Send(store).value();

  std::vector<absl::StatusOr<v1::MultiplexResponse>> answers = session.Finish();
  ASSERT_EQ(answers.size(), expected.size() + 1);
  for (const auto& [index, answer] : expected) {
    ASSERT_TRUE(answers[index].ok()) << index << ": " << answers[index].status();
    EXPECT_TRUE(MessageDifferencer::Equals(*answers[index], answer)) << index;
  }
  ASSERT_TRUE(answers[stored].ok()) << answers[stored].status();
  EXPECT_EQ(NamesOn(1).count("mx-kept"), 1u);
  EXPECT_TRUE(buffers_->Get<int32_t>("mx-kept").ok());
}

TEST_F(RoutesTest, ABufferWhoseInstanceWentAwayIsNotFoundSayingSo) {
  const std::vector<int32_t> x = Values(1000, 4);
  const std::vector<std::string> on = OnePerServer(x);
  ASSERT_FALSE(on[1].empty());
  servers_[1]->Shutdown(absl::ZeroDuration());
  absl::StatusOr<std::vector<int32_t>> scan =
      client_->Scan<int32_t>(BufferRef(on[1]), Op::kSum);
  EXPECT_EQ(scan.status().code(), absl::StatusCode::kNotFound) << scan.status();
  EXPECT_THAT(scan.status().message(), HasSubstr(locations_[1]));
  EXPECT_THAT(scan.status().message(), HasSubstr("went away"));
  absl::StatusOr<std::vector<int32_t>> got = buffers_->Get<int32_t>(on[1]);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("went away"));
  absl::StatusOr<v1::PipelineResponse> pipeline = KeptSum(on[1], on[1]).Run(*client_);
  EXPECT_EQ(pipeline.status().code(), absl::StatusCode::kNotFound) << pipeline.status();
  EXPECT_THAT(pipeline.status().message(), HasSubstr("went away"));
  {
    // In one session, the gone instance's request fails that way; the other's is answered.
    MultiplexSession session(*client_);
    v1::MultiplexRequest request;
    request.mutable_scan()->set_op(v1::SUM);
    *request.mutable_scan()->mutable_input()->mutable_buffer() = BufferRef(on[1]);
    const size_t gone = session.Send(request).value();
    *request.mutable_scan()->mutable_input()->mutable_buffer() = BufferRef(on[0]);
    const size_t kept = session.Send(request).value();
    std::vector<absl::StatusOr<v1::MultiplexResponse>> answers = session.Finish();
    EXPECT_EQ(answers[gone].status().code(), absl::StatusCode::kNotFound) << answers[gone].status();
    EXPECT_THAT(answers[gone].status().message(), HasSubstr(locations_[1]));
    EXPECT_THAT(answers[gone].status().message(), HasSubstr("went away"));
    EXPECT_TRUE(answers[kept].ok()) << answers[kept].status();
  }
  EXPECT_EQ(buffers_->Free(on[1]).code(), absl::StatusCode::kNotFound);
  // The other instance's buffers and calls naming none still work.
  EXPECT_EQ(buffers_->Get<int32_t>(on[0]).value(), x);
  EXPECT_EQ(client_->Scan<int32_t>(BufferRef(on[0]), Op::kSum).value(),
            client_->Scan<int32_t>(x, Op::kSum).value());
  // A name no instance holds is NOT_FOUND too.
  EXPECT_EQ(client_->Scan<int32_t>(BufferRef("never-made"), Op::kSum).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace primserve
