// The CPU backend's reproducible mode (issue 18): a reproducible float
// SUM/PROD scan or reduce answers with the GPU kernels' bits
// (reference/gpu_order.h), a stream's operations with carries continue them
// exactly; every other operation keeps the plain reference's answer.
#include "server/cpu/cpu_backend.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "reference/gpu_order.h"
#include "reference/reference.h"
#include "server/engine/task.h"

namespace primserve {
namespace {

template <typename T>
std::string BytesOf(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <typename T>
ArrayView ViewOf(const std::vector<T>& values) {
  return ArrayView{DTypeOf<T>(),
                   absl::string_view(reinterpret_cast<const char*>(values.data()),
                                     values.size() * sizeof(T))};
}

template <typename T>
uint64_t BitsOf(T x) {
  uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof(T));
  return bits;
}

// Mixed magnitudes for SUM, factors 2^(+-0.1) for PROD: the association
// changes the bits.
template <typename T>
std::vector<T> MixedInput(size_t n, Op op, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<T> v(n);
  for (T& x : v) {
    if constexpr (std::is_integral_v<T>) {
      x = static_cast<T>(rng());
    } else if (op == Op::kSum) {
      const double sign = rng() % 2 ? 1.0 : -1.0;
      x = static_cast<T>(sign * std::ldexp(1.0 + unit(rng), static_cast<int>(rng() % 41) - 20));
    } else {
      x = static_cast<T>(std::exp2(0.2 * unit(rng) - 0.1));
    }
  }
  return v;
}

ScanResult RunScan(const ScanOperation& o) {
  absl::StatusOr<Result> result = RunOnCpu(o);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  return std::get<ScanResult>(*std::move(result));
}

std::string RunReduce(const ReduceOperation& o) {
  absl::StatusOr<Result> result = RunOnCpu(o);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  return std::string(std::get<ReduceResult>(*result).values.data());
}

template <typename T>
std::vector<T> GpuScan(const std::vector<T>& in, Op op, bool exclusive,
                       const std::vector<uint64_t>& starts = {}) {
  std::vector<T> out(in.size());
  reference::GpuOrderSegmentedScan<T>(in, absl::MakeSpan(out), starts, op, exclusive);
  return out;
}

template <typename T>
class CpuBackendReproducible : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CpuBackendReproducible, FloatTypes);

TYPED_TEST(CpuBackendReproducible, ScanGivesTheGpuOrderBits) {
  using T = TypeParam;
  const uint64_t tile = reference::GpuScanTileItems(DTypeOf<T>(), false);
  for (const Op op : {Op::kSum, Op::kProd}) {
    const std::vector<T> in = MixedInput<T>(3 * tile + 17, op, 1);
    const std::vector<uint64_t> offsets = {0, 5, 5, 4000, 9000, 9001};
    for (const bool exclusive : {false, true}) {
      SCOPED_TRACE(absl::StrCat(OpName(op), " exclusive=", exclusive));
      ScanOperation o;
      o.input = ViewOf(in);
      o.op = op;
      o.exclusive = exclusive;
      o.reproducible = true;
      const std::string gpu = BytesOf(GpuScan<T>(in, op, exclusive));
      const std::string plain = BytesOf(reference::Scan<T>(in, op, exclusive));
      ASSERT_NE(gpu, plain);  // else this test would prove nothing
      EXPECT_EQ(std::string(RunScan(o).output.data()), gpu);
      o.segment_offsets = offsets;
      const std::string segmented = BytesOf(GpuScan<T>(in, op, exclusive, offsets));
      ASSERT_NE(segmented, BytesOf(reference::Scan<T>(in, op, exclusive, offsets)));
      EXPECT_EQ(std::string(RunScan(o).output.data()), segmented);
      // Not reproducible: the plain reference, as before.
      o.reproducible = false;
      o.segment_offsets = {};
      EXPECT_EQ(std::string(RunScan(o).output.data()), plain);
    }
  }
}

// A reproducible ScanStream's operations, cut at multiples of the tile,
// carry the running prefix from one to the next: together they give the
// bits of the unary answer, and the last carry_out is the scan's carry.
TYPED_TEST(CpuBackendReproducible, StreamPiecesWithCarriesGiveTheUnaryBits) {
  using T = TypeParam;
  const uint64_t tile = reference::GpuScanTileItems(DTypeOf<T>(), false);
  const size_t n = 5 * tile + 99;
  for (const Op op : {Op::kSum, Op::kProd}) {
    const std::vector<T> in = MixedInput<T>(n, op, 2);
    for (const bool exclusive : {false, true}) {
      SCOPED_TRACE(absl::StrCat(OpName(op), " exclusive=", exclusive));
      ScanOperation whole;
      whole.input = ViewOf(in);
      whole.op = op;
      whole.exclusive = exclusive;
      whole.reproducible = true;
      const std::string unary = std::string(RunScan(whole).output.data());
      T want_carry{};
      std::vector<T> out(n);
      reference::GpuOrderScan<T>(in, absl::MakeSpan(out), op, exclusive, std::nullopt,
                                 &want_carry);
      ASSERT_EQ(unary, BytesOf(out));

      std::string streamed;
      std::optional<uint64_t> carry;
      for (const size_t piece : {2 * tile, tile, n - 3 * tile}) {
        const size_t at = streamed.size() / sizeof(T);
        const std::vector<T> part(in.begin() + at, in.begin() + at + piece);
        ScanOperation o = whole;
        o.input = ViewOf(part);
        o.carry_in = carry;
        o.wants_carry = true;
        ScanResult r = RunScan(o);
        ASSERT_TRUE(r.carry_out.has_value());
        carry = r.carry_out;
        streamed += std::string(r.output.data());
      }
      EXPECT_EQ(streamed, unary);
      EXPECT_EQ(*carry, BitsOf(want_carry));
    }
  }
}

TYPED_TEST(CpuBackendReproducible, ReduceGivesTheGpuOrderBits) {
  using T = TypeParam;
  for (const Op op : {Op::kSum, Op::kProd}) {
    // 3000: one warp per segment; 50000: the segmented scan.
    for (const size_t n : {size_t{3000}, size_t{50000}}) {
      const std::vector<T> in = MixedInput<T>(n, op, 3);
      for (const std::vector<uint64_t>& offsets :
           {std::vector<uint64_t>{}, std::vector<uint64_t>{0, 7, 7, n / 3, n}}) {
        SCOPED_TRACE(absl::StrCat(OpName(op), " n=", n, " segments=", offsets.size()));
        ReduceOperation o;
        o.input = ViewOf(in);
        o.op = op;
        o.segment_offsets = offsets;
        o.reproducible = true;
        std::vector<T> gpu(offsets.empty() ? 1 : offsets.size());
        reference::GpuOrderSegmentedReduce<T>(in, offsets, op, absl::MakeSpan(gpu));
        const std::vector<T> plain = reference::Reduce<T>(in, op, offsets).values;
        ASSERT_NE(BytesOf(gpu), BytesOf(plain));
        EXPECT_EQ(RunReduce(o), BytesOf(gpu));
        o.reproducible = false;
        if (op == Op::kProd) {
          EXPECT_EQ(RunReduce(o), BytesOf(plain));
          continue;
        }
        // Not reproducible, a float SUM is summed in lanes (cpu_kernels.h):
        // within the error bound of both summation orders, 2 (n-1) eps sum|x|.
        const std::string bytes = RunReduce(o);
        ASSERT_EQ(bytes.size(), plain.size() * sizeof(T));
        std::vector<T> got(plain.size());
        std::memcpy(got.data(), bytes.data(), bytes.size());
        double magnitude = 0;
        for (const T x : in) magnitude += std::fabs(static_cast<double>(x));
        const double bound = 2.0 * n * std::numeric_limits<T>::epsilon() * magnitude;
        for (size_t s = 0; s < plain.size(); ++s) EXPECT_NEAR(got[s], plain[s], bound);
      }
    }
  }
}

// Reproducible but not order-sensitive (integers, MIN/MAX): the plain
// reference's answer, which every association gives anyway.
TEST(CpuBackendReproducibleOther, IntegersAndMinMaxKeepTheReference) {
  const std::vector<int32_t> ints = MixedInput<int32_t>(20000, Op::kSum, 4);
  ScanOperation scan;
  scan.input = ViewOf(ints);
  scan.reproducible = true;
  EXPECT_EQ(std::string(RunScan(scan).output.data()), BytesOf(reference::Scan<int32_t>(ints, Op::kSum, false)));
  const std::vector<float> floats = MixedInput<float>(20000, Op::kSum, 5);
  scan.input = ViewOf(floats);
  scan.op = Op::kMax;
  EXPECT_EQ(std::string(RunScan(scan).output.data()), BytesOf(reference::Scan<float>(floats, Op::kMax, false)));
  ReduceOperation reduce;
  reduce.input = ViewOf(floats);
  reduce.op = Op::kMin;
  reduce.reproducible = true;
  EXPECT_EQ(RunReduce(reduce), BytesOf(reference::Reduce<float>(floats, Op::kMin).values));
}

// A large answer goes into the task's answer buffer (sent from there, no
// copy), or where the allocator has no room into one of the backend's own
// (held all the same, not zero-filled first).
TEST(CpuBackendAnswers, LargeAnswersAreWrittenIntoTheTasksAnswerBuffers) {
  const std::vector<int64_t> in = MixedInput<int64_t>(100000, Op::kSum, 5);
  const std::vector<int64_t> expected = reference::Scan<int64_t>(in, Op::kSum, false);
  for (const bool room : {true, false}) {
    int given = 0;
    auto task = std::make_unique<Task>();
    ScanOperation o;
    o.input = ViewOf(in);
    task->operation = o;
    task->answers = [&given, room](size_t bytes) -> std::shared_ptr<char> {
      if (!room) return nullptr;
      ++given;
      return std::shared_ptr<char>(new char[bytes], std::default_delete<char[]>());
    };
    std::optional<absl::StatusOr<Result>> answer;
    task->done = [&answer](absl::StatusOr<Result> result) { answer = std::move(result); };
    std::vector<std::unique_ptr<Task>> batch;
    batch.push_back(std::move(task));
    CpuBackend(nullptr, 2).Execute(std::move(batch));
    ASSERT_TRUE(answer.has_value() && answer->ok());
    const HostArray& output = std::get<ScanResult>(**answer).output;
    EXPECT_NE(output.held, nullptr);
    EXPECT_EQ(given, room ? 1 : 0);
    EXPECT_EQ(std::string(output.data()), BytesOf(expected));
  }
}

// A placed output with room, apart from the input, gets the answer written
// there (bytes_in_place); one that overlaps the input (other than a scan's
// own input exactly) or lacks room does not, and the answer is returned.
TEST(CpuBackendAnswers, PlacedOutputsAreWrittenInPlaceWhereSafe) {
  const std::vector<int64_t> in = MixedInput<int64_t>(100000, Op::kSum, 7);
  const std::string expected = BytesOf(reference::Scan<int64_t>(in, Op::kSum, false));
  std::vector<int64_t> place(in.size() + 1, 42);
  ScanOperation o;
  o.input = ViewOf(in);
  o.output_place = reinterpret_cast<char*>(place.data());
  const HostArray apart = RunScan(o).output;
  EXPECT_EQ(apart.bytes_in_place, expected.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(place.data()), expected.size()), expected);
  // In place over its own input, as the scan allows.
  std::vector<int64_t> own = in;
  o.input = ViewOf(own);
  o.output_place = reinterpret_cast<char*>(own.data());
  EXPECT_EQ(RunScan(o).output.bytes_in_place, expected.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(own.data()), expected.size()), expected);
  // One element off its input: not in place, the input unchanged.
  std::vector<int64_t> shifted = in;
  shifted.push_back(0);
  o.input = ArrayView{DType::kInt64, absl::string_view(reinterpret_cast<const char*>(shifted.data()),
                                                       in.size() * sizeof(int64_t))};
  o.output_place = reinterpret_cast<char*>(shifted.data() + 1);
  const HostArray returned = RunScan(o).output;
  EXPECT_EQ(returned.bytes_in_place, 0u);
  EXPECT_EQ(std::string(returned.data()), expected);
  EXPECT_EQ(std::vector<int64_t>(shifted.begin(), shifted.begin() + in.size()), in);
}

