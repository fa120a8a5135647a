#include "server/cuda/footprint.h"

#include <vector>

#include "gtest/gtest.h"
#include "server/cuda/io.h"

namespace primserve::cuda {
namespace {

// Host buffers recorded as device ranges stand in for device memory: only
// their addresses are looked up.
class FootprintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AddDeviceRange(on_one_.data(), on_one_.size(), 1);
    AddDeviceRange(on_three_.data(), on_three_.size(), 3);
  }
  void TearDown() override {
    RemoveDeviceRange(on_one_.data());
    RemoveDeviceRange(on_three_.data());
  }

  // `count` bytes from `from` on: they may run past the vector, since only
  // the address range is looked at.
  static ArrayView View(const std::vector<char>& bytes, size_t from, size_t count) {
    return ArrayView{DType::kInt32, absl::string_view(bytes.data() + from, count)};
  }

  std::vector<char> host_ = std::vector<char>(4096);
  std::vector<char> on_one_ = std::vector<char>(4096);
  std::vector<char> on_three_ = std::vector<char>(4096);
};

TEST_F(FootprintTest, HostMemoryHasNoDeviceAndCountsInputBytes) {
  ScanOperation scan;
  scan.input = View(host_, 0, 400);
  const Footprint footprint = FootprintOf(scan);
  EXPECT_EQ(footprint.device, -1);
  EXPECT_EQ(footprint.bytes, 400u);

  ReduceByKeyOperation by_key;
  by_key.keys = View(host_, 0, 64);
  by_key.values = View(host_, 64, 128);
  EXPECT_EQ(FootprintOf(by_key).bytes, 192u);
  EXPECT_EQ(FootprintOf(by_key).device, -1);
}

TEST_F(FootprintTest, InputOnADeviceNamesIt) {
  ReduceOperation reduce;
  reduce.input = View(on_three_, 256, 1024);
  const Footprint footprint = FootprintOf(reduce);
  EXPECT_EQ(footprint.device, 3);
  EXPECT_EQ(footprint.bytes, 1024u);
}

TEST_F(FootprintTest, OutputPlaceOnADeviceNamesIt) {
  ScanOperation scan;
  scan.input = View(host_, 0, 400);
  scan.output_place = on_one_.data() + 100;
  EXPECT_EQ(FootprintOf(scan).device, 1);

  SelectOperation select;
  select.input = View(host_, 0, 400);
  select.places.indices = OutputPlace{on_three_.data(), 400};
  EXPECT_EQ(FootprintOf(select).device, 3);
}

// A scan into a wider accumulator writes twice its input's bytes: its place
// is on a device only where all of them lie in the device's range.
TEST_F(FootprintTest, AWiderScanAnswerTakesTwiceTheInputsBytesAtItsPlace) {
  ScanOperation scan;
  scan.input = View(host_, 0, 400);  // 100 INT32
  scan.output_place = on_one_.data() + 4096 - 600;
  EXPECT_EQ(FootprintOf(scan).device, 1);  // 400 bytes of INT32 answer fit
  scan.accumulator = DType::kInt64;
  EXPECT_EQ(FootprintOf(scan).device, -1);  // 800 bytes of INT64 run past the range
  scan.output_place = on_one_.data() + 4096 - 800;
  EXPECT_EQ(FootprintOf(scan).device, 1);
  EXPECT_EQ(FootprintOf(scan).bytes, 400u);  // the work: the input's bytes
}

TEST_F(FootprintTest, FirstDeviceInArgumentOrderWins) {
  SortOperation sort;
  sort.keys = View(on_one_, 0, 64);
  sort.values = View(on_three_, 0, 64);
  EXPECT_EQ(FootprintOf(sort).device, 1);
  EXPECT_EQ(FootprintOf(sort).bytes, 128u);

  SelectOperation select;
  select.input = View(host_, 0, 64);
  select.flags = View(on_three_, 0, 16);
  EXPECT_EQ(FootprintOf(select).device, 3);
  EXPECT_EQ(FootprintOf(select).bytes, 80u);
}

TEST_F(FootprintTest, GatherAndPipelineSteps) {
  GatherOperation gather;
  gather.values = View(host_, 0, 400);
  gather.indices = View(on_three_, 0, 80);
  EXPECT_EQ(FootprintOf(gather).device, 3);
  EXPECT_EQ(FootprintOf(gather).bytes, 480u);

  // The first step reads host memory, the second a buffer on device 1.
  PipelineOperation pipeline;
  ScanOperation scan;
  scan.input = View(host_, 0, 100);
  pipeline.steps.push_back(PipelineStep{scan});
  ReduceOperation reduce;
  reduce.input = View(on_one_, 0, 60);
  pipeline.steps.push_back(PipelineStep{reduce});
  EXPECT_EQ(FootprintOf(pipeline).device, 1);
  EXPECT_EQ(FootprintOf(pipeline).bytes, 160u);
}

TEST_F(FootprintTest, RangeOverrunningARecordedOneIsHostMemory) {
  ReduceOperation reduce;
  // Starts inside device 1's range but runs past its end.
  reduce.input = View(on_one_, 4000, 200);
  EXPECT_EQ(FootprintOf(reduce).device, -1);
}

}  // namespace
}  // namespace primserve::cuda
