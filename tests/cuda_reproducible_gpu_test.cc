// Reproducible float SUM/PROD on the CUDA backend (issue 18), through the
// real gRPC path: each float32/float64 SUM and PROD scan and reduce request
// (1K to 5M elements, random data from fresh seeds, printed) is sent alone 5
// times, batched among 64 random other requests 5 times (sent at once, so
// that the batcher fuses them: a counting backend checks that batches of
// reproducible requests really formed), and streamed in random piece sizes 5
// times; every answer must be bit-identical to the first. Needs a GPU
// (tagged "gpu").
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/cuda/cuda_backend.h"
#include "server/server.h"
#include "tests/batch_counting_backend.h"

namespace primserve {
namespace {

using S = v1::Primitives::Stub;

class ReproducibleTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<CudaBackend>> cuda = CudaBackend::Create({});
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    std::printf("GPU: %s\n", (*cuda)->device_names().c_str());
    // Counts the batches of more than one reproducible request.
    auto counting = std::make_unique<BatchCountingBackend>(
        *std::move(cuda), [](const BatchKey& key) { return key.reproducible; });
    backend_ = counting.get();
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.limits.reproducible_floats = true;
    // One worker, so that requests gather while it is busy.
    options.batcher.num_threads = 1;
    options.batcher.max_batch_size = 128;
    options.batcher.batch_timeout_micros = 2000;
    options.batcher.max_batch_items = uint64_t{1} << 24;
    options.batcher.large_request_items = uint64_t{1} << 23;
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::move(counting));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    channel_ = new std::shared_ptr<grpc::Channel>(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials(), args));
  }

  static inline BatchCountingBackend* backend_ = nullptr;
  static inline PrimServer* server_ = nullptr;
  static inline std::shared_ptr<grpc::Channel>* channel_ = nullptr;
};

std::unique_ptr<S> Stub() { return v1::Primitives::NewStub(*ReproducibleTest::channel_); }

template <typename T>
v1::Array RandomArray(std::mt19937_64& rng, size_t n, v1::Op op) {
  std::uniform_real_distribution<double> sum(-1000, 1000);
  std::uniform_real_distribution<double> near_one(0.999, 1.001);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(op == v1::PROD ? near_one(rng) : sum(rng));
  return PackArray<T>(v);
}

