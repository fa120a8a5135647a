// Every malformed request we can name, table-driven, against a real server
// (CPU backend, loopback gRPC): each gets its exact status code and a message
// fragment, and the server then still answers a good request correctly. The
// table also holds the edge cases that must succeed: empty arrays and sizes
// exactly at the element and receive-message limits.
#include <cstdio>
#include <functional>
#include <ostream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "tests/rpc_api.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;
using Code = absl::StatusCode;

constexpr uint64_t kMaxElements = uint64_t{1} << 16;

struct Case {
  std::string name;
  std::function<absl::Status(PrimitivesClient&)> call;
  Code code;
  std::string message;  // a fragment of the error message; empty for OK
};

// gtest prints a failing parameter: the case's name says which.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

template <typename T>
v1::Array Pack(std::vector<T> values) {
  return PackArray<T>(values);
}

v1::Array Raw(int dtype, std::string data) {
  v1::Array array;
  array.set_dtype(static_cast<v1::DType>(dtype));
  array.set_data(std::move(data));
  return array;
}

// An array of n elements of T (zeros).
template <typename T>
v1::Array Zeros(uint64_t n) {
  return Raw(static_cast<int>(DTypeOf<T>()), std::string(n * sizeof(T), '\0'));
}

v1::ScanRequest GoodScan() {
  v1::ScanRequest r;
  *r.mutable_input() = Pack<int32_t>({1, 2, 3, 4});
  r.set_op(v1::SUM);
  return r;
}

v1::ReduceRequest GoodReduce() {
  v1::ReduceRequest r;
  *r.mutable_input() = Pack<int32_t>({1, 2, 3, 4});
  r.set_op(v1::MIN);
  return r;
}

v1::SelectRequest GoodSelect() {
  v1::SelectRequest r;
  *r.mutable_input() = Pack<int32_t>({1, 2, 3, 4});
  r.mutable_predicate()->set_kind(v1::Predicate::GT);
  r.mutable_predicate()->mutable_operand()->set_int_value(2);
  return r;
}

v1::SelectRequest FlagSelect() {
  v1::SelectRequest r;
  *r.mutable_input() = Pack<int32_t>({1, 2, 3, 4});
  *r.mutable_flags() = Pack<uint32_t>({1, 0, 1, 0});
  return r;
}

v1::ReduceByKeyRequest GoodReduceByKey() {
  v1::ReduceByKeyRequest r;
  *r.mutable_keys() = Pack<int32_t>({7, 7, 1});
  *r.mutable_values() = Pack<float>({1, 2, 3});
  r.set_op(v1::SUM);
  return r;
}

v1::AggregateByKeyRequest GoodAggregate() {
  v1::AggregateByKeyRequest r;
  *r.mutable_keys() = Pack<int32_t>({2, 0, 2});
  *r.mutable_values() = Pack<int64_t>({10, 1, 5});
  r.set_op(v1::SUM);
  r.set_num_keys(3);
  return r;
}

// The largest request the server takes: its size is the server's receive
// limit. Both arrays are at the element limit, so only the byte count can
// trip a check.
v1::SelectRequest ReceiveLimitRequest() {
  v1::SelectRequest r;
  *r.mutable_input() = Zeros<double>(kMaxElements);
  *r.mutable_flags() = Zeros<int64_t>(kMaxElements);
  return r;
}

class Table {
 public:
  template <typename Request>
  void Add(std::string name, Request request, Code code, std::string message = "") {
    cases_.push_back(Case{std::move(name),
                          [request = std::move(request)](PrimitivesClient& client) {
                            return client.Call(request).status();
                          },
                          code, std::move(message)});
  }
  template <typename Request>
  void Ok(std::string name, Request request) {
    Add(std::move(name), std::move(request), Code::kOk);
  }
  std::vector<Case> Take() { return std::move(cases_); }

 private:
  std::vector<Case> cases_;
};

