// Every kernel stays inside its caller's buffers. Each buffer is its own
// stream-ordered allocation of exactly the bytes it holds (no slack), the
// input scanned in place as the server does, for sizes around every warp,
// tile and vector boundary. Run it under compute-sanitizer memcheck
// (tools/gpu_checks.sh does): a read one element past n is a report there,
// while the answers below are checked either way. Found the partial-warp
// over-read fixed in kernels/detail/block.cuh (WarpValid).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/reduce.h"
#include "reference/reference.h"
#include "kernels/scan.h"
#include "kernels/runs.h"
#include "kernels/select.h"

namespace primserve {
namespace {

// One exact-size device buffer from the stream's pool.
class Exact final {
 public:
  Exact(size_t bytes, cudaStream_t stream) : stream_(stream) {
    EXPECT_EQ(cudaMallocAsync(&ptr_, bytes == 0 ? 1 : bytes, stream), cudaSuccess);
  }
  ~Exact() { cudaFreeAsync(ptr_, stream_); }
  Exact(const Exact&) = delete;
  Exact& operator=(const Exact&) = delete;
  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

// Sizes on both sides of every warp (256 items of 8 bytes, 1024 of 4 bytes),
// tile and 16-byte-vector boundary the kernels have, plus random ones.
std::vector<uint64_t> Sizes() {
  std::vector<uint64_t> sizes;
  for (uint64_t boundary : {256, 512, 1024, 2048, 4096, 8192, 8192 * 3}) {
    for (int64_t delta : {-5, -1, 0, 1, 3, 8}) sizes.push_back(boundary + delta);
  }
  std::mt19937_64 rng(11);
  for (int i = 0; i < 40; ++i) sizes.push_back(1 + rng() % 40000);
  return sizes;
}

class BoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    cudaStreamDestroy(stream_);
  }

  template <typename T>
  std::vector<T> Random(uint64_t n) {
    std::vector<T> values(n);
    for (T& v : values) v = static_cast<T>(static_cast<int64_t>(rng_() % 201) - 100);
    return values;
  }

  template <typename T>
  void Upload(void* device, const std::vector<T>& host) {
    ASSERT_EQ(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(T),
                              cudaMemcpyHostToDevice, stream_),
              cudaSuccess);
  }

  template <typename T>
  std::vector<T> Download(const void* device, uint64_t n) {
    std::vector<T> host(n);
    EXPECT_EQ(cudaMemcpyAsync(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost, stream_),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    return host;
  }

  // In place, plain and segmented, as the server's fused scans run.
  template <typename T>
  void ScanInPlace(uint64_t n, bool segmented) {
    SCOPED_TRACE(::testing::Message() << "n=" << n << " segmented=" << segmented);
    const std::vector<T> input = Random<T>(n);
    std::vector<uint64_t> starts;
    if (segmented) {
      starts.push_back(0);
      for (int i = 0; i < 7; ++i) starts.push_back(rng_() % (n + 1));
      std::sort(starts.begin(), starts.end());
    }
    const DType dtype = DTypeOf<T>();
    size_t temp_bytes = 0;
    ASSERT_EQ(gpu::SegmentedScan(nullptr, &temp_bytes, nullptr, nullptr, n, nullptr,
                                 starts.size(), dtype, Op::kMax, false, stream_),
              0);
    Exact data(n * sizeof(T), stream_), d_starts(starts.size() * sizeof(uint64_t), stream_),
        temp(temp_bytes, stream_);
    Upload(data.get(), input);
    Upload(d_starts.get(), starts);
    ASSERT_EQ(gpu::SegmentedScan(temp.get(), &temp_bytes, data.get(), data.get(), n,
                                 d_starts.get<uint64_t>(), starts.size(), dtype, Op::kMax, false,
                                 stream_),
              0);
    EXPECT_EQ(Download<T>(data.get(), n), reference::Scan<T>(input, Op::kMax, false, starts));
  }

  template <typename T>
  void SegmentedReduce(uint64_t n) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const std::vector<T> input = Random<T>(n);
    std::vector<uint64_t> starts = {0, n / 3, n / 2};
    const DType dtype = DTypeOf<T>();
    size_t temp_bytes = 0;
    ASSERT_EQ(gpu::SegmentedReduce(nullptr, &temp_bytes, nullptr, n, nullptr, starts.size(),
                                   dtype, Op::kArgMin, nullptr, nullptr, stream_),
              0);
    Exact data(n * sizeof(T), stream_), d_starts(starts.size() * sizeof(uint64_t), stream_),
        values(starts.size() * sizeof(T), stream_),
        indices(starts.size() * sizeof(int64_t), stream_), temp(temp_bytes, stream_);
    Upload(data.get(), input);
    Upload(d_starts.get(), starts);
    ASSERT_EQ(gpu::SegmentedReduce(temp.get(), &temp_bytes, data.get(), n,
                                   d_starts.get<uint64_t>(), starts.size(), dtype, Op::kArgMin,
                                   values.get(), indices.get<int64_t>(), stream_),
              0);
    const reference::ReduceResult<T> want = reference::Reduce<T>(input, Op::kArgMin, starts);
    EXPECT_EQ(Download<T>(values.get(), starts.size()), want.values);
    EXPECT_EQ(Download<int64_t>(indices.get(), starts.size()), want.indices);
  }

