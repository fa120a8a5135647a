// Resident buffers against a real server (loopback; the CPU backend, or the
// CUDA backend when built as cuda_buffers_gpu_test): round trips of every
// dtype; parallel Writes to disjoint ranges; every RPC and dtype with its
// inputs in buffers (whole and sub-ranges) and its outputs into buffers
// equals the inline answer, unary and through Multiplex; replacing a buffer
// and working in place; two callers kept apart; each quota; idle expiry;
// Free while a request uses the buffer; every error with its code, each
// followed by a good request answered.
#include <atomic>
#include <functional>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"
#include "tests/every_rpc.h"
#include "tests/holding_backend.h"
#include "tests/rpc_api.h"
#include "tests/unary_answer.h"
#ifdef PRIMSERVE_BUFFERS_TEST_CUDA
#include "server/cuda/cuda_backend.h"
#endif

namespace primserve {
namespace {

using ::testing::HasSubstr;

#ifdef PRIMSERVE_BUFFERS_TEST_CUDA
constexpr bool kCudaBackend = true;
std::unique_ptr<ExecutionBackend> TestBackend() {
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create({});
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) std::abort();
  return *std::move(backend);
}
#else
constexpr bool kCudaBackend = false;
std::unique_ptr<ExecutionBackend> TestBackend() { return std::make_unique<CpuBackend>(); }
#endif

v1::BufferRef Ref(const std::string& name, uint64_t offset = 0, uint64_t length = 0) {
  v1::BufferRef ref;
  ref.set_name(name);
  ref.set_offset(offset);
  ref.set_length(length);
  return ref;
}

// A client of the server's Primitives and Buffers, optionally sending the
// caller header.
class Caller {
 public:
  Caller(int port, std::string header_value = "")
      : channel_(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials())),
        primitives_(v1::Primitives::NewStub(channel_)),
        buffers_(v1::Buffers::NewStub(channel_)),
        header_value_(std::move(header_value)) {}

  void Prepare(grpc::ClientContext* context) const {
    if (!header_value_.empty()) context->AddMetadata("x-caller", header_value_);
  }

  grpc::Status Create(const std::string& name, v1::DType dtype, uint64_t length,
                      v1::BufferInfo* info = nullptr) {
    v1::CreateBufferRequest request;
    request.set_name(name);
    request.set_dtype(dtype);
    request.set_length(length);
    v1::BufferInfo ignored;
    grpc::ClientContext context;
    Prepare(&context);
    return buffers_->Create(&context, request, info != nullptr ? info : &ignored);
  }

  // One Write stream of the messages given.
  grpc::Status Write(const std::vector<v1::WriteBufferRequest>& messages,
                     uint64_t* elements_written = nullptr) {
    v1::WriteBufferResponse response;
    grpc::ClientContext context;
    Prepare(&context);
    auto stream = buffers_->Write(&context, &response);
    for (const v1::WriteBufferRequest& m : messages) {
      if (!stream->Write(m)) break;
    }
    stream->WritesDone();
    grpc::Status status = stream->Finish();
    if (elements_written != nullptr) *elements_written = response.elements_written();
    return status;
  }

  grpc::Status Write(const std::string& name, absl::string_view bytes, uint64_t offset = 0) {
    v1::WriteBufferRequest m;
    m.set_name(name);
    m.set_offset(offset);
    m.set_data(std::string(bytes));
    return Write({m});
  }

  // The buffer's bytes, and the pieces' offsets as they came.
  grpc::Status Read(const std::string& name, std::string* bytes, uint64_t offset = 0,
                    uint64_t length = 0, uint64_t piece_bytes = 0,
                    std::vector<uint64_t>* offsets = nullptr) {
    v1::ReadBufferRequest request;
    request.set_name(name);
    request.set_offset(offset);
    request.set_length(length);
    request.set_piece_bytes(piece_bytes);
    grpc::ClientContext context;
    Prepare(&context);
    auto stream = buffers_->Read(&context, request);
    v1::ReadBufferResponse piece;
    bytes->clear();
    int count = 0;
    while (stream->Read(&piece)) {
      ++count;
      if (offsets != nullptr) offsets->push_back(piece.offset());
      bytes->append(piece.data());
    }
    grpc::Status status = stream->Finish();
    EXPECT_TRUE(!status.ok() || count >= 1) << "a Read answered no piece";
    return status;
  }

  grpc::Status Free(const std::string& name) {
    v1::FreeBufferRequest request;
    request.set_name(name);
    v1::FreeBufferResponse response;
    grpc::ClientContext context;
    Prepare(&context);
    return buffers_->Free(&context, request, &response);
  }

  v1::ListBuffersResponse List() {
    v1::ListBuffersResponse response;
    grpc::ClientContext context;
    Prepare(&context);
    EXPECT_TRUE(buffers_->List(&context, v1::ListBuffersRequest(), &response).ok());
    return response;
  }