// Where one placed output lacks room the service refuses the request with
// "nothing was written": the backend then writes none of the request's
// answers in place, not even one whose place has room (Select's values and
// indices, RunLengthEncode's values and lengths, Sort's keys, indices and
// values), and returns them all.
TEST(CpuBackendAnswers, NoAnswerGoesInPlaceWhereAnotherLacksRoom) {
  const std::vector<int32_t> in = {1, 1, 2, 3, 3, 3};
  std::vector<char> region(4096, 0x55);
  RunLengthEncodeOperation rle;
  rle.input = ViewOf(in);
  rle.places.values = OutputPlace{region.data(), 16};
  rle.places.lengths = OutputPlace{region.data() + 64, 16};  // 3 lengths take 24
  absl::StatusOr<Result> got = RunOnCpu(rle);
  ASSERT_TRUE(got.ok());
  const auto& runs = std::get<RunLengthEncodeResult>(*got);
  EXPECT_EQ(runs.values.bytes_in_place, 0u);
  EXPECT_EQ(runs.lengths.bytes_in_place, 0u);
  EXPECT_EQ(std::string(runs.values.data()), BytesOf(std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(std::string(runs.lengths.data()), BytesOf(std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ(std::string(region.begin(), region.end()), std::string(4096, 0x55));
  // With room for both, both go in place.
  rle.places.lengths.room = 24;
  got = RunOnCpu(rle);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(std::get<RunLengthEncodeResult>(*got).values.bytes_in_place, 12u);
  EXPECT_EQ(std::get<RunLengthEncodeResult>(*got).lengths.bytes_in_place, 24u);

  std::fill(region.begin(), region.end(), 0x55);
  SelectOperation select;
  select.input = ViewOf(in);
  select.predicate = PredicateSpec{PredicateKind::kNonzero};
  select.output = SelectOutput::kValuesAndIndices;
  select.places.values = OutputPlace{region.data(), 24};
  select.places.indices = OutputPlace{region.data() + 64, 40};  // 6 indices take 48
  got = RunOnCpu(select);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(std::get<SelectResult>(*got).values->bytes_in_place, 0u);
  EXPECT_EQ(std::get<SelectResult>(*got).indices->bytes_in_place, 0u);
  EXPECT_EQ(std::string(std::get<SelectResult>(*got).values->data()), BytesOf(in));
  EXPECT_EQ(std::string(region.begin(), region.end()), std::string(4096, 0x55));

  const std::vector<int64_t> sort_values = {10, 11, 12, 13, 14, 15};
  SortOperation sort;
  sort.keys = ViewOf(in);
  sort.values = ViewOf(sort_values);
  sort.return_indices = true;
  sort.places.keys = OutputPlace{region.data(), 24};
  sort.places.indices = OutputPlace{region.data() + 64, 48};
  sort.places.values = OutputPlace{region.data() + 256, 47};  // 6 values take 48
  got = RunOnCpu(sort);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(std::get<SortResult>(*got).keys.bytes_in_place, 0u);
  EXPECT_EQ(std::get<SortResult>(*got).indices->bytes_in_place, 0u);
  EXPECT_EQ(std::string(std::get<SortResult>(*got).keys.data()), BytesOf(in));
  EXPECT_EQ(std::string(region.begin(), region.end()), std::string(4096, 0x55));

  const std::vector<double> values = {0.5, 1.5, 2, 3, 4, 5};
  ReduceByKeyOperation by_key;
  by_key.keys = ViewOf(in);
  by_key.values = ViewOf(values);
  by_key.places.keys = OutputPlace{region.data(), 12};
  by_key.places.values = OutputPlace{region.data() + 64, 16};  // 3 sums take 24
  got = RunOnCpu(by_key);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(std::get<ReduceByKeyResult>(*got).keys.bytes_in_place, 0u);
  EXPECT_EQ(std::string(std::get<ReduceByKeyResult>(*got).keys.data()),
            BytesOf(std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(std::string(std::get<ReduceByKeyResult>(*got).values.data()),
            BytesOf(std::vector<double>{2, 2, 12}));
  EXPECT_EQ(std::string(region.begin(), region.end()), std::string(4096, 0x55));
  by_key.places.values.room = 24;
  got = RunOnCpu(by_key);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(std::get<ReduceByKeyResult>(*got).keys.bytes_in_place, 12u);
  EXPECT_EQ(std::get<ReduceByKeyResult>(*got).values.bytes_in_place, 24u);
  EXPECT_EQ(std::string(region.data() + 64, 24), BytesOf(std::vector<double>{2, 2, 12}));
}

// ReduceOperation::accumulator: a SUM/PROD accumulated and answered in the
// wider dtype, so an INT32 sum past 2^31 is numpy's sum(dtype=int64).
TEST(CpuBackendAccumulator, WidensSumAndProdAsNumpyDtypeDoes) {
  std::vector<int32_t> ints(100001, std::numeric_limits<int32_t>::max());
  ints.back() = -7;
  ReduceOperation o;
  o.input = ViewOf(ints);
  o.accumulator = DType::kInt64;
  const int64_t sum = int64_t{100000} * std::numeric_limits<int32_t>::max() - 7;
  EXPECT_EQ(RunReduce(o), BytesOf(std::vector<int64_t>{sum}));
  const std::vector<uint64_t> segments = {0, 3, 3};  // the empty segment sums to 0
  o.segment_offsets = segments;
  EXPECT_EQ(RunReduce(o),
            BytesOf(std::vector<int64_t>{3 * int64_t{std::numeric_limits<int32_t>::max()}, 0,
                                         sum - 3 * int64_t{std::numeric_limits<int32_t>::max()}}));

  std::vector<uint32_t> uints = {4000000000u, 4000000000u, 1};
  ReduceOperation u;
  u.input = ViewOf(uints);
  u.op = Op::kProd;
  u.accumulator = DType::kUint64;
  EXPECT_EQ(RunReduce(u), BytesOf(std::vector<uint64_t>{16000000000000000000u}));

  // 2^24 + 1 is not a float: summed in float, the ones are lost.
  std::vector<float> floats(1 << 20, 1.0f);
  floats[0] = 16777216.0f;
  for (bool reproducible : {false, true}) {
    ReduceOperation f;
    f.input = ViewOf(floats);
    f.accumulator = DType::kFloat64;
    f.reproducible = reproducible;
    EXPECT_EQ(RunReduce(f), BytesOf(std::vector<double>{16777216.0 + (1 << 20) - 1}));
  }
}

TEST(CpuBackendAccumulator, WidensScansAsNumpyCumsumDtypeDoes) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  std::vector<int32_t> ints(5000, kMax);  // past 2^31 from the second element on
  ScanOperation o;
  o.input = ViewOf(ints);
  o.accumulator = DType::kInt64;
  std::vector<int64_t> inclusive(ints.size()), exclusive(ints.size());
  for (size_t i = 0; i < ints.size(); ++i) {
    inclusive[i] = int64_t{kMax} * static_cast<int64_t>(i + 1);
    exclusive[i] = int64_t{kMax} * static_cast<int64_t>(i);
  }
  EXPECT_EQ(std::string(RunScan(o).output.data()), BytesOf(inclusive));
  o.exclusive = true;
  EXPECT_EQ(std::string(RunScan(o).output.data()), BytesOf(exclusive));
  const std::vector<uint64_t> segments = {0, 2};
  o.segment_offsets = segments;
  o.exclusive = false;
  std::vector<int64_t> segmented = {kMax, 2 * int64_t{kMax}};
  for (size_t i = 2; i < ints.size(); ++i) segmented.push_back(int64_t{kMax} * static_cast<int64_t>(i - 1));
  EXPECT_EQ(std::string(RunScan(o).output.data()), BytesOf(segmented));

  std::vector<float> floats(1 << 20, 1.0f);
  floats[0] = 16777216.0f;
  ScanOperation f;
  f.input = ViewOf(floats);
  f.accumulator = DType::kFloat64;
  f.reproducible = true;
  const std::string bytes = std::string(RunScan(f).output.data());
  ASSERT_EQ(bytes.size(), floats.size() * sizeof(double));
  double last = 0;
  std::memcpy(&last, bytes.data() + bytes.size() - sizeof(double), sizeof(double));
  EXPECT_EQ(last, 16777216.0 + (1 << 20) - 1);
}

}  // namespace
}  // namespace primserve
