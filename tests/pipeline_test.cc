// Pipelines against a real server (loopback; the CPU backend, or the CUDA
// backend when built as cuda_pipeline_gpu_test): every step kind chained,
// each returned step equal to the same step sent as its own call with the
// earlier answers inline; steps not returned absent; inputs from buffers and
// outputs into buffers; through Multiplex equal to unary; every validation
// error naming its step with nothing run; a step failing at run time leaving
// no output. Fresh random data each run (the seed is printed on failure).
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "client/buffers_client.h"
#include "client/client.h"
#include "client/pipeline.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "tests/rpc_api.h"
#include "tests/unary_answer.h"
#ifdef PRIMSERVE_PIPELINE_TEST_CUDA
#include "server/cuda/cuda_backend.h"
#endif

namespace primserve {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

#ifdef PRIMSERVE_PIPELINE_TEST_CUDA
std::unique_ptr<ExecutionBackend> TestBackend() {
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create({});
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) std::abort();
  return *std::move(backend);
}
#else
std::unique_ptr<ExecutionBackend> TestBackend() { return std::make_unique<CpuBackend>(); }
#endif

constexpr uint64_t kMaxResponseBytes = 64 << 20;
constexpr uint64_t kMaxIntermediateBytes = 32 << 20;
constexpr uint64_t kMaxSteps = 12;

// The step's request as a MultiplexRequest (PipelineStep.op and
// MultiplexRequest.request name their kinds alike).
v1::MultiplexRequest AsMultiplex(const v1::PipelineStep& step) {
  v1::MultiplexRequest m;
  const auto* from = step.GetReflection()->GetOneofFieldDescriptor(
      step, step.GetDescriptor()->FindOneofByName("op"));
  const auto* to = m.GetDescriptor()->FindFieldByName(from->name());
  m.GetReflection()->MutableMessage(&m, to)->CopyFrom(step.GetReflection()->GetMessage(step, from));
  return m;
}

// The response inside a MultiplexResponse or a PipelineResult (named alike).
const google::protobuf::Message& Inner(const google::protobuf::Message& holder) {
  const auto* oneof = holder.GetDescriptor()->FindOneofByName("response");
  const auto* field = holder.GetReflection()->GetOneofFieldDescriptor(holder, oneof);
  EXPECT_NE(field, nullptr) << holder.DebugString();
  return holder.GetReflection()->GetMessage(holder, field);
}

// The Array of `response` that StepOutput `which` names.
v1::Array OutputArray(const google::protobuf::Message& response, v1::StepOutput::Which which) {
  const char* name = "values";
  switch (which) {
    case v1::StepOutput::INDICES: name = "indices"; break;
    case v1::StepOutput::LENGTHS: name = "lengths"; break;
    case v1::StepOutput::KEYS: name = "keys"; break;
    default: break;
  }
  const auto* descriptor = response.GetDescriptor();
  const auto* field = descriptor->FindFieldByName(name);
  if (field == nullptr) field = descriptor->FindFieldByName("output");  // Scan, Gather
  v1::Array array;
  array.CopyFrom(response.GetReflection()->GetMessage(response, field));
  return array;
}

// Replaces every Array.step in `message` (at any depth) with the inline
// array of the earlier answer it names.
void Resolve(google::protobuf::Message* message,
             const std::vector<v1::MultiplexResponse>& answers) {
  const auto* reflection = message->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const auto* field : fields) {
    if (field->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE || field->is_repeated()) {
      continue;
    }
    google::protobuf::Message* inner = reflection->MutableMessage(message, field);
    if (auto* array = dynamic_cast<v1::Array*>(inner); array != nullptr && array->has_step()) {
      const v1::StepOutput ref = array->step();
      *array = OutputArray(Inner(answers[ref.step()]), ref.output());
      continue;
    }
    Resolve(inner, answers);
  }
}

template <typename T>
v1::Array Random(std::mt19937& rng, size_t n, int64_t low, int64_t high) {
  std::uniform_int_distribution<int64_t> pick(low, high);
  std::vector<T> values(n);
  for (T& v : values) v = static_cast<T>(pick(rng));
  return PackArray<T>(values);
}

class PipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options;
    options.rpc_api = TestRpcApi();
    options.address = "127.0.0.1:0";
    options.limits.max_response_bytes = kMaxResponseBytes;
    options.limits.max_pipeline_steps = kMaxSteps;
    options.limits.max_pipeline_intermediate_bytes = kMaxIntermediateBytes;
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, TestBackend());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    const std::string address = absl::StrCat("127.0.0.1:", server_->port());
    channel_ = new std::shared_ptr<grpc::Channel>(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    stub_ = v1::Primitives::NewStub(*channel_).release();
    client_ = new PrimitivesClient(*channel_);
    buffers_ = new BuffersClient({*channel_});
  }
  static void TearDownTestSuite() {
    delete buffers_;
    delete client_;
    delete stub_;
    delete channel_;
    delete server_;
  }

  void SetUp() override {
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }

  // Each step of `request` as its own call, its Array.step inputs replaced
  // with the earlier answers inline: what the pipeline's returned steps must
  // equal.
  static std::vector<v1::MultiplexResponse> OneByOne(const v1::PipelineRequest& request) {
    std::vector<v1::MultiplexResponse> answers;
    for (const v1::PipelineStep& step : request.steps()) {
      v1::MultiplexRequest m = AsMultiplex(step);
      Resolve(&m, answers);
      grpc::Status status;
      answers.push_back(UnaryAnswer(*stub_, m, &status));
      EXPECT_TRUE(status.ok()) << "step " << answers.size() - 1 << ": "
                               << status.error_message();
    }
    return answers;
  }

  static absl::StatusOr<v1::PipelineResponse> Run(const v1::PipelineRequest& request) {
    return client_->Call(request);
  }

  // Every inline array of `message`'s (at any depth) put in a buffer of
  // its own and named instead; the names go to `names`.
  static void PutInBuffers(google::protobuf::Message* message, std::vector<std::string>* names) {
    const auto* reflection = message->GetReflection();
    std::vector<const google::protobuf::FieldDescriptor*> fields;
    reflection->ListFields(*message, &fields);
    for (const auto* field : fields) {
      if (field->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE ||
          field->is_repeated()) {
        continue;
      }
      google::protobuf::Message* inner = reflection->MutableMessage(message, field);
      auto* array = dynamic_cast<v1::Array*>(inner);
      if (array == nullptr) {
        PutInBuffers(inner, names);
        continue;
      }
      if (array->has_step() || array->has_buffer()) continue;
      const std::string name = absl::StrCat("resident-", names->size());
      ASSERT_TRUE(
          buffers_->PutBytes(name, static_cast<DType>(array->dtype()), array->data()).ok());
      names->push_back(name);
      array->clear_data();
      *array->mutable_buffer() = BufferRef(name);
    }
  }

  // The pipeline equals its steps one by one; only returned steps answer.
  // Again with its inline inputs in buffers: resident inputs, which a GPU
  // runs the pipeline over on the device as one unit (device_pipeline.h).
  void ExpectEqualsOneByOne(const v1::PipelineRequest& request) {
    SCOPED_TRACE(absl::StrCat("seed ", seed_));
    const std::vector<v1::MultiplexResponse> expected = OneByOne(request);
    v1::PipelineRequest resident = request;
    std::vector<std::string> names;
    // Freed however the checks below end.
    absl::Cleanup free_names = [&names] {
      for (const std::string& name : names) EXPECT_TRUE(buffers_->Free(name).ok()) << name;
    };
    for (v1::PipelineStep& step : *resident.mutable_steps()) PutInBuffers(&step, &names);
    const v1::PipelineRequest* const sent_both[] = {&request, &resident};
    for (const v1::PipelineRequest* sent : sent_both) {
      SCOPED_TRACE(sent == &request ? "inline inputs" : "inputs in buffers");
      absl::StatusOr<v1::PipelineResponse> got = Run(*sent);
      ASSERT_TRUE(got.ok()) << got.status();
      int next = 0;
      for (int k = 0; k < request.steps_size(); ++k) {
        if (!request.steps(k).returned()) continue;
        ASSERT_LT(next, got->results_size()) << "step " << k << " is returned but absent";
        const v1::PipelineResult& result = got->results(next++);
        EXPECT_EQ(result.step(), static_cast<uint32_t>(k));
        EXPECT_TRUE(MessageDifferencer::Equals(Inner(result), Inner(expected[k])))
            << "step " << k << ":\n got " << Inner(result).ShortDebugString() << "\n want "
            << Inner(expected[k]).ShortDebugString();
      }
      EXPECT_EQ(next, got->results_size()) << "steps not returned came back";
    }
  }

  void ExpectRefused(const v1::PipelineRequest& request, absl::StatusCode code,
                     const std::string& part) {
    absl::StatusOr<v1::PipelineResponse> got = Run(request);
    EXPECT_EQ(got.status().code(), code) << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(part));
  }

  // The filtered group-by over n rows: select indices of a > t, gather k and
  // v by them, aggregate v by k; every step returned when `all_returned`.
  v1::PipelineRequest GroupBy(size_t n, uint64_t num_keys, bool all_returned) {
    PipelineBuilder p;
    v1::SelectRequest select;
    *select.mutable_input() = Random<int32_t>(rng_, n, -1000, 1000);
    select.mutable_predicate()->set_kind(v1::Predicate::GT);
    select.mutable_predicate()->mutable_operand()->set_int_value(0);
    select.set_output(v1::SelectRequest::INDICES);
    const uint32_t rows = p.Add(select, all_returned);
    v1::GatherRequest keys;
    *keys.mutable_values() = Random<int32_t>(rng_, n, 0, static_cast<int64_t>(num_keys) - 1);
    *keys.mutable_indices() = p.Output(rows, v1::StepOutput::INDICES);
    const uint32_t k = p.Add(keys, all_returned);
    v1::GatherRequest values;
    *values.mutable_values() = Random<int64_t>(rng_, n, -(1 << 20), 1 << 20);
    *values.mutable_indices() = p.Output(rows, v1::StepOutput::INDICES);
    const uint32_t v = p.Add(values, all_returned);
    v1::AggregateByKeyRequest group;
    group.set_op(v1::SUM);
    group.set_num_keys(num_keys);
    *group.mutable_keys() = p.Output(k, v1::StepOutput::VALUES);
    *group.mutable_values() = p.Output(v, v1::StepOutput::VALUES);
    p.Add(group, /*returned=*/true);
    return p.request();
  }

  static PrimServer* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
  static v1::Primitives::Stub* stub_;
  static PrimitivesClient* client_;
  static BuffersClient* buffers_;
  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

