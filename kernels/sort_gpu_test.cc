// GPU tests of kernels/sort.h against the CPU reference (reference/sort.h,
// the oracle: keys, values and indices must match bit for bit) and against
// CUB's DeviceRadixSort / DeviceSegmentedSort on NaN-free input (the same
// order there). Outputs are poisoned before every run. Fresh random data
// every run: the seed is printed, and PRIMSERVE_TEST_SEED replays it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/primitives.h"
#include "kernels/sort.h"
#include "kernels/testing/cub_sort.h"
#include "kernels/testing/device_buffer.h"
#include "kernels/testing/device_helpers.h"
#include "reference/sort.h"

namespace primserve {
namespace {

using gpu::testing::CountMismatchedWords;
using gpu::testing::DeviceBuffer;
using gpu::testing::RunTwoPhase;
using gpu::testing::ToDevice;
using gpu::testing::ToHost;

uint64_t g_seed = 0;

std::mt19937_64 Rng(uint64_t salt) { return std::mt19937_64(g_seed * 0x9e3779b97f4a7c15ull + salt); }

template <typename T>
DType DTypeOf() {
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  if constexpr (std::is_same_v<T, uint32_t>) return DType::kUint32;
  if constexpr (std::is_same_v<T, uint64_t>) return DType::kUint64;
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  return DType::kFloat64;
}

template <typename T>
using BitsOf = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <typename T>
T FromBits(uint64_t bits) {
  const BitsOf<T> b = static_cast<BitsOf<T>>(bits);
  T x;
  std::memcpy(&x, &b, sizeof(T));
  return x;
}

enum class Pattern { kRandom, kFewDistinct, kSorted, kReverse, kAllEqual, kSpecial };
const char* PatternName(Pattern p) {
  switch (p) {
    case Pattern::kRandom: return "random";
    case Pattern::kFewDistinct: return "few-distinct";
    case Pattern::kSorted: return "sorted";
    case Pattern::kReverse: return "reverse";
    case Pattern::kAllEqual: return "all-equal";
    case Pattern::kSpecial: return "special";
  }
  return "?";
}
constexpr Pattern kPatterns[] = {Pattern::kRandom,  Pattern::kFewDistinct, Pattern::kSorted,
                                 Pattern::kReverse, Pattern::kAllEqual,    Pattern::kSpecial};

// Values that stress the order: for floats NaNs of both signs and several
// payloads, both infinities, both zeros, denormals and extremes; for integers
// the extremes and the values around 0 and the sign bit.
template <typename T>
std::vector<T> SpecialValues() {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_floating_point_v<T>) {
    const T nan = L::quiet_NaN();
    return {nan, -nan, FromBits<T>(~uint64_t{0}), L::infinity(), -L::infinity(), T{0}, -T{0},
            L::denorm_min(), -L::denorm_min(), L::max(), L::lowest(), L::min(), T{1}, T{-1}};
  } else {
    return {L::min(), L::max(), T{0}, T{1}, static_cast<T>(-1), static_cast<T>(L::max() / 2),
            static_cast<T>(L::min() / 2 + 1)};
  }
}

// Random bits for `random` (floats include NaNs then, unless no_nan), small
// ranges with many ties for `few-distinct`, reference-sorted runs for sorted
// and reverse.
template <typename T>
std::vector<T> MakeKeys(size_t n, Pattern pattern, uint64_t salt, bool no_nan = false) {
  std::mt19937_64 rng = Rng(salt);
  std::vector<T> v(n);
  const std::vector<T> special = SpecialValues<T>();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bits = rng();
    switch (pattern) {
      case Pattern::kAllEqual: v[i] = static_cast<T>(7); break;
      case Pattern::kFewDistinct:
        v[i] = std::is_floating_point_v<T> ? static_cast<T>(static_cast<int>(bits % 16) - 8) / 2
                                           : static_cast<T>(static_cast<int>(bits % 16) - 8);
        break;
      case Pattern::kSpecial:
        v[i] = bits % 3 == 0 ? special[(bits >> 8) % special.size()] : FromBits<T>(bits >> 3);
        break;
      default: v[i] = FromBits<T>(bits);
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (no_nan && std::isnan(v[i])) v[i] = static_cast<T>(bits % 1000);
    }
  }
  if (pattern == Pattern::kSorted || pattern == Pattern::kReverse) {
    v = reference::Permute<T>(v, reference::SortPermutation<T>(v, pattern == Pattern::kReverse));
  }
  return v;
}

