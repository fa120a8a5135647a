// Which pipelines run on the device as one unit (RunsOnDevice): decided from
// the steps' shapes and where their inputs and places lie, before any CUDA
// call, so it is checked here without a GPU. Device memory is stood in for
// by host bytes recorded as a device range (io.h).
#include "server/cuda/device_pipeline.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "server/cuda/io.h"
#include "server/engine/pipeline_steps.h"

namespace primserve::cuda {
namespace {

constexpr int kDevice = 0;
constexpr size_t kElements = 1000;

class RunsOnDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AddDeviceRange(on_device_.data(), on_device_.size(), kDevice);
    AddDeviceRange(other_device_.data(), other_device_.size(), kDevice + 1);
  }
  void TearDown() override {
    RemoveDeviceRange(on_device_.data());
    RemoveDeviceRange(other_device_.data());
  }

  // kElements of `dtype` in the stand-in device memory (or the host's).
  ArrayView Resident(DType dtype = DType::kInt32) {
    return ArrayView{dtype, absl::string_view(on_device_.data(), kElements * DTypeSize(dtype))};
  }
  ArrayView Inline(DType dtype = DType::kInt32) {
    return ArrayView{dtype, absl::string_view(on_host_.data(), kElements * DTypeSize(dtype))};
  }
  // An input an earlier step makes, before binding.
  static ArrayView Unbound(DType dtype) {
    return ArrayView{dtype, absl::string_view(UnboundStepData(), kElements * DTypeSize(dtype))};
  }

  static PipelineStep Step(Operation operation, std::vector<StepBinding> bindings = {}) {
    PipelineStep step;
    step.operation = std::move(operation);
    step.bindings = std::move(bindings);
    step.returned = true;
    return step;
  }

  // select indices of a > 0, gather k and v by them, aggregate v by k.
  PipelineOperation GroupBy(ArrayView a, ArrayView k, ArrayView v) {
    SelectOperation select;
    select.input = a;
    select.predicate = PredicateSpec{PredicateKind::kGt, 0, 0};
    select.output = SelectOutput::kIndices;
    GatherOperation keys{k, Unbound(DType::kInt64)};
    GatherOperation values{v, Unbound(DType::kInt64)};
    AggregateByKeyOperation group;
    group.keys = Unbound(k.dtype);
    group.values = Unbound(v.dtype);
    group.num_keys = 16;
    PipelineOperation pipeline;
    pipeline.steps.push_back(Step(select));
    pipeline.steps.push_back(Step(keys, {{"indices", 0, StepOutputKind::kIndices}}));
    pipeline.steps.push_back(Step(values, {{"indices", 0, StepOutputKind::kIndices}}));
    pipeline.steps.push_back(Step(group, {{"keys", 1, StepOutputKind::kValues},
                                          {"values", 2, StepOutputKind::kValues}}));
    return pipeline;
  }

  std::vector<char> on_device_ = std::vector<char>(kElements * 8, 1);
  std::vector<char> other_device_ = std::vector<char>(kElements * 8, 1);
  std::vector<char> on_host_ = std::vector<char>(kElements * 8, 1);
};

TEST_F(RunsOnDeviceTest, FilteredGroupByOverColumnsOnTheDeviceOrTheHost) {
  EXPECT_TRUE(RunsOnDevice(GroupBy(Resident(), Resident(), Resident(DType::kFloat32)), kDevice));
  // Host columns are copied to the device first.
  EXPECT_TRUE(RunsOnDevice(GroupBy(Resident(), Inline(), Inline()), kDevice));
  // Not with a column in a CUDA region on another device.
  EXPECT_FALSE(RunsOnDevice(GroupBy(Resident(), Resident(), Resident()), kDevice + 1));
}

TEST_F(RunsOnDeviceTest, RunLengthsThenTheirOffsets) {
  RunLengthEncodeOperation runs;
  runs.input = Resident();
  ScanOperation offsets;
  offsets.input = Unbound(DType::kInt64);
  offsets.exclusive = true;
  PipelineOperation pipeline;
  pipeline.steps.push_back(Step(runs));
  pipeline.steps.push_back(Step(offsets, {{"input", 0, StepOutputKind::kLengths}}));
  EXPECT_TRUE(RunsOnDevice(pipeline, kDevice));
  // A segmented scan, or one into a wider accumulator, runs step by step.
  std::get<ScanOperation>(pipeline.steps[1].operation).accumulator = DType::kInt64;
  EXPECT_FALSE(RunsOnDevice(pipeline, kDevice));
}

TEST_F(RunsOnDeviceTest, ASelectOverACountedInputRunsStepByStep) {
  SelectOperation first;
  first.input = Resident();
  first.predicate = PredicateSpec{PredicateKind::kGt, 0, 0};
  SelectOperation second = first;
  second.input = Unbound(DType::kInt32);
  PipelineOperation pipeline;
  pipeline.steps.push_back(Step(first));
  pipeline.steps.push_back(Step(second, {{"input", 0, StepOutputKind::kValues}}));
  EXPECT_FALSE(RunsOnDevice(pipeline, kDevice));
}

TEST_F(RunsOnDeviceTest, KeysAndValuesCountedApartRunStepByStep) {
  PipelineOperation pipeline = GroupBy(Resident(), Resident(), Resident());
  // Values from a second select: two counts the host cannot compare.
  SelectOperation other;
  other.input = Resident();
  other.predicate = PredicateSpec{PredicateKind::kLt, 0, 0};
  other.output = SelectOutput::kIndices;
  pipeline.steps.insert(pipeline.steps.begin() + 2, Step(other));
  pipeline.steps[3].bindings = {{"indices", 2, StepOutputKind::kIndices}};
  pipeline.steps[4].bindings = {{"keys", 1, StepOutputKind::kValues},
                                {"values", 3, StepOutputKind::kValues}};
  EXPECT_FALSE(RunsOnDevice(pipeline, kDevice));
}

TEST_F(RunsOnDeviceTest, AReproducibleFloatScanNeedsASizeKnownOnTheHost) {
  SelectOperation select;
  select.input = Resident(DType::kFloat32);
  select.predicate = PredicateSpec{PredicateKind::kGt, 0, 0};
  ScanOperation scan;
  scan.input = Unbound(DType::kFloat32);
  scan.reproducible = true;
  PipelineOperation counted;
  counted.steps.push_back(Step(select));
  counted.steps.push_back(Step(scan, {{"input", 0, StepOutputKind::kValues}}));
  EXPECT_FALSE(RunsOnDevice(counted, kDevice));
  PipelineOperation known;
  scan.input = Resident(DType::kFloat32);
  known.steps.push_back(Step(scan));
  EXPECT_TRUE(RunsOnDevice(known, kDevice));
}

TEST_F(RunsOnDeviceTest, SortAndOutputsOnAnotherDeviceRunStepByStep) {
  SortOperation sort;
  sort.keys = Resident();
  PipelineOperation sorting;
  sorting.steps.push_back(Step(sort));
  EXPECT_FALSE(RunsOnDevice(sorting, kDevice));

  PipelineOperation group = GroupBy(Resident(), Resident(), Resident());
  SetPlace(group.steps[3].operation, StepOutputKind::kValues,
           OutputPlace{other_device_.data(), 16 * 4});
  EXPECT_FALSE(RunsOnDevice(group, kDevice));
  SetPlace(group.steps[3].operation, StepOutputKind::kValues,
           OutputPlace{on_device_.data(), 16 * 4});
  EXPECT_TRUE(RunsOnDevice(group, kDevice));
}

}  // namespace
}  // namespace primserve::cuda