PrimServer* PipelineTest::server_ = nullptr;
std::shared_ptr<grpc::Channel>* PipelineTest::channel_ = nullptr;
v1::Primitives::Stub* PipelineTest::stub_ = nullptr;
PrimitivesClient* PipelineTest::client_ = nullptr;
BuffersClient* PipelineTest::buffers_ = nullptr;

TEST_F(PipelineTest, FilteredGroupByEqualsItsStepsOneByOne) {
  for (size_t n : {0, 1, 1000, 300000}) {
    SCOPED_TRACE(absl::StrCat("n=", n));
    ExpectEqualsOneByOne(GroupBy(n, 1024, /*all_returned=*/false));
    ExpectEqualsOneByOne(GroupBy(n, 7, /*all_returned=*/true));
  }
}

// Every kind of step, each reading what earlier ones made: sort pairs, then
// the runs of the sorted keys and their offsets (the exclusive scan of the
// lengths), reduce by key, unique, reduce, select, gather.
TEST_F(PipelineTest, EveryStepKindChained) {
  for (size_t n : {1, 5000, 200000}) {
    SCOPED_TRACE(absl::StrCat("n=", n));
    PipelineBuilder p;
    v1::SortRequest sort;
    *sort.mutable_keys() = Random<int32_t>(rng_, n, 0, 300);
    *sort.mutable_values() = Random<int64_t>(rng_, n, -50, 50);
    sort.set_return_indices(true);
    const uint32_t sorted = p.Add(sort, true);
    v1::RunLengthEncodeRequest runs;
    *runs.mutable_input() = p.Output(sorted, v1::StepOutput::KEYS);
    const uint32_t rle = p.Add(runs, true);
    v1::ScanRequest offsets;
    offsets.set_op(v1::SUM);
    offsets.set_exclusive(true);
    *offsets.mutable_input() = p.Output(rle, v1::StepOutput::LENGTHS);
    p.Add(offsets, true);
    v1::ReduceByKeyRequest sums;
    sums.set_op(v1::SUM);
    *sums.mutable_keys() = p.Output(sorted, v1::StepOutput::KEYS);
    *sums.mutable_values() = p.Output(sorted, v1::StepOutput::VALUES);
    const uint32_t by_key = p.Add(sums, false);
    v1::UniqueRequest unique;
    *unique.mutable_input() = p.Output(by_key, v1::StepOutput::KEYS);
    p.Add(unique, true);
    v1::ReduceRequest extreme;
    extreme.set_op(v1::ARGMAX);
    *extreme.mutable_input() = p.Output(by_key, v1::StepOutput::VALUES);
    p.Add(extreme, true);
    v1::SelectRequest positive;
    *positive.mutable_input() = p.Output(by_key, v1::StepOutput::VALUES);
    positive.mutable_predicate()->set_kind(v1::Predicate::GT);
    positive.mutable_predicate()->mutable_operand()->set_int_value(0);
    positive.set_output(v1::SelectRequest::VALUES_AND_INDICES);
    const uint32_t kept = p.Add(positive, true);
    v1::GatherRequest original;
    *original.mutable_values() = p.Output(sorted, v1::StepOutput::INDICES);
    *original.mutable_indices() = p.Output(kept, v1::StepOutput::INDICES);
    p.Add(original, true);
    ExpectEqualsOneByOne(p.request());
  }
}