enum class Moves { kKeys, kValues4, kValues8, kIndices, kValuesAndIndices };
const char* MovesName(Moves m) {
  switch (m) {
    case Moves::kKeys: return "keys";
    case Moves::kValues4: return "values4";
    case Moves::kValues8: return "values8";
    case Moves::kIndices: return "indices";
    case Moves::kValuesAndIndices: return "values+indices";
  }
  return "?";
}

// Sorts keys (segmented when starts is non-empty) with our kernels and checks
// keys, values and indices bit for bit against the CPU reference.
template <typename K>
void CheckAgainstReference(const std::vector<K>& keys, const std::vector<uint64_t>& starts,
                           bool descending, Moves moves, const std::string& what) {
  SCOPED_TRACE(absl::StrCat(what, " n=", keys.size(), " segments=", starts.size(),
                            " descending=", descending, " moves=", MovesName(moves)));
  const size_t n = keys.size();
  const bool has_values = moves == Moves::kValues4 || moves == Moves::kValues8 ||
                          moves == Moves::kValuesAndIndices;
  const bool has_indices = moves == Moves::kIndices || moves == Moves::kValuesAndIndices;
  const DType value_dtype = moves == Moves::kValues4 ? DType::kFloat32 : DType::kInt64;
  const size_t value_bytes = moves == Moves::kValues4 ? 4 : 8;
  std::mt19937_64 rng = Rng(n * 31 + 5);
  std::vector<uint64_t> values(n);
  for (uint64_t& v : values) v = value_bytes == 4 ? rng() & 0xffffffffu : rng();
  std::vector<uint32_t> values32(values.begin(), values.end());

  DeviceBuffer d_keys_in(n * sizeof(K)), d_keys_out(n * sizeof(K));
  DeviceBuffer d_values_in(n * value_bytes), d_values_out(n * value_bytes);
  DeviceBuffer d_indices(n * sizeof(int64_t));
  ASSERT_TRUE(d_keys_in.ok() && d_keys_out.ok() && d_values_in.ok() && d_values_out.ok() &&
              d_indices.ok());
  CUDA_ASSERT(ToDevice(d_keys_in.get(), keys));
  CUDA_ASSERT(value_bytes == 4 ? ToDevice(d_values_in.get(), values32)
                               : ToDevice(d_values_in.get(), values));
  CUDA_ASSERT(d_keys_out.Poison());
  CUDA_ASSERT(d_values_out.Poison());
  CUDA_ASSERT(d_indices.Poison());
  gpu::SortPayload payload;
  if (has_values) {
    payload.has_values = true;
    payload.d_values_in = d_values_in.get();
    payload.d_values_out = d_values_out.get();
    payload.value_dtype = value_dtype;
  }
  if (has_indices) {
    payload.has_indices = true;
    payload.d_indices_out = d_indices.get<int64_t>();
  }
  CUDA_ASSERT(RunTwoPhase([&](void* temp, size_t* bytes) {
    return starts.empty()
               ? gpu::RadixSort(temp, bytes, d_keys_in.get(), d_keys_out.get(), n, DTypeOf<K>(),
                                payload, descending, nullptr)
               : gpu::SegmentedRadixSort(temp, bytes, d_keys_in.get(), d_keys_out.get(), n,
                                         DTypeOf<K>(), starts.data(), starts.size(), payload,
                                         descending, nullptr);
  }));

  const std::vector<int64_t> perm = reference::SortPermutation<K>(keys, descending, starts);
  const std::vector<K> want_keys = reference::Permute<K>(keys, perm);
  const std::vector<K> got_keys = ToHost<K>(d_keys_out.get(), n);
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&want_keys[i], &got_keys[i], sizeof(K)) != 0) {
      ADD_FAILURE() << "key " << i << ": got " << got_keys[i] << " want " << want_keys[i];
      return;
    }
  }
  if (has_indices) {
    const std::vector<int64_t> got = ToHost<int64_t>(d_indices.get(), n);
    for (size_t i = 0; i < n; ++i) {
      if (got[i] != perm[i]) {
        ADD_FAILURE() << "index " << i << ": got " << got[i] << " want " << perm[i];
        return;
      }
    }
  }
  if (has_values) {
    const std::vector<uint64_t> got =
        value_bytes == 4 ? [&] {
          const std::vector<uint32_t> g = ToHost<uint32_t>(d_values_out.get(), n);
          return std::vector<uint64_t>(g.begin(), g.end());
        }()
                         : ToHost<uint64_t>(d_values_out.get(), n);
    for (size_t i = 0; i < n; ++i) {
      if (got[i] != values[perm[i]]) {
        ADD_FAILURE() << "value " << i << ": got " << got[i] << " want " << values[perm[i]];
        return;
      }
    }
  }
}

