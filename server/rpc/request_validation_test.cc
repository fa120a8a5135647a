// Validation rules that need more than a table of malformed requests: float
// predicate operands compare exactly, and answers are bounded from the
// request's sizes.
#include "server/rpc/request_validation.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;

v1::Scalar Double(double v) {
  v1::Scalar s;
  s.set_float_value(v);
  return s;
}
v1::Scalar Int(int64_t v) {
  v1::Scalar s;
  s.set_int_value(v);
  return s;
}
v1::Scalar Uint(uint64_t v) {
  v1::Scalar s;
  s.set_uint_value(v);
  return s;
}

long double Exact(const v1::Scalar& s) {
  switch (s.value_case()) {
    case v1::Scalar::kIntValue: return s.int_value();
    case v1::Scalar::kUintValue: return s.uint_value();
    default: return s.float_value();
  }
}

// What the predicate means, evaluated without rounding the operand.
bool Mathematically(PredicateKind kind, long double x, long double v, long double upper) {
  switch (kind) {
    case PredicateKind::kNonzero: return x != 0;
    case PredicateKind::kEq: return x == v;
    case PredicateKind::kNe: return x != v;
    case PredicateKind::kLt: return x < v;
    case PredicateKind::kLe: return x <= v;
    case PredicateKind::kGt: return x > v;
    case PredicateKind::kGe: return x >= v;
    case PredicateKind::kInRange: return v <= x && x < upper;
  }
  return false;
}

template <typename T>
v1::DType WireDType() {
  return std::is_same_v<T, float> ? v1::FLOAT32 : v1::FLOAT64;
}

template <typename T>
PredicateSpec Parse(PredicateKind kind, const v1::Scalar& operand, const v1::Scalar& upper) {
  v1::SelectRequest request;
  request.mutable_input()->set_dtype(WireDType<T>());
  request.mutable_predicate()->set_kind(static_cast<v1::Predicate::Kind>(kind));
  *request.mutable_predicate()->mutable_operand() = operand;
  *request.mutable_predicate()->mutable_upper() = upper;
  absl::StatusOr<Operation> operation = ToOperation(request, RequestLimits{});
  EXPECT_TRUE(operation.ok()) << operation.status();
  if (!operation.ok()) return {};
  return *std::get<SelectOperation>(*operation).predicate;
}

// Every element near the operand (its neighbours in T and theirs), and the
// special values, gets the answer mathematics gives.
template <typename T>
void ExpectExactEverywhere(const std::vector<v1::Scalar>& operands) {
  constexpr PredicateKind kKinds[] = {PredicateKind::kEq, PredicateKind::kNe, PredicateKind::kLt,
                                      PredicateKind::kLe, PredicateKind::kGt, PredicateKind::kGe,
                                      PredicateKind::kInRange};
  constexpr T kInf = std::numeric_limits<T>::infinity();
  for (const v1::Scalar& operand : operands) {
    const long double v = Exact(operand);
    const T near = static_cast<T>(v);
    std::vector<T> elements = {T(0), -T(0), kInf, -kInf, std::numeric_limits<T>::quiet_NaN(),
                               std::numeric_limits<T>::max(), std::numeric_limits<T>::lowest(),
                               std::numeric_limits<T>::denorm_min()};
    T down = near, up = near;
    for (int i = 0; i < 3; ++i) {
      elements.push_back(down);
      elements.push_back(up);
      down = std::nextafter(down, -kInf);
      up = std::nextafter(up, kInf);
    }
    for (PredicateKind kind : kKinds) {
      // IN_RANGE from the operand up to a point a little above it.
      const v1::Scalar upper = Double(static_cast<double>(v) * 1.5 + 1);
      const Predicate<T> p = Parse<T>(kind, operand, upper).template As<T>();
      for (T x : elements) {
        const bool want = std::isnan(x) ? kind == PredicateKind::kNe
                                        : Mathematically(kind, x, v, Exact(upper));
        EXPECT_EQ(p(x), want) << PredicateKindName(kind) << " x=" << x
                              << " operand=" << operand.ShortDebugString();
      }
    }
  }
}

TEST(RequestValidationTest, Float32OperandsCompareExactly) {
  ExpectExactEverywhere<float>({Int(16777217), Int(16777216), Double(1e-50), Double(-1e-50),
                                Double(0.1), Double(1e300), Double(-1e300), Double(3.5),
                                Uint(UINT64_MAX), Int(INT64_MIN), Double(-0.0)});
}

TEST(RequestValidationTest, Float64OperandsCompareExactly) {
  ExpectExactEverywhere<double>({Uint((uint64_t{1} << 53) + 1), Int(-(int64_t{1} << 53) - 1),
                                 Uint(UINT64_MAX), Int(INT64_MAX), Int(INT64_MIN), Double(0.1),
                                 Double(5e-324), Double(-0.0)});
}

