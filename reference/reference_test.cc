// Tests of the CPU reference (reference/reference.h) and of the names in
// core/primitives.cc. Hand-worked cases pin exact answers for every op and
// dtype; seeded property checks relate the primitives to each other and to
// brute-force oracles written independently here.
#include "reference/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "core/primitives.h"

namespace primserve::reference {
namespace {

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

template <typename T>
constexpr DType TestDTypeOf() {
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  if constexpr (std::is_same_v<T, uint32_t>) return DType::kUint32;
  if constexpr (std::is_same_v<T, uint64_t>) return DType::kUint64;
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  return DType::kFloat64;
}

struct TypeNames {
  template <typename T>
  static std::string GetName(int) {
    return DTypeName(TestDTypeOf<T>());
  }
};

using AllTypes =
    ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
using IntTypes = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t>;
using SignedTypes = ::testing::Types<int32_t, int64_t>;
using UnsignedTypes = ::testing::Types<uint32_t, uint64_t>;
using FloatTypes = ::testing::Types<float, double>;

constexpr Op kAllOps[] = {Op::kSum, Op::kProd,   Op::kMin,
                          Op::kMax, Op::kArgMin, Op::kArgMax};
constexpr Op kCombineOps[] = {Op::kSum, Op::kProd, Op::kMin, Op::kMax};

// The bit pattern of x (the value itself for integers).
template <typename T>
uint64_t Bits(T x) {
  if constexpr (std::is_same_v<T, float>) {
    uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
  } else if constexpr (std::is_same_v<T, double>) {
    uint64_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
  } else {
    return static_cast<uint64_t>(x);
  }
}

template <typename T>
std::string Show(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return absl::StrCat(x, " (bits 0x", absl::Hex(Bits(x)), ")");
  } else {
    return absl::StrCat(x);
  }
}

// Bit-pattern equality, except that any NaN matches any NaN: IEEE leaves the
// payload and sign of a NaN made by arithmetic unspecified, and compilers may
// swap the operands of a commutative op, so only NaN-ness is meaningful.
template <typename T>
bool SameValueBits(T got, T want) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(got) && std::isnan(want)) return true;
  }
  return Bits(got) == Bits(want);
}

template <typename T>
::testing::AssertionResult SameBits(T got, T want) {
  if (SameValueBits(got, want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << Show(got) << ", expected " << Show(want);
}

// Element-wise SameValueBits of two vectors.
template <typename T>
::testing::AssertionResult BitsEq(const std::vector<T>& got,
                                  const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size " << got.size() << ", expected " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!SameValueBits(got[i], want[i])) {
      return ::testing::AssertionFailure()
             << "at [" << i << "]: got " << Show(got[i]) << ", expected "
             << Show(want[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
std::vector<T> Vec(std::initializer_list<long long> xs) {
  std::vector<T> v;
  for (long long x : xs) v.push_back(static_cast<T>(x));
  return v;
}

std::vector<bool> Bools(std::initializer_list<int> xs) {
  std::vector<bool> v;
  for (int x : xs) v.push_back(x != 0);
  return v;
}

template <typename T>
T Max() {
  return std::numeric_limits<T>::max();
}
template <typename T>
T Lowest() {
  return std::numeric_limits<T>::lowest();
}
template <typename T>
T Inf() {
  return std::numeric_limits<T>::infinity();
}
template <typename T>
T QNaN() {
  return std::numeric_limits<T>::quiet_NaN();
}
// A quiet NaN with a low payload, so that different NaNs can be told apart.
template <typename T>
T NanWithPayload(uint64_t payload) {
  T x;
  if constexpr (std::is_same_v<T, float>) {
    const uint32_t b = 0x7fc00000u | static_cast<uint32_t>(payload);
    std::memcpy(&x, &b, sizeof x);
  } else {
    const uint64_t b = 0x7ff8000000000000ull | payload;
    std::memcpy(&x, &b, sizeof x);
  }
  return x;
}

// The identities, written out independently of primitives.h.
template <typename T>
T MinIdentity() {
  if constexpr (std::is_floating_point_v<T>) return Inf<T>();
  return Max<T>();
}
template <typename T>
T MaxIdentity() {
  if constexpr (std::is_floating_point_v<T>) return -Inf<T>();
  return Lowest<T>();
}
template <typename T>
T ExpectedIdentity(Op op) {
  switch (op) {
    case Op::kSum: return T(0);
    case Op::kProd: return T(1);
    case Op::kMin:
    case Op::kArgMin: return MinIdentity<T>();
    case Op::kMax:
    case Op::kArgMax: return MaxIdentity<T>();
  }
  ADD_FAILURE() << "bad op";
  return T(0);
}

// Wrapping add written independently of primitives.h (for the SUM oracle).
template <typename T>
T OracleAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) +
                                         static_cast<U>(b)));
  } else {
    return a + b;
  }
}

bool IsArg(Op op) { return op == Op::kArgMin || op == Op::kArgMax; }

// Segment bounds [begin, end) for the property tests.
std::vector<std::pair<size_t, size_t>> Segments(
    size_t n, const std::vector<uint64_t>& starts) {
  std::vector<std::pair<size_t, size_t>> segs;
  if (starts.empty()) {
    segs.push_back({0, n});
    return segs;
  }
  for (size_t s = 0; s < starts.size(); ++s) {
    segs.push_back({starts[s], s + 1 < starts.size() ? starts[s + 1] : n});
  }
  return segs;
}

// ---------------------------------------------------------------------------
// Names and vocabulary (primitives.cc)
// ---------------------------------------------------------------------------

TEST(PrimitivesNames, DTypeName) {
  EXPECT_STREQ(DTypeName(DType::kInt32), "INT32");
  EXPECT_STREQ(DTypeName(DType::kInt64), "INT64");
  EXPECT_STREQ(DTypeName(DType::kUint32), "UINT32");
  EXPECT_STREQ(DTypeName(DType::kUint64), "UINT64");
  EXPECT_STREQ(DTypeName(DType::kFloat32), "FLOAT32");
  EXPECT_STREQ(DTypeName(DType::kFloat64), "FLOAT64");
  EXPECT_STREQ(DTypeName(static_cast<DType>(0)), "UNKNOWN");
  EXPECT_STREQ(DTypeName(static_cast<DType>(7)), "UNKNOWN");
  EXPECT_STREQ(DTypeName(static_cast<DType>(-1)), "UNKNOWN");
}

TEST(PrimitivesNames, OpName) {
  EXPECT_STREQ(OpName(Op::kSum), "SUM");
  EXPECT_STREQ(OpName(Op::kProd), "PROD");
  EXPECT_STREQ(OpName(Op::kMin), "MIN");
  EXPECT_STREQ(OpName(Op::kMax), "MAX");
  EXPECT_STREQ(OpName(Op::kArgMin), "ARGMIN");
  EXPECT_STREQ(OpName(Op::kArgMax), "ARGMAX");
  EXPECT_STREQ(OpName(static_cast<Op>(0)), "UNKNOWN");
  EXPECT_STREQ(OpName(static_cast<Op>(7)), "UNKNOWN");
}

TEST(PrimitivesNames, PredicateKindName) {
  EXPECT_STREQ(PredicateKindName(PredicateKind::kNonzero), "NONZERO");
  EXPECT_STREQ(PredicateKindName(PredicateKind::kEq), "EQ");
  EXPECT_STREQ(PredicateKindName(PredicateKind::kNe), "NE");
  EXPECT_STREQ(PredicateKindName(PredicateKind::kLt), "LT");
  EXPECT_STREQ(PredicateKindName(PredicateKind::kLe), "LE");
  EXPECT_STREQ(PredicateKindName(PredicateKind::kGt), "GT");
  EXPECT_STREQ(PredicateKindName(PredicateKind::kGe), "GE");
  EXPECT_STREQ(PredicateKindName(PredicateKind::kInRange), "IN_RANGE");
  EXPECT_STREQ(PredicateKindName(static_cast<PredicateKind>(0)), "UNKNOWN");
  EXPECT_STREQ(PredicateKindName(static_cast<PredicateKind>(9)), "UNKNOWN");
}

TEST(PrimitivesNames, VisitDTypeSizeAndIntegerness) {
  for (DType d : {DType::kInt32, DType::kInt64, DType::kUint32, DType::kUint64,
                  DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(d));
    EXPECT_EQ(
        VisitDType(d, [](auto x) { return TestDTypeOf<decltype(x)>(); }), d);
    EXPECT_EQ(VisitDType(d, [](auto x) { return sizeof(x); }), DTypeSize(d));
    EXPECT_EQ(VisitDType(d,
                         [](auto x) {
                           return std::is_integral_v<decltype(x)>;
                         }),
              IsIntegerDType(d));
  }
}

// ---------------------------------------------------------------------------
// Hand-worked cases for every dtype
// ---------------------------------------------------------------------------

template <typename T>
class RefAll : public ::testing::Test {};
TYPED_TEST_SUITE(RefAll, AllTypes, TypeNames);

TYPED_TEST(RefAll, ScanSum) {
  using T = TypeParam;
  const auto in = Vec<T>({1, 2, 3, 4});
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kSum, false), Vec<T>({1, 3, 6, 10})));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kSum, true), Vec<T>({0, 1, 3, 6})));
}