constexpr size_t kSizes[] = {0, 1, 2, 33, 4095, 4096, 4097, 70001, (1u << 20) + 5};

template <typename K>
void SortAllCases() {
  uint64_t salt = 0;
  for (size_t n : kSizes) {
    for (bool descending : {false, true}) {
      CheckAgainstReference<K>(MakeKeys<K>(n, Pattern::kRandom, ++salt), {}, descending,
                               Moves::kKeys, "random");
    }
  }
  for (size_t n : {size_t{3000}, size_t{70001}, (size_t{1} << 20) + 5}) {
    for (Pattern pattern : kPatterns) {
      for (bool descending : {false, true}) {
        CheckAgainstReference<K>(MakeKeys<K>(n, pattern, ++salt), {}, descending, Moves::kKeys,
                                 PatternName(pattern));
      }
    }
  }
  for (size_t n : {size_t{1000}, size_t{4097}, size_t{300001}}) {
    for (Moves moves : {Moves::kValues4, Moves::kValues8, Moves::kIndices,
                        Moves::kValuesAndIndices}) {
      for (bool descending : {false, true}) {
        CheckAgainstReference<K>(MakeKeys<K>(n, Pattern::kSpecial, ++salt), {}, descending,
                                 moves, "special");
        CheckAgainstReference<K>(MakeKeys<K>(n, Pattern::kFewDistinct, ++salt), {}, descending,
                                 moves, "few-distinct");
      }
    }
  }
}

// Segment starts over n keys: lengths drawn from empty, one key, block-sized
// and longer than one block (the global passes), in random order.
std::vector<uint64_t> RandomStarts(size_t n, uint64_t salt) {
  std::mt19937_64 rng = Rng(salt);
  std::vector<uint64_t> starts;
  uint64_t at = 0;
  while (at < n || starts.empty()) {
    starts.push_back(at);
    const int kind = static_cast<int>(rng() % 8);
    const uint64_t len = kind == 0 ? 0 : kind == 1 ? 1 : kind < 5 ? rng() % 200
                         : kind < 7 ? rng() % 4200 : 4097 + rng() % 30000;
    at = std::min<uint64_t>(n, at + len);
  }
  if (rng() % 2) starts.push_back(n);  // an empty last segment
  return starts;
}

template <typename K>
void SegmentedAllCases() {
  uint64_t salt = 1000;
  for (size_t n : {size_t{0}, size_t{5000}, size_t{200003}}) {
    for (Pattern pattern : {Pattern::kRandom, Pattern::kSpecial, Pattern::kFewDistinct}) {
      for (bool descending : {false, true}) {
        for (Moves moves : {Moves::kKeys, Moves::kValues4, Moves::kValuesAndIndices}) {
          const uint64_t key_salt = ++salt;
          const uint64_t starts_salt = ++salt;
          CheckAgainstReference<K>(MakeKeys<K>(n, pattern, key_salt), RandomStarts(n, starts_salt),
                                   descending, moves, PatternName(pattern));
        }
      }
    }
  }
  // One-key segments; one segment holding everything; all empty but one.
  std::vector<uint64_t> ones(3000);
  for (size_t i = 0; i < ones.size(); ++i) ones[i] = i;
  CheckAgainstReference<K>(MakeKeys<K>(3000, Pattern::kRandom, ++salt), ones, false,
                           Moves::kIndices, "one-key segments");
  CheckAgainstReference<K>(MakeKeys<K>(100000, Pattern::kRandom, ++salt), {0}, true,
                           Moves::kValues8, "one segment");
  CheckAgainstReference<K>(MakeKeys<K>(9000, Pattern::kRandom, ++salt), {0, 0, 0, 9000, 9000},
                           false, Moves::kKeys, "empty around one");
}