void AddArrayCases(Table& t) {
  const Code invalid = Code::kInvalidArgument;
  v1::ScanRequest scan = GoodScan();
  scan.mutable_input()->set_dtype(v1::DTYPE_UNSPECIFIED);
  t.Add("ScanDtypeMissing", scan, invalid, "input.dtype is missing (DTYPE_UNSPECIFIED)");
  scan.mutable_input()->set_dtype(static_cast<v1::DType>(99));
  t.Add("ScanDtypeUnknown", scan, invalid, "input.dtype 99 is not a known DType");
  scan.mutable_input()->set_dtype(static_cast<v1::DType>(-1));
  t.Add("ScanDtypeNegative", scan, invalid, "input.dtype -1 is not a known DType");
  *scan.mutable_input() = Raw(v1::INT32, "1234567");
  t.Add("ScanDataOddLength", scan, invalid,
        "input.data has 7 bytes, not a multiple of the 4-byte INT32 element");
  *scan.mutable_input() = Raw(v1::INT64, std::string(15, 'x'));
  t.Add("ScanDataTruncated", scan, invalid,
        "input.data has 15 bytes, not a multiple of the 8-byte INT64 element");

  v1::ReduceRequest reduce = GoodReduce();
  reduce.mutable_input()->clear_dtype();
  t.Add("ReduceDtypeMissing", reduce, invalid, "input.dtype is missing");
  *reduce.mutable_input() = Raw(v1::FLOAT64, "abc");
  t.Add("ReduceDataOddLength", reduce, invalid, "input.data has 3 bytes, not a multiple of the 8-byte FLOAT64");

  v1::SelectRequest select = GoodSelect();
  *select.mutable_input() = Raw(v1::FLOAT32, "abcdef");
  t.Add("SelectDataOddLength", select, invalid, "input.data has 6 bytes");
  select = FlagSelect();
  select.mutable_flags()->clear_dtype();
  t.Add("SelectFlagsDtypeMissing", select, invalid, "flags.dtype is missing");
  *select.mutable_flags() = Raw(v1::UINT32, "abc");
  t.Add("SelectFlagsOddLength", select, invalid, "flags.data has 3 bytes");

  v1::UniqueRequest unique;
  *unique.mutable_input() = Raw(7, "abcd");
  t.Add("UniqueDtypeUnknown", unique, invalid, "input.dtype 7 is not a known DType");
  v1::RunLengthEncodeRequest rle;
  *rle.mutable_input() = Raw(v1::UINT32, "abcde");
  t.Add("RunLengthEncodeDataOddLength", rle, invalid, "input.data has 5 bytes");
  rle.clear_input();
  t.Add("RunLengthEncodeInputMissing", rle, invalid, "input.dtype is missing");

  v1::ReduceByKeyRequest by_key = GoodReduceByKey();
  by_key.mutable_keys()->clear_dtype();
  t.Add("ReduceByKeyKeysDtypeMissing", by_key, invalid, "keys.dtype is missing");
  by_key = GoodReduceByKey();
  *by_key.mutable_values() = Raw(v1::FLOAT32, "abcdefghijk");
  t.Add("ReduceByKeyValuesOddLength", by_key, invalid, "values.data has 11 bytes");

  v1::AggregateByKeyRequest aggregate = GoodAggregate();
  *aggregate.mutable_keys() = Raw(v1::INT32, "abcdef");
  t.Add("AggregateByKeyKeysOddLength", aggregate, invalid, "keys.data has 6 bytes");
  aggregate = GoodAggregate();
  aggregate.mutable_values()->set_dtype(static_cast<v1::DType>(12));
  t.Add("AggregateByKeyValuesDtypeUnknown", aggregate, invalid,
        "values.dtype 12 is not a known DType");
}