TYPED_TEST(RefAll, ScanProd) {
  using T = TypeParam;
  const auto in = Vec<T>({1, 2, 3, 4});
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kProd, false), Vec<T>({1, 2, 6, 24})));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kProd, true), Vec<T>({1, 1, 2, 6})));
}

TYPED_TEST(RefAll, ScanMin) {
  using T = TypeParam;
  const auto in = Vec<T>({5, 3, 4, 1, 2});
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMin, false), Vec<T>({5, 3, 3, 1, 1})));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMin, true),
                     {MinIdentity<T>(), T(5), T(3), T(3), T(1)}));
}

TYPED_TEST(RefAll, ScanMax) {
  using T = TypeParam;
  const auto in = Vec<T>({2, 1, 4, 3, 6});
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMax, false), Vec<T>({2, 2, 4, 4, 6})));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMax, true),
                     {MaxIdentity<T>(), T(2), T(2), T(4), T(4)}));
}

TYPED_TEST(RefAll, ScanSegmentedRestartsAndSkipsEmptySegments) {
  using T = TypeParam;
  // Segments: [0,2) {5,2}, [2,2) empty, [2,5) {3,1,4}, [5,6) {6}, [6,6) empty.
  const auto in = Vec<T>({5, 2, 3, 1, 4, 6});
  const std::vector<uint64_t> starts = {0, 2, 2, 5, 6};
  const T mi = MinIdentity<T>(), ma = MaxIdentity<T>();
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kSum, false, starts),
                     Vec<T>({5, 7, 3, 4, 8, 6})));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kSum, true, starts),
                     Vec<T>({0, 5, 0, 3, 4, 0})));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kProd, false, starts),
                     Vec<T>({5, 10, 3, 3, 12, 6})));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kProd, true, starts),
                     Vec<T>({1, 5, 1, 3, 3, 1})));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMin, false, starts),
                     Vec<T>({5, 2, 3, 1, 1, 6})));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMin, true, starts),
                     {mi, T(5), mi, T(3), T(1), mi}));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMax, false, starts),
                     Vec<T>({5, 5, 3, 3, 4, 6})));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMax, true, starts),
                     {ma, T(5), ma, T(3), T(3), ma}));
}

TYPED_TEST(RefAll, ScanOneSegmentStartEqualsNoSegments) {
  using T = TypeParam;
  const auto in = Vec<T>({3, 1, 2, 7});
  for (Op op : kCombineOps) {
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE(absl::StrCat(OpName(op), exclusive ? " exclusive" : ""));
      EXPECT_TRUE(BitsEq(Scan<T>(in, op, exclusive, std::vector<uint64_t>{0}),
                         Scan<T>(in, op, exclusive)));
    }
  }
}

TYPED_TEST(RefAll, ScanEmptyInput) {
  using T = TypeParam;
  const std::vector<T> empty;
  for (Op op : kCombineOps) {
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE(absl::StrCat(OpName(op), exclusive ? " exclusive" : ""));
      EXPECT_TRUE(Scan<T>(empty, op, exclusive).empty());
      EXPECT_TRUE(Scan<T>(empty, op, exclusive, std::vector<uint64_t>{0})
                      .empty());
      EXPECT_TRUE(Scan<T>(empty, op, exclusive, std::vector<uint64_t>{0, 0})
                      .empty());
    }
  }
}

TYPED_TEST(RefAll, ScanSingleElement) {
  using T = TypeParam;
  const auto in = Vec<T>({9});
  for (Op op : kCombineOps) {
    SCOPED_TRACE(OpName(op));
    EXPECT_TRUE(BitsEq(Scan<T>(in, op, false), Vec<T>({9})));
    EXPECT_TRUE(BitsEq(Scan<T>(in, op, true), {ExpectedIdentity<T>(op)}));
  }
}

TYPED_TEST(RefAll, ReduceEachOp) {
  using T = TypeParam;
  const auto in = Vec<T>({3, 1, 4, 1, 5, 9, 2, 6});
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kSum).values, Vec<T>({31})));
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kProd).values, Vec<T>({6480})));
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kMin).values, Vec<T>({1})));
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kMax).values, Vec<T>({9})));

  const ReduceResult<T> argmin = Reduce<T>(in, Op::kArgMin);
  EXPECT_TRUE(BitsEq(argmin.values, Vec<T>({1})));
  EXPECT_EQ(argmin.indices, std::vector<int64_t>({1}));  // tie at 3: first
  const ReduceResult<T> argmax = Reduce<T>(in, Op::kArgMax);
  EXPECT_TRUE(BitsEq(argmax.values, Vec<T>({9})));
  EXPECT_EQ(argmax.indices, std::vector<int64_t>({5}));
}

TYPED_TEST(RefAll, ReduceNonArgOpsLeaveIndicesEmpty) {
  using T = TypeParam;
  const auto in = Vec<T>({3, 1, 4});
  for (Op op : kCombineOps) {
    SCOPED_TRACE(OpName(op));
    EXPECT_TRUE(Reduce<T>(in, op).indices.empty());
    EXPECT_TRUE(
        Reduce<T>(in, op, std::vector<uint64_t>{0, 1, 1}).indices.empty());
  }
}

TYPED_TEST(RefAll, ReduceArgTiesPickFirstIndex) {
  using T = TypeParam;
  const auto in = Vec<T>({7, 2, 9, 2, 9, 7});
  const ReduceResult<T> argmin = Reduce<T>(in, Op::kArgMin);
  EXPECT_EQ(argmin.indices, std::vector<int64_t>({1}));
  EXPECT_TRUE(BitsEq(argmin.values, Vec<T>({2})));
  const ReduceResult<T> argmax = Reduce<T>(in, Op::kArgMax);
  EXPECT_EQ(argmax.indices, std::vector<int64_t>({2}));
  EXPECT_TRUE(BitsEq(argmax.values, Vec<T>({9})));

  const auto same = Vec<T>({4, 4, 4});
  EXPECT_EQ(Reduce<T>(same, Op::kArgMin).indices, std::vector<int64_t>({0}));
  EXPECT_EQ(Reduce<T>(same, Op::kArgMax).indices, std::vector<int64_t>({0}));
}

// A non-empty segment whose elements all equal the identity still has an
// index: an implementation seeded with (identity, -1) and a strict compare
// would wrongly report -1.
TYPED_TEST(RefAll, ReduceArgOfElementsEqualToIdentity) {
  using T = TypeParam;
  const std::vector<T> highs = {MinIdentity<T>(), MinIdentity<T>()};
  const ReduceResult<T> argmin = Reduce<T>(highs, Op::kArgMin);
  EXPECT_EQ(argmin.indices, std::vector<int64_t>({0}));
  EXPECT_TRUE(BitsEq(argmin.values, {MinIdentity<T>()}));

  const std::vector<T> lows = {MaxIdentity<T>(), MaxIdentity<T>()};
  const ReduceResult<T> argmax = Reduce<T>(lows, Op::kArgMax);
  EXPECT_EQ(argmax.indices, std::vector<int64_t>({0}));
  EXPECT_TRUE(BitsEq(argmax.values, {MaxIdentity<T>()}));

  // Segmented: the second segment's only element is the identity.
  const std::vector<T> in = {T(1), MinIdentity<T>()};
  EXPECT_EQ(Reduce<T>(in, Op::kArgMin, std::vector<uint64_t>{0, 1}).indices,
            std::vector<int64_t>({0, 1}));
}

TYPED_TEST(RefAll, ReduceSegmentedWithEmptySegmentsAndGlobalIndices) {
  using T = TypeParam;
  // Segments: [0,0) empty, [0,3) {4,2,7}, [3,3) empty, [3,6) {7,1,8},
  // [6,6) empty.
  const auto in = Vec<T>({4, 2, 7, 7, 1, 8});
  const std::vector<uint64_t> starts = {0, 0, 3, 3, 6};
  const T mi = MinIdentity<T>(), ma = MaxIdentity<T>();
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kSum, starts).values,
                     Vec<T>({0, 13, 0, 16, 0})));
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kProd, starts).values,
                     Vec<T>({1, 56, 1, 56, 1})));
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kMin, starts).values,
                     {mi, T(2), mi, T(1), mi}));
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kMax, starts).values,
                     {ma, T(7), ma, T(8), ma}));

  const ReduceResult<T> argmin = Reduce<T>(in, Op::kArgMin, starts);
  EXPECT_TRUE(BitsEq(argmin.values, {mi, T(2), mi, T(1), mi}));
  EXPECT_EQ(argmin.indices, std::vector<int64_t>({-1, 1, -1, 4, -1}));
  const ReduceResult<T> argmax = Reduce<T>(in, Op::kArgMax, starts);
  EXPECT_TRUE(BitsEq(argmax.values, {ma, T(7), ma, T(8), ma}));
  EXPECT_EQ(argmax.indices, std::vector<int64_t>({-1, 2, -1, 5, -1}));
}

