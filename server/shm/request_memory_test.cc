#include "server/shm/request_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace primserve::shm {
namespace {

using ::testing::HasSubstr;

// A 4096-byte region "r" of zeros, over a shm object removed at the end.
class RequestMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = absl::StrCat("/primserve_request_memory_test_", getpid());
    fd_ = shm_open(key_.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(ftruncate(fd_, 4096), 0);
    ASSERT_TRUE(registry_.RegisterSystem("r", key_, 0, 4096).ok());
    lease_ = std::make_unique<Lease>(registry_.Acquire("r").value());
    bytes_ = lease_->Range(0, 4096, 1, "test").value();
  }
  void TearDown() override {
    close(fd_);
    shm_unlink(key_.c_str());
  }

  static v1::SharedMemoryRef Ref(uint64_t offset, uint64_t byte_size) {
    v1::SharedMemoryRef ref;
    ref.set_region("r");
    ref.set_offset(offset);
    ref.set_byte_size(byte_size);
    return ref;
  }

  std::string key_;
  int fd_ = -1;
  Registry registry_{RegistryOptions{}};
  std::unique_ptr<Lease> lease_;  // to see the region's bytes
  char* bytes_ = nullptr;
};

HostArray Int64s(std::vector<int64_t> values) {
  return HostArray::Of<int64_t>(DType::kInt64, values);
}

TEST_F(RequestMemoryTest, InputsViewTheRegionInPlace) {
  RequestMemory memory(&registry_);
  std::memcpy(bytes_ + 8, "abcdefgh", 8);
  absl::StatusOr<absl::string_view> view = memory.Input(Ref(8, 8), DType::kInt32, "input");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->data(), bytes_ + 8);
  EXPECT_EQ(*view, "abcdefgh");
  // One lease per region however many refs name it.
  ASSERT_TRUE(memory.Input(Ref(16, 8), DType::kInt64, "values").ok());
  EXPECT_EQ(registry_.List("r").value()[0].requests_in_flight, 2u);  // this and lease_
  absl::Status past = memory.Input(Ref(4092, 8), DType::kInt32, "keys").status();
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past.message(), HasSubstr("keys.shm: offset 4092 + byte_size 8 is past the end"));
}

