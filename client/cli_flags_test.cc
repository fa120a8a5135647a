// The flag values primctl and primload parse alike: what each table takes,
// and the errors that list the names a flag takes.
#include "client/cli_flags.h"

#include "gtest/gtest.h"

namespace primserve {
namespace {

TEST(LookupTest, GivesTheValueOfTheName) {
  absl::StatusOr<int> value = Lookup<int>("size", "large", {{"small", 1}, {"large", 2}});
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 2);
}

TEST(LookupTest, AnUnknownNameListsTheNames) {
  absl::StatusOr<int> value = Lookup<int>("size", "huge", {{"small", 1}, {"large", 2}});
  EXPECT_EQ(value.status(),
            absl::InvalidArgumentError("--size=huge is not one of small, large"));
}

TEST(ParseTest, DTypeOpAndOutput) {
  EXPECT_EQ(ParseDType("key_dtype", "uint64").value(), DType::kUint64);
  EXPECT_EQ(ParseDType("key_dtype", "int8").status().message(),
            "--key_dtype=int8 is not one of int32, int64, uint32, uint64, float32, float64");
  EXPECT_EQ(ParseOp("argmax").value(), Op::kArgMax);
  EXPECT_EQ(ParseOp("mean").status().message(),
            "--op=mean is not one of sum, prod, min, max, argmin, argmax");
  EXPECT_EQ(ParseSelectOutput("values_and_indices").value(),
            v1::SelectRequest::VALUES_AND_INDICES);
}

TEST(ParseTest, InRangeOnlyWhereTheToolTakesAnUpperBound) {
  EXPECT_EQ(ParsePredicate("ge", /*with_in_range=*/false).value(), PredicateKind::kGe);
  EXPECT_EQ(ParsePredicate("in_range", /*with_in_range=*/true).value(), PredicateKind::kInRange);
  EXPECT_EQ(ParsePredicate("in_range", /*with_in_range=*/false).status().message(),
            "--predicate=in_range is not one of nonzero, eq, ne, lt, le, gt, ge");
  EXPECT_EQ(ParsePredicate("odd", /*with_in_range=*/true).status().message(),
            "--predicate=odd is not one of nonzero, eq, ne, lt, le, gt, ge, in_range");
}

}  // namespace
}  // namespace primserve