TYPED_TEST(RefAll, ReduceEmptyInputIsIdentity) {
  using T = TypeParam;
  const std::vector<T> empty;
  for (Op op : kAllOps) {
    SCOPED_TRACE(OpName(op));
    const T id = ExpectedIdentity<T>(op);
    const std::vector<int64_t> no_index =
        IsArg(op) ? std::vector<int64_t>{-1} : std::vector<int64_t>{};
    const ReduceResult<T> whole = Reduce<T>(empty, op);
    EXPECT_TRUE(BitsEq(whole.values, {id}));
    EXPECT_EQ(whole.indices, no_index);
    const ReduceResult<T> one = Reduce<T>(empty, op, std::vector<uint64_t>{0});
    EXPECT_TRUE(BitsEq(one.values, {id}));
    const ReduceResult<T> two =
        Reduce<T>(empty, op, std::vector<uint64_t>{0, 0});
    EXPECT_TRUE(BitsEq(two.values, {id, id}));
    EXPECT_EQ(two.indices.size(), IsArg(op) ? 2u : 0u);
  }
}

TYPED_TEST(RefAll, SelectKeepsInInputOrder) {
  using T = TypeParam;
  const auto in = Vec<T>({10, 11, 12, 13, 14});
  const auto keep = Bools({1, 0, 0, 1, 1});
  const SelectResult<T> r = Select<T>(in, keep, false);
  EXPECT_TRUE(BitsEq(r.values, Vec<T>({10, 13, 14})));
  EXPECT_EQ(r.indices, std::vector<int64_t>({0, 3, 4}));
  EXPECT_EQ(r.count, uint64_t{3});
}

TYPED_TEST(RefAll, SelectPartitionPutsRejectedAfterKept) {
  using T = TypeParam;
  const auto in = Vec<T>({10, 11, 12, 13, 14});
  const auto keep = Bools({1, 0, 0, 1, 1});
  const SelectResult<T> r = Select<T>(in, keep, true);
  EXPECT_TRUE(BitsEq(r.values, Vec<T>({10, 13, 14, 11, 12})));
  EXPECT_EQ(r.indices, std::vector<int64_t>({0, 3, 4, 1, 2}));
  EXPECT_EQ(r.count, uint64_t{3});
}

TYPED_TEST(RefAll, SelectAllNoneAndEmpty) {
  using T = TypeParam;
  const auto in = Vec<T>({5, 6, 7});
  const SelectResult<T> all = Select<T>(in, Bools({1, 1, 1}), false);
  EXPECT_TRUE(BitsEq(all.values, in));
  EXPECT_EQ(all.indices, std::vector<int64_t>({0, 1, 2}));
  EXPECT_EQ(all.count, uint64_t{3});

  const SelectResult<T> none = Select<T>(in, Bools({0, 0, 0}), false);
  EXPECT_TRUE(none.values.empty());
  EXPECT_TRUE(none.indices.empty());
  EXPECT_EQ(none.count, uint64_t{0});

  const SelectResult<T> none_part = Select<T>(in, Bools({0, 0, 0}), true);
  EXPECT_TRUE(BitsEq(none_part.values, in));
  EXPECT_EQ(none_part.indices, std::vector<int64_t>({0, 1, 2}));
  EXPECT_EQ(none_part.count, uint64_t{0});

  for (bool partition : {false, true}) {
    const SelectResult<T> empty = Select<T>(std::vector<T>{}, {}, partition);
    EXPECT_TRUE(empty.values.empty());
    EXPECT_TRUE(empty.indices.empty());
    EXPECT_EQ(empty.count, uint64_t{0});
  }
}

TYPED_TEST(RefAll, EvaluatePredicateEveryKind) {
  using T = TypeParam;
  const auto in = Vec<T>({0, 1, 2, 3, 4});
  auto eval = [&](PredicateKind kind, T operand, T upper = T(0)) {
    Predicate<T> p;
    p.kind = kind;
    p.operand = operand;
    p.upper = upper;
    return EvaluatePredicate<T>(in, p);
  };
  EXPECT_EQ(eval(PredicateKind::kNonzero, T(2)), Bools({0, 1, 1, 1, 1}));
  EXPECT_EQ(eval(PredicateKind::kEq, T(2)), Bools({0, 0, 1, 0, 0}));
  EXPECT_EQ(eval(PredicateKind::kNe, T(2)), Bools({1, 1, 0, 1, 1}));
  EXPECT_EQ(eval(PredicateKind::kLt, T(2)), Bools({1, 1, 0, 0, 0}));
  EXPECT_EQ(eval(PredicateKind::kLe, T(2)), Bools({1, 1, 1, 0, 0}));
  EXPECT_EQ(eval(PredicateKind::kGt, T(2)), Bools({0, 0, 0, 1, 1}));
  EXPECT_EQ(eval(PredicateKind::kGe, T(2)), Bools({0, 0, 1, 1, 1}));
  // IN_RANGE is operand <= x < upper.
  EXPECT_EQ(eval(PredicateKind::kInRange, T(1), T(4)), Bools({0, 1, 1, 1, 0}));
  EXPECT_EQ(eval(PredicateKind::kInRange, T(2), T(2)), Bools({0, 0, 0, 0, 0}));
  EXPECT_EQ(eval(PredicateKind::kInRange, T(3), T(1)), Bools({0, 0, 0, 0, 0}));
  EXPECT_EQ(eval(PredicateKind::kInRange, T(0), T(5)), Bools({1, 1, 1, 1, 1}));
  // EQ with an operand not in the input keeps nothing; NE keeps everything.
  EXPECT_EQ(eval(PredicateKind::kEq, T(9)), Bools({0, 0, 0, 0, 0}));
  EXPECT_EQ(eval(PredicateKind::kNe, T(9)), Bools({1, 1, 1, 1, 1}));
}

TYPED_TEST(RefAll, EvaluatePredicateEmptyInput) {
  using T = TypeParam;
  Predicate<T> p;
  p.kind = PredicateKind::kNe;
  EXPECT_TRUE(EvaluatePredicate<T>(std::vector<T>{}, p).empty());
}