TEST(RequestValidationTest, IssueExamplesGiveMathematicalAnswers) {
  // FLOAT32 16777216 == 16777217 is false; 0.0 < 1e-50 is true; FLOAT64
  // 2^53 == 2^53 + 1 is false.
  EXPECT_FALSE(Parse<float>(PredicateKind::kEq, Int(16777217), {}).As<float>()(16777216.0f));
  EXPECT_TRUE(Parse<float>(PredicateKind::kLt, Double(1e-50), {}).As<float>()(0.0f));
  EXPECT_FALSE(Parse<double>(PredicateKind::kEq, Uint((uint64_t{1} << 53) + 1), {})
                   .As<double>()(9007199254740992.0));
}

TEST(RequestValidationTest, AggregateByKeyAnswerOverTheLimitIsRefusedFromTheRequestAlone) {
  v1::AggregateByKeyRequest request;
  request.mutable_keys()->set_dtype(v1::INT32);
  request.mutable_values()->set_dtype(v1::FLOAT64);
  request.set_op(v1::SUM);
  request.set_num_keys((uint64_t{1} << 31) - 1);  // 16 GiB of FLOAT64 groups
  ASSERT_LT(request.ByteSizeLong(), 32u);
  absl::StatusOr<Operation> operation = ToOperation(request, RequestLimits{});
  ASSERT_EQ(operation.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(operation.status().message()),
              HasSubstr("AggregateByKey could take 17179869176 bytes, over the server's limit of "
                        "1073741824 (--max_response_bytes)"));
}

TEST(RequestValidationTest, ReduceAnswerCountsEverySegmentAndArgIndices) {
  RequestLimits limits;
  limits.max_response_bytes = 1000;
  v1::ReduceRequest request;
  request.mutable_input()->set_dtype(v1::INT64);
  for (int i = 0; i < 62; ++i) request.add_segment_offsets(0);
  request.set_op(v1::ARGMIN);  // 62 * (8 + 8) = 992 bytes
  EXPECT_TRUE(ToOperation(request, limits).ok());
  request.add_segment_offsets(0);  // 1008 bytes
  absl::StatusOr<Operation> over = ToOperation(request, limits);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("Reduce could take 1008 bytes"));
  request.set_op(v1::MIN);  // 63 * 8 = 504 bytes
  EXPECT_TRUE(ToOperation(request, limits).ok());
}

TEST(RequestValidationTest, SelectAnswerDependsOnTheOutputsAskedFor) {
  RequestLimits limits;
  limits.max_response_bytes = 100 * 12;
  v1::SelectRequest request;
  request.mutable_input()->set_dtype(v1::INT32);
  request.mutable_input()->set_data(std::string(100 * 4, '\1'));
  request.mutable_predicate()->set_kind(v1::Predicate::NONZERO);
  request.set_output(v1::SelectRequest::VALUES_AND_INDICES);
  EXPECT_TRUE(ToOperation(request, limits).ok());
  limits.max_response_bytes -= 1;
  EXPECT_EQ(ToOperation(request, limits).status().code(), absl::StatusCode::kResourceExhausted);
  request.set_output(v1::SelectRequest::COUNT);
  EXPECT_TRUE(ToOperation(request, limits).ok());
}

// The request's `reproducible` or the server's default reaches every
// operation that has the flag; false in a request never turns the server's
// default off.
TEST(RequestValidationTest, ReproducibleComesFromTheRequestOrTheServerDefault) {
  v1::ScanRequest scan;
  scan.mutable_input()->set_dtype(v1::FLOAT32);
  scan.set_op(v1::SUM);
  v1::ReduceRequest reduce;
  reduce.mutable_input()->set_dtype(v1::FLOAT64);
  reduce.set_op(v1::PROD);
  v1::ReduceByKeyRequest by_key;
  by_key.mutable_keys()->set_dtype(v1::INT32);
  by_key.mutable_values()->set_dtype(v1::FLOAT32);
  by_key.set_op(v1::SUM);
  v1::AggregateByKeyRequest aggregate;
  aggregate.mutable_keys()->set_dtype(v1::INT32);
  aggregate.mutable_values()->set_dtype(v1::FLOAT64);
  aggregate.set_op(v1::SUM);
  aggregate.set_num_keys(4);
  auto flags = [&](const RequestLimits& limits) {
    std::vector<bool> seen;
    for (absl::StatusOr<Operation> o :
         {ToOperation(scan, limits), ToOperation(reduce, limits), ToOperation(by_key, limits),
          ToOperation(aggregate, limits)}) {
      EXPECT_TRUE(o.ok()) << o.status();
      if (!o.ok()) return seen;
      seen.push_back(std::visit(
          Overloaded{[](const ScanOperation& op) { return op.reproducible; },
                     [](const ReduceOperation& op) { return op.reproducible; },
                     [](const ReduceByKeyOperation& op) { return op.reproducible; },
                     [](const AggregateByKeyOperation& op) { return op.reproducible; },
                     [](const auto&) { return false; }},
          *o));
    }
    return seen;
  };
  RequestLimits off;
  ASSERT_FALSE(off.reproducible_floats) << "requests ask for reproducible floats by default";
  EXPECT_EQ(flags(off), std::vector<bool>(4, false));
  RequestLimits on;
  on.reproducible_floats = true;
  EXPECT_EQ(flags(on), std::vector<bool>(4, true));
  scan.set_reproducible(true);
  reduce.set_reproducible(true);
  by_key.set_reproducible(true);
  aggregate.set_reproducible(true);
  EXPECT_EQ(flags(off), std::vector<bool>(4, true));
  EXPECT_EQ(flags(on), std::vector<bool>(4, true));
}

