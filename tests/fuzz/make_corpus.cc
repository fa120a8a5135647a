// Writes the fuzzer's seed corpus: valid and invalid requests of every RPC, in
// request_path.h's input format, one file each. The output is checked in as
// tests/fuzz/corpus; regenerate it after changing the seeds:
//   bazel run //tests/fuzz:make_corpus -- "$PWD/tests/fuzz/corpus"
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/pipeline.h"
#include "proto/primserve/v1/echo.pb.h"
#include "tests/fuzz/request_path.h"
#include "wire/format.h"

namespace primserve::fuzz {
namespace {

class Corpus {
 public:
  explicit Corpus(std::string dir) : dir_(std::move(dir)) {}

  void Add(const std::string& name, Rpc rpc, const google::protobuf::Message& request) {
    AddBytes(name, rpc, request.SerializeAsString());
  }
  // Bytes no serializer writes (repeated fields, groups, unknown fields).
  void AddBytes(const std::string& name, Rpc rpc, const std::string& bytes) {
    std::ofstream out(dir_ + "/" + name, std::ios::binary | std::ios::trunc);
    out << static_cast<char>(RpcIndex(rpc)) << bytes;
    if (!out) {
      std::fprintf(stderr, "cannot write %s/%s\n", dir_.c_str(), name.c_str());
      failed_ = true;
    }
    ++count_;
  }
  int count() const { return count_; }
  bool failed() const { return failed_; }