// Steps whose element counts depend on the data, read by the steps after
// them: the kept count of a select and the runs of an encoding reach the
// scans, reduces, gathers and aggregation that read them (on a GPU with
// resident inputs: on the device, with one wait for the whole pipeline).
TEST_F(PipelineTest, DataDependentCountsFlowIntoLaterSteps) {
  // Every step returned: 100000 rows keep the answer under the client's
  // 4 MiB message limit.
  for (size_t n : {1, 2, 5000, 100000}) {
    SCOPED_TRACE(absl::StrCat("n=", n));
    constexpr int64_t kKeys = 37;
    PipelineBuilder p;
    v1::SelectRequest select;
    *select.mutable_input() = Random<int64_t>(rng_, n, -1000, 1000);
    select.mutable_predicate()->set_kind(v1::Predicate::GT);
    select.mutable_predicate()->mutable_operand()->set_int_value(0);
    select.set_output(v1::SelectRequest::VALUES_AND_INDICES);
    const uint32_t kept = p.Add(select, true);
    v1::ScanRequest running;
    running.set_op(v1::SUM);
    *running.mutable_input() = p.Output(kept, v1::StepOutput::VALUES);
    const uint32_t sums = p.Add(running, true);
    v1::ReduceRequest largest;
    largest.set_op(v1::MAX);
    *largest.mutable_input() = p.Output(sums, v1::StepOutput::VALUES);
    p.Add(largest, true);
    v1::ReduceRequest first;
    first.set_op(v1::ARGMIN);
    *first.mutable_input() = p.Output(kept, v1::StepOutput::INDICES);
    p.Add(first, true);
    v1::GatherRequest keys;
    *keys.mutable_values() = Random<int32_t>(rng_, n, 0, kKeys - 1);
    *keys.mutable_indices() = p.Output(kept, v1::StepOutput::INDICES);
    const uint32_t kept_keys = p.Add(keys, false);
    v1::AggregateByKeyRequest group;
    group.set_op(v1::SUM);
    group.set_num_keys(kKeys);
    *group.mutable_keys() = p.Output(kept_keys, v1::StepOutput::VALUES);
    *group.mutable_values() = p.Output(sums, v1::StepOutput::VALUES);
    p.Add(group, true);
    v1::RunLengthEncodeRequest runs;
    *runs.mutable_input() = Random<int32_t>(rng_, n, 0, 2);
    const uint32_t rle = p.Add(runs, true);
    v1::ScanRequest offsets;
    offsets.set_op(v1::SUM);
    offsets.set_exclusive(true);
    *offsets.mutable_input() = p.Output(rle, v1::StepOutput::LENGTHS);
    p.Add(offsets, true);
    v1::UniqueRequest unique;
    *unique.mutable_input() = Random<int32_t>(rng_, n, 5, 6);
    const uint32_t distinct = p.Add(unique, false);
    v1::ReduceRequest total;
    total.set_op(v1::SUM);
    *total.mutable_input() = p.Output(distinct, v1::StepOutput::VALUES);
    p.Add(total, true);
    ExpectEqualsOneByOne(p.request());
  }
}