// Small enough for compute-sanitizer: the block sort, the global passes and
// the gather of values by index, with empty and one-key segments.
TEST(SegmentedSortGpuTest, SmallMixed) {
  CheckAgainstReference<float>(MakeKeys<float>(30011, Pattern::kSpecial, 77), RandomStarts(30011, 78),
                               true, Moves::kValuesAndIndices, "special");
  CheckAgainstReference<uint64_t>(MakeKeys<uint64_t>(9001, Pattern::kRandom, 79), {}, false,
                                  Moves::kIndices, "random");
}

TEST(SortGpuTest, Int32) { SortAllCases<int32_t>(); }
TEST(SortGpuTest, Int64) { SortAllCases<int64_t>(); }
TEST(SortGpuTest, Uint32) { SortAllCases<uint32_t>(); }
TEST(SortGpuTest, Uint64) { SortAllCases<uint64_t>(); }
TEST(SortGpuTest, Float32) { SortAllCases<float>(); }
TEST(SortGpuTest, Float64) { SortAllCases<double>(); }
TEST(SegmentedSortGpuTest, Int32) { SegmentedAllCases<int32_t>(); }
TEST(SegmentedSortGpuTest, Int64) { SegmentedAllCases<int64_t>(); }
TEST(SegmentedSortGpuTest, Uint32) { SegmentedAllCases<uint32_t>(); }
TEST(SegmentedSortGpuTest, Uint64) { SegmentedAllCases<uint64_t>(); }
TEST(SegmentedSortGpuTest, Float32) { SegmentedAllCases<float>(); }
TEST(SegmentedSortGpuTest, Float64) { SegmentedAllCases<double>(); }

// Ours against CUB on the device, word for word: keys (and 4-byte values),
// n random keys of dtype from device-filled 32-bit words (8-byte keys are two
// words each); floats are NaN-free there (CUB orders a NaN by its sign bit).
void CompareWithCub(DType dtype, uint64_t n, bool pairs, bool descending) {
  SCOPED_TRACE(absl::StrCat("dtype=", static_cast<int>(dtype), " n=", n, " pairs=", pairs,
                            " descending=", descending));
  const size_t key_bytes = dtype == DType::kInt32 || dtype == DType::kUint32 ||
                                   dtype == DType::kFloat32 ? 4 : 8;
  const uint64_t words = n * key_bytes / 4;
  DeviceBuffer keys_in(n * key_bytes), ours(n * key_bytes), cubs(n * key_bytes);
  DeviceBuffer values_in(pairs ? n * 4 : 0), ours_values(pairs ? n * 4 : 0),
      cub_values(pairs ? n * 4 : 0);
  ASSERT_TRUE(keys_in.ok() && ours.ok() && cubs.ok() && values_in.ok() && ours_values.ok() &&
              cub_values.ok());
  // Floats: 30 random bits below the sign keep the exponent < 255 (no NaN, no inf).
  const int bits = dtype == DType::kFloat32 ? 30 : 32;
  CUDA_ASSERT(gpu::testing::FillRandomInt32(keys_in.get<int32_t>(), words, g_seed + n, bits,
                                            nullptr));
  if (pairs) {
    CUDA_ASSERT(gpu::testing::FillRandomInt32(values_in.get<int32_t>(), n, g_seed + 7, 32,
                                              nullptr));
  }
  CUDA_ASSERT(ours.Poison());
  CUDA_ASSERT(cubs.Poison());
  gpu::SortPayload payload;
  if (pairs) {
    payload.has_values = true;
    payload.d_values_in = values_in.get();
    payload.d_values_out = ours_values.get();
    payload.value_dtype = DType::kUint32;
  }
  CUDA_ASSERT(RunTwoPhase([&](void* temp, size_t* bytes) {
    return gpu::RadixSort(temp, bytes, keys_in.get(), ours.get(), n, dtype, payload, descending,
                          nullptr);
  }));
  CUDA_ASSERT(RunTwoPhase([&](void* temp, size_t* bytes) {
    return gpu::testing::CubRadixSort(temp, bytes, keys_in.get(), cubs.get(),
                                      pairs ? values_in.get() : nullptr, cub_values.get(), n,
                                      dtype, descending, /*int64_count=*/n > INT32_MAX, nullptr);
  }));
  uint64_t mismatches = 0;
  CUDA_ASSERT(CountMismatchedWords(ours.get(), cubs.get(), words, &mismatches));
  EXPECT_EQ(mismatches, 0u) << "key words differ from CUB's";
  if (pairs) {
    CUDA_ASSERT(CountMismatchedWords(ours_values.get(), cub_values.get(), n, &mismatches));
    EXPECT_EQ(mismatches, 0u) << "value words differ from CUB's";
  }
}

