// Which operations may share a fused launch: only those a backend can run
// with one set of parameters.
#include "server/task.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace primserve {
namespace {

const std::vector<int32_t> kInput = {5, -3, 8, 0, 2};

ArrayView View(const std::vector<int32_t>& values) {
  return ArrayView{DType::kInt32,
                   absl::string_view(reinterpret_cast<const char*>(values.data()),
                                     values.size() * sizeof(int32_t))};
}

SelectOperation SelectGreaterThan(uint64_t operand_bits) {
  SelectOperation select;
  select.input = View(kInput);
  select.predicate = PredicateSpec{PredicateKind::kGt, operand_bits, 0};
  return select;
}

TEST(BatchKeyTest, SelectsWithTheSamePredicateShareALaunch) {
  EXPECT_TRUE(BatchKeyOf(SelectGreaterThan(0)) == BatchKeyOf(SelectGreaterThan(0)));
}

// A fused Select applies the first request's predicate to every request:
// GT 0 and GT 500 in one launch gave the second caller the first's answer.
TEST(BatchKeyTest, SelectsWithDifferentOperandsDoNotShareALaunch) {
  EXPECT_FALSE(BatchKeyOf(SelectGreaterThan(0)) == BatchKeyOf(SelectGreaterThan(500)));
  SelectOperation in_range = SelectGreaterThan(0);
  in_range.predicate->kind = PredicateKind::kInRange;
  SelectOperation other_upper = in_range;
  in_range.predicate->upper_bits = 10;
  other_upper.predicate->upper_bits = 20;
  EXPECT_FALSE(BatchKeyOf(in_range) == BatchKeyOf(other_upper));
}

TEST(BatchKeyTest, SelectsByPredicateAndByFlagsDoNotShareALaunch) {
  SelectOperation flagged;
  flagged.input = View(kInput);
  flagged.flags = View(kInput);
  EXPECT_FALSE(BatchKeyOf(SelectGreaterThan(0)) == BatchKeyOf(flagged));
}

TEST(BatchKeyTest, ScansDifferingInOpDtypeOrExclusiveDoNotShareALaunch) {
  ScanOperation sum;
  sum.input = View(kInput);
  sum.op = Op::kSum;
  ScanOperation max = sum;
  max.op = Op::kMax;
  ScanOperation exclusive = sum;
  exclusive.exclusive = true;
  ScanOperation int64 = sum;
  int64.input.dtype = DType::kInt64;
  EXPECT_FALSE(BatchKeyOf(sum) == BatchKeyOf(max));
  EXPECT_FALSE(BatchKeyOf(sum) == BatchKeyOf(exclusive));
  EXPECT_FALSE(BatchKeyOf(sum) == BatchKeyOf(int64));
  ScanOperation segmented = sum;
  const std::vector<uint64_t> starts = {0, 2};
  segmented.segment_offsets = starts;
  EXPECT_TRUE(BatchKeyOf(sum) == BatchKeyOf(segmented)) << "segments fuse: each keeps its own";
}

}  // namespace
}  // namespace primserve
