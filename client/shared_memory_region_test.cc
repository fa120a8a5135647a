// SharedMemoryRegion against a real server (CPU backend, loopback) with
// --shared_memory: requests whose inputs and outputs are in the region give
// the inline answers; refusals come back as the server's status; nothing is
// left in /dev/shm or registered on the server afterwards.
#include "client/shared_memory_region.h"

#include <dirent.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"

namespace primserve {
namespace {

// Names of this process's objects in /dev/shm.
std::vector<std::string> OurObjects() {
  std::vector<std::string> names;
  const std::string prefix = absl::StrCat("primserve-client-", getpid(), "-");
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* entry = readdir(dir)) {
      if (absl::StartsWith(entry->d_name, prefix)) names.push_back(entry->d_name);
    }
    closedir(dir);
  }
  return names;
}

class SharedMemoryRegionTest : public ::testing::Test {
 protected:
  void Start(bool shared_memory) {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.shared_memory = shared_memory;
    server_ = PrimServer::Start(options, std::make_unique<CpuBackend>()).value();
    channel_ = PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", server_->port()));
    stub_ = v1::Primitives::NewStub(channel_);
  }
  void TearDown() override { EXPECT_TRUE(OurObjects().empty()); }

  uint64_t RegionsOnServer() {
    v1::SharedMemoryStatusResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(v1::SharedMemory::NewStub(channel_)
                    ->Status(&context, v1::SharedMemoryStatusRequest(), &response)
                    .ok());
    return response.regions_size();
  }

  std::unique_ptr<PrimServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Primitives::Stub> stub_;
};

