// Scan and Reduce accumulator_dtype (numpy's cumsum/sum(dtype=)) through the
// real gRPC path, on the CPU backend (or the CUDA backend when built as
// cuda_accumulator_gpu_test): INT32 into INT64, UINT32 into UINT64 and
// FLOAT32 into FLOAT64, SUM and PROD, inclusive and exclusive, whole and
// segmented, 1 to 2^24 + 7 elements on the CUDA backend (past its
// pipelined-scan size; 2^22 + 7 on the CPU backend), against the reference
// on the widened input: integers exact (the random 32-bit values overflow
// 32-bit partial sums at once, so a narrow accumulation fails), FLOAT64 SUM
// within 1e-12 of the sums of |x| and PROD within 2^-52 per factor (a
// FLOAT32 accumulation, about 6e-8 off, fails).
// Then 64 small requests at once, fused by the batcher (a counting backend
// checks that such batches formed), each checked the same way; and
// reproducible FLOAT32 into FLOAT64 requests, alone and batched: one set of
// bits. Fresh random data every run; the seed is printed.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "reference/reference.h"
#include "server/cpu/cpu_backend.h"
#include "server/engine/backend.h"
#include "server/engine/task.h"
#include "server/server.h"
#include "tests/batch_counting_backend.h"
#ifdef PRIMSERVE_ACCUMULATOR_TEST_CUDA
#include "server/cuda/cuda_backend.h"
#endif

namespace primserve {
namespace {

#ifdef PRIMSERVE_ACCUMULATOR_TEST_CUDA
// Past the CUDA engine's pipelined-scan size (a widened scan is staged whole).
constexpr size_t kLargest = (size_t{1} << 24) + 7;
std::unique_ptr<ExecutionBackend> TestBackend() {
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create({});
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) std::abort();
  std::printf("GPU: %s\n", (*backend)->device_names().c_str());
  return *std::move(backend);
}
#else
// Smaller on the CPU backend, whose test runs in CI on two shared cores.
constexpr size_t kLargest = (size_t{1} << 22) + 7;
std::unique_ptr<ExecutionBackend> TestBackend() { return std::make_unique<CpuBackend>(); }
#endif

class AccumulatorTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    // Counts the batches of several widened requests (a Scan's or Reduce's
    // second dtype is its answer's: ValuesDType).
    auto counting = std::make_unique<BatchCountingBackend>(
        TestBackend(), [](const BatchKey& key) { return key.second_dtype != key.dtype; });
    backend_ = counting.get();
    ServerOptions options;
    options.address = "127.0.0.1:0";
    // One worker, so that requests gather while it is busy.
    options.batcher.num_threads = 1;
    options.batcher.max_batch_size = 128;
    options.batcher.batch_timeout_micros = 2000;
    absl::StatusOr<std::unique_ptr<PrimServer>> server =
        PrimServer::Start(options, std::move(counting));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    channel_ = new std::shared_ptr<grpc::Channel>(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials(), args));
    seed_ = std::random_device()();
    std::printf("seed %llu\n", static_cast<unsigned long long>(seed_));
  }

  static inline BatchCountingBackend* backend_ = nullptr;
  static inline PrimServer* server_ = nullptr;
  static inline std::shared_ptr<grpc::Channel>* channel_ = nullptr;
  static inline uint64_t seed_ = 0;
};

std::unique_ptr<v1::Primitives::Stub> Stub() {
  return v1::Primitives::NewStub(*AccumulatorTest::channel_);
}

template <typename T>
v1::DType ProtoDType() {
  return static_cast<v1::DType>(DTypeOf<T>());
}

// Random input for `op`: full-range 32-bit integers (odd for PROD, so that
// products do not collapse to 0), floats in [-1000, 1000) for SUM and in
// [0.999, 1.001) for PROD.
template <typename T>
std::vector<T> RandomInput(std::mt19937_64& rng, size_t n, v1::Op op) {
  std::vector<T> v(n);
  for (T& x : v) {
    const uint64_t bits = rng();
    if constexpr (std::is_floating_point_v<T>) {
      const double u = static_cast<double>(bits >> 11) * 0x1.0p-53;
      x = static_cast<T>(op == v1::PROD ? 0.999 + 0.002 * u : 2000 * u - 1000);
    } else {
      x = static_cast<T>(op == v1::PROD ? bits | 1 : bits);
    }
  }
  return v;
}