// accumulator_dtype widens SUM/PROD as numpy's dtype= does, where the
// backend can; every other ask is refused naming what is wrong.
TEST(RequestValidationTest, AccumulatorDtypeWidensSumAndProdOnly) {
  RequestLimits cpu;
  cpu.wide_accumulators = true;
  v1::ReduceRequest request;
  request.mutable_input()->set_dtype(v1::INT32);
  request.mutable_input()->set_data(std::string(8, '\1'));
  request.set_op(v1::SUM);
  auto accumulator = [&](const RequestLimits& limits) -> absl::StatusOr<std::optional<DType>> {
    absl::StatusOr<Operation> o = ToOperation(request, limits);
    if (!o.ok()) return o.status();
    return std::get<ReduceOperation>(*o).accumulator;
  };
  EXPECT_EQ(*accumulator(cpu), std::nullopt);
  request.set_accumulator_dtype(v1::INT32);  // the input's own: nothing to widen
  EXPECT_EQ(*accumulator(cpu), std::nullopt);
  for (auto [input, wide] : {std::pair{v1::INT32, v1::INT64}, std::pair{v1::UINT32, v1::UINT64},
                             std::pair{v1::FLOAT32, v1::FLOAT64}}) {
    request.mutable_input()->set_dtype(input);
    request.set_accumulator_dtype(wide);
    for (v1::Op op : {v1::SUM, v1::PROD}) {
      request.set_op(op);
      EXPECT_EQ(*accumulator(cpu), static_cast<DType>(wide));
    }
  }
  auto refused = [&](const RequestLimits& limits, absl::string_view message) {
    absl::StatusOr<std::optional<DType>> o = accumulator(limits);
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(o.status().message()), HasSubstr(std::string(message)));
  };
  request.set_op(v1::MAX);
  refused(cpu, "accumulator_dtype FLOAT64 applies to SUM and PROD, not MAX");
  request.set_op(v1::SUM);
  request.set_accumulator_dtype(v1::INT64);
  refused(cpu, "accumulator_dtype INT64 does not widen a FLOAT32 input (INT32 widens to INT64");
  request.mutable_input()->set_dtype(v1::INT64);
  request.set_accumulator_dtype(v1::INT32);
  refused(cpu, "accumulator_dtype INT32 does not widen a INT64 input");
  request.set_accumulator_dtype(static_cast<v1::DType>(9));
  refused(cpu, "accumulator_dtype 9 is not a known DType");
  request.mutable_input()->set_dtype(v1::INT32);
  request.set_accumulator_dtype(v1::INT64);
  refused(RequestLimits{}, "accumulator_dtype INT64: this server's backend accumulates in the input's "
                           "dtype only");
}

TEST(RequestValidationTest, ScanTakesTheAccumulatorDtypeAsReduceDoes) {
  RequestLimits cpu;
  cpu.wide_accumulators = true;
  v1::ScanRequest request;
  request.mutable_input()->set_dtype(v1::FLOAT32);
  request.mutable_input()->set_data(std::string(8, '\0'));
  request.set_op(v1::SUM);
  request.set_accumulator_dtype(v1::FLOAT64);
  absl::StatusOr<Operation> o = ToOperation(request, cpu);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(std::get<ScanOperation>(*o).accumulator, DType::kFloat64);
  request.set_op(v1::MIN);
  EXPECT_THAT(std::string(ToOperation(request, cpu).status().message()),
              HasSubstr("accumulator_dtype FLOAT64 applies to SUM and PROD, not MIN"));
  request.set_op(v1::SUM);
  EXPECT_EQ(ToOperation(request, RequestLimits{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RequestValidationTest, AccumulatorDtypeCountsInTheAnswerLimit) {
  RequestLimits limits;
  limits.wide_accumulators = true;
  limits.max_response_bytes = 100 * 4;
  v1::ReduceRequest request;
  request.mutable_input()->set_dtype(v1::INT32);
  for (int i = 0; i < 100; ++i) request.add_segment_offsets(0);
  request.set_op(v1::SUM);
  EXPECT_TRUE(ToOperation(request, limits).ok());
  request.set_accumulator_dtype(v1::INT64);  // 100 * 8 bytes
  EXPECT_EQ(ToOperation(request, limits).status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace primserve