TEST_F(SharedMemoryRegionTest, ScansInTheRegionAndInPlace) {
  Start(true);
  const uint64_t n = 100000;
  {
    auto region = SharedMemoryRegion::Create(channel_, "r", 2 * n * sizeof(int64_t));
    ASSERT_TRUE(region.ok()) << region.status();
    EXPECT_EQ(RegionsOnServer(), 1u);
    absl::Span<int64_t> in = (*region)->Elements<int64_t>(0, n);
    absl::Span<int64_t> out = (*region)->Elements<int64_t>(n * sizeof(int64_t), n);
    ASSERT_EQ(in.size(), n);
    ASSERT_EQ(out.size(), n);
    std::mt19937_64 rng(5);
    for (int64_t& x : in) x = static_cast<int64_t>(rng() % 2001) - 1000;
    std::vector<int64_t> want(n);
    std::partial_sum(in.begin(), in.end(), want.begin());
    ASSERT_TRUE((*region)->Scan<int64_t>(in, out, Op::kSum).ok());
    EXPECT_EQ(std::vector<int64_t>(out.begin(), out.end()), want);
    ASSERT_TRUE((*region)->Scan<int64_t>(in, in, Op::kSum).ok());  // in place
    EXPECT_EQ(std::vector<int64_t>(in.begin(), in.end()), want);
    // The server's refusal comes back as it is: too little room for the answer.
    v1::ScanRequest request;
    *request.mutable_input() = (*region)->ArrayOf<int64_t>(in).value();
    *request.mutable_output_location()->mutable_values() =
        (*region)->Ref(out.data(), 8).value();
    request.set_op(v1::SUM);
    v1::ScanResponse response;
    grpc::ClientContext context;
    EXPECT_EQ(stub_->Scan(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    // Spans and refs outside the region are refused here, before any call.
    EXPECT_TRUE((*region)->Elements<int64_t>(n * sizeof(int64_t), n + 1).empty());
    EXPECT_EQ((*region)->Ref((*region)->data() + (*region)->size() - 4, 8).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(RegionsOnServer(), 0u);
}

TEST_F(SharedMemoryRegionTest, EveryRpcTakesRegionArraysAsInlineOnes) {
  Start(true);
  const uint64_t n = 5000;
  auto region = SharedMemoryRegion::Create(channel_, "r", 8 * n * sizeof(int32_t));
  ASSERT_TRUE(region.ok()) << region.status();
  absl::Span<int32_t> keys = (*region)->Elements<int32_t>(0, n);
  absl::Span<int32_t> values = (*region)->Elements<int32_t>(n * sizeof(int32_t), n);
  std::mt19937 rng(9);
  for (uint64_t i = 0; i < n; ++i) {
    keys[i] = static_cast<int32_t>(i / 7 % 16);
    values[i] = static_cast<int32_t>(rng() % 1000) - 500;
  }
  const v1::Array keys_array = (*region)->ArrayOf<int32_t>(keys).value();
  const v1::Array values_array = (*region)->ArrayOf<int32_t>(values).value();
  const v1::Array keys_inline = PackArray<int32_t>(keys);
  const v1::Array values_inline = PackArray<int32_t>(values);
  // One request per RPC, built twice: arrays in the region, and inline.
  {
    v1::ReduceRequest placed, inline_request;
    *placed.mutable_input() = values_array;
    *inline_request.mutable_input() = values_inline;
    placed.set_op(v1::ARGMIN);
    inline_request.set_op(v1::ARGMIN);
    v1::ReduceResponse a, b;
    grpc::ClientContext c1, c2;
    ASSERT_TRUE(stub_->Reduce(&c1, placed, &a).ok());
    ASSERT_TRUE(stub_->Reduce(&c2, inline_request, &b).ok());
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  }
  {
    v1::SelectRequest placed, inline_request;
    *placed.mutable_input() = values_array;
    *inline_request.mutable_input() = values_inline;
    for (v1::SelectRequest* r : {&placed, &inline_request}) {
      r->mutable_predicate()->set_kind(v1::Predicate::GT);
      r->mutable_predicate()->mutable_operand()->set_int_value(0);
    }
    absl::Span<int32_t> out = (*region)->Elements<int32_t>(2 * n * sizeof(int32_t), n);
    *placed.mutable_output_location()->mutable_values() =
        (*region)->Ref(out.data(), n * sizeof(int32_t)).value();
    v1::SelectResponse a, b;
    grpc::ClientContext c1, c2;
    ASSERT_TRUE(stub_->Select(&c1, placed, &a).ok());
    ASSERT_TRUE(stub_->Select(&c2, inline_request, &b).ok());
    EXPECT_EQ(a.count(), b.count());
    EXPECT_EQ(a.values().shm().byte_size(), b.values().data().size());
    EXPECT_EQ(std::memcmp(out.data(), b.values().data().data(), b.values().data().size()), 0);
  }
  {
    v1::UniqueRequest placed, inline_request;
    *placed.mutable_input() = keys_array;
    *inline_request.mutable_input() = keys_inline;
    v1::UniqueResponse a, b;
    grpc::ClientContext c1, c2;
    ASSERT_TRUE(stub_->Unique(&c1, placed, &a).ok());
    ASSERT_TRUE(stub_->Unique(&c2, inline_request, &b).ok());
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  }
  {
    v1::RunLengthEncodeRequest placed, inline_request;
    *placed.mutable_input() = keys_array;
    *inline_request.mutable_input() = keys_inline;
    v1::RunLengthEncodeResponse a, b;
    grpc::ClientContext c1, c2;
    ASSERT_TRUE(stub_->RunLengthEncode(&c1, placed, &a).ok());
    ASSERT_TRUE(stub_->RunLengthEncode(&c2, inline_request, &b).ok());
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  }
  {
    v1::ReduceByKeyRequest placed, inline_request;
    *placed.mutable_keys() = keys_array;
    *placed.mutable_values() = values_array;
    *inline_request.mutable_keys() = keys_inline;
    *inline_request.mutable_values() = values_inline;
    placed.set_op(v1::SUM);
    inline_request.set_op(v1::SUM);
    v1::ReduceByKeyResponse a, b;
    grpc::ClientContext c1, c2;
    ASSERT_TRUE(stub_->ReduceByKey(&c1, placed, &a).ok());
    ASSERT_TRUE(stub_->ReduceByKey(&c2, inline_request, &b).ok());
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  }
  {
    v1::AggregateByKeyRequest placed, inline_request;
    *placed.mutable_keys() = keys_array;
    *placed.mutable_values() = values_array;
    *inline_request.mutable_keys() = keys_inline;
    *inline_request.mutable_values() = values_inline;
    for (v1::AggregateByKeyRequest* r : {&placed, &inline_request}) {
      r->set_op(v1::SUM);
      r->set_num_keys(16);
    }
    v1::AggregateByKeyResponse a, b;
    grpc::ClientContext c1, c2;
    ASSERT_TRUE(stub_->AggregateByKey(&c1, placed, &a).ok());
    ASSERT_TRUE(stub_->AggregateByKey(&c2, inline_request, &b).ok());
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  }
}

TEST_F(SharedMemoryRegionTest, RefusedRegistrationsLeaveNothingBehind) {
  Start(true);
  auto first = SharedMemoryRegion::Create(channel_, "taken", 4096);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = SharedMemoryRegion::Create(channel_, "taken", 4096);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(OurObjects().size(), 1u);
  EXPECT_EQ(SharedMemoryRegion::Create(channel_, "empty", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  first->reset();
  EXPECT_EQ(RegionsOnServer(), 0u);
}

TEST_F(SharedMemoryRegionTest, AServerWithoutSharedMemoryRefusesIt) {
  Start(false);
  EXPECT_EQ(SharedMemoryRegion::Create(channel_, "r", 4096).status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace primserve