 private:
  std::string dir_;
  int count_ = 0;
  bool failed_ = false;
};

template <typename T>
v1::Array Pack(std::vector<T> values) {
  return PackArray<T>(values);
}

v1::Array Odd(v1::DType dtype, const std::string& data) {
  v1::Array array;
  array.set_dtype(dtype);
  array.set_data(data);
  return array;
}

void AddScan(Corpus& c) {
  v1::ScanRequest r;
  *r.mutable_input() = Pack<int32_t>({3, 1, 4, 1, 5, 9, 2, 6});
  r.set_op(v1::SUM);
  c.Add("scan_ok_int32_sum", Rpc::kScan, r);
  r.set_exclusive(true);
  for (uint64_t s : {0, 2, 2, 5}) r.add_segment_offsets(s);
  r.set_op(v1::MAX);
  c.Add("scan_ok_exclusive_max_segments", Rpc::kScan, r);
  v1::ScanRequest f;
  *f.mutable_input() = Pack<double>({1.5, -0.0, NAN, 2.0});
  f.set_op(v1::PROD);
  c.Add("scan_ok_float64_prod_nan", Rpc::kScan, f);
  v1::ScanRequest bad = r;
  bad.clear_segment_offsets();
  for (uint64_t s : {0, 5, 3}) bad.add_segment_offsets(s);
  c.Add("scan_bad_segments_unsorted", Rpc::kScan, bad);
  bad = r;
  bad.mutable_input()->set_dtype(v1::DTYPE_UNSPECIFIED);
  c.Add("scan_bad_dtype_missing", Rpc::kScan, bad);
  bad = r;
  bad.set_op(v1::ARGMIN);
  c.Add("scan_bad_op_argmin", Rpc::kScan, bad);
  bad.clear_op();
  *bad.mutable_input() = Odd(v1::INT64, "1234567");
  c.Add("scan_bad_odd_data", Rpc::kScan, bad);
}

void AddReduce(Corpus& c) {
  v1::ReduceRequest r;
  *r.mutable_input() = Pack<float>({2, -1, 7, 7, NAN, 3});
  r.set_op(v1::ARGMAX);
  for (uint64_t s : {0, 2, 2, 6}) r.add_segment_offsets(s);
  c.Add("reduce_ok_argmax_segments", Rpc::kReduce, r);
  v1::ReduceRequest u;
  *u.mutable_input() = Pack<uint64_t>({~uint64_t{0}, 1, 2});
  u.set_op(v1::SUM);
  c.Add("reduce_ok_uint64_sum_wraps", Rpc::kReduce, u);
  u.clear_input();
  u.mutable_input()->set_dtype(v1::INT32);
  u.set_op(v1::ARGMIN);
  c.Add("reduce_ok_empty_argmin", Rpc::kReduce, u);
  v1::ReduceRequest bad = r;
  bad.add_segment_offsets(7);
  c.Add("reduce_bad_segment_past_end", Rpc::kReduce, bad);
  bad = r;
  bad.mutable_segment_offsets()->Set(0, 1);
  c.Add("reduce_bad_first_segment", Rpc::kReduce, bad);
  bad = r;
  bad.set_op(static_cast<v1::Op>(42));
  c.Add("reduce_bad_op_unknown", Rpc::kReduce, bad);
}

void AddSelect(Corpus& c) {
  v1::SelectRequest r;
  *r.mutable_input() = Pack<int64_t>({5, -3, 8, 0, 12, -7});
  r.mutable_predicate()->set_kind(v1::Predicate::GT);
  r.mutable_predicate()->mutable_operand()->set_int_value(0);
  r.set_output(v1::SelectRequest::VALUES_AND_INDICES);
  c.Add("select_ok_gt_values_and_indices", Rpc::kSelect, r);
  v1::SelectRequest f;
  *f.mutable_input() = Pack<float>({0.5f, NAN, -2.0f, 3.0f});
  f.mutable_predicate()->set_kind(v1::Predicate::IN_RANGE);
  f.mutable_predicate()->mutable_operand()->set_float_value(-1);
  f.mutable_predicate()->mutable_upper()->set_uint_value(3);
  f.set_partition(true);
  c.Add("select_ok_in_range_partition", Rpc::kSelect, f);
  v1::SelectRequest flags;
  *flags.mutable_input() = Pack<uint32_t>({1, 2, 3, 4});
  *flags.mutable_flags() = Pack<int64_t>({0, 1, 0, -1});
  flags.set_output(v1::SelectRequest::COUNT);
  c.Add("select_ok_flags_count", Rpc::kSelect, flags);
  flags.set_output(v1::SelectRequest::INDICES);
  c.Add("select_ok_flags_indices", Rpc::kSelect, flags);
  v1::SelectRequest bad = r;
  bad.clear_predicate();
  c.Add("select_bad_no_criterion", Rpc::kSelect, bad);
  bad = flags;
  *bad.mutable_flags() = Pack<float>({0, 1, 0, 1});
  c.Add("select_bad_float_flags", Rpc::kSelect, bad);
  bad = flags;
  *bad.mutable_flags() = Pack<uint32_t>({0, 1});
  c.Add("select_bad_flags_length", Rpc::kSelect, bad);
  bad = r;
  bad.mutable_predicate()->mutable_operand()->set_float_value(0.5);
  c.Add("select_bad_float_operand_for_int", Rpc::kSelect, bad);
  bad = f;
  bad.mutable_predicate()->clear_upper();
  c.Add("select_bad_in_range_without_upper", Rpc::kSelect, bad);
  bad = r;
  bad.set_output(static_cast<v1::SelectRequest::Output>(9));
  c.Add("select_bad_output_unknown", Rpc::kSelect, bad);
}

void AddUnique(Corpus& c) {
  v1::UniqueRequest r;
  *r.mutable_input() = Pack<double>({0.0, -0.0, -0.0, NAN, NAN, 1.0});
  c.Add("unique_ok_float64_zeros_nans", Rpc::kUnique, r);
  *r.mutable_input() = Odd(static_cast<v1::DType>(99), "abcd");
  c.Add("unique_bad_dtype_unknown", Rpc::kUnique, r);
}

void AddRunLengthEncode(Corpus& c) {
  v1::RunLengthEncodeRequest r;
  *r.mutable_input() = Pack<int32_t>({4, 4, 1, 1, 1, 4, 9});
  c.Add("rle_ok_int32", Rpc::kRunLengthEncode, r);
  r.mutable_input()->clear_data();
  c.Add("rle_ok_empty", Rpc::kRunLengthEncode, r);
  *r.mutable_input() = Odd(v1::UINT32, "abcde");
  c.Add("rle_bad_odd_data", Rpc::kRunLengthEncode, r);
}

void AddReduceByKey(Corpus& c) {
  v1::ReduceByKeyRequest r;
  *r.mutable_keys() = Pack<uint32_t>({4, 4, 1, 1, 1, 4, 9});
  *r.mutable_values() = Pack<double>({1, 2, 3, 4, 5, 6, 7});
  r.set_op(v1::SUM);
  c.Add("reduce_by_key_ok_sum", Rpc::kReduceByKey, r);
  *r.mutable_keys() = Pack<float>({0.0f, -0.0f, -0.0f, NAN, NAN, 1, 1});
  r.set_op(v1::MIN);
  c.Add("reduce_by_key_ok_float_keys_min", Rpc::kReduceByKey, r);
  v1::ReduceByKeyRequest bad = r;
  *bad.mutable_values() = Pack<double>({1});
  c.Add("reduce_by_key_bad_length_mismatch", Rpc::kReduceByKey, bad);
  bad = r;
  bad.set_op(v1::ARGMIN);
  c.Add("reduce_by_key_bad_op_argmin", Rpc::kReduceByKey, bad);
}

void AddAggregateByKey(Corpus& c) {
  v1::AggregateByKeyRequest r;
  *r.mutable_keys() = Pack<int32_t>({2, 0, 2, 3, 0});
  *r.mutable_values() = Pack<int32_t>({10, 1, 5, 7, 2});
  r.set_op(v1::SUM);
  r.set_num_keys(5);
  c.Add("aggregate_ok_sum", Rpc::kAggregateByKey, r);
  v1::AggregateByKeyRequest m;
  *m.mutable_keys() = Pack<uint64_t>({1, 1, 0});
  *m.mutable_values() = Pack<float>({NAN, 2, -1});
  m.set_op(v1::MAX);
  m.set_num_keys(3);
  c.Add("aggregate_ok_uint64_keys_max", Rpc::kAggregateByKey, m);
  v1::AggregateByKeyRequest bad = r;
  bad.set_num_keys(3);
  c.Add("aggregate_bad_key_out_of_range", Rpc::kAggregateByKey, bad);
  bad = r;
  *bad.mutable_keys() = Pack<int64_t>({0, 1, -2, 1, 0});
  c.Add("aggregate_bad_negative_key", Rpc::kAggregateByKey, bad);
  bad = r;
  *bad.mutable_keys() = Pack<float>({0, 1, 1, 0, 2});
  c.Add("aggregate_bad_float_keys", Rpc::kAggregateByKey, bad);
  bad = r;
  bad.set_num_keys(0);
  c.Add("aggregate_bad_num_keys_zero", Rpc::kAggregateByKey, bad);
  bad.set_num_keys(kFuzzLimits.max_elements + 1);
  c.Add("aggregate_bad_num_keys_over_limit", Rpc::kAggregateByKey, bad);
  bad = r;
  bad.set_op(v1::PROD);
  c.Add("aggregate_bad_op_prod", Rpc::kAggregateByKey, bad);
}

void AddSort(Corpus& c) {
  v1::SortRequest r;
  *r.mutable_keys() = Pack<double>({3, NAN, -0.0, 0.0, -NAN, 1, -INFINITY});
  c.Add("sort_ok_float64_nans_zeros", Rpc::kSort, r);
  v1::SortRequest p;
  *p.mutable_keys() = Pack<int32_t>({5, -1, 5, 2, 0, -1});
  *p.mutable_values() = Pack<uint64_t>({10, 11, 12, 13, 14, 15});
  p.set_descending(true);
  p.set_return_indices(true);
  for (uint64_t start : {0, 0, 2, 6}) p.add_segment_offsets(start);
  c.Add("sort_ok_int32_pairs_indices_segments_descending", Rpc::kSort, p);
  v1::SortRequest bad = p;
  *bad.mutable_values() = Pack<uint64_t>({1, 2});
  c.Add("sort_bad_values_length", Rpc::kSort, bad);
  bad = p;
  bad.clear_segment_offsets();
  for (uint64_t start : {0, 4, 3}) bad.add_segment_offsets(start);
  c.Add("sort_bad_segments_decreasing", Rpc::kSort, bad);
  bad = r;
  *bad.mutable_keys() = Odd(static_cast<v1::DType>(0), "abcd");
  c.Add("sort_bad_dtype_unspecified", Rpc::kSort, bad);
}

void AddGather(Corpus& c) {
  v1::GatherRequest r;
  *r.mutable_values() = Pack<float>({1.5f, -2, 3, NAN});
  *r.mutable_indices() = Pack<int64_t>({3, 0, 0, 2});
  c.Add("gather_ok_float32", Rpc::kGather, r);
  v1::GatherRequest bad = r;
  *bad.mutable_indices() = Pack<int64_t>({0, 4});
  c.Add("gather_bad_index_past_end", Rpc::kGather, bad);
  *bad.mutable_indices() = Pack<int32_t>({0, 1});
  c.Add("gather_bad_int32_indices", Rpc::kGather, bad);
}

void AddPipeline(Corpus& c) {
  // WHERE a > 2, gather k and v, group by k: the filtered group-by.
  v1::PipelineRequest r;
  v1::SelectRequest* select = r.add_steps()->mutable_select();
  *select->mutable_input() = Pack<int32_t>({5, 1, 3, 0, 9, 2});
  select->mutable_predicate()->set_kind(v1::Predicate::GT);
  select->mutable_predicate()->mutable_operand()->set_int_value(2);
  select->set_output(v1::SelectRequest::INDICES);
  v1::GatherRequest* keys = r.add_steps()->mutable_gather();
  *keys->mutable_values() = Pack<int32_t>({0, 1, 2, 0, 1, 2});
  *keys->mutable_indices() = PipelineBuilder::Output(0, v1::StepOutput::INDICES);
  v1::GatherRequest* values = r.add_steps()->mutable_gather();
  *values->mutable_values() = Pack<float>({1, 2, 4, 8, 16, 32});
  *values->mutable_indices() = PipelineBuilder::Output(0, v1::StepOutput::INDICES);
  v1::PipelineStep* group = r.add_steps();
  group->set_returned(true);
  group->mutable_aggregate_by_key()->set_op(v1::SUM);
  group->mutable_aggregate_by_key()->set_num_keys(3);
  *group->mutable_aggregate_by_key()->mutable_keys() = PipelineBuilder::Output(1, v1::StepOutput::VALUES);
  *group->mutable_aggregate_by_key()->mutable_values() = PipelineBuilder::Output(2, v1::StepOutput::VALUES);
  c.Add("pipeline_ok_filtered_group_by", Rpc::kPipeline, r);
  v1::PipelineRequest runs;
  *runs.add_steps()->mutable_run_length_encode()->mutable_input() =
      Pack<int64_t>({7, 7, 1, 1, 1, 4});
  v1::PipelineStep* offsets = runs.add_steps();
  offsets->set_returned(true);
  offsets->mutable_scan()->set_op(v1::SUM);
  offsets->mutable_scan()->set_exclusive(true);
  *offsets->mutable_scan()->mutable_input() = PipelineBuilder::Output(0, v1::StepOutput::LENGTHS);
  c.Add("pipeline_ok_rle_offsets", Rpc::kPipeline, runs);
  v1::PipelineRequest bad = r;
  *bad.mutable_steps(1)->mutable_gather()->mutable_indices() =
      PipelineBuilder::Output(2, v1::StepOutput::INDICES);
  c.Add("pipeline_bad_later_step", Rpc::kPipeline, bad);
  bad = r;
  *bad.mutable_steps(1)->mutable_gather()->mutable_indices() =
      PipelineBuilder::Output(0, v1::StepOutput::LENGTHS);
  c.Add("pipeline_bad_output_not_produced", Rpc::kPipeline, bad);
  bad = r;
  bad.mutable_steps(3)->mutable_aggregate_by_key()->set_num_keys(2);
  c.Add("pipeline_bad_key_in_last_step", Rpc::kPipeline, bad);
  bad = r;
  bad.mutable_steps(3)->set_returned(false);
  c.Add("pipeline_bad_nothing_returned", Rpc::kPipeline, bad);
  c.Add("pipeline_bad_empty", Rpc::kPipeline, v1::PipelineRequest());
  v1::ScanRequest outside;
  outside.set_op(v1::SUM);
  *outside.mutable_input() = PipelineBuilder::Output(0, v1::StepOutput::VALUES);
  c.Add("scan_bad_step_outside_pipeline", Rpc::kScan, outside);
}

// Protobuf's wire format by hand, for the seeds of the raw-buffer parser.
using wire::Varint;
std::string Tag(int field, int wire_type) { return Varint((uint64_t(field) << 3) | wire_type); }
std::string Field(int field, const std::string& bytes) {
  return Tag(field, 2) + Varint(bytes.size()) + bytes;
}
std::string VarintField(int field, uint64_t value) { return Tag(field, 0) + Varint(value); }

// Seeds for wire::ReceivedMessage (request_path.h parses every input's rest
// as the RPC's request, a MultiplexRequest and an EchoRequest): nested and
// repeated Arrays, fields protobuf merges or switches, unknown fields,
// groups, and a pass-through field large enough to be referenced.
// Resident buffers (Array.buffer, output_buffers): the request path below
// gRPC has no buffer registry, so each is refused as a streaming RPC refuses
// it; the wire parser must still read them as protobuf does.
void AddBuffers(Corpus& c) {
  v1::ScanRequest scan;
  scan.mutable_input()->mutable_buffer()->set_name("x");
  scan.mutable_input()->mutable_buffer()->set_offset(3);
  scan.mutable_input()->mutable_buffer()->set_length(5);
  scan.set_op(v1::SUM);
  c.Add("buffers_scan_input_ref", Rpc::kScan, scan);
  scan.mutable_input()->set_data(std::string(8, '\1'));
  scan.mutable_input()->set_dtype(v1::INT32);
  c.Add("buffers_scan_data_and_buffer", Rpc::kScan, scan);
  v1::ReduceByKeyRequest by_key;
  *by_key.mutable_keys() = Pack<int32_t>({1, 1, 2});
  by_key.mutable_values()->mutable_buffer()->set_name("values.v1");
  by_key.set_op(v1::SUM);
  by_key.mutable_output_buffers()->set_keys("k");
  by_key.mutable_output_buffers()->set_values("v");
  c.Add("buffers_reduce_by_key_refs_and_outputs", Rpc::kReduceByKey, by_key);
  v1::SelectRequest select;
  *select.mutable_input() = Pack<float>({1, -1, 2});
  select.mutable_predicate()->set_kind(v1::Predicate::GT);
  select.mutable_predicate()->mutable_operand()->set_float_value(0);
  select.mutable_output_buffers()->set_indices("i");
  c.Add("buffers_select_output_indices", Rpc::kSelect, select);
}

void AddWire(Corpus& c) {
  v1::MultiplexRequest m;
  m.set_id(300);
  *m.mutable_aggregate_by_key()->mutable_keys() = Pack<int32_t>({2, 0, 2, 3, 0});
  *m.mutable_aggregate_by_key()->mutable_values() = Pack<int64_t>({10, 1, 5, 7, 2});
  m.mutable_aggregate_by_key()->set_op(v1::SUM);
  m.mutable_aggregate_by_key()->set_num_keys(4);
  c.Add("wire_multiplex_aggregate", Rpc::kAggregateByKey, m);
  v1::MultiplexRequest s;
  s.set_id(1);
  *s.mutable_select()->mutable_input() = Pack<uint32_t>({1, 2, 3, 4});
  *s.mutable_select()->mutable_flags() = Pack<int32_t>({0, 1, 0, 1});
  c.Add("wire_multiplex_select_flags", Rpc::kSelect, s);

  v1::EchoRequest echo;
  *echo.add_arrays() = Pack<int32_t>({1, 2, 3});
  echo.add_arrays()->set_dtype(v1::INT64);
  *echo.add_arrays() = Pack<double>({0.5, -1});
  echo.set_response_bytes(16);
  c.Add("wire_echo_arrays", Rpc::kUnique, echo);

  const std::string input = Field(1, VarintField(1, v1::INT32) + Field(2, std::string(12, '\x03')));
  const std::string unknown = VarintField(100, 7) + Tag(101, 5) + "abcd" + Field(102, "xyz");
  c.AddBytes("wire_scan_unknown_fields", Rpc::kScan,
             unknown + Field(1, VarintField(1, v1::INT32) + Field(2, std::string(8, '\x01')) +
                                 unknown + Field(3, unknown)) +
                 VarintField(2, v1::SUM));
  c.AddBytes("wire_scan_group", Rpc::kScan,
             input + Tag(50, 3) + VarintField(1, 5) + Field(2, "g") + Tag(50, 4) +
                 VarintField(2, v1::SUM));
  // keys' data twice (the last wins) and values in two pieces (merged).
  c.AddBytes("wire_reduce_by_key_repeated",  Rpc::kReduceByKey,
             Field(1, VarintField(1, v1::INT32) + Field(2, std::string(8, '\x07')) +
                          Field(2, std::string(12, '\x02'))) +
                 Field(2, VarintField(1, v1::INT32)) + Field(2, Field(2, std::string(12, '\x05'))) +
                 VarintField(3, v1::SUM));
  // flags, then a predicate, then flags again: the last criterion wins.
  c.AddBytes("wire_select_oneof_switch", Rpc::kSelect,
             input + Field(3, VarintField(1, v1::INT32) + Field(2, std::string(12, '\x01'))) +
                 Field(2, VarintField(1, v1::Predicate::NONZERO)) +
                 Field(3, VarintField(1, v1::INT32) + Field(2, std::string(12, '\x00'))));
  // Segment offsets over 4 KiB: passed through as references to the slices.
  std::string offsets;
  for (int i = 0; i < 700; ++i) offsets += Varint(uint64_t{1} << 35 | i);
  c.AddBytes("wire_scan_large_segments", Rpc::kScan,
             input + VarintField(2, v1::SUM) + Field(4, offsets) + VarintField(3, 1));
}

}  // namespace
}  // namespace primserve::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output directory>\n", argv[0]);
    return 2;
  }
  primserve::fuzz::Corpus corpus(argv[1]);
  primserve::fuzz::AddScan(corpus);
  primserve::fuzz::AddReduce(corpus);
  primserve::fuzz::AddSelect(corpus);
  primserve::fuzz::AddUnique(corpus);
  primserve::fuzz::AddRunLengthEncode(corpus);
  primserve::fuzz::AddReduceByKey(corpus);
  primserve::fuzz::AddAggregateByKey(corpus);
  primserve::fuzz::AddBuffers(corpus);
  primserve::fuzz::AddSort(corpus);
  primserve::fuzz::AddGather(corpus);
  primserve::fuzz::AddPipeline(corpus);
  primserve::fuzz::AddWire(corpus);
  std::printf("wrote %d seeds to %s\n", corpus.count(), argv[1]);
  return corpus.failed() ? 1 : 0;
}