TEST_F(RequestMemoryTest, ARefusingMemoryRefusesEveryRef) {
  RequestMemory memory(absl::FailedPreconditionError("shared memory is off (--shared_memory)"));
  absl::Status input = memory.Input(Ref(0, 8), DType::kInt32, "input").status();
  EXPECT_EQ(input.code(), absl::StatusCode::kFailedPrecondition);
  v1::OutputLocation location;
  *location.mutable_values() = Ref(0, 8);
  EXPECT_EQ(memory.PlaceOutputs(location, {{Slot::kValues, DType::kInt32, 2}}, "Scan").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(RequestMemoryTest, PlacesOnlyOutputsTheRequestProducesWithRoomForThem) {
  v1::OutputLocation location;
  *location.mutable_lengths() = Ref(0, 8);
  absl::Status not_produced =
      RequestMemory(&registry_).PlaceOutputs(location, {{Slot::kValues, DType::kInt32, 2}}, "Scan");
  EXPECT_EQ(not_produced.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_produced.message(),
              HasSubstr("output_location.lengths is set but this Scan request produces no "
                        "lengths"));

  location.Clear();
  *location.mutable_values() = Ref(0, 8);
  absl::Status small =
      RequestMemory(&registry_).PlaceOutputs(location, {{Slot::kValues, DType::kInt32, 3}}, "Scan");
  EXPECT_EQ(small.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(small.message(), HasSubstr("has room for 8 bytes but the answer takes 12"));

  *location.mutable_indices() = Ref(0, 16);
  absl::Status overlap = RequestMemory(&registry_).PlaceOutputs(
      location, {{Slot::kValues, DType::kInt32, 2}, {Slot::kIndices, DType::kInt64, 2}}, "Reduce");
  EXPECT_EQ(overlap.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(overlap.message(), HasSubstr("overlaps"));
}

TEST_F(RequestMemoryTest, DeliversPlacedOutputsIntoTheRegionAndTheRestInline) {
  RequestMemory memory(&registry_);
  v1::OutputLocation location;
  *location.mutable_indices() = Ref(64, 64);
  ASSERT_TRUE(memory
                  .PlaceOutputs(location,
                                {{Slot::kValues, DType::kInt64, std::nullopt},
                                 {Slot::kIndices, DType::kInt64, std::nullopt}},
                                "Select")
                  .ok());
  HostArray values = Int64s({5, 6});
  HostArray indices = Int64s({1, 3, 7});
  v1::Array values_field, indices_field;
  ASSERT_TRUE(memory
                  .Deliver({{Slot::kValues, &values, &values_field},
                            {Slot::kIndices, &indices, &indices_field}})
                  .ok());
  EXPECT_EQ(values_field.data().size(), 16u);
  EXPECT_FALSE(values_field.has_shm());
  EXPECT_TRUE(indices_field.data().empty());
  EXPECT_EQ(indices_field.dtype(), v1::INT64);
  EXPECT_EQ(indices_field.shm().region(), "r");
  EXPECT_EQ(indices_field.shm().offset(), 64u);
  EXPECT_EQ(indices_field.shm().byte_size(), 24u);
  int64_t written[3];
  std::memcpy(written, bytes_ + 64, sizeof(written));
  EXPECT_THAT(written, ::testing::ElementsAre(1, 3, 7));
}

TEST_F(RequestMemoryTest, AnAnswerTheBackendWroteInPlaceIsReportedNotCopied) {
  RequestMemory memory(&registry_);
  v1::OutputLocation location;
  *location.mutable_values() = Ref(128, 64);
  ASSERT_TRUE(memory.PlaceOutputs(location, {{Slot::kValues, DType::kInt32, 16}}, "Scan").ok());
  ASSERT_EQ(memory.PlacedData(Slot::kValues), bytes_ + 128);
  EXPECT_EQ(memory.PlacedData(Slot::kIndices), nullptr);
  bytes_[128] = 42;  // as the backend wrote it
  HostArray in_place{DType::kInt32, {}, 64};
  v1::Array field;
  ASSERT_TRUE(memory.Deliver({{Slot::kValues, &in_place, &field}}).ok());
  EXPECT_EQ(field.shm().offset(), 128u);
  EXPECT_EQ(field.shm().byte_size(), 64u);
  EXPECT_TRUE(field.data().empty());
  EXPECT_EQ(bytes_[128], 42);
  // Written in place where nothing was placed: the backend's error, not an answer.
  RequestMemory inline_only(&registry_);
  v1::Array unplaced;
  EXPECT_EQ(inline_only.Deliver({{Slot::kValues, &in_place, &unplaced}}).code(),
            absl::StatusCode::kInternal);
}

TEST_F(RequestMemoryTest, AnAnswerWithoutRoomWritesNothing) {
  RequestMemory memory(&registry_);
  v1::OutputLocation location;
  *location.mutable_values() = Ref(0, 16);
  *location.mutable_lengths() = Ref(16, 16);
  ASSERT_TRUE(memory
                  .PlaceOutputs(location,
                                {{Slot::kValues, DType::kInt64, std::nullopt},
                                 {Slot::kLengths, DType::kInt64, std::nullopt}},
                                "RunLengthEncode")
                  .ok());
  HostArray values = Int64s({1, 2});
  HostArray lengths = Int64s({1, 2, 3});
  v1::Array values_field, lengths_field;
  absl::Status small = memory.Deliver(
      {{Slot::kValues, &values, &values_field}, {Slot::kLengths, &lengths, &lengths_field}});
  EXPECT_EQ(small.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(small.message(),
              HasSubstr("output_location.lengths has room for 16 bytes but the answer takes 24"));
  EXPECT_EQ(std::string(bytes_, 32), std::string(32, '\0'));
}

TEST_F(RequestMemoryTest, AnObjectTruncatedDuringTheRequestIsNotWritten) {
  RequestMemory memory(&registry_);
  v1::OutputLocation location;
  *location.mutable_values() = Ref(0, 4096);
  ASSERT_TRUE(
      memory.PlaceOutputs(location, {{Slot::kValues, DType::kInt64, std::nullopt}}, "Unique").ok());
  ASSERT_EQ(ftruncate(fd_, 100), 0);
  HostArray values = Int64s({1, 2, 3});
  v1::Array field;
  EXPECT_EQ(memory.Deliver({{Slot::kValues, &values, &field}}).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace primserve::shm