TYPED_TEST(RefAll, EvaluateFlags) {
  using F = TypeParam;
  EXPECT_EQ(EvaluateFlags<F>(Vec<F>({0, 1, 0, 5, 0, 2})),
            Bools({0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(EvaluateFlags<F>(std::vector<F>{Max<F>(), Lowest<F>()}),
            Bools({1, std::is_signed_v<F> ? 1 : 0}));
  EXPECT_TRUE(EvaluateFlags<F>(std::vector<F>{}).empty());
}

TYPED_TEST(RefAll, UniqueDropsOnlyConsecutiveDuplicates) {
  using T = TypeParam;
  EXPECT_TRUE(BitsEq(Unique<T>(Vec<T>({1, 1, 2, 2, 2, 3, 1, 1})),
                     Vec<T>({1, 2, 3, 1})));
  EXPECT_TRUE(BitsEq(Unique<T>(Vec<T>({4, 5, 4, 5})), Vec<T>({4, 5, 4, 5})));
  EXPECT_TRUE(BitsEq(Unique<T>(Vec<T>({7, 7, 7})), Vec<T>({7})));
  EXPECT_TRUE(BitsEq(Unique<T>(Vec<T>({8})), Vec<T>({8})));
  EXPECT_TRUE(Unique<T>(std::vector<T>{}).empty());
}

TYPED_TEST(RefAll, RunLengthEncode) {
  using T = TypeParam;
  const Runs<T> r = RunLengthEncode<T>(Vec<T>({1, 1, 2, 2, 2, 3, 1, 1}));
  EXPECT_TRUE(BitsEq(r.values, Vec<T>({1, 2, 3, 1})));
  EXPECT_EQ(r.lengths, std::vector<int64_t>({2, 3, 1, 2}));

  const Runs<T> one = RunLengthEncode<T>(Vec<T>({6, 6, 6, 6}));
  EXPECT_TRUE(BitsEq(one.values, Vec<T>({6})));
  EXPECT_EQ(one.lengths, std::vector<int64_t>({4}));

  const Runs<T> distinct = RunLengthEncode<T>(Vec<T>({1, 2, 3}));
  EXPECT_EQ(distinct.lengths, std::vector<int64_t>({1, 1, 1}));

  const Runs<T> empty = RunLengthEncode<T>(std::vector<T>{});
  EXPECT_TRUE(empty.values.empty());
  EXPECT_TRUE(empty.lengths.empty());
}

TYPED_TEST(RefAll, ReduceByKeyEachOp) {
  using T = TypeParam;
  const std::vector<int32_t> keys = {1, 1, 2, 2, 2, 1, 3};
  const auto values = Vec<T>({1, 2, 3, 4, 5, 6, 7});
  const std::vector<int32_t> want_keys = {1, 2, 1, 3};
  struct Case {
    Op op;
    std::vector<T> want;
  };
  const Case cases[] = {{Op::kSum, Vec<T>({3, 12, 6, 7})},
                        {Op::kProd, Vec<T>({2, 60, 6, 7})},
                        {Op::kMin, Vec<T>({1, 3, 6, 7})},
                        {Op::kMax, Vec<T>({2, 5, 6, 7})}};
  for (const Case& c : cases) {
    SCOPED_TRACE(OpName(c.op));
    const KeyedValues<int32_t, T> r =
        ReduceByKey<int32_t, T>(keys, values, c.op);
    EXPECT_EQ(r.keys, want_keys);
    EXPECT_TRUE(BitsEq(r.values, c.want));
  }
}

TYPED_TEST(RefAll, ReduceByKeyWithKeysOfThisType) {
  using T = TypeParam;
  const auto keys = Vec<T>({5, 5, 0, 0, 5});
  const std::vector<int64_t> values = {1, 2, 3, 4, 5};
  const KeyedValues<T, int64_t> r =
      ReduceByKey<T, int64_t>(keys, values, Op::kSum);
  EXPECT_TRUE(BitsEq(r.keys, Vec<T>({5, 0, 5})));
  EXPECT_EQ(r.values, std::vector<int64_t>({3, 7, 5}));

  const KeyedValues<T, T> empty =
      ReduceByKey<T, T>(std::vector<T>{}, std::vector<T>{}, Op::kMax);
  EXPECT_TRUE(empty.keys.empty());
  EXPECT_TRUE(empty.values.empty());
}

TYPED_TEST(RefAll, AggregateByKeyEachOp) {
  using T = TypeParam;
  // key 0: {2, 5}; key 1: absent; key 2: {1, 3}; key 3: {4}; key 4: absent.
  const std::vector<int32_t> keys = {2, 0, 2, 3, 0};
  const auto values = Vec<T>({1, 2, 3, 4, 5});
  const T mi = MinIdentity<T>(), ma = MaxIdentity<T>();

  absl::StatusOr<std::vector<T>> sum =
      AggregateByKey<int32_t, T>(keys, values, Op::kSum, 5);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_TRUE(BitsEq(*sum, Vec<T>({7, 0, 4, 4, 0})));

  absl::StatusOr<std::vector<T>> min =
      AggregateByKey<int32_t, T>(keys, values, Op::kMin, 5);
  ASSERT_TRUE(min.ok()) << min.status();
  EXPECT_TRUE(BitsEq(*min, {T(2), mi, T(1), T(4), mi}));

  absl::StatusOr<std::vector<T>> max =
      AggregateByKey<int32_t, T>(keys, values, Op::kMax, 5);
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_TRUE(BitsEq(*max, {T(5), ma, T(3), T(4), ma}));
}

TYPED_TEST(RefAll, AggregateByKeyWithoutKeys) {
  using T = TypeParam;
  const std::vector<int32_t> no_keys;
  const std::vector<T> no_values;
  for (Op op : {Op::kSum, Op::kMin, Op::kMax}) {
    SCOPED_TRACE(OpName(op));
    const T id = ExpectedIdentity<T>(op);
    absl::StatusOr<std::vector<T>> three =
        AggregateByKey<int32_t, T>(no_keys, no_values, op, 3);
    ASSERT_TRUE(three.ok()) << three.status();
    EXPECT_TRUE(BitsEq(*three, {id, id, id}));
    absl::StatusOr<std::vector<T>> zero =
        AggregateByKey<int32_t, T>(no_keys, no_values, op, 0);
    ASSERT_TRUE(zero.ok()) << zero.status();
    EXPECT_TRUE(zero->empty());
  }
}

TYPED_TEST(RefAll, AggregateByKeyRejectsOtherOpsAndLengthMismatch) {
  using T = TypeParam;
  const std::vector<int32_t> keys = {0, 1};
  const auto values = Vec<T>({1, 2});
  for (Op op : {Op::kProd, Op::kArgMin, Op::kArgMax}) {
    SCOPED_TRACE(OpName(op));
    absl::StatusOr<std::vector<T>> r =
        AggregateByKey<int32_t, T>(keys, values, op, 2);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(r.status().message()).find(OpName(op)),
              std::string::npos)
        << r.status();
  }
  absl::StatusOr<std::vector<T>> mismatch =
      AggregateByKey<int32_t, T>(keys, Vec<T>({1}), Op::kSum, 2);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Integer wrapping and extremes
// ---------------------------------------------------------------------------

template <typename T>
class RefInt : public ::testing::Test {};
TYPED_TEST_SUITE(RefInt, IntTypes, TypeNames);

TYPED_TEST(RefInt, SumWrapsPastMax) {
  using T = TypeParam;
  // max + 1 wraps to the lowest value (INT_MIN, or 0 for unsigned).
  const std::vector<T> in = {Max<T>(), T(1), T(1)};
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kSum, false),
                     {Max<T>(), Lowest<T>(), T(Lowest<T>() + 1)}));
  EXPECT_TRUE(
      BitsEq(Scan<T>(in, Op::kSum, true), {T(0), Max<T>(), Lowest<T>()}));
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kSum).values, {T(Lowest<T>() + 1)}));
  EXPECT_TRUE(BitsEq(
      ReduceByKey<int32_t, T>(std::vector<int32_t>{4, 4, 4}, in, Op::kSum)
          .values,
      {T(Lowest<T>() + 1)}));
  absl::StatusOr<std::vector<T>> agg = AggregateByKey<int32_t, T>(
      std::vector<int32_t>{1, 1, 0}, in, Op::kSum, 2);
  ASSERT_TRUE(agg.ok()) << agg.status();
  EXPECT_TRUE(BitsEq(*agg, {T(1), Lowest<T>()}));
}

TYPED_TEST(RefInt, MinMaxAtTheExtremes) {
  using T = TypeParam;
  const std::vector<T> in = {T(5), Lowest<T>(), Max<T>(), T(0), Lowest<T>(),
                             Max<T>()};
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kMin).values, {Lowest<T>()}));
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kMax).values, {Max<T>()}));
  EXPECT_EQ(Reduce<T>(in, Op::kArgMin).indices, std::vector<int64_t>({1}));
  EXPECT_EQ(Reduce<T>(in, Op::kArgMax).indices, std::vector<int64_t>({2}));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMax, false),
                     {T(5), T(5), Max<T>(), Max<T>(), Max<T>(), Max<T>()}));
}

TYPED_TEST(RefInt, PredicatesAtTheExtremes) {
  using T = TypeParam;
  const std::vector<T> in = {Lowest<T>(), T(0), Max<T>()};
  Predicate<T> range;
  range.kind = PredicateKind::kInRange;
  range.operand = Lowest<T>();
  range.upper = Max<T>();
  EXPECT_EQ(EvaluatePredicate<T>(in, range), Bools({1, 1, 0}));
  Predicate<T> ge;
  ge.kind = PredicateKind::kGe;
  ge.operand = Max<T>();
  EXPECT_EQ(EvaluatePredicate<T>(in, ge), Bools({0, 0, 1}));
  Predicate<T> le;
  le.kind = PredicateKind::kLe;
  le.operand = Lowest<T>();
  EXPECT_EQ(EvaluatePredicate<T>(in, le), Bools({1, std::is_unsigned_v<T>, 0}));
}

template <typename T>
class RefSigned : public ::testing::Test {};
TYPED_TEST_SUITE(RefSigned, SignedTypes, TypeNames);

TYPED_TEST(RefSigned, WrapsBelowLowestAndInProducts) {
  using T = TypeParam;
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{Lowest<T>(), T(-1)}, Op::kSum)
                         .values,
                     {Max<T>()}));
  // MAX * 2 = 0x7f..f * 2 = 0xff..fe = -2.
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{Max<T>(), T(2)}, Op::kProd)
                         .values,
                     {T(-2)}));
  // LOWEST * -1 overflows back to LOWEST.
  EXPECT_TRUE(BitsEq(Scan<T>(std::vector<T>{Lowest<T>(), T(-1)}, Op::kProd,
                             false),
                     {Lowest<T>(), Lowest<T>()}));
  EXPECT_TRUE(BitsEq(Scan<T>(std::vector<T>{T(-3), T(-4), T(2)}, Op::kProd,
                             false),
                     {T(-3), T(12), T(24)}));
}

TYPED_TEST(RefSigned, NegativeValues) {
  using T = TypeParam;
  const std::vector<T> in = {T(-2), T(-1), T(0), T(1), T(-2)};
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kSum, false),
                     {T(-2), T(-3), T(-3), T(-2), T(-4)}));
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kMin).values, {T(-2)}));
  EXPECT_EQ(Reduce<T>(in, Op::kArgMin).indices, std::vector<int64_t>({0}));
  EXPECT_TRUE(BitsEq(Reduce<T>(in, Op::kMax).values, {T(1)}));
  Predicate<T> lt;
  lt.kind = PredicateKind::kLt;
  lt.operand = T(0);
  EXPECT_EQ(EvaluatePredicate<T>(in, lt), Bools({1, 1, 0, 0, 1}));
  Predicate<T> nz;
  nz.kind = PredicateKind::kNonzero;
  EXPECT_EQ(EvaluatePredicate<T>(in, nz), Bools({1, 1, 0, 1, 1}));
  Predicate<T> range;
  range.kind = PredicateKind::kInRange;
  range.operand = T(-1);
  range.upper = T(1);
  EXPECT_EQ(EvaluatePredicate<T>(in, range), Bools({0, 1, 1, 0, 0}));
  EXPECT_EQ(EvaluateFlags<T>(std::vector<T>{T(-1), T(0)}), Bools({1, 0}));
}

template <typename T>
class RefUnsigned : public ::testing::Test {};
TYPED_TEST_SUITE(RefUnsigned, UnsignedTypes, TypeNames);