TEST_F(PipelineTest, ReproducibleFloatSumsHaveTheBitsOfTheStepsOneByOne) {
  PipelineBuilder p;
  v1::SelectRequest select;
  std::uniform_real_distribution<float> real(-1, 1);
  std::vector<float> values(100000);
  for (float& v : values) v = real(rng_);
  *select.mutable_input() = PackArray<float>(values);
  select.mutable_predicate()->set_kind(v1::Predicate::GT);
  select.mutable_predicate()->mutable_operand()->set_float_value(-0.5);
  const uint32_t kept = p.Add(select, false);
  v1::ScanRequest scan;
  scan.set_op(v1::SUM);
  scan.set_reproducible(true);
  *scan.mutable_input() = p.Output(kept, v1::StepOutput::VALUES);
  p.Add(scan, true);
  v1::ReduceRequest reduce;
  reduce.set_op(v1::SUM);
  reduce.set_reproducible(true);
  *reduce.mutable_input() = p.Output(kept, v1::StepOutput::VALUES);
  p.Add(reduce, true);
  ExpectEqualsOneByOne(p.request());

  // Sums by key of the kept values (on a GPU with resident inputs: sorted
  // by key over the count the select left on the device).
  PipelineBuilder grouped;
  select.set_output(v1::SelectRequest::VALUES_AND_INDICES);
  const uint32_t rows = grouped.Add(select, false);
  v1::GatherRequest keys;
  *keys.mutable_values() = Random<int32_t>(rng_, values.size(), 0, 49);
  *keys.mutable_indices() = grouped.Output(rows, v1::StepOutput::INDICES);
  const uint32_t kept_keys = grouped.Add(keys, false);
  v1::AggregateByKeyRequest sums;
  sums.set_op(v1::SUM);
  sums.set_num_keys(50);
  sums.set_reproducible(true);
  *sums.mutable_keys() = grouped.Output(kept_keys, v1::StepOutput::VALUES);
  *sums.mutable_values() = grouped.Output(rows, v1::StepOutput::VALUES);
  grouped.Add(sums, true);
  ExpectEqualsOneByOne(grouped.request());
}

