// The Sort RPC end to end: a real server on a loopback port with the CPU
// backend, called through the client library (answers against the CPU
// reference), with raw requests for each error, and through Multiplex.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "reference/sort.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "tests/rpc_api.h"
#include "tests/unary_answer.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMaxResponseBytes = 1 << 20;

class SortServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options;
    options.rpc_api = TestRpcApi();
    options.address = "127.0.0.1:0";
    options.limits.max_response_bytes = kMaxResponseBytes;
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::make_unique<CpuBackend>());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    const std::string address = absl::StrCat("127.0.0.1:", server_->port());
    client_ = new PrimitivesClient(PrimitivesClient::Connect(address));
    stub_ = v1::Primitives::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials())).release();
  }
  static void TearDownTestSuite() {
    delete stub_;
    delete client_;
    delete server_;
  }

  static void ExpectError(const v1::SortRequest& request, absl::StatusCode code,
                          const std::string& message_part) {
    const absl::Status status = client_->Call(request).status();
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message_part));
  }

  static PrimServer* server_;
  static PrimitivesClient* client_;
  static v1::Primitives::Stub* stub_;
};

PrimServer* SortServiceTest::server_ = nullptr;
PrimitivesClient* SortServiceTest::client_ = nullptr;
v1::Primitives::Stub* SortServiceTest::stub_ = nullptr;

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST_F(SortServiceTest, FloatsWithNaNsZerosValuesIndicesSegments) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> keys = {3, -nan, -0.0f, 0.0f, nan, 1, -INFINITY, 3, 0.0f, -2};
  std::vector<int64_t> values(keys.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = 100 + static_cast<int64_t>(i);
  const std::vector<uint64_t> starts = {0, 0, 4, 4, 9};
  for (bool descending : {false, true}) {
    for (bool segmented : {false, true}) {
      SCOPED_TRACE(absl::StrCat("descending=", descending, " segmented=", segmented));
      const std::vector<uint64_t> segments = segmented ? starts : std::vector<uint64_t>{};
      absl::StatusOr<Sorted<float, int64_t>> got =
          client_->Sort<float, int64_t>(keys, values, descending, /*return_indices=*/true, segments);
      ASSERT_TRUE(got.ok()) << got.status();
      const std::vector<int64_t> perm = reference::SortPermutation<float>(keys, descending, segments);
      EXPECT_TRUE(SameBits(got->keys, reference::Permute<float>(keys, perm)));
      EXPECT_EQ(got->values, reference::Permute<int64_t>(values, perm));
      EXPECT_EQ(got->indices, perm);
    }
  }
}

TEST_F(SortServiceTest, KeysOnlyEveryIntegerDtypeAndEmpty) {
  std::mt19937_64 rng(3);
  std::vector<int64_t> keys(5000);
  for (int64_t& k : keys) k = static_cast<int64_t>(rng() % 100) - 50;
  absl::StatusOr<Sorted<int64_t, int32_t>> got = client_->Sort<int64_t>(keys);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<int64_t> want = keys;
  std::stable_sort(want.begin(), want.end());
  EXPECT_EQ(got->keys, want);
  EXPECT_TRUE(got->values.empty());
  EXPECT_TRUE(got->indices.empty());
  std::vector<uint32_t> small = {7, 0, 4294967295u, 3};
  absl::StatusOr<Sorted<uint32_t, int32_t>> u =
      client_->Sort<uint32_t>(small, {}, /*descending=*/true);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->keys, (std::vector<uint32_t>{4294967295u, 7, 3, 0}));
  absl::StatusOr<Sorted<double, int32_t>> empty =
      client_->Sort<double>({}, {}, false, /*return_indices=*/true);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->keys.empty());
  EXPECT_TRUE(empty->indices.empty());
}

v1::SortRequest GoodSort() {
  v1::SortRequest request;
  *request.mutable_keys() = PackArray<int32_t>(std::vector<int32_t>{4, 1, 3, 2});
  return request;
}