TYPED_TEST(RefUnsigned, WrapsInSumsAndProducts) {
  using T = TypeParam;
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{Max<T>(), Max<T>()}, Op::kSum)
                         .values,
                     {T(Max<T>() - 1)}));
  // (2^w - 1)^2 = 1 mod 2^w.
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{Max<T>(), Max<T>()}, Op::kProd)
                         .values,
                     {T(1)}));
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{Max<T>(), T(2)}, Op::kProd)
                         .values,
                     {T(Max<T>() - 1)}));
  // 2^(w/2) * 2^(w/2) = 2^w = 0.
  const T half = T(T(1) << (sizeof(T) * 4));
  EXPECT_TRUE(BitsEq(Scan<T>(std::vector<T>{half, half, T(3)}, Op::kProd,
                             true),
                     {T(1), half, T(0)}));
}

// The literal examples from the spec, one per integer dtype.
TEST(RefConcreteWrap, LiteralExamples) {
  EXPECT_EQ(Scan<int32_t>(std::vector<int32_t>{INT32_MAX, 1}, Op::kSum, false),
            std::vector<int32_t>({INT32_MAX, INT32_MIN}));
  EXPECT_EQ(Scan<int64_t>(std::vector<int64_t>{INT64_MAX, 1}, Op::kSum, false),
            std::vector<int64_t>({INT64_MAX, INT64_MIN}));
  EXPECT_EQ(Scan<uint32_t>(std::vector<uint32_t>{UINT32_MAX, 1}, Op::kSum,
                           false),
            std::vector<uint32_t>({UINT32_MAX, 0}));
  EXPECT_EQ(Scan<uint64_t>(std::vector<uint64_t>{UINT64_MAX, 2}, Op::kSum,
                           false),
            std::vector<uint64_t>({UINT64_MAX, 1}));
  EXPECT_EQ(Reduce<uint32_t>(std::vector<uint32_t>{65536, 65536}, Op::kProd)
                .values,
            std::vector<uint32_t>({0}));
  EXPECT_EQ(Reduce<int32_t>(std::vector<int32_t>{65536, 32768}, Op::kProd)
                .values,
            std::vector<int32_t>({INT32_MIN}));
  EXPECT_EQ(Reduce<int64_t>(std::vector<int64_t>{int64_t{1} << 32,
                                                 int64_t{1} << 32},
                            Op::kProd)
                .values,
            std::vector<int64_t>({0}));
}

TEST(RefFlags, NarrowFlagTypes) {
  EXPECT_EQ(EvaluateFlags<uint8_t>(std::vector<uint8_t>{0, 1, 255, 0}),
            Bools({0, 1, 1, 0}));
  EXPECT_EQ(EvaluateFlags<int8_t>(std::vector<int8_t>{-1, 0, 127}),
            Bools({1, 0, 1}));
}

// ---------------------------------------------------------------------------
// Floating point: NaN, signed zeros, infinities
// ---------------------------------------------------------------------------

template <typename T>
class RefFloat : public ::testing::Test {};
TYPED_TEST_SUITE(RefFloat, FloatTypes, TypeNames);

TYPED_TEST(RefFloat, MinMaxPropagateNaN) {
  using T = TypeParam;
  const T nan = QNaN<T>();
  for (const std::vector<T>& in :
       {std::vector<T>{T(3), nan, T(1)}, std::vector<T>{nan, T(1)},
        std::vector<T>{T(1), nan}, std::vector<T>{-Inf<T>(), nan, Inf<T>()}}) {
    for (Op op : kCombineOps) {
      SCOPED_TRACE(OpName(op));
      const std::vector<T> r = Reduce<T>(in, op).values;
      ASSERT_EQ(r.size(), 1u);
      EXPECT_TRUE(std::isnan(r[0])) << Show(r[0]);
    }
  }
  // The NaN that MIN/MAX propagate is the input's NaN, unchanged.
  const T nan_a = NanWithPayload<T>(5);
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{T(2), nan_a, T(-1)}, Op::kMin)
                         .values,
                     {nan_a}));
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{T(2), nan_a, T(9)}, Op::kMax)
                         .values,
                     {nan_a}));
}

TYPED_TEST(RefFloat, ScanMinMaxWithNaN) {
  using T = TypeParam;
  const T nan = NanWithPayload<T>(3);
  const std::vector<T> in = {T(3), T(1), nan, T(0)};
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMin, false), {T(3), T(1), nan, nan}));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMin, true), {Inf<T>(), T(3), T(1), nan}));
  EXPECT_TRUE(BitsEq(Scan<T>(in, Op::kMax, false), {T(3), T(3), nan, nan}));
  EXPECT_TRUE(
      BitsEq(Scan<T>(in, Op::kMax, true), {-Inf<T>(), T(3), T(3), nan}));
  const std::vector<T> sum = Scan<T>(in, Op::kSum, false);
  EXPECT_FALSE(std::isnan(sum[1]));
  EXPECT_TRUE(std::isnan(sum[2]));
  EXPECT_TRUE(std::isnan(sum[3]));
}

TYPED_TEST(RefFloat, NaNStaysInItsSegment) {
  using T = TypeParam;
  const T nan = QNaN<T>();
  const std::vector<T> in = {nan, T(1), T(2), T(3)};
  const std::vector<uint64_t> starts = {0, 2};
  const std::vector<T> min = Reduce<T>(in, Op::kMin, starts).values;
  ASSERT_EQ(min.size(), 2u);
  EXPECT_TRUE(std::isnan(min[0]));
  EXPECT_TRUE(SameBits(min[1], T(2)));
  const std::vector<T> scan = Scan<T>(in, Op::kMax, false, starts);
  EXPECT_TRUE(std::isnan(scan[1]));
  EXPECT_TRUE(SameBits(scan[2], T(2)));
  EXPECT_TRUE(SameBits(scan[3], T(3)));
  const ReduceResult<T> argmax = Reduce<T>(in, Op::kArgMax, starts);
  EXPECT_EQ(argmax.indices, std::vector<int64_t>({0, 3}));
}

TYPED_TEST(RefFloat, ArgReturnsFirstNaN) {
  using T = TypeParam;
  const T nan_a = NanWithPayload<T>(1), nan_b = NanWithPayload<T>(2);
  const std::vector<T> in = {T(3), T(-7), nan_a, T(-9), nan_b};
  for (Op op : {Op::kArgMin, Op::kArgMax}) {
    SCOPED_TRACE(OpName(op));
    const ReduceResult<T> r = Reduce<T>(in, op);
    EXPECT_EQ(r.indices, std::vector<int64_t>({2}));
    EXPECT_TRUE(BitsEq(r.values, {nan_a}));
  }
  const std::vector<T> first = {nan_b, -Inf<T>(), Inf<T>(), nan_a};
  EXPECT_EQ(Reduce<T>(first, Op::kArgMin).indices, std::vector<int64_t>({0}));
  EXPECT_EQ(Reduce<T>(first, Op::kArgMax).indices, std::vector<int64_t>({0}));
  EXPECT_TRUE(BitsEq(Reduce<T>(first, Op::kArgMax).values, {nan_b}));
}

TYPED_TEST(RefFloat, ArgTreatsSignedZerosAsTies) {
  using T = TypeParam;
  const std::vector<T> pos_first = {T(1), T(0.0), T(-0.0)};
  const ReduceResult<T> argmin = Reduce<T>(pos_first, Op::kArgMin);
  EXPECT_EQ(argmin.indices, std::vector<int64_t>({1}));
  EXPECT_TRUE(BitsEq(argmin.values, {T(0.0)}));
  const std::vector<T> neg_first = {T(-1), T(-0.0), T(0.0)};
  const ReduceResult<T> argmax = Reduce<T>(neg_first, Op::kArgMax);
  EXPECT_EQ(argmax.indices, std::vector<int64_t>({1}));
  EXPECT_TRUE(BitsEq(argmax.values, {T(-0.0)}));
}

// MIN/MAX order -0.0 before +0.0, so the zero they return does not depend
// on which came first (a GPU combines in another order than this loop).
TYPED_TEST(RefFloat, MinMaxOrderNegativeZeroFirst) {
  using T = TypeParam;
  const T nz = T(-0.0), pz = T(0.0);
  for (const std::vector<T>& zeros : {std::vector<T>{pz, nz}, std::vector<T>{nz, pz}}) {
    EXPECT_TRUE(BitsEq(Reduce<T>(zeros, Op::kMin).values, {nz}));
    EXPECT_TRUE(BitsEq(Reduce<T>(zeros, Op::kMax).values, {pz}));
  }
  EXPECT_TRUE(BitsEq(Scan<T>(std::vector<T>{pz, T(1), nz, pz}, Op::kMin, false),
                     {pz, pz, nz, nz}));
  EXPECT_TRUE(BitsEq(Scan<T>(std::vector<T>{nz, T(-1), pz, nz}, Op::kMax, false),
                     {nz, nz, pz, pz}));
  absl::StatusOr<std::vector<T>> agg = AggregateByKey<int32_t, T>(
      std::vector<int32_t>{0, 0, 1, 1}, std::vector<T>{nz, pz, pz, nz}, Op::kMax, 2);
  ASSERT_TRUE(agg.ok()) << agg.status();
  EXPECT_TRUE(BitsEq(*agg, {pz, pz}));
}