TEST_F(PipelineTest, BufferInputsAndOutputsIntoBuffers) {
  const size_t n = 50000;
  std::vector<int32_t> a(n), k(n);
  std::vector<int64_t> v(n);
  std::uniform_int_distribution<int32_t> pick(-100, 100), key(0, 63);
  for (size_t i = 0; i < n; ++i) {
    a[i] = pick(rng_);
    k[i] = key(rng_);
    v[i] = pick(rng_);
  }
  ASSERT_TRUE(buffers_->Put<int32_t>("pipe-a", a).ok());
  ASSERT_TRUE(buffers_->Put<int32_t>("pipe-k", k).ok());
  ASSERT_TRUE(buffers_->Put<int64_t>("pipe-v", v).ok());
  PipelineBuilder p;
  v1::SelectRequest select;
  // a's first n - 100 rows, whose values are v's from row 100 on.
  *select.mutable_input()->mutable_buffer() = BufferRef("pipe-a", 0, n - 100);
  select.mutable_predicate()->set_kind(v1::Predicate::GT);
  select.mutable_predicate()->mutable_operand()->set_int_value(10);
  select.set_output(v1::SelectRequest::INDICES);
  const uint32_t rows = p.Add(select, false);
  v1::GatherRequest keys;
  *keys.mutable_values()->mutable_buffer() = BufferRef("pipe-k");
  *keys.mutable_indices() = p.Output(rows, v1::StepOutput::INDICES);
  keys.mutable_output_buffers()->set_values("pipe-kept-keys");
  const uint32_t kept_keys = p.Add(keys, true);
  v1::GatherRequest values;
  *values.mutable_values()->mutable_buffer() = BufferRef("pipe-v", 100);
  *values.mutable_indices() = p.Output(rows, v1::StepOutput::INDICES);
  const uint32_t kept_values = p.Add(values, false);
  v1::AggregateByKeyRequest group;
  group.set_op(v1::SUM);
  group.set_num_keys(64);
  *group.mutable_keys() = p.Output(kept_keys, v1::StepOutput::VALUES);
  *group.mutable_values() = p.Output(kept_values, v1::StepOutput::VALUES);
  group.mutable_output_buffers()->set_values("pipe-sums");
  p.Add(group, true);
  absl::StatusOr<v1::PipelineResponse> got = Run(p.request());
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->results_size(), 2);
  EXPECT_EQ(got->results(0).gather().output().buffer().name(), "pipe-kept-keys");
  EXPECT_EQ(got->results(1).aggregate_by_key().values().buffer().name(), "pipe-sums");
  // The same by hand.
  std::vector<int64_t> sums(64, 0);
  std::vector<int32_t> kept;
  for (size_t i = 0; i + 100 < n; ++i) {
    if (a[i] <= 10) continue;
    kept.push_back(k[i]);
    sums[k[i]] += v[i + 100];
  }
  absl::StatusOr<std::vector<int64_t>> stored_sums = buffers_->Get<int64_t>("pipe-sums");
  ASSERT_TRUE(stored_sums.ok()) << stored_sums.status();
  EXPECT_EQ(*stored_sums, sums);
  absl::StatusOr<std::vector<int32_t>> stored_keys = buffers_->Get<int32_t>("pipe-kept-keys");
  ASSERT_TRUE(stored_keys.ok()) << stored_keys.status();
  EXPECT_EQ(*stored_keys, kept);
  // Steps not returned left no buffer behind.
  absl::StatusOr<v1::ListBuffersResponse> list = buffers_->List();
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (const v1::BufferInfo& info : list->buffers()) names.push_back(info.name());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("pipe-a", "pipe-k", "pipe-v",
                                                     "pipe-kept-keys", "pipe-sums"));
  for (const std::string& name : names) ASSERT_TRUE(buffers_->Free(name).ok());
}

TEST_F(PipelineTest, MultiplexEqualsUnary) {
  grpc::ClientContext context;
  auto stream = stub_->Multiplex(&context);
  std::vector<v1::MultiplexRequest> sent;
  for (uint64_t id = 1; id <= 4; ++id) {
    v1::MultiplexRequest m;
    m.set_id(id);
    *m.mutable_pipeline() = GroupBy(2000 * id, 16, /*all_returned=*/id % 2 == 0);
    ASSERT_TRUE(stream->Write(m));
    sent.push_back(m);
  }
  v1::MultiplexRequest gather;
  gather.set_id(5);
  *gather.mutable_gather()->mutable_values() = Random<double>(rng_, 100, -5, 5);
  *gather.mutable_gather()->mutable_indices() = Random<int64_t>(rng_, 300, 0, 99);
  ASSERT_TRUE(stream->Write(gather));
  sent.push_back(gather);
  stream->WritesDone();
  v1::MultiplexResponse answer;
  size_t answered = 0;
  while (stream->Read(&answer)) {
    ASSERT_GE(answer.id(), 1u);
    ASSERT_LE(answer.id(), sent.size());
    ASSERT_EQ(answer.code(), 0) << answer.message();
    grpc::Status status;
    const v1::MultiplexResponse unary = UnaryAnswer(*stub_, sent[answer.id() - 1], &status);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(MessageDifferencer::Equals(answer, unary)) << "id " << answer.id();
    ++answered;
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, sent.size());
}