void AddSegmentCases(Table& t) {
  const Code invalid = Code::kInvalidArgument;
  v1::ScanRequest scan = GoodScan();
  scan.add_segment_offsets(1);
  t.Add("ScanFirstSegmentNotZero", scan, invalid,
        "segment_offsets[0] = 1: the first segment must start at 0");
  scan = GoodScan();
  for (uint64_t s : {0, 3, 2}) scan.add_segment_offsets(s);
  t.Add("ScanSegmentsUnsorted", scan, invalid,
        "segment_offsets[2] = 2 is less than segment_offsets[1] = 3");
  scan = GoodScan();
  for (uint64_t s : {0, 5}) scan.add_segment_offsets(s);
  t.Add("ScanSegmentPastEnd", scan, invalid,
        "segment_offsets[1] = 5 is past the end of the input (4 elements)");

  v1::ReduceRequest reduce = GoodReduce();
  reduce.add_segment_offsets(2);
  t.Add("ReduceFirstSegmentNotZero", reduce, invalid, "the first segment must start at 0");
  reduce = GoodReduce();
  for (uint64_t s : {0, 2, 1}) reduce.add_segment_offsets(s);
  t.Add("ReduceSegmentsUnsorted", reduce, invalid,
        "segment_offsets[2] = 1 is less than segment_offsets[1] = 2");
  reduce = GoodReduce();
  for (uint64_t s : {uint64_t{0}, std::numeric_limits<uint64_t>::max()}) {
    reduce.add_segment_offsets(s);
  }
  t.Add("ReduceSegmentFarPastEnd", reduce, invalid,
        "segment_offsets[1] = 18446744073709551615 is past the end of the input (4 elements)");
  reduce = GoodReduce();
  for (uint64_t s : {0, 0, 4, 4}) reduce.add_segment_offsets(s);
  t.Ok("ReduceEmptySegmentsAtBothEnds", reduce);
}

void AddSelectCases(Table& t) {
  const Code invalid = Code::kInvalidArgument;
  v1::SelectRequest select = FlagSelect();
  *select.mutable_flags() = Pack<int32_t>({1, 0});
  t.Add("FlagsShorterThanInput", select, invalid, "flags has 2 elements but input has 4");
  *select.mutable_flags() = Pack<int64_t>({1, 0, 1, 0, 1});
  t.Add("FlagsLongerThanInput", select, invalid, "flags has 5 elements but input has 4");
  *select.mutable_flags() = Pack<float>({1, 0, 1, 0});
  t.Add("FlagsFloat32", select, invalid,
        "flags.dtype is FLOAT32; flags must be of an integer dtype");
  *select.mutable_flags() = Pack<double>({1, 0, 1, 0});
  t.Add("FlagsFloat64", select, invalid, "flags.dtype is FLOAT64");

  select = GoodSelect();
  select.clear_predicate();
  t.Add("CriterionMissing", select, invalid, "a criterion is required: set predicate or flags");
  select = GoodSelect();
  select.mutable_predicate()->set_kind(v1::Predicate::KIND_UNSPECIFIED);
  t.Add("PredicateKindMissing", select, invalid, "predicate.kind is missing (KIND_UNSPECIFIED)");
  select.mutable_predicate()->set_kind(static_cast<v1::Predicate::Kind>(42));
  t.Add("PredicateKindUnknown", select, invalid, "predicate.kind 42 is not a known Kind");
  select = GoodSelect();
  select.mutable_predicate()->set_kind(v1::Predicate::LT);
  select.mutable_predicate()->clear_operand();
  t.Add("OperandMissing", select, invalid, "predicate.operand is required for LT");
  select.mutable_predicate()->mutable_operand();  // present, but no value set
  t.Add("OperandWithoutValue", select, invalid, "predicate.operand has no value");
  select.mutable_predicate()->mutable_operand()->set_float_value(2.5);
  t.Add("OperandFloatForInt32", select, invalid,
        "predicate.operand is a float_value but the input is INT32");
  select.mutable_predicate()->mutable_operand()->set_int_value(int64_t{1} << 40);
  t.Add("OperandOverInt32", select, invalid,
        "predicate.operand.int_value 1099511627776 does not fit INT32");
  select.mutable_predicate()->mutable_operand()->set_uint_value(uint64_t{1} << 31);
  t.Add("OperandUintOverInt32", select, invalid,
        "predicate.operand.uint_value 2147483648 does not fit INT32");
  *select.mutable_input() = Pack<uint32_t>({1, 2, 3});
  select.mutable_predicate()->mutable_operand()->set_int_value(-1);
  t.Add("OperandNegativeForUint32", select, invalid,
        "predicate.operand.int_value -1 does not fit UINT32");
  *select.mutable_input() = Pack<int64_t>({1, 2, 3});
  select.mutable_predicate()->mutable_operand()->set_uint_value(uint64_t{1} << 63);
  t.Add("OperandUintOverInt64", select, invalid,
        "predicate.operand.uint_value 9223372036854775808 does not fit INT64");
  *select.mutable_input() = Pack<double>({1, 2, 3});
  select.mutable_predicate()->mutable_operand()->set_int_value(-5);
  t.Ok("IntOperandForFloat64", select);

  select = GoodSelect();
  select.mutable_predicate()->set_kind(v1::Predicate::IN_RANGE);
  t.Add("InRangeWithoutUpper", select, invalid, "predicate.upper is required for IN_RANGE");
  select.mutable_predicate()->mutable_upper()->set_float_value(3);
  t.Add("InRangeUpperFloatForInt32", select, invalid,
        "predicate.upper is a float_value but the input is INT32");
  select.mutable_predicate()->mutable_upper()->set_int_value(-(int64_t{1} << 33));
  t.Add("InRangeUpperUnderInt32", select, invalid, "predicate.upper.int_value -8589934592 does not fit INT32");
  select.mutable_predicate()->mutable_upper()->set_int_value(4);
  t.Ok("InRangeWithUpper", select);
  select = GoodSelect();
  select.mutable_predicate()->set_kind(v1::Predicate::NONZERO);
  select.mutable_predicate()->clear_operand();
  t.Ok("NonzeroWithoutOperand", select);

  select = GoodSelect();
  select.set_output(static_cast<v1::SelectRequest::Output>(9));
  t.Add("OutputUnknown", select, invalid, "output 9 is not a known Output");
  select.set_output(static_cast<v1::SelectRequest::Output>(-1));
  t.Add("OutputNegative", select, invalid, "output -1 is not a known Output");
}