TYPED_TEST(RefFloat, Infinities) {
  using T = TypeParam;
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{Inf<T>()}, Op::kMin).values,
                     {Inf<T>()}));
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{T(1), -Inf<T>()}, Op::kMin)
                         .values,
                     {-Inf<T>()}));
  EXPECT_TRUE(std::isnan(
      Reduce<T>(std::vector<T>{Inf<T>(), -Inf<T>()}, Op::kSum).values[0]));
  EXPECT_TRUE(std::isnan(
      Reduce<T>(std::vector<T>{Inf<T>(), T(0)}, Op::kProd).values[0]));
  EXPECT_EQ(Reduce<T>(std::vector<T>{-Inf<T>(), -Inf<T>()}, Op::kArgMax)
                .indices,
            std::vector<int64_t>({0}));
}

// A non-empty fold starts from its first element, so the identity never
// touches the sign of a zero (see reference_impl.h).
TYPED_TEST(RefFloat, NonEmptyFoldsStartFromTheFirstElement) {
  using T = TypeParam;
  const T nz = T(-0.0);
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{nz}, Op::kSum).values, {nz}));
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{nz, nz}, Op::kSum).values, {nz}));
  EXPECT_TRUE(BitsEq(Reduce<T>(std::vector<T>{}, Op::kSum).values, {T(0.0)}));
  EXPECT_TRUE(BitsEq(Scan<T>(std::vector<T>{nz, nz}, Op::kSum, false),
                     {nz, nz}));
  EXPECT_TRUE(BitsEq(Scan<T>(std::vector<T>{nz, nz}, Op::kSum, true),
                     {T(0.0), nz}));
  EXPECT_TRUE(BitsEq(
      ReduceByKey<int32_t, T>(std::vector<int32_t>{1}, std::vector<T>{nz},
                              Op::kSum)
          .values,
      {nz}));
  absl::StatusOr<std::vector<T>> agg = AggregateByKey<int32_t, T>(
      std::vector<int32_t>{0}, std::vector<T>{nz}, Op::kSum, 2);
  ASSERT_TRUE(agg.ok()) << agg.status();
  EXPECT_TRUE(BitsEq(*agg, {nz, T(0.0)}));
}

TYPED_TEST(RefFloat, RunsCompareBitPatterns) {
  using T = TypeParam;
  const T nan_a = NanWithPayload<T>(1), nan_b = NanWithPayload<T>(2);
  const std::vector<T> in = {T(0.0), T(-0.0), T(-0.0), T(0.0),
                             nan_a,  nan_a,   nan_b,   nan_a};
  const std::vector<T> want = {T(0.0), T(-0.0), T(0.0), nan_a, nan_b, nan_a};
  EXPECT_TRUE(BitsEq(Unique<T>(in), want));
  const Runs<T> runs = RunLengthEncode<T>(in);
  EXPECT_TRUE(BitsEq(runs.values, want));
  EXPECT_EQ(runs.lengths, std::vector<int64_t>({1, 2, 1, 2, 1, 1}));

  const std::vector<int32_t> values = {1, 2, 3, 4, 5, 6, 7, 8};
  const KeyedValues<T, int32_t> r =
      ReduceByKey<T, int32_t>(in, values, Op::kSum);
  EXPECT_TRUE(BitsEq(r.keys, want));
  EXPECT_EQ(r.values, std::vector<int32_t>({1, 5, 4, 11, 7, 8}));
}

TYPED_TEST(RefFloat, PredicatesFollowIEEE) {
  using T = TypeParam;
  auto eval = [](const std::vector<T>& in, PredicateKind kind, T operand,
                 T upper = T(0)) {
    Predicate<T> p;
    p.kind = kind;
    p.operand = operand;
    p.upper = upper;
    return EvaluatePredicate<T>(in, p);
  };
  const T nan = QNaN<T>();
  // A NaN element: passes NE and NONZERO only.
  const std::vector<T> n = {nan};
  EXPECT_EQ(eval(n, PredicateKind::kNonzero, T(0)), Bools({1}));
  EXPECT_EQ(eval(n, PredicateKind::kEq, T(0)), Bools({0}));
  EXPECT_EQ(eval(n, PredicateKind::kEq, nan), Bools({0}));
  EXPECT_EQ(eval(n, PredicateKind::kNe, T(0)), Bools({1}));
  EXPECT_EQ(eval(n, PredicateKind::kNe, nan), Bools({1}));
  EXPECT_EQ(eval(n, PredicateKind::kLt, T(0)), Bools({0}));
  EXPECT_EQ(eval(n, PredicateKind::kLe, T(0)), Bools({0}));
  EXPECT_EQ(eval(n, PredicateKind::kGt, T(0)), Bools({0}));
  EXPECT_EQ(eval(n, PredicateKind::kGe, T(0)), Bools({0}));
  EXPECT_EQ(eval(n, PredicateKind::kInRange, -Inf<T>(), Inf<T>()), Bools({0}));
  // A NaN operand: only NE passes.
  const std::vector<T> one = {T(1)};
  EXPECT_EQ(eval(one, PredicateKind::kEq, nan), Bools({0}));
  EXPECT_EQ(eval(one, PredicateKind::kNe, nan), Bools({1}));
  EXPECT_EQ(eval(one, PredicateKind::kLt, nan), Bools({0}));
  EXPECT_EQ(eval(one, PredicateKind::kLe, nan), Bools({0}));
  EXPECT_EQ(eval(one, PredicateKind::kGt, nan), Bools({0}));
  EXPECT_EQ(eval(one, PredicateKind::kGe, nan), Bools({0}));
  EXPECT_EQ(eval(one, PredicateKind::kInRange, nan, T(2)), Bools({0}));
  EXPECT_EQ(eval(one, PredicateKind::kInRange, T(0), nan), Bools({0}));
  // Signed zeros compare equal; -0.0 is zero for NONZERO.
  const std::vector<T> zeros = {T(-0.0), T(0.0)};
  EXPECT_EQ(eval(zeros, PredicateKind::kNonzero, T(0)), Bools({0, 0}));
  EXPECT_EQ(eval(zeros, PredicateKind::kEq, T(0.0)), Bools({1, 1}));
  EXPECT_EQ(eval(zeros, PredicateKind::kLt, T(0.0)), Bools({0, 0}));
  // Infinities and the half-open range.
  const std::vector<T> infs = {-Inf<T>(), T(0.5), Inf<T>()};
  EXPECT_EQ(eval(infs, PredicateKind::kInRange, T(0), Inf<T>()),
            Bools({0, 1, 0}));
  EXPECT_EQ(eval(infs, PredicateKind::kInRange, -Inf<T>(), T(1)),
            Bools({1, 1, 0}));
  EXPECT_EQ(eval(infs, PredicateKind::kLt, Lowest<T>()), Bools({1, 0, 0}));
  EXPECT_EQ(eval(infs, PredicateKind::kGe, Inf<T>()), Bools({0, 0, 1}));
}

TYPED_TEST(RefFloat, EvaluateFlagsOnSpecialValues) {
  using F = TypeParam;
  const std::vector<F> flags = {F(0.0), F(-0.0), QNaN<F>(),
                                std::numeric_limits<F>::denorm_min(),
                                -Inf<F>()};
  EXPECT_EQ(EvaluateFlags<F>(flags), Bools({0, 0, 1, 1, 1}));
}

// ---------------------------------------------------------------------------
// AggregateByKey key validation, for every integer key type
// ---------------------------------------------------------------------------

template <typename K>
class RefAggregateKeys : public ::testing::Test {};
TYPED_TEST_SUITE(RefAggregateKeys, IntTypes, TypeNames);

TYPED_TEST(RefAggregateKeys, AggregatesValidKeys) {
  using K = TypeParam;
  const std::vector<K> keys = {K(1), K(0), K(1), K(3)};
  const std::vector<double> values = {1.5, 2, 3, 4};
  absl::StatusOr<std::vector<double>> r =
      AggregateByKey<K, double>(keys, values, Op::kSum, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, std::vector<double>({2, 4.5, 0, 4}));
}