// Each refusal names its step, and nothing runs: step 0's output for a
// buffer never appears.
TEST_F(PipelineTest, ValidationErrorsNameTheirStepAndRunNothing) {
  const v1::PipelineRequest good = GroupBy(100, 8, false);
  auto with_early_output = [&](v1::PipelineRequest r) {
    r.mutable_steps(0)->set_returned(true);
    r.mutable_steps(0)->mutable_select()->mutable_output_buffers()->set_indices("pipe-early");
    return r;
  };
  using Code = absl::StatusCode;
  struct Case {
    std::string what;
    v1::PipelineRequest request;
    Code code;
    std::string part;
  };
  std::vector<Case> cases;
  auto add = [&](std::string what, v1::PipelineRequest r, Code code, std::string part) {
    cases.push_back({std::move(what), with_early_output(std::move(r)), code, std::move(part)});
  };
  v1::PipelineRequest r = good;
  *r.mutable_steps(1)->mutable_gather()->mutable_indices() = PipelineBuilder::Output(2, v1::StepOutput::INDICES);
  add("a later step", r, Code::kInvalidArgument, "step 1: indices.step names step 2");
  r = good;
  *r.mutable_steps(1)->mutable_gather()->mutable_indices() = PipelineBuilder::Output(1, v1::StepOutput::INDICES);
  add("itself", r, Code::kInvalidArgument, "step 1: indices.step names step 1");
  r = good;
  *r.mutable_steps(2)->mutable_gather()->mutable_indices() = PipelineBuilder::Output(0, v1::StepOutput::LENGTHS);
  add("an output not made", r, Code::kInvalidArgument,
      "step 2: indices.step names the LENGTHS of step 0");
  r = good;
  r.mutable_steps(3)->mutable_aggregate_by_key()->mutable_keys()->set_dtype(v1::INT32);
  add("a dtype set", r, Code::kInvalidArgument, "step 3: keys.dtype is set");
  r = good;
  *r.mutable_steps(1)->mutable_gather()->mutable_indices() = PipelineBuilder::Output(0, v1::StepOutput::VALUES);
  r.mutable_steps(0)->mutable_select()->set_output(v1::SelectRequest::VALUES_AND_INDICES);
  add("a dtype the step does not take", r, Code::kInvalidArgument,
      "step 1: indices.dtype is INT32; Gather takes INT64 indices");
  r = good;
  r.mutable_steps(3)->mutable_aggregate_by_key()->set_op(v1::PROD);
  add("a bad op", r, Code::kInvalidArgument, "step 3: op PROD");
  r = good;
  r.mutable_steps(2)->mutable_gather()->mutable_output_buffers()->set_values("pipe-nope");
  add("an output placed on a step not returned", r, Code::kInvalidArgument,
      "step 2: output_buffers is set but the step is not returned");
  r = good;
  r.add_steps();
  add("a step without an op", r, Code::kInvalidArgument, "step 4: op is not set");
  r = good;
  r.mutable_steps(1)->mutable_gather()->mutable_values()->mutable_buffer()->set_name("no-such");
  r.mutable_steps(1)->mutable_gather()->mutable_values()->clear_data();
  add("an unknown buffer", r, Code::kNotFound, "step 1:");
  r = good;
  r.mutable_steps(3)->mutable_aggregate_by_key()->set_num_keys(kMaxResponseBytes);
  add("answers over --max_response_bytes", r, Code::kResourceExhausted,
      "--max_response_bytes");
  r = good;
  // Indices of up to 5M rows: 40 MB, each answer within the limit.
  *r.mutable_steps(0)->mutable_select()->mutable_input() =
      Random<int32_t>(rng_, kMaxIntermediateBytes / 8 + 1, 0, 1);
  add("intermediates over the caller's quota", r, Code::kResourceExhausted,
      "--max_buffer_bytes_per_caller");
  r = good;
  while (r.steps_size() <= static_cast<int>(kMaxSteps)) *r.add_steps() = good.steps(0);
  add("too many steps", r, Code::kResourceExhausted, "--max_pipeline_steps");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ExpectRefused(c.request, c.code, c.part);
    EXPECT_EQ(buffers_->Info("pipe-early").status().code(), Code::kNotFound);
  }
  ExpectRefused(v1::PipelineRequest(), Code::kInvalidArgument, "steps is empty");
  r = good;
  r.mutable_steps(3)->set_returned(false);
  ExpectRefused(r, Code::kInvalidArgument, "no step is returned");
  // Outside a Pipeline, Array.step is refused.
  v1::ScanRequest scan;
  scan.set_op(v1::SUM);
  *scan.mutable_input() = PipelineBuilder::Output(0, v1::StepOutput::VALUES);
  EXPECT_EQ(client_->Call(scan).status().code(), Code::kInvalidArgument);
  // And the server still answers.
  ExpectEqualsOneByOne(good);
}