void AddOpCases(Table& t) {
  const Code invalid = Code::kInvalidArgument;
  v1::ScanRequest scan = GoodScan();
  scan.clear_op();
  t.Add("ScanOpMissing", scan, invalid, "op is missing (OP_UNSPECIFIED)");
  scan.set_op(v1::ARGMIN);
  t.Add("ScanArgMin", scan, invalid, "op ARGMIN does not apply to Scan");
  scan.set_op(v1::ARGMAX);
  t.Add("ScanArgMax", scan, invalid, "op ARGMAX does not apply to Scan");
  scan.set_op(static_cast<v1::Op>(42));
  t.Add("ScanOpUnknown", scan, invalid, "op 42 is not a known Op");
  scan.set_op(static_cast<v1::Op>(-3));
  t.Add("ScanOpNegative", scan, invalid, "op -3 is not a known Op");

  v1::ReduceRequest reduce = GoodReduce();
  reduce.clear_op();
  t.Add("ReduceOpMissing", reduce, invalid, "op is missing");
  reduce.set_op(static_cast<v1::Op>(7));
  t.Add("ReduceOpUnknown", reduce, invalid, "op 7 is not a known Op");

  v1::ReduceByKeyRequest by_key = GoodReduceByKey();
  by_key.clear_op();
  t.Add("ReduceByKeyOpMissing", by_key, invalid, "op is missing");
  by_key.set_op(v1::ARGMIN);
  t.Add("ReduceByKeyArgMin", by_key, invalid, "op ARGMIN does not apply to ReduceByKey");
  by_key.set_op(v1::ARGMAX);
  t.Add("ReduceByKeyArgMax", by_key, invalid, "op ARGMAX does not apply to ReduceByKey");
  by_key.set_op(static_cast<v1::Op>(100));
  t.Add("ReduceByKeyOpUnknown", by_key, invalid, "op 100 is not a known Op");

  v1::AggregateByKeyRequest aggregate = GoodAggregate();
  aggregate.clear_op();
  t.Add("AggregateByKeyOpMissing", aggregate, invalid, "op is missing");
  aggregate.set_op(v1::PROD);
  t.Add("AggregateByKeyProd", aggregate, invalid, "op PROD does not apply to AggregateByKey");
  aggregate.set_op(v1::ARGMIN);
  t.Add("AggregateByKeyArgMin", aggregate, invalid, "op ARGMIN does not apply to AggregateByKey");
  aggregate.set_op(v1::ARGMAX);
  t.Add("AggregateByKeyArgMax", aggregate, invalid, "op ARGMAX does not apply to AggregateByKey");
  aggregate.set_op(static_cast<v1::Op>(8));
  t.Add("AggregateByKeyOpUnknown", aggregate, invalid, "op 8 is not a known Op");
}