  // Create and Write at once: a buffer holding `array`.
  grpc::Status Put(const std::string& name, const v1::Array& array) {
    const uint64_t length = array.data().size() / DTypeSize(static_cast<DType>(array.dtype()));
    if (grpc::Status s = Create(name, array.dtype(), length); !s.ok()) return s;
    return Write(name, array.data());
  }

  // Without the caller header (the header tests call Scan).
  v1::MultiplexResponse Unary(const v1::MultiplexRequest& m, grpc::Status* status) {
    return UnaryAnswer(*primitives_, m, status);
  }

  grpc::Status Scan(const v1::ScanRequest& request, v1::ScanResponse* response) {
    grpc::ClientContext context;
    Prepare(&context);
    return primitives_->Scan(&context, request, response);
  }

  v1::Primitives::Stub& primitives() { return *primitives_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Primitives::Stub> primitives_;
  std::unique_ptr<v1::Buffers::Stub> buffers_;
  const std::string header_value_;
};

v1::ScanRequest ScanOf(const v1::BufferRef& ref, const std::string& output = "") {
  v1::ScanRequest request;
  *request.mutable_input()->mutable_buffer() = ref;
  request.set_op(v1::SUM);
  if (!output.empty()) request.mutable_output_buffers()->set_values(output);
  return request;
}

class BuffersTest : public ::testing::Test {
 protected:
  void Start(buffers::Limits limits = DefaultLimits(), std::string caller_header = "",
             std::unique_ptr<ExecutionBackend> backend = TestBackend()) {
    ServerOptions options;
    options.rpc_api = TestRpcApi();
    options.address = "127.0.0.1:0";
    options.buffer_limits = limits;
    options.caller_header = std::move(caller_header);
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::move(backend));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<Caller>(server_->port());
  }

  static buffers::Limits DefaultLimits() {
    buffers::Limits limits;
    limits.max_bytes = uint64_t{1} << 30;
    limits.location = "primserve-0:50051";
    return limits;
  }

  v1::MultiplexResponse Unary(const v1::MultiplexRequest& m) {
    grpc::Status status;
    v1::MultiplexResponse got = client_->Unary(m, &status);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return got;
  }

  grpc::Status ErrorOf(const v1::MultiplexRequest& m) {
    grpc::Status status;
    client_->Unary(m, &status);
    return status;
  }

