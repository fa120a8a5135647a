// Which operations may share a fused launch: only those a backend can run
// with one set of parameters; and an answer edited wherever it is held.
#include "server/engine/task.h"

#include <cstdint>
#include <memory>
#include <string>
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

ScanOperation FloatSum(DType dtype, bool reproducible) {
  ScanOperation scan;
  scan.input = View(kInput);
  scan.input.dtype = dtype;
  scan.op = Op::kSum;
  scan.reproducible = reproducible;
  return scan;
}

// A reproducible float SUM/PROD runs in its own launch: batched with a
// non-reproducible one it would be fused into theirs.
TEST(BatchKeyTest, ReproducibleFloatSumsAndProductsBatchOnlyWithReproducibleOnes) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (Op op : {Op::kSum, Op::kProd}) {
      ScanOperation fast = FloatSum(dtype, false);
      fast.op = op;
      ScanOperation reproducible = FloatSum(dtype, true);
      reproducible.op = op;
      EXPECT_FALSE(BatchKeyOf(fast) == BatchKeyOf(reproducible)) << DTypeName(dtype);
      EXPECT_TRUE(BatchKeyOf(reproducible) == BatchKeyOf(reproducible));
      EXPECT_TRUE(BatchKeyOf(reproducible).reproducible);
      ReduceOperation reduce{fast.input, op, {}, false};
      ReduceOperation reproducible_reduce{fast.input, op, {}, true};
      EXPECT_FALSE(BatchKeyOf(reduce) == BatchKeyOf(reproducible_reduce));
      EXPECT_TRUE(BatchKeyOf(reproducible_reduce).reproducible);
    }
  }
}

// Integers, and MIN/MAX on floats, give the same bits in any order: the flag
// changes nothing for them, and they keep fusing.
TEST(BatchKeyTest, ReproducibleIntegerAndMinMaxRequestsStillFuse) {
  EXPECT_TRUE(BatchKeyOf(FloatSum(DType::kInt32, true)) ==
              BatchKeyOf(FloatSum(DType::kInt32, false)));
  EXPECT_FALSE(BatchKeyOf(FloatSum(DType::kInt64, true)).reproducible);
  ScanOperation max = FloatSum(DType::kFloat32, true);
  max.op = Op::kMax;
  ScanOperation fast_max = max;
  fast_max.reproducible = false;
  EXPECT_TRUE(BatchKeyOf(max) == BatchKeyOf(fast_max));
  ReduceOperation argmax{View(kInput), Op::kArgMax, {}, true};
  argmax.input.dtype = DType::kFloat64;
  EXPECT_FALSE(BatchKeyOf(argmax).reproducible);
}

// "0123456789" held 4 bytes into a buffer of its own ("....0123456789").
HostArray HeldDigits(std::shared_ptr<char>* buffer) {
  const std::string bytes = "....0123456789";
  buffer->reset(new char[bytes.size()], std::default_delete<char[]>());
  bytes.copy(buffer->get(), bytes.size());
  HostArray array;
  array.held = std::shared_ptr<char>(*buffer, buffer->get() + 4);
  array.held_bytes = 10;
  array.held_room = 4;
  return array;
}

TEST(HostArrayTest, AHeldAnswerIsEditedInItsBuffer) {
  std::shared_ptr<char> buffer;
  HostArray array = HeldDigits(&buffer);
  array.mutable_data()[0] = 'a';
  EXPECT_EQ(buffer.get()[4], 'a');
  array.Truncate(8);
  array.RemovePrefix(3);  // the dropped bytes become room
  EXPECT_EQ(array.data(), "34567");
  EXPECT_EQ(array.held_room, 7u);
  array.Prepend("xyz_abc");
  EXPECT_EQ(array.data(), "xyz_abc34567");
  EXPECT_EQ(array.held.get(), buffer.get());  // no copy: the same buffer
  EXPECT_EQ(array.held_room, 0u);
  EXPECT_TRUE(array.bytes.empty());
}

TEST(HostArrayTest, APrependWithoutRoomMovesTheAnswerIntoAString) {
  std::shared_ptr<char> buffer;
  HostArray array = HeldDigits(&buffer);
  array.Prepend("abcde");
  EXPECT_EQ(array.held, nullptr);
  EXPECT_EQ(array.bytes, "abcde0123456789");
  EXPECT_EQ(array.data(), "abcde0123456789");
  EXPECT_EQ(buffer.use_count(), 1);  // the buffer let go
}

TEST(HostArrayTest, AStringAnswerIsEditedAlike) {
  HostArray array{DType::kInt32, "0123456789"};
  array.mutable_data()[9] = 'z';
  array.Truncate(12);  // no longer than it is: unchanged
  array.Truncate(9);
  array.RemovePrefix(2);
  array.Prepend("ab");
  EXPECT_EQ(array.data(), "ab2345678");
  EXPECT_EQ(array.held, nullptr);
}

}  // namespace
}  // namespace primserve