void AddKeyCases(Table& t) {
  const Code invalid = Code::kInvalidArgument;
  v1::AggregateByKeyRequest aggregate = GoodAggregate();
  *aggregate.mutable_keys() = Pack<int32_t>({2, 3, 0});
  t.Add("KeyEqualToNumKeys", aggregate, invalid, "keys[1] = 3 is outside [0, num_keys=3)");
  *aggregate.mutable_keys() = Pack<int64_t>({0, 1, -2});
  t.Add("KeyNegative", aggregate, invalid, "keys[2] = -2 is outside [0, num_keys=3)");
  *aggregate.mutable_keys() = Pack<uint64_t>({0, ~uint64_t{0}, 1});
  t.Add("KeyHugeUnsigned", aggregate, invalid,
        "keys[1] = 18446744073709551615 is outside [0, num_keys=3)");
  *aggregate.mutable_keys() = Pack<float>({0, 1, 2});
  t.Add("KeysFloat32", aggregate, invalid,
        "keys.dtype is FLOAT32; AggregateByKey keys must be of an integer dtype");
  *aggregate.mutable_keys() = Pack<double>({0, 1, 2});
  t.Add("KeysFloat64", aggregate, invalid, "keys.dtype is FLOAT64");
  aggregate = GoodAggregate();
  *aggregate.mutable_values() = Pack<int64_t>({10, 1});
  t.Add("AggregateValuesShorterThanKeys", aggregate, invalid,
        "values has 2 elements but keys has 3");
  aggregate = GoodAggregate();
  aggregate.set_num_keys(0);
  t.Add("NumKeysZero", aggregate, invalid, "num_keys must be at least 1");
  aggregate.set_num_keys(kMaxElements + 1);
  t.Add("NumKeysOverLimit", aggregate, Code::kResourceExhausted,
        "num_keys = 65537 is over the server's limit of 65536");
  aggregate.set_num_keys(kMaxElements);
  t.Ok("NumKeysAtLimit", aggregate);

  v1::ReduceByKeyRequest by_key = GoodReduceByKey();
  *by_key.mutable_values() = Pack<float>({1, 2, 3, 4});
  t.Add("ReduceByKeyValuesLongerThanKeys", by_key, invalid,
        "values has 4 elements but keys has 3");
  by_key = GoodReduceByKey();
  *by_key.mutable_keys() = Pack<double>({0.5, 0.5, -1});
  t.Ok("ReduceByKeyFloatKeys", by_key);
}

void AddEmptyCases(Table& t) {
  v1::ScanRequest scan = GoodScan();
  scan.mutable_input()->clear_data();
  t.Ok("ScanEmpty", scan);
  v1::ReduceRequest reduce = GoodReduce();
  reduce.mutable_input()->clear_data();
  t.Ok("ReduceEmpty", reduce);
  reduce.add_segment_offsets(0);
  t.Ok("ReduceEmptyWithOneSegment", reduce);
  v1::SelectRequest select = GoodSelect();
  select.mutable_input()->clear_data();
  t.Ok("SelectEmptyPredicate", select);
  select = FlagSelect();
  select.mutable_input()->clear_data();
  select.mutable_flags()->clear_data();
  t.Ok("SelectEmptyFlags", select);
  v1::UniqueRequest unique;
  unique.mutable_input()->set_dtype(v1::FLOAT64);
  t.Ok("UniqueEmpty", unique);
  v1::RunLengthEncodeRequest rle;
  rle.mutable_input()->set_dtype(v1::UINT64);
  t.Ok("RunLengthEncodeEmpty", rle);
  v1::ReduceByKeyRequest by_key = GoodReduceByKey();
  by_key.mutable_keys()->clear_data();
  by_key.mutable_values()->clear_data();
  t.Ok("ReduceByKeyEmpty", by_key);
  v1::AggregateByKeyRequest aggregate = GoodAggregate();
  aggregate.mutable_keys()->clear_data();
  aggregate.mutable_values()->clear_data();
  t.Ok("AggregateByKeyEmpty", aggregate);
}