TEST(SortGpuTest, MatchesCubUpTo2Pow28) {
  for (uint64_t n : {uint64_t{1} << 16, (uint64_t{1} << 24) + 3, uint64_t{1} << 28}) {
    for (DType dtype : {DType::kInt32, DType::kUint32, DType::kFloat32, DType::kInt64,
                        DType::kUint64}) {
      for (bool pairs : {false, true}) {
        CompareWithCub(dtype, n, pairs, /*descending=*/(n & 1) != 0);
      }
    }
  }
  CompareWithCub(DType::kInt32, uint64_t{1} << 28, true, true);
}

// Past 2^31 keys (two portions of the look-back's 30-bit counts, 64-bit
// positions): int32 keys against CUB with an int64 count.
TEST(SortGpuTest, PastTwoToThe31) {
  size_t free_bytes = 0, total = 0;
  CUDA_ASSERT(cudaMemGetInfo(&free_bytes, &total));
  const uint64_t n = (uint64_t{1} << 31) + 4099;
  if (free_bytes < n * 4 * 6) GTEST_SKIP() << "needs " << n * 24 / (1 << 30) << " GiB";
  CompareWithCub(DType::kInt32, n, false, false);
}

// CUB's DeviceSegmentedSort on the same NaN-free segments, word for word.
TEST(SegmentedSortGpuTest, MatchesCub) {
  for (uint64_t n : {uint64_t{100000}, uint64_t{3000000}}) {
    const std::vector<uint64_t> starts = RandomStarts(n, n);
    std::vector<uint64_t> ends(starts.begin() + 1, starts.end());
    ends.push_back(n);
    const std::vector<float> keys = MakeKeys<float>(n, Pattern::kFewDistinct, n, true);
    std::vector<uint32_t> values(n);
    for (uint64_t i = 0; i < n; ++i) values[i] = static_cast<uint32_t>(i * 2654435761u);
    DeviceBuffer d_keys(n * 4), d_values(n * 4), d_begins(starts.size() * 8),
        d_ends(ends.size() * 8), ours(n * 4), ours_values(n * 4), cubs(n * 4), cub_values(n * 4);
    CUDA_ASSERT(ToDevice(d_keys.get(), keys));
    CUDA_ASSERT(ToDevice(d_values.get(), values));
    CUDA_ASSERT(ToDevice(d_begins.get(), starts));
    CUDA_ASSERT(ToDevice(d_ends.get(), ends));
    for (bool descending : {false, true}) {
      CUDA_ASSERT(ours.Poison());
      CUDA_ASSERT(cubs.Poison());
      gpu::SortPayload payload{true, DType::kUint32, d_values.get(), ours_values.get()};
      CUDA_ASSERT(RunTwoPhase([&](void* temp, size_t* bytes) {
        return gpu::SegmentedRadixSort(temp, bytes, d_keys.get(), ours.get(), n,
                                       DType::kFloat32, starts.data(), starts.size(), payload,
                                       descending, nullptr);
      }));
      CUDA_ASSERT(RunTwoPhase([&](void* temp, size_t* bytes) {
        return gpu::testing::CubSegmentedSort(
            temp, bytes, d_keys.get<float>(), cubs.get<float>(), d_values.get<uint32_t>(),
            cub_values.get<uint32_t>(), n, d_begins.get<uint64_t>(), d_ends.get<uint64_t>(),
            starts.size(), descending, nullptr);
      }));
      uint64_t mismatches = 0;
      CUDA_ASSERT(CountMismatchedWords(ours.get(), cubs.get(), n, &mismatches));
      EXPECT_EQ(mismatches, 0u) << "keys, descending=" << descending;
      CUDA_ASSERT(CountMismatchedWords(ours_values.get(), cub_values.get(), n, &mismatches));
      EXPECT_EQ(mismatches, 0u) << "values, descending=" << descending;
    }
  }
}

