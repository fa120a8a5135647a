// The CUDA backend through the real gRPC path, with batching on and many
// concurrent callers: every answer is checked against the CPU reference
// backend served the same way. Needs a GPU (tagged "gpu").
#include <cuda_runtime_api.h>

#include <atomic>
#include <fstream>
#include <cmath>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/cuda/cuda_backend.h"
#include "server/server.h"
#include "tests/array_diff.h"

namespace primserve {
namespace {

struct Servers {
  std::unique_ptr<PrimServer> gpu, cpu;
  std::unique_ptr<PrimitivesClient> gpu_client, cpu_client;
};

Servers* StartServers() {
  auto* servers = new Servers;
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.batcher.batch_timeout_micros = 300;
  options.batcher.max_batch_size = 64;
  options.batcher.num_threads = 4;
  absl::StatusOr<std::unique_ptr<CudaBackend>> cuda = CudaBackend::Create({});
  EXPECT_TRUE(cuda.ok()) << cuda.status();
  if (!cuda.ok()) return nullptr;
  std::printf("GPU: %s\n", (*cuda)->device_names().c_str());
  servers->gpu = *PrimServer::Start(options, *std::move(cuda));
  servers->cpu = *PrimServer::Start(options, std::make_unique<CpuBackend>());
  servers->gpu_client = std::make_unique<PrimitivesClient>(
      PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", servers->gpu->port())));
  servers->cpu_client = std::make_unique<PrimitivesClient>(
      PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", servers->cpu->port())));
  return servers;
}

// Random arrays with repeats (so runs and ties occur) and, for floats, a few
// NaNs and signed zeros.
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  uint64_t Below(uint64_t n) { return rng_() % n; }

  uint64_t Size() {
    switch (Below(8)) {
      case 0: return Below(3);                       // 0, 1, 2
      case 1: return (uint64_t{1} << 20) + Below(5000);  // large: runs alone
      default: return 1 + Below(4000);
    }
  }

  // near_one: floats close to 1, so that a long PROD neither overflows nor
  // meets inf * 0, whose NaN would depend on the order of operations.
  v1::Array Array(DType dtype, uint64_t n, uint64_t distinct, bool near_one = false) {
    return VisitDType(dtype, [&](auto zero) {
      using T = decltype(zero);
      std::vector<T> values(n);
      for (T& v : values) {
        if constexpr (std::is_floating_point_v<T>) {
          const uint64_t pick = Below(1000);
          if (near_one) {
            v = pick == 0 ? NAN : T(1) + (T(Below(5)) - T(2)) / T(4096);
            continue;
          }
          v = pick == 0 ? NAN : pick == 1 ? T(-0.0) : T(Below(distinct)) * T(0.25) - T(3);
        } else {
          v = static_cast<T>(Below(distinct)) - (std::is_signed_v<T> ? T(distinct / 2) : T(0));
        }
      }
      return PackArray<T>(values);
    });
  }

  std::vector<uint64_t> Segments(uint64_t n) {
    std::vector<uint64_t> starts;
    if (Below(2) == 0) return starts;
    starts.push_back(0);
    const uint64_t count = Below(20);
    for (uint64_t i = 0; i < count; ++i) starts.push_back(Below(n + 1));
    std::sort(starts.begin(), starts.end());
    return starts;
  }

 private:
  std::mt19937_64 rng_;
};

constexpr DType kDTypes[] = {DType::kInt32,  DType::kInt64,   DType::kUint32,
                             DType::kUint64, DType::kFloat32, DType::kFloat64};

// Float SUM/PROD (AggregateByKey's atomics too) may associate differently:
// those compare within tests/array_diff.h's tolerance; everything else must
// match bit for bit (any NaN matches any NaN).
::testing::AssertionResult SameArray(const v1::Array& gpu, const v1::Array& cpu, bool tolerant) {
  const std::string diff = ArrayDiff("gpu", gpu, cpu, tolerant);
  if (diff.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diff << "(want: the CPU backend's)";
}

bool Tolerant(v1::Op op, DType dtype) {
  return !IsIntegerDType(dtype) && (op == v1::SUM || op == v1::PROD);
}

class CudaServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { servers_ = StartServers(); }
  static void TearDownTestSuite() { delete servers_; }

  // One random request of the given RPC, sent to both servers and compared.
  static ::testing::AssertionResult CheckOne(Generator& gen, int rpc) {
    const DType dtype = kDTypes[gen.Below(6)];
    const uint64_t n = gen.Size();
    const uint64_t distinct = 1 + gen.Below(2) * 1000 + gen.Below(4);
    auto status_mismatch = [](const absl::Status& g, const absl::Status& c) {
      return ::testing::AssertionFailure() << "status gpu " << g << " vs cpu " << c;
    };
#define PRIMSERVE_COMPARE(request, check)                                        \
  {                                                                              \
    auto g = servers_->gpu_client->Call(request);                                \
    auto c = servers_->cpu_client->Call(request);                                \
    if (g.ok() != c.ok() || (!g.ok() && g.status() != c.status()))               \
      return status_mismatch(g.status(), c.status());                            \
    if (!g.ok()) return ::testing::AssertionSuccess();                           \
    check;                                                                       \
    return ::testing::AssertionSuccess();                                        \
  }
#define PRIMSERVE_EXPECT_SAME(field, tolerant)                                   \
  if (auto r = SameArray(g->field(), c->field(), tolerant); !r) return r << " in " #field;
    switch (rpc) {
      case 0: {
        v1::ScanRequest request;
        request.set_op(static_cast<v1::Op>(1 + gen.Below(4)));
        *request.mutable_input() = gen.Array(dtype, n, distinct, request.op() == v1::PROD);
        request.set_exclusive(gen.Below(2));
        for (uint64_t s : gen.Segments(n)) request.add_segment_offsets(s);
        PRIMSERVE_COMPARE(request, PRIMSERVE_EXPECT_SAME(output, Tolerant(request.op(), dtype)));
      }
      case 1: {
        v1::ReduceRequest request;
        request.set_op(static_cast<v1::Op>(1 + gen.Below(6)));
        *request.mutable_input() = gen.Array(dtype, n, distinct, request.op() == v1::PROD);
        for (uint64_t s : gen.Segments(n)) request.add_segment_offsets(s);
        PRIMSERVE_COMPARE(request, PRIMSERVE_EXPECT_SAME(values, Tolerant(request.op(), dtype));
                          PRIMSERVE_EXPECT_SAME(indices, false));
      }
      case 2: {
        v1::SelectRequest request;
        *request.mutable_input() = gen.Array(dtype, n, distinct);
        if (gen.Below(2)) {
          *request.mutable_flags() = gen.Array(kDTypes[gen.Below(4)], n, 2);
        } else {
          v1::Predicate* p = request.mutable_predicate();
          p->set_kind(static_cast<v1::Predicate::Kind>(1 + gen.Below(8)));
          if (IsIntegerDType(dtype)) {
            p->mutable_operand()->set_uint_value(gen.Below(distinct / 2 + 1));
            p->mutable_upper()->set_uint_value(distinct / 2 + 1 + gen.Below(distinct));
          } else {
            p->mutable_operand()->set_float_value(-1.0);
            p->mutable_upper()->set_float_value(2.5);
          }
        }
        request.set_output(static_cast<v1::SelectRequest::Output>(1 + gen.Below(4)));
        request.set_partition(gen.Below(3) == 0);
        PRIMSERVE_COMPARE(request, PRIMSERVE_EXPECT_SAME(values, false);
                          PRIMSERVE_EXPECT_SAME(indices, false);
                          if (g->count() != c->count()) return ::testing::AssertionFailure()
                                                               << "count " << g->count()
                                                               << " vs " << c->count());
      }
      case 3: {
        v1::UniqueRequest request;
        *request.mutable_input() = gen.Array(dtype, n, 1 + gen.Below(3));
        PRIMSERVE_COMPARE(request, PRIMSERVE_EXPECT_SAME(values, false));
      }
      case 4: {
        v1::RunLengthEncodeRequest request;
        *request.mutable_input() = gen.Array(dtype, n, 1 + gen.Below(3));
        PRIMSERVE_COMPARE(request, PRIMSERVE_EXPECT_SAME(values, false);
                          PRIMSERVE_EXPECT_SAME(lengths, false));
      }
      case 5: {
        v1::ReduceByKeyRequest request;
        *request.mutable_keys() = gen.Array(dtype, n, 1 + gen.Below(3));
        const DType value_dtype = kDTypes[gen.Below(6)];
        request.set_op(static_cast<v1::Op>(1 + gen.Below(4)));
        *request.mutable_values() = gen.Array(value_dtype, n, distinct, request.op() == v1::PROD);
        PRIMSERVE_COMPARE(request, PRIMSERVE_EXPECT_SAME(keys, false);
                          PRIMSERVE_EXPECT_SAME(values, Tolerant(request.op(), value_dtype)));
      }
      default: {
        v1::AggregateByKeyRequest request;
        const uint64_t num_keys = 1 + gen.Below(2) * gen.Below(100000) + gen.Below(300);
        const DType key_dtype = kDTypes[gen.Below(4)];
        v1::Array keys = gen.Array(key_dtype, n, num_keys);
        if (key_dtype == DType::kInt32 || key_dtype == DType::kInt64) {
          keys = gen.Array(key_dtype == DType::kInt32 ? DType::kUint32 : DType::kUint64, n,
                           num_keys);
          keys.set_dtype(static_cast<v1::DType>(key_dtype));
        }
        *request.mutable_keys() = keys;
        const DType value_dtype = kDTypes[gen.Below(6)];
        *request.mutable_values() = gen.Array(value_dtype, n, distinct);
        const v1::Op ops[] = {v1::SUM, v1::MIN, v1::MAX};
        request.set_op(ops[gen.Below(3)]);
        request.set_num_keys(num_keys - (gen.Below(10) == 0 ? 1 : 0));  // sometimes a key is out of range
        PRIMSERVE_COMPARE(request,
                          PRIMSERVE_EXPECT_SAME(values, !IsIntegerDType(value_dtype)));
      }
    }
#undef PRIMSERVE_COMPARE
#undef PRIMSERVE_EXPECT_SAME
  }

  static Servers* servers_;
};

Servers* CudaServiceTest::servers_ = nullptr;

TEST_F(CudaServiceTest, EveryRpcMatchesTheCpuBackendUnderConcurrency) {
  ASSERT_NE(servers_, nullptr);
  ASSERT_TRUE(servers_->gpu_client->IsServing());
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  constexpr int kThreads = 16, kCallsPerThread = 60;
  std::atomic<int> checked{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Generator gen(seed + t);
      for (int i = 0; i < kCallsPerThread; ++i) {
        const int rpc = (t + i) % 7;
        ::testing::AssertionResult same = CheckOne(gen, rpc);
        ++checked;
        if (!same) {
          ++failed;
          ADD_FAILURE() << "rpc " << rpc << " thread " << t << " call " << i << ": "
                        << same.message();
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::printf("checked %d answers, %d wrong\n", checked.load(), failed.load());
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(checked, kThreads * kCallsPerThread);
}

TEST_F(CudaServiceTest, LargeScansArePipelinedAndExact) {
  ASSERT_NE(servers_, nullptr);
  Generator gen(std::random_device{}());
  for (auto [dtype, n] : {std::pair{DType::kInt32, (uint64_t{50} << 20) + 7},
                          std::pair{DType::kUint64, (uint64_t{20} << 20) + 3}}) {
    for (bool exclusive : {false, true}) {
      v1::ScanRequest request;
      *request.mutable_input() = gen.Array(dtype, n, 1000);
      request.set_op(v1::SUM);
      request.set_exclusive(exclusive);
      absl::StatusOr<v1::ScanResponse> gpu = servers_->gpu_client->Call(request);
      absl::StatusOr<v1::ScanResponse> cpu = servers_->cpu_client->Call(request);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      EXPECT_TRUE(SameArray(gpu->output(), cpu->output(), false)) << DTypeName(dtype);
    }
  }
}

// The process's resident set (VmRSS), in MiB.
double RssMib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  }
  return -1;
}

// A 30-byte AggregateByKey asking for 16 GiB of groups, and a Reduce whose
// empty segments ask for 64 MB of ARGMIN answer, are refused at validation:
// within milliseconds, with the device's free memory and the process's RSS
// unchanged, and the next request answered.
TEST(CudaAmplificationTest, OversizedAnswersAreRefusedWithoutTouchingTheGpu) {
  absl::StatusOr<std::unique_ptr<CudaBackend>> cuda = CudaBackend::Create({});
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.limits.max_response_bytes = uint64_t{16} << 20;
  absl::StatusOr<std::unique_ptr<PrimServer>> server = PrimServer::Start(options, *std::move(cuda));
  ASSERT_TRUE(server.ok()) << server.status();
  PrimitivesClient client(PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", (*server)->port())));
  const std::vector<int32_t> warm = {1, 2, 3};
  ASSERT_TRUE(client.Scan<int32_t>(warm, Op::kSum).ok());

  v1::AggregateByKeyRequest aggregate;
  aggregate.mutable_keys()->set_dtype(v1::INT32);
  aggregate.mutable_values()->set_dtype(v1::FLOAT64);
  aggregate.set_op(v1::SUM);
  aggregate.set_num_keys((uint64_t{1} << 31) - 1);
  v1::ReduceRequest reduce;
  reduce.mutable_input()->set_dtype(v1::INT64);
  reduce.set_op(v1::ARGMIN);
  reduce.mutable_segment_offsets()->Resize(4 << 20, 0);

  // The warm-up's answer may arrive before its lane has freed its device
  // block (answers go out before the drain): wait until free memory settles.
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  for (int stable = 0, polls = 0; stable < 3 && polls < 200; ++polls) {
    absl::SleepFor(absl::Milliseconds(10));
    size_t now = 0;
    ASSERT_EQ(cudaMemGetInfo(&now, &total), cudaSuccess);
    stable = now == free_before ? stable + 1 : 0;
    free_before = now;
  }
  const double rss_before = RssMib();
  absl::Time start = absl::Now();
  absl::StatusOr<v1::AggregateByKeyResponse> refused_aggregate = client.Call(aggregate);
  const absl::Duration aggregate_took = absl::Now() - start;
  start = absl::Now();
  absl::StatusOr<v1::ReduceResponse> refused_reduce = client.Call(reduce);
  const absl::Duration reduce_took = absl::Now() - start;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(refused_aggregate.status().code(), absl::StatusCode::kResourceExhausted)
      << refused_aggregate.status();
  EXPECT_EQ(refused_reduce.status().code(), absl::StatusCode::kResourceExhausted)
      << refused_reduce.status();
  EXPECT_LT(aggregate_took, absl::Milliseconds(100));
  EXPECT_LT(reduce_took, absl::Seconds(1));
  EXPECT_EQ(free_after, free_before) << "device memory moved";
  // The Reduce request's own parsed offsets (32 MB) and gRPC's buffers may
  // stay in malloc's cache (42-48 MiB measured on an H100 host); the answers
  // (16 GiB, and 64 MB = 61 MiB more on top) must not have been made.
  EXPECT_LT(RssMib() - rss_before, 64.0) << "resident memory kept";
  std::printf("refused in %.1f ms and %.1f ms; device free %zu -> %zu bytes; RSS %.0f -> %.0f MiB\n",
              absl::ToDoubleMilliseconds(aggregate_took), absl::ToDoubleMilliseconds(reduce_took),
              free_before, free_after, rss_before, RssMib());
  absl::StatusOr<std::vector<int32_t>> next = client.Scan<int32_t>(warm, Op::kSum);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, (std::vector<int32_t>{1, 3, 6}));
}

TEST_F(CudaServiceTest, SmallScansAreBatchedAndRoutedToTheirCallers) {
  ASSERT_NE(servers_, nullptr);
  constexpr int kThreads = 64;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int32_t> input(1024);
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < input.size(); ++i) input[i] = t * 1000 + round + int(i % 7);
        absl::StatusOr<std::vector<int32_t>> out =
            servers_->gpu_client->Scan<int32_t>(input, Op::kSum);
        int32_t sum = 0;
        bool ok = out.ok() && out->size() == input.size();
        for (size_t i = 0; ok && i < input.size(); ++i) {
          sum += input[i];
          ok = (*out)[i] == sum;
        }
        if (!ok) ++wrong;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace primserve
