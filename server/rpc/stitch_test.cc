// Stitching against the CPU reference: an array cut into random pieces (empty
// ones included), each piece computed on its own by the reference with the
// stitcher's piece parameters, then stitched, equals the reference's answer
// for the whole array, bit for bit, whether the pieces' answers are strings
// or held in answer buffers (edited there, without a copy). Values are small
// integers, so float SUM and PROD are exact whatever the association.
#include "server/rpc/stitch.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "reference/reference.h"

namespace primserve {
namespace {

template <typename F>
void ForEachDType(F f) {
  f(int32_t{});
  f(int64_t{});
  f(uint32_t{});
  f(uint64_t{});
  f(float{});
  f(double{});
}

template <typename T>
std::vector<T> Random(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int> dist(-2, 2);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// Piece sizes adding up to n, with empty pieces among them.
std::vector<uint64_t> Pieces(std::mt19937& rng, uint64_t n) {
  std::vector<uint64_t> sizes;
  for (uint64_t left = n; left > 0;) {
    const uint64_t size = rng() % 4 == 0 ? 0 : std::min<uint64_t>(left, 1 + rng() % 40);
    sizes.push_back(size);
    left -= size;
  }
  if (rng() % 2) sizes.push_back(0);
  if (sizes.empty()) sizes.push_back(0);
  return sizes;
}

// Random global segment offsets for n elements (repeats and n included);
// empty half the time.
std::vector<uint64_t> Offsets(std::mt19937& rng, uint64_t n) {
  if (rng() % 2) return {};
  std::vector<uint64_t> offsets = {0};
  for (int i = 0, k = static_cast<int>(rng() % 12); i < k; ++i) offsets.push_back(rng() % (n + 1));
  std::sort(offsets.begin(), offsets.end());
  return offsets;
}

template <typename T>
ArrayView View(absl::Span<const T> values) {
  return ArrayView{DTypeOf<T>(), absl::string_view(reinterpret_cast<const char*>(values.data()),
                                                   values.size() * sizeof(T))};
}

template <typename T>
std::vector<T> Values(const HostArray& array) {
  std::vector<T> v(array.bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), array.bytes.data(), array.bytes.size());
  return v;
}

template <typename T>
void Append(std::vector<T>* to, const HostArray& array) {
  const std::vector<T> more = Values<T>(array);
  to->insert(to->end(), more.begin(), more.end());
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(StitchTest, ScanEqualsTheWholeScan) {
  std::mt19937 rng(1);
  ForEachDType([&](auto zero) {
    using T = decltype(zero);
    for (int round = 0; round < 40; ++round) {
      const std::vector<T> input = Random<T>(rng, rng() % 200);
      const auto span = absl::MakeConstSpan(input);
      const std::vector<uint64_t> offsets = Offsets(rng, input.size());
      for (Op op : {Op::kSum, Op::kProd, Op::kMin, Op::kMax}) {
        for (bool exclusive : {false, true}) {
          ScanStitch stitch(op, exclusive, offsets);
          std::vector<T> got;
          uint64_t start = 0;
          for (uint64_t size : Pieces(rng, input.size())) {
            const auto piece = span.subspan(start, size);
            const std::vector<uint64_t> local = stitch.PieceOffsets(start, size);
            HostArray out = HostArray::Of<T>(DTypeOf<T>(),
                                             reference::Scan<T>(piece, op, exclusive, local));
            stitch.Stitch(View(piece), &out);
            Append(&got, out);
            start += size;
          }
          EXPECT_TRUE(stitch.Finish().ok());
          EXPECT_EQ(Bytes(got), Bytes(reference::Scan<T>(span, op, exclusive, offsets)))
              << DTypeName(DTypeOf<T>()) << " " << OpName(op) << " exclusive " << exclusive;
        }
      }
    }
  });
}

TEST(StitchTest, ScanRefusesAnOffsetPastTheEnd) {
  ScanStitch stitch(Op::kSum, false, {0, 3, 9});
  const std::vector<int32_t> input = {1, 2, 3, 4};
  HostArray out = HostArray::Of<int32_t>(
      DType::kInt32, reference::Scan<int32_t>(input, Op::kSum, false, stitch.PieceOffsets(0, 4)));
  stitch.Stitch(View(absl::MakeConstSpan(input)), &out);
  const absl::Status status = stitch.Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "segment_offsets[2] = 9 is past the end of the stream's input (4 elements)");
}

TEST(StitchTest, SelectEqualsTheWholeSelect) {
  std::mt19937 rng(2);
  ForEachDType([&](auto zero) {
    using T = decltype(zero);
    for (int round = 0; round < 40; ++round) {
      const std::vector<T> input = Random<T>(rng, rng() % 200);
      const auto span = absl::MakeConstSpan(input);
      std::vector<bool> keep(input.size());
      for (size_t i = 0; i < keep.size(); ++i) keep[i] = rng() % 3 == 0;
      SelectStitch stitch;
      std::vector<T> values;
      std::vector<int64_t> indices;
      uint64_t count = 0;
      uint64_t start = 0;
      for (uint64_t size : Pieces(rng, input.size())) {
        const std::vector<bool> piece_keep(keep.begin() + start, keep.begin() + start + size);
        const auto local = reference::Select<T>(span.subspan(start, size), piece_keep, false);
        SelectResult result{HostArray::Of<T>(DTypeOf<T>(), local.values),
                            HostArray::Of<int64_t>(DType::kInt64, local.indices), local.count};
        stitch.Stitch(size, &result);
        Append(&values, *result.values);
        Append(&indices, *result.indices);
        EXPECT_GE(result.count, count);
        count = result.count;
        start += size;
      }
      const auto whole = reference::Select<T>(span, keep, false);
      EXPECT_EQ(Bytes(values), Bytes(whole.values));
      EXPECT_EQ(indices, whole.indices);
      EXPECT_EQ(count, whole.count);
    }
  });
}

TEST(StitchTest, UniqueEqualsTheWholeUnique) {
  std::mt19937 rng(3);
  ForEachDType([&](auto zero) {
    using T = decltype(zero);
    for (int round = 0; round < 40; ++round) {
      const std::vector<T> input = Random<T>(rng, rng() % 200);
      const auto span = absl::MakeConstSpan(input);
      UniqueStitch stitch;
      std::vector<T> got;
      uint64_t start = 0;
      for (uint64_t size : Pieces(rng, input.size())) {
        const auto piece = span.subspan(start, size);
        HostArray values = HostArray::Of<T>(DTypeOf<T>(), reference::Unique<T>(piece));
        stitch.Stitch(View(piece), &values);
        Append(&got, values);
        start += size;
      }
      EXPECT_EQ(Bytes(got), Bytes(reference::Unique<T>(span)));
    }
  });
}

TEST(StitchTest, RunLengthEncodeEqualsTheWholeEncoding) {
  std::mt19937 rng(4);
  ForEachDType([&](auto zero) {
    using T = decltype(zero);
    for (int round = 0; round < 40; ++round) {
      const std::vector<T> input = Random<T>(rng, rng() % 200);
      const auto span = absl::MakeConstSpan(input);
      RunStitch stitch;
      std::vector<T> values;
      std::vector<int64_t> lengths;
      uint64_t start = 0;
      for (uint64_t size : Pieces(rng, input.size())) {
        const auto runs = reference::RunLengthEncode<T>(span.subspan(start, size));
        HostArray v = HostArray::Of<T>(DTypeOf<T>(), runs.values);
        HostArray l = HostArray::Of<int64_t>(DType::kInt64, runs.lengths);
        stitch.Stitch(&v, &l);
        Append(&values, v);
        Append(&lengths, l);
        start += size;
      }
      HostArray v, l;
      stitch.Flush(&v, &l);
      EXPECT_EQ(v.dtype, DTypeOf<T>());
      Append(&values, v);
      Append(&lengths, l);
      const auto whole = reference::RunLengthEncode<T>(span);
      EXPECT_EQ(Bytes(values), Bytes(whole.values));
      EXPECT_EQ(lengths, whole.lengths);
    }
  });
}

TEST(StitchTest, ReduceByKeyEqualsTheWholeReduction) {
  std::mt19937 rng(5);
  ForEachDType([&](auto zero) {
    using V = decltype(zero);
    using K = int64_t;
    for (int round = 0; round < 20; ++round) {
      const size_t n = rng() % 200;
      const std::vector<K> keys = Random<K>(rng, n);
      const std::vector<V> input = Random<V>(rng, n);
      for (Op op : {Op::kSum, Op::kProd, Op::kMin, Op::kMax}) {
        RunStitch stitch(op);
        std::vector<K> got_keys;
        std::vector<V> got_values;
        uint64_t start = 0;
        for (uint64_t size : Pieces(rng, n)) {
          const auto local = reference::ReduceByKey<K, V>(
              absl::MakeConstSpan(keys).subspan(start, size),
              absl::MakeConstSpan(input).subspan(start, size), op);
          HostArray k = HostArray::Of<K>(DType::kInt64, local.keys);
          HostArray v = HostArray::Of<V>(DTypeOf<V>(), local.values);
          stitch.Stitch(&k, &v);
          Append(&got_keys, k);
          Append(&got_values, v);
          start += size;
        }
        HostArray k, v;
        stitch.Flush(&k, &v);
        Append(&got_keys, k);
        Append(&got_values, v);
        const auto whole = reference::ReduceByKey<K, V>(keys, input, op);
        EXPECT_EQ(got_keys, whole.keys);
        EXPECT_EQ(Bytes(got_values), Bytes(whole.values)) << OpName(op);
      }
    }
  });
}

TEST(StitchTest, ReduceEqualsTheWholeReduction) {
  std::mt19937 rng(6);
  ForEachDType([&](auto zero) {
    using T = decltype(zero);
    for (int round = 0; round < 40; ++round) {
      const std::vector<T> input = Random<T>(rng, rng() % 200);
      const auto span = absl::MakeConstSpan(input);
      const std::vector<uint64_t> offsets = Offsets(rng, input.size());
      for (Op op : {Op::kSum, Op::kProd, Op::kMin, Op::kMax, Op::kArgMin, Op::kArgMax}) {
        ReduceStitch stitch(op, offsets);
        uint64_t start = 0;
        for (uint64_t size : Pieces(rng, input.size())) {
          const auto local =
              reference::Reduce<T>(span.subspan(start, size), op, stitch.PieceOffsets(start, size));
          ReduceResult result{HostArray::Of<T>(DTypeOf<T>(), local.values)};
          if (op == Op::kArgMin || op == Op::kArgMax) {
            result.indices = HostArray::Of<int64_t>(DType::kInt64, local.indices);
          }
          stitch.Stitch(size, std::move(result));
          start += size;
        }
        absl::StatusOr<ReduceResult> got = stitch.Finish(DTypeOf<T>());
        ASSERT_TRUE(got.ok()) << got.status();
        const auto whole = reference::Reduce<T>(span, op, offsets);
        EXPECT_EQ(Bytes(Values<T>(got->values)), Bytes(whole.values)) << OpName(op);
        if (op == Op::kArgMin || op == Op::kArgMax) {
          EXPECT_EQ(Values<int64_t>(*got->indices), whole.indices) << OpName(op);
        } else {
          EXPECT_FALSE(got->indices.has_value());
        }
      }
    }
  });
}

TEST(StitchTest, AggregateByKeyEqualsTheWholeAggregation) {
  std::mt19937 rng(7);
  ForEachDType([&](auto zero) {
    using V = decltype(zero);
    for (int round = 0; round < 20; ++round) {
      const size_t n = rng() % 200;
      const uint64_t num_keys = 1 + rng() % 10;
      std::vector<uint32_t> keys(n);
      for (uint32_t& k : keys) k = static_cast<uint32_t>(rng() % num_keys);
      const std::vector<V> input = Random<V>(rng, n);
      for (Op op : {Op::kSum, Op::kMin, Op::kMax}) {
        AggregateStitch stitch(op);
        uint64_t start = 0;
        for (uint64_t size : Pieces(rng, n)) {
          absl::StatusOr<std::vector<V>> local = reference::AggregateByKey<uint32_t, V>(
              absl::MakeConstSpan(keys).subspan(start, size),
              absl::MakeConstSpan(input).subspan(start, size), op, num_keys);
          ASSERT_TRUE(local.ok());
          stitch.Stitch({HostArray::Of<V>(DTypeOf<V>(), *local)});
          start += size;
        }
        absl::StatusOr<std::vector<V>> whole =
            reference::AggregateByKey<uint32_t, V>(keys, input, op, num_keys);
        ASSERT_TRUE(whole.ok());
        EXPECT_EQ(Bytes(Values<V>(stitch.Finish().values)), Bytes(*whole)) << OpName(op);
      }
    }
  });
}

// An answer held in a buffer of its own (HostArray::held), as a stream's
// answer buffers hold them: `room` bytes of the buffer before it.
struct HeldBuffer {
  std::shared_ptr<char> buffer;
  size_t size = 0;