// In place: keys_out == keys_in, values_out == values_in.
TEST(SortGpuTest, InPlace) {
  for (uint64_t n : {uint64_t{3000}, uint64_t{500000}}) {
    const std::vector<int64_t> keys = MakeKeys<int64_t>(n, Pattern::kFewDistinct, n);
    std::vector<uint32_t> values(n);
    for (uint64_t i = 0; i < n; ++i) values[i] = static_cast<uint32_t>(i);
    DeviceBuffer d_keys(n * 8), d_values(n * 4);
    CUDA_ASSERT(ToDevice(d_keys.get(), keys));
    CUDA_ASSERT(ToDevice(d_values.get(), values));
    gpu::SortPayload payload{true, DType::kInt32, d_values.get(), d_values.get()};
    CUDA_ASSERT(RunTwoPhase([&](void* temp, size_t* bytes) {
      return gpu::RadixSort(temp, bytes, d_keys.get(), d_keys.get(), n, DType::kInt64, payload,
                            false, nullptr);
    }));
    const std::vector<int64_t> perm = reference::SortPermutation<int64_t>(keys, false);
    EXPECT_EQ(ToHost<int64_t>(d_keys.get(), n), reference::Permute<int64_t>(keys, perm));
    const std::vector<uint32_t> got = ToHost<uint32_t>(d_values.get(), n);
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<uint32_t>(perm[i])) << i;
  }
}

TEST(SortGpuTest, BadArguments) {
  size_t bytes = 0;
  EXPECT_EQ(gpu::RadixSort(nullptr, &bytes, nullptr, nullptr, 10, static_cast<DType>(9), {},
                           false, nullptr),
            1);
  EXPECT_EQ(gpu::RadixSort(nullptr, nullptr, nullptr, nullptr, 10, DType::kInt32, {}, false,
                           nullptr),
            1);
  EXPECT_EQ(gpu::SegmentedRadixSort(nullptr, &bytes, nullptr, nullptr, 10, DType::kInt32,
                                    nullptr, 3, {}, false, nullptr),
            1);
  gpu::SortPayload bad_values;
  bad_values.has_values = true;
  bad_values.value_dtype = static_cast<DType>(0);
  EXPECT_EQ(gpu::RadixSort(nullptr, &bytes, nullptr, nullptr, 10, DType::kInt32, bad_values,
                           false, nullptr),
            1);
  // The run phase with a value pointer missing.
  bad_values.value_dtype = DType::kInt32;
  char temp[16];
  bytes = sizeof(temp);
  EXPECT_EQ(gpu::RadixSort(temp, &bytes, temp, temp, 10, DType::kInt32, bad_values, false,
                           nullptr),
            1);
}

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* env = std::getenv("PRIMSERVE_TEST_SEED");
  primserve::g_seed = env ? std::strtoull(env, nullptr, 10)
                         : static_cast<uint64_t>(
                               std::chrono::steady_clock::now().time_since_epoch().count());
  std::printf("PRIMSERVE_TEST_SEED=%llu\n", static_cast<unsigned long long>(primserve::g_seed));
  return RUN_ALL_TESTS();
}