TEST_F(SortServiceTest, RejectsBadRequests) {
  v1::SortRequest request = GoodSort();
  *request.mutable_values() = PackArray<double>(std::vector<double>{1, 2});
  ExpectError(request, absl::StatusCode::kInvalidArgument, "values has 2 elements but keys has 4");

  request = GoodSort();
  for (uint64_t offset : {0, 3, 2}) request.add_segment_offsets(offset);
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "segment_offsets[2] = 2 is less than segment_offsets[1] = 3");
  request = GoodSort();
  for (uint64_t offset : {0, 5}) request.add_segment_offsets(offset);
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "segment_offsets[1] = 5 is past the end of the input (4 elements)");
  request = GoodSort();
  request.add_segment_offsets(1);
  ExpectError(request, absl::StatusCode::kInvalidArgument, "the first segment must start at 0");

  request = GoodSort();
  request.mutable_keys()->set_dtype(v1::DTYPE_UNSPECIFIED);
  ExpectError(request, absl::StatusCode::kInvalidArgument, "keys.dtype is missing");
  request = GoodSort();
  request.mutable_values()->set_dtype(static_cast<v1::DType>(99));
  ExpectError(request, absl::StatusCode::kInvalidArgument, "values.dtype 99 is not a known DType");
  request = GoodSort();
  request.mutable_keys()->mutable_data()->append("xy");
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "keys.data has 18 bytes, not a multiple of the 4-byte INT32 element");
}

// The answer's size (keys, values and indices) is bounded at validation.
TEST_F(SortServiceTest, AnswerOverTheResponseLimitIsRefusedBeforeRunning) {
  const std::vector<int32_t> keys(kMaxResponseBytes / 16, 1);  // 256 KiB of keys
  const std::vector<int64_t> values(keys.size(), 2);           // 512 KiB of values
  const absl::Status fits = client_->Sort<int32_t, int64_t>(keys, values).status();
  ASSERT_TRUE(fits.ok()) << fits;
  const absl::Status status =
      client_->Sort<int32_t, int64_t>(keys, values, false, /*return_indices=*/true).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("the answer to this Sort could take 1310720 bytes"));
}

TEST_F(SortServiceTest, MultiplexAnswersAsTheUnaryCall) {
  grpc::ClientContext context;
  auto stream = stub_->Multiplex(&context);
  std::vector<v1::MultiplexRequest> requests;
  for (uint64_t id = 1; id <= 20; ++id) {
    v1::MultiplexRequest m;
    m.set_id(id);
    v1::SortRequest* r = m.mutable_sort();
    std::vector<double> keys(id * 37);
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<double>((i * 7919) % 13) - 6;
    *r->mutable_keys() = PackArray<double>(keys);
    r->set_descending(id % 2);
    r->set_return_indices(id % 3 == 0);
    if (id % 4 == 0) *r->mutable_values() = PackArray<double>(keys);
    requests.push_back(m);
  }
  v1::MultiplexRequest bad;
  bad.set_id(99);
  *bad.mutable_sort() = GoodSort();
  *bad.mutable_sort()->mutable_values() = PackArray<int32_t>(std::vector<int32_t>{1});
  for (const auto& r : requests) ASSERT_TRUE(stream->Write(r));
  ASSERT_TRUE(stream->Write(bad));
  ASSERT_TRUE(stream->WritesDone());
  size_t answered = 0;
  v1::MultiplexResponse answer;
  while (stream->Read(&answer)) {
    ++answered;
    if (answer.id() == 99) {
      EXPECT_EQ(answer.code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(answer.message(), HasSubstr("values has 1 elements but keys has 4"));
      continue;
    }
    ASSERT_EQ(answer.code(), 0) << answer.message();
    grpc::Status status;
    const v1::MultiplexResponse want = UnaryAnswer(*stub_, requests[answer.id() - 1], &status);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(answer.SerializeAsString(), want.SerializeAsString()) << answer.id();
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, requests.size() + 1);
}

}  // namespace
}  // namespace primserve