  // The caller's bytes_used reaches `bytes` within a second: storage goes
  // when the last request holding it has been destroyed, which may be just
  // after its answer arrived.
  static void WaitForBytesUsed(Caller& caller, uint64_t bytes) {
    for (int i = 0; i < 100 && caller.List().bytes_used() != bytes; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_EQ(caller.List().bytes_used(), bytes);
  }

  // A small inline Scan, answered right.
  void ExpectAGoodRequestAnswered() {
    v1::ScanRequest request;
    *request.mutable_input() = PackArray<int32_t>(std::vector<int32_t>{1, 2, 3});
    request.set_op(v1::SUM);
    v1::ScanResponse response;
    ASSERT_TRUE(client_->Scan(request, &response).ok());
    EXPECT_EQ(UnpackArray<int32_t>(response.output()).value(), (std::vector<int32_t>{1, 3, 6}));
  }

  // Moves every input array of `m` into a buffer of its own (odd ids whole,
  // even ids as a sub-range between other elements, with the dtype given)
  // and names a buffer for every output its RPC produces.
  void ToBuffers(v1::MultiplexRequest* m) {
    google::protobuf::Message* request = Inner(m);
    const auto* reflection = request->GetReflection();
    std::vector<const google::protobuf::FieldDescriptor*> fields;
    reflection->ListFields(*request, &fields);
    const std::string prefix = absl::StrCat("r", m->id(), ".");
    for (const auto* field : fields) {
      if (field->message_type() != v1::Array::descriptor()) continue;
      auto* array = static_cast<v1::Array*>(reflection->MutableMessage(request, field));
      const std::string name = prefix + field->name();
      const size_t size = DTypeSize(static_cast<DType>(array->dtype()));
      const uint64_t n = array->data().size() / size;
      if (m->id() % 2 == 1) {
        ASSERT_TRUE(client_->Put(name, *array).ok());
        array->clear_dtype();
        *array->mutable_buffer() = Ref(name);
      } else {
        ASSERT_TRUE(client_->Create(name, array->dtype(), n + 7).ok());
        ASSERT_TRUE(client_->Write(name, array->data(), 5).ok());
        *array->mutable_buffer() = Ref(name, 5, n);
      }
      array->clear_data();
    }
    auto* outputs = static_cast<v1::OutputBuffers*>(reflection->MutableMessage(
        request, request->GetDescriptor()->FindFieldByName("output_buffers")));
    switch (m->request_case()) {
      case v1::MultiplexRequest::kReduce:
        outputs->set_values(prefix + "values");
        if (m->reduce().op() == v1::ARGMIN || m->reduce().op() == v1::ARGMAX) {
          outputs->set_indices(prefix + "indices");
        }
        break;
      case v1::MultiplexRequest::kSelect:
        if (m->select().output() != v1::SelectRequest::INDICES &&
            m->select().output() != v1::SelectRequest::COUNT) {
          outputs->set_values(prefix + "values");
        }
        if (m->select().output() == v1::SelectRequest::INDICES ||
            m->select().output() == v1::SelectRequest::VALUES_AND_INDICES) {
          outputs->set_indices(prefix + "indices");
        }
        break;
      case v1::MultiplexRequest::kRunLengthEncode:
        outputs->set_values(prefix + "values");
        outputs->set_lengths(prefix + "lengths");
        break;
      case v1::MultiplexRequest::kReduceByKey:
        outputs->set_keys(prefix + "keys");
        outputs->set_values(prefix + "values");
        break;
      default:
        outputs->set_values(prefix + "values");
    }
  }

  // The response with every Array (each must name a buffer) read back
  // inline, as the inline call answers.
  void ReadBack(google::protobuf::Message* response) {
    const auto* reflection = response->GetReflection();
    std::vector<const google::protobuf::FieldDescriptor*> fields;
    reflection->ListFields(*response, &fields);
    for (const auto* field : fields) {
      if (field->message_type() == v1::Array::descriptor()) {
        auto* array = static_cast<v1::Array*>(reflection->MutableMessage(response, field));
        EXPECT_TRUE(array->has_buffer()) << field->full_name() << " came back inline";
        EXPECT_TRUE(array->data().empty());
        EXPECT_EQ(array->buffer().offset(), 0u);
        std::string bytes;
        EXPECT_TRUE(client_->Read(array->buffer().name(), &bytes).ok());
        EXPECT_EQ(bytes.size(),
                  array->buffer().length() * DTypeSize(static_cast<DType>(array->dtype())));
        array->set_data(bytes);
        array->clear_buffer();
      } else if (field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE &&
                 !field->is_repeated()) {
        ReadBack(reflection->MutableMessage(response, field));
      }
    }
  }

  std::unique_ptr<PrimServer> server_;
  std::unique_ptr<Caller> client_;
};

TEST_F(BuffersTest, EveryDtypeRoundTrips) {
  Start();
  std::mt19937 rng(3);
  const v1::DType dtypes[] = {v1::INT32, v1::INT64, v1::UINT32, v1::UINT64, v1::FLOAT32,
                              v1::FLOAT64};
  for (v1::DType dtype : dtypes) {
    SCOPED_TRACE(v1::DType_Name(dtype));
    const size_t size = DTypeSize(static_cast<DType>(dtype));
    const uint64_t n = 1001;
    std::string bytes(n * size, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    const std::string name = absl::StrCat("rt.", v1::DType_Name(dtype));
    v1::BufferInfo info;
    ASSERT_TRUE(client_->Create(name, dtype, n, &info).ok());
    EXPECT_EQ(info.name(), name);
    EXPECT_EQ(info.dtype(), dtype);
    EXPECT_EQ(info.length(), n);
    EXPECT_EQ(info.device_id() >= 0, kCudaBackend);
    EXPECT_EQ(info.location(), "primserve-0:50051");
    EXPECT_GT(info.expires_in_seconds(), 3500);
    // Zeroed at first.
    std::string read;
    ASSERT_TRUE(client_->Read(name, &read).ok());
    EXPECT_EQ(read, std::string(n * size, '\0'));
    // The second half in two messages (the second continuing after the
    // first), then the first half in another stream.
    std::vector<v1::WriteBufferRequest> messages(2);
    messages[0].set_name(name);
    messages[0].set_offset(500);
    messages[0].set_data(bytes.substr(500 * size, 300 * size));
    messages[1].set_data(bytes.substr(800 * size));
    uint64_t written = 0;
    ASSERT_TRUE(client_->Write(messages, &written).ok());
    EXPECT_EQ(written, n - 500);
    ASSERT_TRUE(client_->Write(name, bytes.substr(0, 500 * size), 0).ok());
    std::vector<uint64_t> offsets;
    // 100 elements a piece (piece_bytes rounds down to whole elements).
    ASSERT_TRUE(client_->Read(name, &read, 0, 0, 100 * size + 3, &offsets).ok());
    EXPECT_EQ(read, bytes);
    EXPECT_THAT(offsets, ::testing::ElementsAre(0, 100, 200, 300, 400, 500, 600, 700, 800, 900,
                                                1000));
    // A sub-range.
    ASSERT_TRUE(client_->Read(name, &read, 10, 20).ok());
    EXPECT_EQ(read, bytes.substr(10 * size, 20 * size));
    ASSERT_TRUE(client_->Read(name, &read, n, 0).ok());  // empty: one empty piece
    EXPECT_TRUE(read.empty());
  }
  const v1::ListBuffersResponse list = client_->List();
  ASSERT_EQ(list.buffers_size(), 6);
  EXPECT_EQ(list.buffers(0).name(), "rt.FLOAT32");  // by name
  EXPECT_EQ(list.bytes_used(), 1001u * (4 + 8 + 4 + 8 + 4 + 8));
  EXPECT_EQ(list.bytes_limit(), uint64_t{1} << 30);
}

TEST_F(BuffersTest, AWriteContinuesAfterThePreviousMessage) {
  Start();
  ASSERT_TRUE(client_->Create("c", v1::INT32, 6).ok());
  std::vector<v1::WriteBufferRequest> messages(3);
  messages[0].set_name("c");
  messages[0].set_offset(1);
  messages[0].set_data(PackArray<int32_t>(std::vector<int32_t>{1, 2}).data());
  messages[1].set_data(PackArray<int32_t>(std::vector<int32_t>{3}).data());  // at 3
  messages[2].set_name("c");
  messages[2].set_data(PackArray<int32_t>(std::vector<int32_t>{4, 5}).data());  // at 4
  uint64_t written = 0;
  ASSERT_TRUE(client_->Write(messages, &written).ok());
  EXPECT_EQ(written, 5u);
  std::string read;
  ASSERT_TRUE(client_->Read("c", &read).ok());
  v1::Array array;
  array.set_dtype(v1::INT32);
  array.set_data(read);
  EXPECT_EQ(UnpackArray<int32_t>(array).value(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
}

TEST_F(BuffersTest, ParallelWritesToDisjointRanges) {
  Start();
  constexpr int kWriters = 8;
  constexpr uint64_t kPer = 100000;
  ASSERT_TRUE(client_->Create("big", v1::INT64, kWriters * kPer).ok());
  std::vector<int64_t> all(kWriters * kPer);
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i * 2654435761u);
  std::vector<std::thread> writers;
  std::atomic<int> failed{0};
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      Caller own(server_->port());  // a connection of its own, as a striping client has
      std::vector<v1::WriteBufferRequest> messages;
      for (uint64_t at = w * kPer; at < (w + 1) * kPer; at += 10000) {
        v1::WriteBufferRequest m;
        if (messages.empty()) m.set_name("big");
        m.set_offset(at);
        m.set_data(std::string(reinterpret_cast<const char*>(&all[at]), 10000 * 8));
        messages.push_back(std::move(m));
      }
      if (!own.Write(messages).ok()) ++failed;
    });
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(failed.load(), 0);
  std::string read;
  ASSERT_TRUE(client_->Read("big", &read).ok());
  ASSERT_EQ(read.size(), all.size() * 8);
  EXPECT_EQ(std::memcmp(read.data(), all.data(), read.size()), 0);
}

TEST_F(BuffersTest, EveryRpcAndDtypeFromBuffersEqualsTheInlineAnswer) {
  Start();
  for (const v1::MultiplexRequest& inline_request : EveryRpcAndDtype()) {
    v1::MultiplexRequest buffered = inline_request;
    ToBuffers(&buffered);
    v1::MultiplexResponse got = Unary(buffered);
    ReadBack(&got);
    EXPECT_EQ(got.SerializeAsString(), Unary(inline_request).SerializeAsString())
        << inline_request.ShortDebugString().substr(0, 200);
  }
}

TEST_F(BuffersTest, MultiplexTakesBuffersAsUnaryCallsDo) {
  Start();
  const std::vector<v1::MultiplexRequest> requests = EveryRpcAndDtype();
  std::vector<v1::MultiplexRequest> buffered = requests;
  for (v1::MultiplexRequest& m : buffered) ToBuffers(&m);
  grpc::ClientContext context;
  auto stream = client_->primitives().Multiplex(&context);
  for (const v1::MultiplexRequest& m : buffered) ASSERT_TRUE(stream->Write(m));
  ASSERT_TRUE(stream->WritesDone());
  std::map<uint64_t, v1::MultiplexResponse> answers;
  v1::MultiplexResponse answer;
  while (stream->Read(&answer)) answers[answer.id()] = answer;
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(answers.size(), requests.size());
  for (const v1::MultiplexRequest& r : requests) {
    v1::MultiplexResponse& got = answers[r.id()];
    ASSERT_EQ(got.code(), 0) << got.message();
    ReadBack(&got);
    EXPECT_EQ(got.SerializeAsString(), Unary(r).SerializeAsString())
        << r.ShortDebugString().substr(0, 200);
  }
}

TEST_F(BuffersTest, AnOutputReplacesABufferAndMayWorkInPlace) {
  Start();
  ASSERT_TRUE(client_->Put("x", PackArray<int32_t>(std::vector<int32_t>{1, 2, 3, 4})).ok());
  // In place: the scan of x into x, twice.
  for (const std::vector<int32_t>& want :
       {std::vector<int32_t>{1, 3, 6, 10}, std::vector<int32_t>{1, 4, 10, 20}}) {
    v1::ScanResponse response;
    ASSERT_TRUE(client_->Scan(ScanOf(Ref("x"), "x"), &response).ok());
    EXPECT_EQ(response.output().buffer().name(), "x");
    EXPECT_EQ(response.output().buffer().length(), 4u);
    EXPECT_EQ(response.output().dtype(), v1::INT32);
    std::string read;
    ASSERT_TRUE(client_->Read("x", &read).ok());
    v1::Array array;
    array.set_dtype(v1::INT32);
    array.set_data(read);
    EXPECT_EQ(UnpackArray<int32_t>(array).value(), want);
  }
  // Replacing takes the output's dtype and length: Select's INT64 indices
  // of a part of x into x.
  v1::MultiplexRequest m;
  auto* select = m.mutable_select();
  *select->mutable_input()->mutable_buffer() = Ref("x", 1, 3);
  select->mutable_predicate()->set_kind(v1::Predicate::GT);
  select->mutable_predicate()->mutable_operand()->set_int_value(5);
  select->set_output(v1::SelectRequest::INDICES);
  select->mutable_output_buffers()->set_indices("x");
  const v1::MultiplexResponse got = Unary(m);
  EXPECT_EQ(got.select().count(), 2u);
  const v1::ListBuffersResponse list = client_->List();
  ASSERT_EQ(list.buffers_size(), 1);
  EXPECT_EQ(list.buffers(0).dtype(), v1::INT64);
  EXPECT_EQ(list.buffers(0).length(), 2u);
  std::string read;
  ASSERT_TRUE(client_->Read("x", &read).ok());
  v1::Array array;
  array.set_dtype(v1::INT64);
  array.set_data(read);
  EXPECT_EQ(UnpackArray<int64_t>(array).value(), (std::vector<int64_t>{1, 2}));
  // The old contents go once the requests that held them are done.
  WaitForBytesUsed(*client_, 16);
}

TEST_F(BuffersTest, CallersAreKeptApartByTheCallerHeader) {
  Start(DefaultLimits(), "x-caller");
  Caller alice(server_->port(), "alice"), bob(server_->port(), "bob");
  ASSERT_TRUE(alice.Put("data", PackArray<int32_t>(std::vector<int32_t>{1, 2})).ok());
  std::string read;
  EXPECT_EQ(bob.Read("data", &read).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(bob.Write("data", std::string(4, 'x')).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(bob.Free("data").error_code(), grpc::StatusCode::NOT_FOUND);
  v1::ScanResponse response;
  const grpc::Status scan = bob.Scan(ScanOf(Ref("data")), &response);
  EXPECT_EQ(scan.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(scan.error_message(), HasSubstr("no buffer named data"));
  EXPECT_EQ(bob.List().buffers_size(), 0);
  // Bob's own buffer of that name is another.
  ASSERT_TRUE(bob.Put("data", PackArray<int64_t>(std::vector<int64_t>{7})).ok());
  ASSERT_TRUE(alice.Scan(ScanOf(Ref("data")), &response).ok());
  EXPECT_EQ(UnpackArray<int32_t>(response.output()).value(), (std::vector<int32_t>{1, 3}));
  ASSERT_TRUE(bob.Scan(ScanOf(Ref("data")), &response).ok());
  EXPECT_EQ(UnpackArray<int64_t>(response.output()).value(), (std::vector<int64_t>{7}));
  EXPECT_EQ(alice.List().buffers_size(), 1);
  // Without the header: the peer's address, a third namespace.
  EXPECT_EQ(client_->List().buffers_size(), 0);
  EXPECT_EQ(client_->Read("data", &read).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(BuffersTest, EachQuotaIsResourceExhaustedNamingIt) {
  buffers::Limits limits = DefaultLimits();
  limits.max_bytes = 4096;
  limits.max_bytes_per_caller = 1024;
  limits.max_buffers_per_caller = 3;
  Start(limits, "x-caller");
  Caller a(server_->port(), "a"), b(server_->port(), "b"), c(server_->port(), "c"),
      d(server_->port(), "d"), e(server_->port(), "e");
  ASSERT_TRUE(a.Create("one", v1::INT32, 200).ok());  // 800 bytes
  grpc::Status refused = a.Create("two", v1::INT32, 57);  // 228 more
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max_buffer_bytes_per_caller=1024"));
  // An output past the quota: refused before the request runs (size known).
  v1::ScanResponse response;
  refused = a.Scan(ScanOf(Ref("one"), "copy"), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max_buffer_bytes_per_caller=1024"));
  WaitForBytesUsed(a, 800);
  EXPECT_EQ(a.List().bytes_limit(), 1024u);
  // All callers together: 4096 bytes.
  for (Caller* caller : {&b, &c, &d}) ASSERT_TRUE(caller->Create("one", v1::INT32, 256).ok());
  refused = e.Create("one", v1::INT32, 100);  // 3872 + 400
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max_buffer_bytes=4096"));
  EXPECT_EQ(e.List().bytes_used(), 0u);
  // Buffers per caller: 3.
  EXPECT_EQ(e.Free("one").error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(a.Create("e1", v1::INT32, 0).ok());
  ASSERT_TRUE(a.Create("e2", v1::INT32, 0).ok());
  refused = a.Create("e3", v1::INT32, 0);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max_buffers_per_caller=3"));
  // Freeing makes room.
  ASSERT_TRUE(a.Free("e1").ok());
  EXPECT_TRUE(a.Create("e3", v1::INT32, 0).ok());
  ExpectAGoodRequestAnswered();
}

TEST_F(BuffersTest, IdleBuffersAreDropped) {
  buffers::Limits limits = DefaultLimits();
  limits.idle = absl::Milliseconds(300);
  Start(limits);
  ASSERT_TRUE(client_->Put("idle", PackArray<int32_t>(std::vector<int32_t>{1})).ok());
  ASSERT_TRUE(client_->Put("used", PackArray<int32_t>(std::vector<int32_t>{2})).ok());
  const v1::ListBuffersResponse list = client_->List();
  ASSERT_EQ(list.buffers_size(), 2);
  EXPECT_GT(list.buffers(0).expires_in_seconds(), 0.1);
  EXPECT_LE(list.buffers(0).expires_in_seconds(), 0.3);
  v1::ScanResponse response;
  for (int i = 0; i < 8; ++i) {
    absl::SleepFor(absl::Milliseconds(75));
    ASSERT_TRUE(client_->Scan(ScanOf(Ref("used")), &response).ok());  // a use restarts it
  }
  std::string read;
  EXPECT_EQ(client_->Read("idle", &read).error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(client_->Read("used", &read).ok());
  WaitForBytesUsed(*client_, 4);  // the expiry thread freed the idle one
}

TEST_F(BuffersTest, FreeWhileARequestUsesTheBuffer) {
  if (kCudaBackend) GTEST_SKIP() << "holds requests on the CPU backend";
  auto backend = std::make_unique<HoldingBackend>(Rpc::kScan);
  HoldingBackend* holding = backend.get();
  Start(DefaultLimits(), "", std::move(backend));
  ASSERT_TRUE(client_->Put("x", PackArray<int32_t>(std::vector<int32_t>{5, 6, 7})).ok());
  v1::ScanResponse held_response;
  grpc::Status held_status;
  std::thread held([&] { held_status = client_->Scan(ScanOf(Ref("x")), &held_response); });
  holding->arrived_.WaitForNotification();
  ASSERT_TRUE(client_->Free("x").ok());
  EXPECT_EQ(client_->List().buffers_size(), 0);
  EXPECT_EQ(client_->List().bytes_used(), 12u);  // still held by the request
  // A new buffer of that name does not change what the held request reads.
  ASSERT_TRUE(client_->Put("x", PackArray<int32_t>(std::vector<int32_t>{0, 0, 0})).ok());
  holding->release_.Notify();
  held.join();
  ASSERT_TRUE(held_status.ok()) << held_status.error_message();
  EXPECT_EQ(UnpackArray<int32_t>(held_response.output()).value(),
            (std::vector<int32_t>{5, 11, 18}));
  WaitForBytesUsed(*client_, 12);  // the old contents go with the request
  ASSERT_TRUE(client_->Free("x").ok());
  v1::ScanResponse response;
  EXPECT_EQ(client_->Scan(ScanOf(Ref("x")), &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(BuffersTest, EachErrorHasItsCodeAndTheNextRequestIsAnswered) {
  Start();
  ASSERT_TRUE(client_->Put("x", PackArray<int32_t>(std::vector<int32_t>{1, 2, 3})).ok());
  struct Case {
    std::string what;
    std::function<grpc::Status()> call;
    grpc::StatusCode code;
    std::string message;
  };
  auto scan = [this](v1::ScanRequest request) {
    return [this, request] {
      v1::ScanResponse response;
      return client_->Scan(request, &response);
    };
  };
  v1::ScanRequest both = ScanOf(Ref("x"));
  both.mutable_input()->set_data(std::string(4, '\0'));
  v1::ScanRequest wrong_dtype = ScanOf(Ref("x"));
  wrong_dtype.mutable_input()->set_dtype(v1::FLOAT32);
  v1::ScanRequest not_produced = ScanOf(Ref("x"));
  not_produced.mutable_output_buffers()->set_lengths("l");
  v1::ScanRequest bad_output = ScanOf(Ref("x"), "no/slash");
  std::string read;
  const std::vector<Case> cases = {
      {"unknown name", [&] { return client_->Read("nope", &read); },
       grpc::StatusCode::NOT_FOUND, "no buffer named nope"},
      {"unknown input", scan(ScanOf(Ref("nope"))), grpc::StatusCode::NOT_FOUND,
       "no buffer named nope"},
      {"unknown free", [&] { return client_->Free("nope"); }, grpc::StatusCode::NOT_FOUND,
       "no buffer named nope"},
      {"create taken", [&] { return client_->Create("x", v1::INT32, 1); },
       grpc::StatusCode::ALREADY_EXISTS, "already holds a buffer named x"},
      {"bad name", [&] { return client_->Create("a b", v1::INT32, 1); },
       grpc::StatusCode::INVALID_ARGUMENT, "[A-Za-z0-9._-]"},
      {"long name", [&] { return client_->Create(std::string(129, 'a'), v1::INT32, 1); },
       grpc::StatusCode::INVALID_ARGUMENT, "129 characters"},
      {"no dtype", [&] { return client_->Create("y", v1::DTYPE_UNSPECIFIED, 1); },
       grpc::StatusCode::INVALID_ARGUMENT, "dtype 0"},
      {"read past end", [&] { return client_->Read("x", &read, 2, 2); },
       grpc::StatusCode::INVALID_ARGUMENT, "past the end of buffer x (3 elements)"},
      {"write past end", [&] { return client_->Write("x", std::string(8, 'a'), 2); },
       grpc::StatusCode::INVALID_ARGUMENT, "elements [2, 4) are past the end of buffer x"},
      {"partial element", [&] { return client_->Write("x", std::string(5, 'a')); },
       grpc::StatusCode::INVALID_ARGUMENT, "not whole 4-byte INT32 elements"},
      {"ref past end", scan(ScanOf(Ref("x", 1, 3))), grpc::StatusCode::INVALID_ARGUMENT,
       "input.buffer [1, +3) is past the end of buffer x (3 elements)"},
      {"data and buffer", scan(both), grpc::StatusCode::INVALID_ARGUMENT,
       "input has data and buffer; set one of data, shm and buffer"},
      {"dtype mismatch", scan(wrong_dtype), grpc::StatusCode::INVALID_ARGUMENT,
       "input.dtype is FLOAT32 but buffer x holds INT32 elements"},
      {"output not produced", scan(not_produced), grpc::StatusCode::INVALID_ARGUMENT,
       "output_buffers.lengths is set but this Scan request produces no lengths"},
      {"bad output name", scan(bad_output), grpc::StatusCode::INVALID_ARGUMENT,
       "output_buffers.values holds the character 0x2f"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const grpc::Status status = c.call();
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
    ExpectAGoodRequestAnswered();
  }
  // The buffer is as it was.
  ASSERT_TRUE(client_->Read("x", &read).ok());
  EXPECT_EQ(read, PackArray<int32_t>(std::vector<int32_t>{1, 2, 3}).data());
}

TEST_F(BuffersTest, TheStreamingRpcsRefuseBuffers) {
  Start();
  ASSERT_TRUE(client_->Put("x", PackArray<int32_t>(std::vector<int32_t>{1, 2, 3})).ok());
  for (bool output : {false, true}) {
    v1::ScanRequest request;
    if (output) {
      *request.mutable_input() = PackArray<int32_t>(std::vector<int32_t>{1});
      request.mutable_output_buffers()->set_values("y");
    } else {
      *request.mutable_input()->mutable_buffer() = Ref("x");
    }
    request.set_op(v1::SUM);
    grpc::ClientContext context;
    auto stream = client_->primitives().ScanStream(&context);
    stream->Write(request);
    stream->WritesDone();
    v1::ScanResponse response;
    while (stream->Read(&response)) {
    }
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("resident buffers"));
  }
  ExpectAGoodRequestAnswered();
}

// On the CUDA backend, over 64 MiB: a scan reads its buffer in device
// memory and writes its output buffer there.
TEST_F(BuffersTest, ANewBufferReadsZerosWhereAFreedOneLay) {
  Start();
  const uint64_t n = kCudaBackend ? uint64_t{1} << 22 : uint64_t{1} << 16;
  std::mt19937 rng(11);
  for (int round = 0; round < 4; ++round) {
    ASSERT_TRUE(client_->Create("z", v1::INT32, n).ok());
    std::string read;
    ASSERT_TRUE(client_->Read("z", &read).ok());
    ASSERT_EQ(read.size(), n * 4);
    EXPECT_EQ(read.find_first_not_of('\0'), std::string::npos) << "round " << round;
    std::vector<int32_t> noise(n);
    for (int32_t& x : noise) x = static_cast<int32_t>(rng()) | 1;
    ASSERT_TRUE(client_->Write("z", PackArray<int32_t>(noise).data()).ok());
    ASSERT_TRUE(client_->Free("z").ok());
  }
}

// Each scan's output replaces the buffer the one before read, so frees of
// memory that queued kernels may still read run beside new allocations, on
// two callers at once; every answer is checked at the end.
TEST_F(BuffersTest, ScansChainedThroughReplacedBuffersStayRight) {
  Start();
  const uint64_t n = kCudaBackend ? uint64_t{1} << 22 : uint64_t{1} << 14;
  constexpr int kSteps = 12;
  auto chain = [&](const std::string& a, const std::string& b, uint32_t seed) {
    Caller caller(server_->port());
    std::mt19937 rng(seed);
    std::vector<int32_t> want(n);
    for (int32_t& x : want) x = static_cast<int32_t>(rng() % 7) - 3;
    ASSERT_TRUE(caller.Put(a, PackArray<int32_t>(want)).ok());
    for (int step = 0; step < kSteps; ++step) {
      v1::ScanResponse response;
      const bool forth = step % 2 == 0;
      ASSERT_TRUE(caller.Scan(ScanOf(Ref(forth ? a : b), forth ? b : a), &response).ok());
      uint32_t sum = 0;  // int32 SUM wraps
      for (int32_t& x : want) x = static_cast<int32_t>(sum += static_cast<uint32_t>(x));
    }
    std::string read;
    ASSERT_TRUE(caller.Read(kSteps % 2 == 0 ? a : b, &read).ok());
    ASSERT_EQ(read.size(), n * 4);
    EXPECT_EQ(std::memcmp(read.data(), want.data(), read.size()), 0) << a;
  };
  std::thread other([&] { chain("c.a", "c.b", 2); });
  chain("d.a", "d.b", 3);
  other.join();
  ExpectAGoodRequestAnswered();
}

TEST_F(BuffersTest, ALargeScanFromABufferIntoABuffer) {
  Start();
  const uint64_t n = kCudaBackend ? uint64_t{3} << 23 : uint64_t{1} << 20;
  std::mt19937 rng(7);
  std::vector<int32_t> input(n);
  for (int32_t& x : input) x = static_cast<int32_t>(rng());
  ASSERT_TRUE(client_->Put("in", PackArray<int32_t>(input)).ok());
  v1::ScanResponse response;
  ASSERT_TRUE(client_->Scan(ScanOf(Ref("in"), "out"), &response).ok());
  EXPECT_EQ(response.output().buffer().length(), n);
  std::string read;
  ASSERT_TRUE(client_->Read("out", &read).ok());
  ASSERT_EQ(read.size(), n * 4);
  uint32_t sum = 0;  // int32 SUM wraps
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < n; ++i) {
    sum += static_cast<uint32_t>(input[i]);
    int32_t got;
    std::memcpy(&got, read.data() + i * 4, 4);
    wrong += got != static_cast<int32_t>(sum);
  }
  EXPECT_EQ(wrong, 0u) << "of " << n;
  ExpectAGoodRequestAnswered();
}

// accumulator_dtype from and into buffers (on the CUDA backend the kernels
// read and write device memory in place): INT32 into INT64 does not wrap; an
// output naming the input buffer replaces it with the wider answer; a
// Reduce's wider value lands in a buffer too.
TEST_F(BuffersTest, AWiderAccumulatorFromAndIntoBuffers) {
  Start();
  const uint64_t n = kCudaBackend ? (uint64_t{1} << 22) + 3 : (uint64_t{1} << 14) + 3;
  std::mt19937 rng(11);
  std::vector<int32_t> input(n);
  for (int32_t& x : input) x = static_cast<int32_t>(rng());
  std::vector<int64_t> want(n);
  int64_t sum = 0;
  for (uint64_t i = 0; i < n; ++i) want[i] = sum += input[i];
  auto read_int64 = [&](const std::string& name) {
    std::string read;
    EXPECT_TRUE(client_->Read(name, &read).ok());
    std::vector<int64_t> values(read.size() / 8);
    std::memcpy(values.data(), read.data(), values.size() * 8);
    return values;
  };
  ASSERT_TRUE(client_->Put("in", PackArray<int32_t>(input)).ok());
  v1::MultiplexRequest m;
  *m.mutable_reduce()->mutable_input()->mutable_buffer() = Ref("in");
  m.mutable_reduce()->set_op(v1::SUM);
  m.mutable_reduce()->set_accumulator_dtype(v1::INT64);
  m.mutable_reduce()->mutable_output_buffers()->set_values("total");
  const v1::MultiplexResponse got = Unary(m);
  EXPECT_EQ(got.reduce().values().dtype(), v1::INT64);
  EXPECT_EQ(read_int64("total"), std::vector<int64_t>{want.back()});
  for (const std::string output : {"wide", "in"}) {  // beside, then over the input
    v1::ScanRequest request = ScanOf(Ref("in"), output);
    request.set_accumulator_dtype(v1::INT64);
    v1::ScanResponse response;
    ASSERT_TRUE(client_->Scan(request, &response).ok()) << output;
    EXPECT_EQ(response.output().dtype(), v1::INT64) << output;
    EXPECT_EQ(response.output().buffer().length(), n) << output;
    EXPECT_TRUE(read_int64(output) == want) << output;
  }
  ExpectAGoodRequestAnswered();
}

}  // namespace
}  // namespace primserve