// The answer's bytes; empty (and a failure) if the call failed.
std::string Unary(const v1::ScanRequest& request) {
  grpc::ClientContext context;
  v1::ScanResponse response;
  const grpc::Status status = Stub()->Scan(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.output().data();
}
std::string Unary(const v1::ReduceRequest& request) {
  grpc::ClientContext context;
  v1::ReduceResponse response;
  const grpc::Status status = Stub()->Reduce(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.values().data();
}

// `whole` in pieces of random sizes (empty ones among them), the first with
// every parameter.
template <typename Request>
std::vector<Request> Pieces(const Request& whole, size_t element, std::mt19937_64& rng) {
  const std::string& data = whole.input().data();
  const size_t n = data.size() / element;
  const size_t most = 1 + rng() % std::max<size_t>(1, n / 3);
  std::vector<Request> pieces;
  size_t start = 0;
  do {
    const size_t size = rng() % 7 == 0 ? 0 : std::min(n - start, 1 + rng() % most);
    Request piece;
    if (pieces.empty()) piece = whole;
    piece.mutable_input()->set_dtype(whole.input().dtype());
    piece.mutable_input()->set_data(data.substr(start * element, size * element));
    pieces.push_back(std::move(piece));
    start += size;
  } while (start < n);
  return pieces;
}

std::string Streamed(const v1::ScanRequest& whole, size_t element, std::mt19937_64& rng) {
  const std::vector<v1::ScanRequest> pieces = Pieces(whole, element, rng);
  grpc::ClientContext context;
  auto stub = Stub();
  auto stream = stub->ScanStream(&context);
  std::thread writer([&] {
    for (const v1::ScanRequest& piece : pieces) {
      if (!stream->Write(piece)) break;
    }
    stream->WritesDone();
  });
  std::string joined;
  v1::ScanResponse answer;
  while (stream->Read(&answer)) joined += answer.output().data();
  writer.join();
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  return joined;
}

std::string Streamed(const v1::ReduceRequest& whole, size_t element, std::mt19937_64& rng) {
  const std::vector<v1::ReduceRequest> pieces = Pieces(whole, element, rng);
  grpc::ClientContext context;
  v1::ReduceResponse answer;
  auto stub = Stub();
  auto stream = stub->ReduceStream(&context, &answer);
  for (const v1::ReduceRequest& piece : pieces) {
    if (!stream->Write(piece)) break;
  }
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  return answer.values().data();
}

// `request` sent at once with 64 random others of its op and dtype (small
// ones, a few segmented), so that the batcher fuses them; its answer.
template <typename T, typename Request>
std::string Batched(const Request& request, std::mt19937_64& rng) {
  std::vector<Request> others(64);
  for (Request& other : others) {
    other = request;
    const size_t n = 1 + rng() % 4000;
    *other.mutable_input() = RandomArray<T>(rng, n, request.op());
    other.clear_segment_offsets();
    if (rng() % 4 == 0) {
      other.add_segment_offsets(0);
      other.add_segment_offsets(rng() % (n + 1));
    }
  }
  std::string answer;
  std::vector<std::thread> callers;
  for (size_t i = 0; i <= others.size(); ++i) {
    callers.emplace_back([&, i] {
      if (i == others.size() / 2) {
        answer = Unary(request);
      } else {
        Unary(others[i < others.size() / 2 ? i : i - 1]);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  return answer;
}

// Alone, batched and streamed, 5 times each: one set of bits.
template <typename T, typename Request>
void ExpectOneAnswer(const Request& request, const std::string& what, std::mt19937_64& rng) {
  const std::string first = Unary(request);
  ASSERT_FALSE(first.empty()) << what;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Unary(request), first) << what << ": alone, run " << i;
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ((Batched<T>(request, rng)), first) << what << ": batched, run " << i;
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Streamed(request, sizeof(T), rng), first) << what << ": streamed, run " << i;
  }
}

template <typename T>
void RunAll(v1::DType dtype) {
  const uint64_t seed = std::random_device()();
  std::printf("%s seed %llu\n", v1::DType_Name(dtype).c_str(),
              static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const int batches_before = ReproducibleTest::backend_->batches();
  for (size_t n : {size_t{1000}, size_t{3000}, size_t{100000}, size_t{1} << 20,
                   size_t{5000000}}) {
    for (v1::Op op : {v1::SUM, v1::PROD}) {
      const std::string what =
          absl::StrCat(v1::DType_Name(dtype), " ", v1::Op_Name(op), " n=", n, " seed ", seed);
      for (bool exclusive : {false, true}) {
        v1::ScanRequest scan;
        *scan.mutable_input() = RandomArray<T>(rng, n, op);
        scan.set_op(op);
        scan.set_exclusive(exclusive);
        ExpectOneAnswer<T>(scan, absl::StrCat("scan ", what, exclusive ? " exclusive" : ""), rng);
      }
      v1::ScanRequest segmented;
      *segmented.mutable_input() = RandomArray<T>(rng, n, op);
      segmented.set_op(op);
      for (uint64_t o : {uint64_t{0}, uint64_t{n / 3}, uint64_t{n / 3 + 1}, uint64_t{n - 7}}) {
        segmented.add_segment_offsets(o);
      }
      ExpectOneAnswer<T>(segmented, absl::StrCat("segmented scan ", what), rng);
      v1::ReduceRequest reduce;
      *reduce.mutable_input() = RandomArray<T>(rng, n, op);
      reduce.set_op(op);
      ExpectOneAnswer<T>(reduce, absl::StrCat("reduce ", what), rng);
      reduce.add_segment_offsets(0);
      reduce.add_segment_offsets(n / 2);
      ExpectOneAnswer<T>(reduce, absl::StrCat("segmented reduce ", what), rng);
    }
  }
  const int batches = ReproducibleTest::backend_->batches() - batches_before;
  std::printf("%s: %d batches of several reproducible requests\n", v1::DType_Name(dtype).c_str(),
              batches);
  EXPECT_GT(batches, 0) << "the batched runs must really batch";
}

TEST_F(ReproducibleTest, Float32AloneBatchedAndStreamedGiveOneAnswer) { RunAll<float>(v1::FLOAT32); }

TEST_F(ReproducibleTest, Float64AloneBatchedAndStreamedGiveOneAnswer) {
  RunAll<double>(v1::FLOAT64);
}

// A scan above 64 MiB runs alone as a pipeline of 32 MiB chunks with the
// carry; streamed, as whole tiles with the carry: the same bits.
TEST_F(ReproducibleTest, APipelinedScanAndItsStreamGiveOneAnswer) {
  const uint64_t seed = std::random_device()();
  std::printf("pipelined seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  v1::ScanRequest scan;
  *scan.mutable_input() = RandomArray<float>(rng, (size_t{80} << 20) / sizeof(float), v1::SUM);
  scan.set_op(v1::SUM);
  const std::string first = Unary(scan);
  ASSERT_FALSE(first.empty());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Unary(scan), first) << "alone, run " << i << ", seed " << seed;
    EXPECT_EQ(Streamed(scan, sizeof(float), rng), first) << "streamed, run " << i;
  }
}

}  // namespace
}  // namespace primserve