  // Whether `array` is still held in this buffer (edited where it lies).
  bool Holds(const HostArray& array) const {
    return array.held != nullptr && array.bytes.empty() && array.held.get() >= buffer.get() &&
           array.held.get() + array.held_bytes <= buffer.get() + size;
  }
};

HeldBuffer Hold(HostArray* array, size_t room) {
  const size_t bytes = array->bytes.size();
  HeldBuffer held{std::shared_ptr<char>(new char[room + bytes], std::default_delete<char[]>()),
                  room + bytes};
  if (bytes > 0) std::memcpy(held.buffer.get() + room, array->bytes.data(), bytes);
  array->held = std::shared_ptr<char>(held.buffer, held.buffer.get() + room);
  array->held_bytes = bytes;
  array->held_room = room;
  array->bytes.clear();
  return held;
}

template <typename T>
void AppendHeld(std::vector<T>* to, const HostArray& array) {
  const absl::string_view bytes = array.data();
  const size_t n = to->size();
  to->resize(n + bytes.size() / sizeof(T));
  if (!bytes.empty()) std::memcpy(to->data() + n, bytes.data(), bytes.size());
}

// Answers held in buffers are stitched in place: a scan's carry, a select's
// positions, a unique's repeated first value dropped and a run held back and
// put in front of the next piece's runs all leave each answer in its buffer
// (no copy), and the stitched answers are the whole array's.
TEST(StitchTest, HeldAnswersAreStitchedWhereTheyLie) {
  std::mt19937 rng(8);
  constexpr size_t kRoom = 8;
  ForEachDType([&](auto zero) {
    using T = decltype(zero);
    for (int round = 0; round < 20; ++round) {
      const std::vector<T> input = Random<T>(rng, rng() % 300);
      const auto span = absl::MakeConstSpan(input);
      const std::vector<uint64_t> offsets = Offsets(rng, input.size());
      ScanStitch scan(Op::kSum, false, offsets);
      SelectStitch select;
      UniqueStitch unique;
      RunStitch runs;
      RunStitch by_key(Op::kMax);
      std::vector<T> scanned, selected, uniques, run_values, keys;
      std::vector<int64_t> positions, lengths;
      std::vector<T> maxima;
      uint64_t start = 0;
      for (uint64_t size : Pieces(rng, input.size())) {
        const auto piece = span.subspan(start, size);
        HostArray out = HostArray::Of<T>(
            DTypeOf<T>(), reference::Scan<T>(piece, Op::kSum, false, scan.PieceOffsets(start, size)));
        const HeldBuffer out_buffer = Hold(&out, kRoom);
        scan.Stitch(View(piece), &out);
        EXPECT_TRUE(out_buffer.Holds(out));
        AppendHeld(&scanned, out);

        std::vector<bool> keep(size);
        for (uint64_t i = 0; i < size; ++i) keep[i] = piece[i] > T{0};
        const auto kept = reference::Select<T>(piece, keep, false);
        SelectResult result{HostArray::Of<T>(DTypeOf<T>(), kept.values),
                            HostArray::Of<int64_t>(DType::kInt64, kept.indices), kept.count};
        const HeldBuffer indices_buffer = Hold(&*result.indices, kRoom);
        select.Stitch(size, &result);
        EXPECT_TRUE(indices_buffer.Holds(*result.indices));
        AppendHeld(&selected, *result.values);
        AppendHeld(&positions, *result.indices);

        HostArray distinct = HostArray::Of<T>(DTypeOf<T>(), reference::Unique<T>(piece));
        const HeldBuffer distinct_buffer = Hold(&distinct, kRoom);
        unique.Stitch(View(piece), &distinct);
        EXPECT_TRUE(distinct_buffer.Holds(distinct));
        AppendHeld(&uniques, distinct);

        const auto encoded = reference::RunLengthEncode<T>(piece);
        HostArray v = HostArray::Of<T>(DTypeOf<T>(), encoded.values);
        HostArray l = HostArray::Of<int64_t>(DType::kInt64, encoded.lengths);
        const HeldBuffer v_buffer = Hold(&v, kRoom);
        const HeldBuffer l_buffer = Hold(&l, kRoom);
        runs.Stitch(&v, &l);
        EXPECT_TRUE(v_buffer.Holds(v) && l_buffer.Holds(l));
        AppendHeld(&run_values, v);
        AppendHeld(&lengths, l);

        const auto reduced = reference::ReduceByKey<T, T>(piece, piece, Op::kMax);
        HostArray k = HostArray::Of<T>(DTypeOf<T>(), reduced.keys);
        HostArray m = HostArray::Of<T>(DTypeOf<T>(), reduced.values);
        const HeldBuffer k_buffer = Hold(&k, kRoom);
        const HeldBuffer m_buffer = Hold(&m, kRoom);
        by_key.Stitch(&k, &m);
        EXPECT_TRUE(k_buffer.Holds(k) && m_buffer.Holds(m));
        AppendHeld(&keys, k);
        AppendHeld(&maxima, m);
        start += size;
      }
      HostArray v, l, k, m;
      runs.Flush(&v, &l);
      AppendHeld(&run_values, v);
      AppendHeld(&lengths, l);
      by_key.Flush(&k, &m);
      AppendHeld(&keys, k);
      AppendHeld(&maxima, m);

      EXPECT_EQ(Bytes(scanned), Bytes(reference::Scan<T>(span, Op::kSum, false, offsets)));
      std::vector<bool> keep(input.size());
      for (size_t i = 0; i < input.size(); ++i) keep[i] = input[i] > T{0};
      const auto kept = reference::Select<T>(span, keep, false);
      EXPECT_EQ(Bytes(selected), Bytes(kept.values));
      EXPECT_EQ(positions, kept.indices);
      EXPECT_EQ(Bytes(uniques), Bytes(reference::Unique<T>(span)));
      const auto encoded = reference::RunLengthEncode<T>(span);
      EXPECT_EQ(Bytes(run_values), Bytes(encoded.values));
      EXPECT_EQ(lengths, encoded.lengths);
      const auto reduced = reference::ReduceByKey<T, T>(span, span, Op::kMax);
      EXPECT_EQ(Bytes(keys), Bytes(reduced.keys));
      EXPECT_EQ(Bytes(maxima), Bytes(reduced.values));
    }
  });
}

// A scan shaped like the GPU's (kernels/NOTES.md, issue 18): tiles of
// `granule` elements from the first element, each element the tile's prefix
// (the carry, then each earlier tile's total folded in) plus its sum from the
// tile's start, so its float bits depend on where the tiles begin.
std::vector<float> TiledScan(const std::vector<float>& in, uint64_t granule, float* carry) {
  std::vector<float> out(in.size());
  for (uint64_t tile = 0; tile < in.size(); tile += granule) {
    float local = 0;
    const uint64_t end = std::min<uint64_t>(tile + granule, in.size());
    for (uint64_t i = tile; i < end; ++i) {
      local += in[i];
      out[i] = *carry + local;
    }
    *carry += local;
  }
  return out;
}

std::vector<float> FloatsOf(absl::string_view bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

// Every operation the cut hands out starts and ends at a multiple of the
// granule (the last, at the end of the stream, only starts at one), holds
// fewer than a granule back, and the operations are the stream in order.
TEST(ScanCutTest, OperationsStartAtMultiplesOfTheGranuleAndMakeTheWhole) {
  std::mt19937 rng(11);
  for (int round = 0; round < 400; ++round) {
    const uint64_t granule = std::vector<uint64_t>{0, 1, 3, 16, 64, 100}[rng() % 6];
    const size_t element = rng() % 2 ? 4 : 8;
    const uint64_t n = rng() % 3 == 0 ? rng() % 8 : rng() % 1000;
    std::string whole(n * element, '\0');
    for (char& c : whole) c = static_cast<char>(rng());
    // Random pieces, empty ones among them; the whole as one piece at times.
    std::vector<uint64_t> sizes = rng() % 5 == 0 ? std::vector<uint64_t>{n} : Pieces(rng, n);
    ScanCut cut(granule, element);
    std::string joined;
    uint64_t received = 0;
    for (uint64_t size : sizes) {
      const uint64_t start = cut.cut_elements();
      const std::string next =
          cut.Next(absl::string_view(whole).substr(received * element, size * element));
      received += size;
      ASSERT_EQ(next.size() % element, 0u);
      if (granule > 0) {
        EXPECT_EQ(start % granule, 0u) << "granule " << granule;
        EXPECT_EQ(cut.cut_elements() % granule, 0u);
        EXPECT_LT(cut.held_elements(), granule);
      } else {
        EXPECT_EQ(cut.held_elements(), 0u) << "no granule: nothing is held";
      }
      EXPECT_EQ(cut.cut_elements() + cut.held_elements(), received);
      EXPECT_EQ(start + next.size() / element, cut.cut_elements());
      joined += next;
    }
    const uint64_t last_start = cut.cut_elements();
    if (granule > 0) {
      EXPECT_EQ(last_start % granule, 0u);
    }
    joined += cut.Flush();
    EXPECT_EQ(cut.held_elements(), 0u);
    EXPECT_EQ(cut.cut_elements(), n);
    EXPECT_EQ(joined, whole) << "granule " << granule << ", " << sizes.size() << " pieces";
  }
}

// Scanned one operation at a time with the carry, the cut's operations give
// the bits of one tiled scan of the whole, in any piece sizes; cutting where
// the pieces end instead (what a stream did before) does not.
TEST(ScanCutTest, TiledScansOfTheOperationsWithTheCarryAreTheWholeScanBitForBit) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> value(-1000.0f, 1000.0f);
  int piece_cuts_differ = 0;
  for (int round = 0; round < 50; ++round) {
    const uint64_t granule = 8 + rng() % 120;
    const uint64_t n = 1 + rng() % 3000;
    std::vector<float> in(n);
    for (float& x : in) x = value(rng);
    float whole_carry = 0;
    const std::vector<float> whole = TiledScan(in, granule, &whole_carry);
    std::vector<uint64_t> sizes = Pieces(rng, n);
    ScanCut cut(granule, sizeof(float));
    std::vector<float> streamed;
    std::vector<float> by_piece;
    float carry = 0;
    float piece_carry = 0;
    uint64_t start = 0;
    for (uint64_t size : sizes) {
      const std::vector<float> piece(in.begin() + start, in.begin() + start + size);
      start += size;
      const std::vector<float> out = TiledScan(
          FloatsOf(cut.Next(absl::string_view(reinterpret_cast<const char*>(piece.data()),
                                              piece.size() * sizeof(float)))),
          granule, &carry);
      streamed.insert(streamed.end(), out.begin(), out.end());
      const std::vector<float> naive = TiledScan(piece, granule, &piece_carry);
      by_piece.insert(by_piece.end(), naive.begin(), naive.end());
    }
    const std::vector<float> last = TiledScan(FloatsOf(cut.Flush()), granule, &carry);
    streamed.insert(streamed.end(), last.begin(), last.end());
    ASSERT_EQ(streamed.size(), n);
    EXPECT_EQ(Bytes(streamed), Bytes(whole)) << "granule " << granule << ", n " << n;
    EXPECT_EQ(carry, whole_carry);
    piece_cuts_differ += Bytes(by_piece) != Bytes(whole);
  }
  EXPECT_GT(piece_cuts_differ, 0) << "the tiled scan must depend on where tiles start";
}

}  // namespace
}  // namespace primserve