void AddLimitCases(Table& t) {
  const Code exhausted = Code::kResourceExhausted;
  v1::ScanRequest scan = GoodScan();
  *scan.mutable_input() = Zeros<int32_t>(kMaxElements);
  t.Ok("ScanAtElementLimit", scan);
  *scan.mutable_input() = Zeros<int32_t>(kMaxElements + 1);
  t.Add("ScanOverElementLimit", scan, exhausted,
        "input has 65537 elements, over the server's limit of 65536 (--max_request_elements)");

  v1::SelectRequest select = FlagSelect();
  *select.mutable_input() = Zeros<int32_t>(kMaxElements);
  *select.mutable_flags() = Zeros<int32_t>(kMaxElements + 1);
  t.Add("FlagsOverElementLimit", select, exhausted, "flags has 65537 elements");

  v1::ReduceByKeyRequest by_key = GoodReduceByKey();
  *by_key.mutable_keys() = Zeros<int32_t>(kMaxElements);
  *by_key.mutable_values() = Zeros<float>(kMaxElements);
  t.Ok("ReduceByKeyAtElementLimit", by_key);
  *by_key.mutable_values() = Zeros<float>(kMaxElements + 1);
  t.Add("ReduceByKeyValuesOverElementLimit", by_key, exhausted, "values has 65537 elements");

  v1::AggregateByKeyRequest aggregate = GoodAggregate();
  *aggregate.mutable_keys() = Zeros<uint32_t>(kMaxElements + 1);
  t.Add("AggregateByKeyKeysOverElementLimit", aggregate, exhausted, "keys has 65537 elements");

  // Repeated offsets make empty segments, so the input's size does not bound
  // their number; the element limit does.
  v1::ReduceRequest reduce = GoodReduce();
  reduce.mutable_input()->clear_data();
  for (uint64_t i = 0; i < kMaxElements; ++i) reduce.add_segment_offsets(0);
  t.Ok("SegmentsAtElementLimit", reduce);
  reduce.add_segment_offsets(0);
  t.Add("SegmentsOverElementLimit", reduce, exhausted,
        "segment_offsets has 65537 entries, over the server's limit of 65536");

  t.Ok("MessageAtReceiveLimit", ReceiveLimitRequest());
  v1::SelectRequest over = ReceiveLimitRequest();
  over.mutable_flags()->mutable_data()->push_back('\0');  // one byte more on the wire
  t.Add("MessageOverReceiveLimit", over, exhausted, "Received message larger than max");
}

std::vector<Case> AllCases() {
  Table table;
  AddArrayCases(table);
  AddSegmentCases(table);
  AddSelectCases(table);
  AddOpCases(table);
  AddKeyCases(table);
  AddEmptyCases(table);
  AddLimitCases(table);
  return table.Take();
}

const std::vector<Case>& Cases() {
  static const std::vector<Case>* cases = new std::vector<Case>(AllCases());
  return *cases;
}

class MalformedTest : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    std::printf("malformed_test: %zu cases\n", Cases().size());
    ServerOptions options;
    options.rpc_api = TestRpcApi();
    options.address = "127.0.0.1:0";
    options.limits.max_elements = kMaxElements;
    options.max_receive_message_bytes = static_cast<int>(ReceiveLimitRequest().ByteSizeLong());
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::make_unique<CpuBackend>());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    client_ = new PrimitivesClient(
        PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", server_->port())));
  }
  static void TearDownTestSuite() {
    delete client_;
    delete server_;
  }

  static PrimServer* server_;
  static PrimitivesClient* client_;
};

PrimServer* MalformedTest::server_ = nullptr;
PrimitivesClient* MalformedTest::client_ = nullptr;

TEST_P(MalformedTest, GetsItsCodeAndMessageAndTheServerCarriesOn) {
  const Case& c = GetParam();
  const absl::Status status = c.call(*client_);
  EXPECT_EQ(status.code(), c.code) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));

  const std::vector<int64_t> input = {5, -2, 7};
  absl::StatusOr<std::vector<int64_t>> next = client_->Scan<int64_t>(input, Op::kSum);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, (std::vector<int64_t>{5, 3, 10}));
}

INSTANTIATE_TEST_SUITE_P(Table, MalformedTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace primserve