TYPED_TEST(RefAggregateKeys, KeyEqualToNumKeysIsRejected) {
  using K = TypeParam;
  const std::vector<K> keys = {K(0), K(9), K(1), K(10), K(11)};
  const std::vector<int32_t> values = {1, 2, 3, 4, 5};
  absl::StatusOr<std::vector<int32_t>> r =
      AggregateByKey<K, int32_t>(keys, values, Op::kSum, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  // The first offending position is named.
  EXPECT_EQ(r.status().message(), "keys[3] = 10 is outside [0, num_keys=10)");
}

TYPED_TEST(RefAggregateKeys, LargestKeyIsPrintedInFull) {
  using K = TypeParam;
  const std::vector<K> keys = {K(2), Max<K>()};
  const std::vector<float> values = {1, 2};
  absl::StatusOr<std::vector<float>> r =
      AggregateByKey<K, float>(keys, values, Op::kMax, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            absl::StrCat("keys[1] = ", Max<K>(),
                         " is outside [0, num_keys=3)"));
}

TYPED_TEST(RefAggregateKeys, NoKeyFitsZeroKeys) {
  using K = TypeParam;
  absl::StatusOr<std::vector<int64_t>> r = AggregateByKey<K, int64_t>(
      std::vector<K>{K(0)}, std::vector<int64_t>{7}, Op::kMin, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "keys[0] = 0 is outside [0, num_keys=0)");
}

TEST(RefAggregateKeysSigned, NegativeKeysAreRejected) {
  std::vector<int32_t> keys(20, 1);
  keys[17] = -3;
  keys[18] = -4;
  const std::vector<int64_t> values(20, 1);
  absl::StatusOr<std::vector<int64_t>> r =
      AggregateByKey<int32_t, int64_t>(keys, values, Op::kSum, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "keys[17] = -3 is outside [0, num_keys=10)");

  absl::StatusOr<std::vector<double>> r64 = AggregateByKey<int64_t, double>(
      std::vector<int64_t>{0, INT64_MIN}, std::vector<double>{1, 2}, Op::kSum,
      UINT64_MAX);
  ASSERT_FALSE(r64.ok());
  EXPECT_EQ(r64.status().message(),
            "keys[1] = -9223372036854775808 is outside [0, "
            "num_keys=18446744073709551615)");
}

// ---------------------------------------------------------------------------
// Seeded property checks
// ---------------------------------------------------------------------------

// Random data with many repeats (so runs and ties occur) and, per trial,
// optionally full-range integers (so sums and products wrap) or NaNs, signed
// zeros and infinities for floats.
template <typename T>
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  std::mt19937_64& rng() { return rng_; }
  size_t Below(size_t n) { return static_cast<size_t>(rng_() % n); }

  // Starts a new trial: picks the value profile.
  void NewTrial() {
    wide_ = Below(3) == 0;
    specials_ = Below(2) == 0;
    repeat_ = Below(3) * 3;  // tenths: chance an element repeats the last
  }

  T Value() {
    if constexpr (std::is_integral_v<T>) {
      if (wide_) return static_cast<T>(rng_());
      if constexpr (std::is_signed_v<T>) {
        return static_cast<T>(static_cast<int>(Below(9)) - 4);
      } else {
        return static_cast<T>(Below(9));
      }
    } else {
      if (specials_) {
        switch (Below(25)) {
          case 0: return NanWithPayload<T>(1);
          case 1: return NanWithPayload<T>(2);
          case 2: return -QNaN<T>();
          case 3: return T(-0.0);
          case 4: return Inf<T>();
          case 5: return -Inf<T>();
          default: break;
        }
      }
      // Thirds: inexact values, so a change in fold order would show.
      return static_cast<T>(static_cast<int>(Below(13)) - 6) / T(3);
    }
  }

  std::vector<T> Values(size_t n) {
    std::vector<T> v;
    for (size_t i = 0; i < n; ++i) {
      if (i > 0 && Below(10) < repeat_) {
        v.push_back(v.back());  // same bits, NaNs included
      } else {
        v.push_back(Value());
      }
    }
    return v;
  }

  // Empty (one segment) a quarter of the time; otherwise 1..6 sorted starts
  // in [0, n] with the first 0, duplicates (empty segments) allowed.
  std::vector<uint64_t> SegmentStarts(size_t n) {
    std::vector<uint64_t> starts;
    if (Below(4) == 0) return starts;
    starts.push_back(0);
    const size_t more = Below(6);
    for (size_t i = 0; i < more; ++i) starts.push_back(Below(n + 1));
    std::sort(starts.begin(), starts.end());
    return starts;
  }

 private:
  std::mt19937_64 rng_;
  bool wide_ = false;
  bool specials_ = false;
  size_t repeat_ = 0;
};

constexpr int kTrials = 300;

template <typename T>
class RefProperty : public ::testing::Test {};
TYPED_TEST_SUITE(RefProperty, AllTypes, TypeNames);

TYPED_TEST(RefProperty, ExclusiveScanIsInclusiveShiftedRightPerSegment) {
  using T = TypeParam;
  Generator<T> gen(1);
  for (int trial = 0; trial < kTrials; ++trial) {
    gen.NewTrial();
    const std::vector<T> in = gen.Values(gen.Below(40));
    const std::vector<uint64_t> starts = gen.SegmentStarts(in.size());
    for (Op op : kCombineOps) {
      SCOPED_TRACE(absl::StrCat("trial ", trial, " ", OpName(op)));
      const std::vector<T> inc = Scan<T>(in, op, false, starts);
      const std::vector<T> exc = Scan<T>(in, op, true, starts);
      std::vector<T> want(in.size());
      for (auto [begin, end] : Segments(in.size(), starts)) {
        for (size_t i = begin; i < end; ++i) {
          want[i] = i == begin ? ExpectedIdentity<T>(op) : inc[i - 1];
        }
      }
      ASSERT_TRUE(BitsEq(exc, want));
    }
  }
}

TYPED_TEST(RefProperty, SegmentedScanIsConcatenationOfPerSegmentScans) {
  using T = TypeParam;
  Generator<T> gen(2);
  for (int trial = 0; trial < kTrials; ++trial) {
    gen.NewTrial();
    const std::vector<T> in = gen.Values(gen.Below(40));
    const std::vector<uint64_t> starts = gen.SegmentStarts(in.size());
    for (Op op : kCombineOps) {
      for (bool exclusive : {false, true}) {
        SCOPED_TRACE(absl::StrCat("trial ", trial, " ", OpName(op),
                                  exclusive ? " exclusive" : ""));
        std::vector<T> want;
        for (auto [begin, end] : Segments(in.size(), starts)) {
          const std::vector<T> part(in.begin() + begin, in.begin() + end);
          const std::vector<T> scanned = Scan<T>(part, op, exclusive);
          want.insert(want.end(), scanned.begin(), scanned.end());
        }
        ASSERT_TRUE(BitsEq(Scan<T>(in, op, exclusive, starts), want));
      }
    }
  }
}

TYPED_TEST(RefProperty, InclusiveSumScanMatchesBruteForce) {
  using T = TypeParam;
  Generator<T> gen(3);
  for (int trial = 0; trial < kTrials; ++trial) {
    gen.NewTrial();
    const std::vector<T> in = gen.Values(gen.Below(40));
    const std::vector<T> got = Scan<T>(in, Op::kSum, false);
    T acc{};
    for (size_t i = 0; i < in.size(); ++i) {
      acc = i == 0 ? in[0] : OracleAdd(acc, in[i]);
      ASSERT_TRUE(SameBits(got[i], acc)) << "trial " << trial << " at " << i;
    }
  }
}

TYPED_TEST(RefProperty, ReduceIsLastElementOfInclusiveScanPerSegment) {
  using T = TypeParam;
  Generator<T> gen(4);
  for (int trial = 0; trial < kTrials; ++trial) {
    gen.NewTrial();
    const std::vector<T> in = gen.Values(gen.Below(40));
    const std::vector<uint64_t> starts = gen.SegmentStarts(in.size());
    for (Op op : kCombineOps) {
      SCOPED_TRACE(absl::StrCat("trial ", trial, " ", OpName(op)));
      const std::vector<T> inc = Scan<T>(in, op, false, starts);
      std::vector<T> want;
      for (auto [begin, end] : Segments(in.size(), starts)) {
        want.push_back(begin == end ? ExpectedIdentity<T>(op) : inc[end - 1]);
      }
      const ReduceResult<T> r = Reduce<T>(in, op, starts);
      ASSERT_TRUE(BitsEq(r.values, want));
      ASSERT_TRUE(r.indices.empty());
    }
  }
}

TYPED_TEST(RefProperty, ArgReduceMatchesBruteForce) {
  using T = TypeParam;
  Generator<T> gen(5);
  for (int trial = 0; trial < kTrials; ++trial) {
    gen.NewTrial();
    const std::vector<T> in = gen.Values(gen.Below(40));
    const std::vector<uint64_t> starts = gen.SegmentStarts(in.size());
    for (bool is_min : {true, false}) {
      const Op op = is_min ? Op::kArgMin : Op::kArgMax;
      SCOPED_TRACE(absl::StrCat("trial ", trial, " ", OpName(op)));
      const ReduceResult<T> r = Reduce<T>(in, op, starts);
      const ReduceResult<T> plain =
          Reduce<T>(in, is_min ? Op::kMin : Op::kMax, starts);
      const auto segs = Segments(in.size(), starts);
      ASSERT_EQ(r.values.size(), segs.size());
      ASSERT_EQ(r.indices.size(), segs.size());
      for (size_t s = 0; s < segs.size(); ++s) {
        const auto [begin, end] = segs[s];
        // Oracle: the first NaN, else the first index of the extreme value.
        int64_t want = -1;
        for (size_t i = begin; i < end && want < 0; ++i) {
          if (std::isnan(static_cast<double>(in[i]))) want = int64_t(i);
        }
        if (want < 0 && begin < end) {
          T best = in[begin];
          for (size_t i = begin; i < end; ++i) {
            if (is_min ? in[i] < best : best < in[i]) best = in[i];
          }
          for (size_t i = begin; i < end && want < 0; ++i) {
            if (in[i] == best) want = int64_t(i);
          }
        }
        ASSERT_EQ(r.indices[s], want) << "segment " << s;
        const T want_value =
            want < 0 ? ExpectedIdentity<T>(op) : in[size_t(want)];
        ASSERT_TRUE(SameBits(r.values[s], want_value)) << "segment " << s;
        // MIN/MAX agree with ARGMIN/ARGMAX's value, bit for bit.
        ASSERT_TRUE(SameBits(plain.values[s], want_value)) << "segment " << s;
      }
    }
  }
}

