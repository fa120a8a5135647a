// Answers framed as gRPC sends them: large arrays as slices over the
// buffers that hold them, small ones copied.
#include "server/rpc/response_framing.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"

namespace primserve {
namespace {

// The bytes of a framed response, joined.
std::string Joined(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string joined;
  for (const grpc::Slice& slice : slices) {
    joined.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return joined;
}

// `bytes` moved into an answer buffer, as a backend holds an answer.
HostArray Held(DType dtype, const std::string& bytes) {
  std::shared_ptr<char> buffer(new char[bytes.size()], std::default_delete<char[]>());
  std::memcpy(buffer.get(), bytes.data(), bytes.size());
  return HostArray{dtype, {}, 0, std::move(buffer), bytes.size()};
}

TEST(ResponseFramingTest, FramedAnswersSendHeldArraysFromTheirBuffersAndLetThemGo) {
  std::string values(3 << 20, '\0');
  std::string lengths(1000, '\0');  // below the framing's slice threshold
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<char>(i * 7);
  for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = static_cast<char>(i * 3);
  RunLengthEncodeResult held{Held(DType::kInt32, values), Held(DType::kInt64, lengths)};
  std::weak_ptr<const char> values_buffer = held.values.held;
  std::weak_ptr<const char> lengths_buffer = held.lengths.held;
  v1::RunLengthEncodeResponse expected;
  ASSERT_TRUE(ToResponse(RunLengthEncodeResult{HostArray{DType::kInt32, values},
                                               HostArray{DType::kInt64, lengths}},
                         &expected)
                  .ok());
  {
    v1::RunLengthEncodeResponse response;
    absl::StatusOr<grpc::ByteBuffer> framed = FrameResponse(std::move(held), &response);
    ASSERT_TRUE(framed.ok()) << framed.status();
    // The small one was copied into the framing; the large one is sent from
    // its buffer, which the framed bytes keep.
    EXPECT_TRUE(lengths_buffer.expired());
    EXPECT_FALSE(values_buffer.expired());
    v1::RunLengthEncodeResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(Joined(*framed)));
    EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
    EXPECT_EQ(framed->Length(), expected.ByteSizeLong());
  }
  // gRPC done with the bytes: the buffer goes back.
  EXPECT_TRUE(values_buffer.expired());
}

TEST(ResponseFramingTest, ToResponseCopiesHeldArrays) {
  const std::string values(2 << 20, 'x');
  v1::ScanResponse response;
  ASSERT_TRUE(ToResponse(ScanResult{Held(DType::kInt64, values)}, &response).ok());
  EXPECT_EQ(response.output().data(), values);
  EXPECT_EQ(response.output().dtype(), v1::INT64);
}

TEST(ResponseFramingTest, FramingAResultOfAnotherKindIsInternal) {
  v1::ScanResponse response;
  EXPECT_EQ(FrameResponse(UniqueResult{}, &response).status().code(),
            absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace primserve