template <typename T>
v1::Array ArrayOf(const std::vector<T>& values) {
  v1::Array array;
  array.set_dtype(ProtoDType<T>());
  array.set_data(std::string(reinterpret_cast<const char*>(values.data()),
                             values.size() * sizeof(T)));
  return array;
}

template <typename A>
std::vector<A> ValuesOf(const v1::Array& array) {
  std::vector<A> values(array.data().size() / sizeof(A));
  std::memcpy(values.data(), array.data().data(), values.size() * sizeof(A));
  return values;
}

// Random segment starts over n (first 0, some empty segments).
std::vector<uint64_t> RandomStarts(std::mt19937_64& rng, uint64_t n, uint64_t most) {
  std::vector<uint64_t> starts{0};
  for (uint64_t at = rng() % (most + 1); at < n; at += rng() % (most + 1)) starts.push_back(at);
  starts.push_back(n);
  return starts;
}

// got against the reference's `want` (both in A): exact for integers; for
// floats within the tolerance the header states, `scale` holding the same
// computation over |x| (SUM) or over ones (PROD: the factors counted).
template <typename A>
void ExpectClose(const std::vector<A>& got, const std::vector<A>& want,
                 const std::vector<A>& scale, v1::Op op, const std::string& what) {
  (void)scale;  // integers: exact
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok = got[i] == want[i];
    if constexpr (std::is_floating_point_v<A>) {
      const double tolerance =
          op == v1::SUM ? 1e-12 * scale[i] + 1e-300
                        : std::numeric_limits<double>::epsilon() * scale[i] * std::fabs(want[i]);
      ok = std::fabs(got[i] - want[i]) <= tolerance;
    }
    if (!ok && ++bad <= 5) {
      ADD_FAILURE() << what << ": element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " wrong";
}

// The reference's scan (or reduce) of the input widened to A, and its scale.
template <typename T, typename A, typename Computation>
void ExpectReference(const std::vector<T>& input, const std::vector<A>& got, v1::Op op,
                     Computation compute, const std::string& what) {
  const std::vector<A> wide(input.begin(), input.end());
  std::vector<A> scale;
  if constexpr (std::is_floating_point_v<A>) {
    std::vector<A> scale_input(wide.size(), A(1));
    if (op == v1::SUM) {
      for (size_t i = 0; i < wide.size(); ++i) scale_input[i] = std::fabs(wide[i]);
    }
    scale = compute(scale_input, Op::kSum);
  }
  ExpectClose(got, compute(wide, static_cast<Op>(op)), scale, op, what);
}

template <typename T, typename A>
v1::ScanRequest ScanRequestOf(const std::vector<T>& input, v1::Op op, bool exclusive,
                              const std::vector<uint64_t>& starts) {
  v1::ScanRequest request;
  *request.mutable_input() = ArrayOf(input);
  request.set_op(op);
  request.set_exclusive(exclusive);
  request.set_accumulator_dtype(ProtoDType<A>());
  for (uint64_t s : starts) request.add_segment_offsets(s);
  return request;
}

template <typename T, typename A>
v1::ReduceRequest ReduceRequestOf(const std::vector<T>& input, v1::Op op,
                                  const std::vector<uint64_t>& starts) {
  v1::ReduceRequest request;
  *request.mutable_input() = ArrayOf(input);
  request.set_op(op);
  request.set_accumulator_dtype(ProtoDType<A>());
  for (uint64_t s : starts) request.add_segment_offsets(s);
  return request;
}

// The answer; a failure (and an empty one) if the call failed.
v1::Array Call(const v1::ScanRequest& request) {
  grpc::ClientContext context;
  v1::ScanResponse response;
  const grpc::Status status = Stub()->Scan(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.output();
}
v1::Array Call(const v1::ReduceRequest& request) {
  grpc::ClientContext context;
  v1::ReduceResponse response;
  const grpc::Status status = Stub()->Reduce(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.values();
}

// The answer's values, which must be in A.
template <typename A, typename Request>
std::vector<A> Answer(const Request& request) {
  const v1::Array answer = Call(request);
  EXPECT_EQ(answer.dtype(), ProtoDType<A>());
  return ValuesOf<A>(answer);
}

template <typename T, typename A>
void CheckScan(const std::vector<T>& input, v1::Op op, bool exclusive,
               const std::vector<uint64_t>& starts, const std::string& what) {
  const std::vector<A> got = Answer<A>(ScanRequestOf<T, A>(input, op, exclusive, starts));
  ExpectReference(input, got, op,
                  [&](const std::vector<A>& wide, Op o) {
                    return reference::Scan(absl::MakeConstSpan(wide), o, exclusive,
                                           absl::MakeConstSpan(starts));
                  },
                  what);
}

template <typename T, typename A>
void CheckReduce(const std::vector<T>& input, v1::Op op, const std::vector<uint64_t>& starts,
                 const std::string& what) {
  const std::vector<A> got = Answer<A>(ReduceRequestOf<T, A>(input, op, starts));
  ExpectReference(input, got, op,
                  [&](const std::vector<A>& wide, Op o) {
                    return reference::Reduce(absl::MakeConstSpan(wide), o,
                                             absl::MakeConstSpan(starts))
                        .values;
                  },
                  what);
}

template <typename T, typename A>
void AloneAllCases(uint64_t salt) {
  std::mt19937_64 rng(AccumulatorTest::seed_ + salt);
  for (v1::Op op : {v1::SUM, v1::PROD}) {
    for (size_t n : {size_t{1}, size_t{1027}, (size_t{1} << 20) + 7, kLargest}) {
      const std::string what = absl::StrCat(DTypeName(DTypeOf<T>()), " into ",
                                            DTypeName(DTypeOf<A>()), " ", v1::Op_Name(op),
                                            " n=", n);
      const std::vector<T> input = RandomInput<T>(rng, n, op);
      for (bool exclusive : {false, true}) {
        CheckScan<T, A>(input, op, exclusive, {}, absl::StrCat("scan ", what, " ", exclusive));
      }
      CheckReduce<T, A>(input, op, {}, absl::StrCat("reduce ", what));
    }
    const size_t n = (size_t{1} << 20) + 7;
    const std::vector<T> input = RandomInput<T>(rng, n, op);
    for (uint64_t most : {uint64_t{40}, uint64_t{200000}}) {
      const std::vector<uint64_t> starts = RandomStarts(rng, n, most);
      const std::string what = absl::StrCat(DTypeName(DTypeOf<T>()), " ", v1::Op_Name(op),
                                            " segments=", starts.size());
      for (bool exclusive : {false, true}) {
        CheckScan<T, A>(input, op, exclusive, starts,
                        absl::StrCat("segmented scan ", what, " ", exclusive));
      }
      CheckReduce<T, A>(input, op, starts, absl::StrCat("segmented reduce ", what));
    }
  }
}

TEST_F(AccumulatorTest, Int32IntoInt64AloneIsTheReferences) { AloneAllCases<int32_t, int64_t>(1); }
TEST_F(AccumulatorTest, Uint32IntoUint64AloneIsTheReferences) {
  AloneAllCases<uint32_t, uint64_t>(2);
}
TEST_F(AccumulatorTest, Float32IntoFloat64AloneIsTheReferences) {
  AloneAllCases<float, double>(3);
}

// 64 small requests of one kind sent at once (a quarter segmented), so that
// the batcher fuses them: each answer is its own reference's.
template <typename T, typename A>
void BatchedAllCases(uint64_t salt) {
  const int batches_before = AccumulatorTest::backend_->batches();
  std::mt19937_64 rng(AccumulatorTest::seed_ + salt);
  for (v1::Op op : {v1::SUM, v1::PROD}) {
    for (int kind = 0; kind < 3; ++kind) {  // inclusive scan, exclusive scan, reduce
      std::vector<std::vector<T>> inputs(64);
      std::vector<std::vector<uint64_t>> starts(64);
      for (size_t i = 0; i < inputs.size(); ++i) {
        inputs[i] = RandomInput<T>(rng, 1 + rng() % 4000, op);
        if (rng() % 4 == 0) starts[i] = RandomStarts(rng, inputs[i].size(), 500);
      }
      std::vector<std::thread> callers;
      for (size_t i = 0; i < inputs.size(); ++i) {
        callers.emplace_back([&, i] {
          const std::string what =
              absl::StrCat("batched ", DTypeName(DTypeOf<T>()), " ", v1::Op_Name(op), " kind ",
                           kind, " request ", i);
          if (kind < 2) {
            CheckScan<T, A>(inputs[i], op, kind == 1, starts[i], what);
          } else {
            CheckReduce<T, A>(inputs[i], op, starts[i], what);
          }
        });
      }
      for (std::thread& t : callers) t.join();
    }
  }
  const int batches = AccumulatorTest::backend_->batches() - batches_before;
  std::printf("%s: %d batches of several widened requests\n", DTypeName(DTypeOf<T>()), batches);
  EXPECT_GT(batches, 0) << "the batched runs must really batch";
}

TEST_F(AccumulatorTest, Int32IntoInt64BatchedIsTheReferences) {
  BatchedAllCases<int32_t, int64_t>(4);
}
TEST_F(AccumulatorTest, Uint32IntoUint64BatchedIsTheReferences) {
  BatchedAllCases<uint32_t, uint64_t>(5);
}
TEST_F(AccumulatorTest, Float32IntoFloat64BatchedIsTheReferences) {
  BatchedAllCases<float, double>(6);
}

// `request` sent at once with 64 random others of its kind; its answer's
// bytes.
template <typename Request>
std::string AmongOthers(const Request& request, std::mt19937_64& rng) {
  std::vector<Request> others(64, request);
  for (Request& other : others) {
    *other.mutable_input() = ArrayOf(RandomInput<float>(rng, 1 + rng() % 4000, request.op()));
    other.clear_segment_offsets();
  }
  std::string answer;
  std::vector<std::thread> callers;
  for (size_t i = 0; i <= others.size(); ++i) {
    callers.emplace_back([&, i] {
      if (i == others.size()) {
        answer = Call(request).data();
      } else {
        Call(others[i]);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  return answer;
}

// Reproducible FLOAT32 into FLOAT64: alone and batched among others, 3
// times each, the same bits.
template <typename Request>
void ExpectOneAnswer(const Request& request, const std::string& what, std::mt19937_64& rng) {
  const v1::Array first = Call(request);
  ASSERT_EQ(first.dtype(), v1::FLOAT64) << what;
  ASSERT_FALSE(first.data().empty()) << what;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(Call(request).data() == first.data()) << what << ": alone, run " << i;
    EXPECT_TRUE(AmongOthers(request, rng) == first.data()) << what << ": batched, run " << i;
  }
}

TEST_F(AccumulatorTest, ReproducibleFloat32IntoFloat64AloneAndBatchedGiveOneAnswer) {
  std::mt19937_64 rng(seed_ + 7);
  for (v1::Op op : {v1::SUM, v1::PROD}) {
    for (size_t n : {size_t{3000}, size_t{100003}}) {
      const std::string what = absl::StrCat(v1::Op_Name(op), " n=", n);
      const std::vector<float> input = RandomInput<float>(rng, n, op);
      const std::vector<uint64_t> starts = {0, n / 3, n / 3 + 1, n - 7};
      for (bool exclusive : {false, true}) {
        v1::ScanRequest scan = ScanRequestOf<float, double>(input, op, exclusive, {});
        scan.set_reproducible(true);
        ExpectOneAnswer(scan, absl::StrCat("scan ", what, " ", exclusive), rng);
      }
      v1::ScanRequest segmented = ScanRequestOf<float, double>(input, op, false, starts);
      segmented.set_reproducible(true);
      ExpectOneAnswer(segmented, absl::StrCat("segmented scan ", what), rng);
      v1::ReduceRequest reduce = ReduceRequestOf<float, double>(input, op, {});
      reduce.set_reproducible(true);
      ExpectOneAnswer(reduce, absl::StrCat("reduce ", what), rng);
      v1::ReduceRequest segmented_reduce = ReduceRequestOf<float, double>(input, op, starts);
      segmented_reduce.set_reproducible(true);
      ExpectOneAnswer(segmented_reduce, absl::StrCat("segmented reduce ", what), rng);
    }
  }
}

// 2^24 + 1 is not a float32: 2^24 followed by ones stays 2^24 in a float32
// accumulation, and is exact in FLOAT64.
TEST_F(AccumulatorTest, OnesAfterTwoPow24AreKeptInFloat64) {
  const size_t n = (size_t{1} << 20) + 7;
  std::vector<float> input(n, 1.0f);
  input[0] = 16777216.0f;
  const std::vector<double> scanned =
      Answer<double>(ScanRequestOf<float, double>(input, v1::SUM, false, {}));
  ASSERT_EQ(scanned.size(), n);
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(scanned[i], 16777216.0 + i) << "element " << i;
  EXPECT_EQ(scanned.back(), 16777216.0 + (n - 1));
  EXPECT_EQ(Answer<double>(ReduceRequestOf<float, double>(input, v1::SUM, {})),
            std::vector<double>{16777216.0 + (n - 1)});
}

}  // namespace
}  // namespace primserve