// A step that fails while running fails the call naming it, and no output
// of any step appears.
TEST_F(PipelineTest, AFailingStepLeavesNoOutput) {
  v1::PipelineRequest r = GroupBy(5000, 64, false);
  r.mutable_steps(0)->set_returned(true);
  r.mutable_steps(0)->mutable_select()->mutable_output_buffers()->set_indices("pipe-early");
  // Keys up to 63 against 32 groups: the last step's keys are out of range.
  r.mutable_steps(3)->mutable_aggregate_by_key()->set_num_keys(32);
  ExpectRefused(r, absl::StatusCode::kInvalidArgument, "step 3: keys[");
  EXPECT_EQ(buffers_->Info("pipe-early").status().code(), absl::StatusCode::kNotFound);
  // An index out of range in a middle step.
  r = GroupBy(5000, 64, false);
  r.mutable_steps(0)->set_returned(true);
  r.mutable_steps(0)->mutable_select()->mutable_output_buffers()->set_indices("pipe-early");
  *r.mutable_steps(1)->mutable_gather()->mutable_values() = Random<int32_t>(rng_, 10, 0, 63);
  ExpectRefused(r, absl::StatusCode::kInvalidArgument, "step 1: indices[");
  EXPECT_EQ(buffers_->Info("pipe-early").status().code(), absl::StatusCode::kNotFound);
  // Arrays that pair up only once the steps before ran: their lengths differ.
  r = GroupBy(5000, 64, false);
  *r.mutable_steps(3)->mutable_aggregate_by_key()->mutable_values() =
      Random<int64_t>(rng_, 3, 0, 9);
  ExpectRefused(r, absl::StatusCode::kInvalidArgument,
                "step 3: values has 3 elements but keys has");
  ExpectEqualsOneByOne(GroupBy(5000, 64, false));
}

TEST_F(PipelineTest, GatherAloneAgainstTheIndexLoop) {
  for (size_t n : {0, 1, 70000}) {
    std::vector<double> values(n + 3);
    for (double& v : values) v = std::uniform_real_distribution<double>(-1e9, 1e9)(rng_);
    std::vector<int64_t> indices(2 * n + 1);
    for (int64_t& i : indices) {
      i = std::uniform_int_distribution<int64_t>(0, static_cast<int64_t>(values.size()) - 1)(rng_);
    }
    v1::GatherRequest request;
    *request.mutable_values() = PackArray<double>(values);
    *request.mutable_indices() = PackArray<int64_t>(indices);
    absl::StatusOr<v1::GatherResponse> got = client_->Call(request);
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<double> expected;
    for (int64_t i : indices) expected.push_back(values[i]);
    absl::StatusOr<std::vector<double>> output = UnpackArray<double>(got->output());
    ASSERT_TRUE(output.ok());
    EXPECT_EQ(*output, expected);
  }
  v1::GatherRequest bad;
  *bad.mutable_values() = PackArray<int32_t>(std::vector<int32_t>{1, 2, 3});
  *bad.mutable_indices() = PackArray<int64_t>(std::vector<int64_t>{0, 2, -1, 3});
  const absl::Status status = client_->Call(bad).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("indices[2] = -1 is outside [0, len(values)=3)"));
  *bad.mutable_indices() = PackArray<int32_t>(std::vector<int32_t>{0, 2});
  const absl::Status int32_indices = client_->Call(bad).status();
  EXPECT_EQ(int32_indices.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(int32_indices.message()),
              HasSubstr("indices.dtype is INT32; Gather takes INT64 indices"));
  // And the server still answers.
  *bad.mutable_indices() = PackArray<int64_t>(std::vector<int64_t>{2, 0});
  absl::StatusOr<v1::GatherResponse> good = client_->Call(bad);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(*UnpackArray<int32_t>(good->output()), (std::vector<int32_t>{3, 1}));
}

}  // namespace
}  // namespace primserve