TYPED_TEST(RefProperty, SelectIsAStablePartition) {
  using T = TypeParam;
  Generator<T> gen(6);
  constexpr PredicateKind kKinds[] = {
      PredicateKind::kNonzero, PredicateKind::kEq, PredicateKind::kNe,
      PredicateKind::kLt,      PredicateKind::kLe, PredicateKind::kGt,
      PredicateKind::kGe,      PredicateKind::kInRange};
  for (int trial = 0; trial < kTrials; ++trial) {
    gen.NewTrial();
    SCOPED_TRACE(absl::StrCat("trial ", trial));
    const std::vector<T> in = gen.Values(gen.Below(40));
    Predicate<T> pred;
    pred.kind = kKinds[gen.Below(8)];
    pred.operand = gen.Value();
    pred.upper = gen.Value();
    const std::vector<bool> keep = EvaluatePredicate<T>(in, pred);
    ASSERT_EQ(keep.size(), in.size());
    size_t kept = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      ASSERT_EQ(keep[i], pred(in[i])) << i;
      kept += keep[i];
    }

    const SelectResult<T> part = Select<T>(in, keep, true);
    const SelectResult<T> sel = Select<T>(in, keep, false);
    ASSERT_EQ(part.count, kept);
    ASSERT_EQ(sel.count, kept);
    ASSERT_EQ(part.values.size(), in.size());
    ASSERT_EQ(part.indices.size(), in.size());
    // Without partition: exactly the kept prefix of the partition.
    ASSERT_TRUE(BitsEq(sel.values, std::vector<T>(part.values.begin(),
                                                  part.values.begin() + kept)));
    ASSERT_EQ(sel.indices, std::vector<int64_t>(part.indices.begin(),
                                                part.indices.begin() + kept));
    // Indices map back to values; each part is in input order and on the
    // right side of the predicate; together they are a permutation.
    std::vector<bool> seen(in.size(), false);
    for (size_t j = 0; j < in.size(); ++j) {
      const int64_t idx = part.indices[j];
      ASSERT_GE(idx, 0);
      ASSERT_LT(idx, int64_t(in.size()));
      ASSERT_FALSE(seen[size_t(idx)]) << "index " << idx << " twice";
      seen[size_t(idx)] = true;
      ASSERT_TRUE(SameBits(part.values[j], in[size_t(idx)])) << j;
      ASSERT_EQ(keep[size_t(idx)], j < kept) << j;
      if (j > 0 && j != kept) {
        ASSERT_LT(part.indices[j - 1], idx) << j;
      }
    }
    // The values, as a multiset of bit patterns, are the input's.
    std::vector<uint64_t> a, b;
    for (const T& x : in) a.push_back(Bits(x));
    for (const T& x : part.values) b.push_back(Bits(x));
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    ASSERT_EQ(a, b);
  }
}

TYPED_TEST(RefProperty, RunLengthEncodeRoundTripsAndUniqueIsItsValues) {
  using T = TypeParam;
  Generator<T> gen(7);
  for (int trial = 0; trial < kTrials; ++trial) {
    gen.NewTrial();
    SCOPED_TRACE(absl::StrCat("trial ", trial));
    const std::vector<T> in = gen.Values(gen.Below(60));
    const Runs<T> runs = RunLengthEncode<T>(in);
    ASSERT_EQ(runs.values.size(), runs.lengths.size());
    std::vector<T> expanded;
    for (size_t r = 0; r < runs.values.size(); ++r) {
      ASSERT_GT(runs.lengths[r], 0);
      if (r > 0) {
        ASSERT_NE(Bits(runs.values[r]), Bits(runs.values[r - 1])) << r;
      }
      expanded.insert(expanded.end(), size_t(runs.lengths[r]), runs.values[r]);
    }
    ASSERT_TRUE(BitsEq(expanded, in));
    ASSERT_TRUE(BitsEq(Unique<T>(in), runs.values));
  }
}

TYPED_TEST(RefProperty, ReduceByKeySumOfOnesIsRunLengths) {
  using T = TypeParam;
  Generator<T> gen(8);
  for (int trial = 0; trial < kTrials; ++trial) {
    gen.NewTrial();
    SCOPED_TRACE(absl::StrCat("trial ", trial));
    const std::vector<T> keys = gen.Values(gen.Below(60));
    const Runs<T> runs = RunLengthEncode<T>(keys);

    const KeyedValues<T, int64_t> counts = ReduceByKey<T, int64_t>(
        keys, std::vector<int64_t>(keys.size(), 1), Op::kSum);
    ASSERT_TRUE(BitsEq(counts.keys, runs.values));
    ASSERT_EQ(counts.values, runs.lengths);

    const KeyedValues<T, T> same = ReduceByKey<T, T>(
        keys, std::vector<T>(keys.size(), T(1)), Op::kSum);
    ASSERT_TRUE(BitsEq(same.keys, runs.values));
    std::vector<T> lengths;
    for (int64_t len : runs.lengths) lengths.push_back(static_cast<T>(len));
    ASSERT_TRUE(BitsEq(same.values, lengths));
  }
}

TYPED_TEST(RefProperty, ReduceByKeyIsReduceOverRunSegments) {
  using T = TypeParam;
  Generator<T> gen(9);
  Generator<int32_t> key_gen(10);
  for (int trial = 0; trial < kTrials; ++trial) {
    gen.NewTrial();
    key_gen.NewTrial();
    const size_t n = gen.Below(60);
    const std::vector<int32_t> keys = key_gen.Values(n);
    const std::vector<T> values = gen.Values(n);
    std::vector<uint64_t> starts;
    for (size_t i = 0; i < n; ++i) {
      if (i == 0 || keys[i] != keys[i - 1]) starts.push_back(i);
    }
    for (Op op : kCombineOps) {
      SCOPED_TRACE(absl::StrCat("trial ", trial, " ", OpName(op)));
      const KeyedValues<int32_t, T> r =
          ReduceByKey<int32_t, T>(keys, values, op);
      std::vector<int32_t> want_keys;
      for (uint64_t s : starts) want_keys.push_back(keys[s]);
      ASSERT_EQ(r.keys, want_keys);
      const std::vector<T> want =
          n == 0 ? std::vector<T>{} : Reduce<T>(values, op, starts).values;
      ASSERT_TRUE(BitsEq(r.values, want));
    }
  }
}

template <typename K, typename T>
void CheckAggregateByKeyAgainstBruteForce(uint64_t seed) {
  Generator<T> gen(seed);
  std::mt19937_64 rng(seed + 100);
  for (int trial = 0; trial < kTrials; ++trial) {
    gen.NewTrial();
    const uint64_t num_keys = 1 + rng() % 12;
    const size_t n = gen.Below(50);
    std::vector<K> keys;
    for (size_t i = 0; i < n; ++i) keys.push_back(K(rng() % num_keys));
    const std::vector<T> values = gen.Values(n);
    for (Op op : {Op::kSum, Op::kMin, Op::kMax}) {
      SCOPED_TRACE(absl::StrCat("trial ", trial, " ", OpName(op)));
      absl::StatusOr<std::vector<T>> got =
          AggregateByKey<K, T>(keys, values, op, num_keys);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), num_keys);
      for (uint64_t k = 0; k < num_keys; ++k) {
        std::vector<T> mine;
        for (size_t i = 0; i < n; ++i) {
          if (uint64_t(keys[i]) == k) mine.push_back(values[i]);
        }
        T want;
        if (op == Op::kSum) {
          // Independent left fold in input order.
          want = T(0);
          for (size_t j = 0; j < mine.size(); ++j) {
            want = j == 0 ? mine[0] : OracleAdd(want, mine[j]);
          }
        } else {
          want = Reduce<T>(mine, op).values[0];
        }
        ASSERT_TRUE(SameBits((*got)[k], want)) << "key " << k;
      }
    }
  }
}

TYPED_TEST(RefProperty, AggregateByKeyMatchesPerKeyBruteForce) {
  using T = TypeParam;
  CheckAggregateByKeyAgainstBruteForce<int32_t, T>(11);
  CheckAggregateByKeyAgainstBruteForce<uint64_t, T>(12);
}

TYPED_TEST(RefProperty, AggregateByKeyNamesFirstOutOfRangeKey) {
  using T = TypeParam;
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < kTrials; ++trial) {
    const uint64_t num_keys = 1 + rng() % 20;
    const size_t n = 1 + rng() % 30;
    std::vector<int64_t> keys;
    for (size_t i = 0; i < n; ++i) keys.push_back(int64_t(rng() % num_keys));
    const size_t bad = rng() % n;
    const int64_t bad_key = rng() % 2 == 0
                                ? -1 - int64_t(rng() % 1000)
                                : int64_t(num_keys + rng() % 1000);
    keys[bad] = bad_key;
    if (bad + 1 < n) keys[n - 1] = -5;  // a later bad key is not the one named
    const std::vector<T> values(n, T(1));
    absl::StatusOr<std::vector<T>> r =
        AggregateByKey<int64_t, T>(keys, values, Op::kSum, num_keys);
    ASSERT_FALSE(r.ok()) << "trial " << trial;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    ASSERT_EQ(r.status().message(),
              absl::StrCat("keys[", bad, "] = ", bad_key,
                           " is outside [0, num_keys=", num_keys, ")"))
        << "trial " << trial;
  }
}

}  // namespace
}  // namespace primserve::reference