  // Into a wider accumulator (gpu::WidenedScan, gpu::WidenedReduce): the
  // narrow input and the wide answers each in a buffer of exactly their
  // bytes, plain and segmented, as the server runs them.
  template <typename T, typename A>
  void Widened(uint64_t n, bool segmented) {
    SCOPED_TRACE(::testing::Message() << "n=" << n << " segmented=" << segmented);
    const std::vector<T> input = Random<T>(n);
    std::vector<uint64_t> starts;
    if (segmented) starts = {0, n / 3, n / 3, n / 2};
    const std::vector<A> wide(input.begin(), input.end());
    size_t scan_bytes = 0, reduce_bytes = 0;
    ASSERT_EQ(gpu::WidenedScan(nullptr, &scan_bytes, nullptr, nullptr, n, nullptr, starts.size(),
                               DTypeOf<T>(), DTypeOf<A>(), Op::kSum, true, stream_),
              0);
    ASSERT_EQ(gpu::WidenedReduce(nullptr, &reduce_bytes, nullptr, n, nullptr, starts.size(),
                                 DTypeOf<T>(), DTypeOf<A>(), Op::kSum, nullptr, stream_),
              0);
    const size_t results = std::max<size_t>(1, starts.size());
    Exact data(n * sizeof(T), stream_), out(n * sizeof(A), stream_),
        values(results * sizeof(A), stream_), d_starts(starts.size() * sizeof(uint64_t), stream_),
        scan_temp(scan_bytes, stream_), reduce_temp(reduce_bytes, stream_);
    Upload(data.get(), input);
    Upload(d_starts.get(), starts);
    ASSERT_EQ(gpu::WidenedScan(scan_temp.get(), &scan_bytes, data.get(), out.get(), n,
                               d_starts.get<uint64_t>(), starts.size(), DTypeOf<T>(),
                               DTypeOf<A>(), Op::kSum, true, stream_),
              0);
    ASSERT_EQ(gpu::WidenedReduce(reduce_temp.get(), &reduce_bytes, data.get(), n,
                                 d_starts.get<uint64_t>(), starts.size(), DTypeOf<T>(),
                                 DTypeOf<A>(), Op::kSum, values.get(), stream_),
              0);
    EXPECT_EQ(Download<A>(out.get(), n), reference::Scan<A>(wide, Op::kSum, true, starts));
    EXPECT_EQ(Download<A>(values.get(), results), reference::Reduce<A>(wide, Op::kSum, starts).values);
  }

  // Partition with indices: the largest shared-memory staging of Select.
  template <typename T>
  void Partition(uint64_t n) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const std::vector<T> input = Random<T>(n);
    Predicate<T> predicate;
    predicate.kind = PredicateKind::kGt;
    predicate.operand = T(0);
    const gpu::SelectKeep keep = gpu::MakeKeep<T>(predicate.kind, predicate.operand);
    const DType dtype = DTypeOf<T>();
    size_t temp_bytes = 0;
    ASSERT_EQ(gpu::Select(nullptr, &temp_bytes, nullptr, dtype, n, keep, true, nullptr, nullptr,
                          nullptr, stream_),
              0);
    Exact data(n * sizeof(T), stream_), values(n * sizeof(T), stream_),
        indices(n * sizeof(int64_t), stream_), count(sizeof(uint64_t), stream_),
        temp(temp_bytes, stream_);
    Upload(data.get(), input);
    ASSERT_EQ(gpu::Select(temp.get(), &temp_bytes, data.get(), dtype, n, keep, true,
                          values.get(), indices.get<int64_t>(), count.get<uint64_t>(), stream_),
              0);
    const reference::SelectResult<T> want = reference::Select<T>(
        input, reference::EvaluatePredicate<T>(input, predicate), true);
    EXPECT_EQ(Download<T>(values.get(), n), want.values);
    EXPECT_EQ(Download<int64_t>(indices.get(), n), want.indices);
    EXPECT_EQ(Download<uint64_t>(count.get(), 1)[0], want.count);
  }

  cudaStream_t stream_ = nullptr;
  std::mt19937_64 rng_{2026};
};

TEST_F(BoundsTest, ScansInPlace) {
  for (uint64_t n : Sizes()) {
    for (bool segmented : {false, true}) {
      ScanInPlace<int32_t>(n, segmented);
      ScanInPlace<int64_t>(n, segmented);
      ScanInPlace<float>(n, segmented);
    }
  }
}

TEST_F(BoundsTest, SegmentedReduces) {
  for (uint64_t n : Sizes()) {
    SegmentedReduce<int32_t>(n);
    SegmentedReduce<double>(n);
  }
}

// Small integers: the FLOAT32 into FLOAT64 sums are exact in any order.
TEST_F(BoundsTest, WidenedScansAndReduces) {
  for (uint64_t n : Sizes()) {
    for (bool segmented : {false, true}) {
      Widened<int32_t, int64_t>(n, segmented);
      Widened<float, double>(n, segmented);
    }
  }
}

TEST_F(BoundsTest, Partitions) {
  for (uint64_t n : Sizes()) {
    Partition<int32_t>(n);
    Partition<int64_t>(n);
  }
}

}  // namespace
}  // namespace primserve
