#include "wire/parallel_copy.h"

#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace primserve::wire {
namespace {

// Random pieces (empty ones, odd sizes, odd addresses) cut from one buffer
// of random bytes, which owns them.
struct Source {
  std::string bytes;
  std::vector<absl::string_view> pieces;
  std::string whole;  // the pieces end to end, concatenated one by one
};

Source MakeSource(std::mt19937_64& random, size_t max_pieces, size_t max_piece_bytes) {
  Source source;
  const size_t count = std::uniform_int_distribution<size_t>(0, max_pieces)(random);
  std::vector<size_t> sizes;
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    // One in five empty; the rest anything up to the maximum, odd included.
    const size_t size = random() % 5 == 0
                            ? 0
                            : std::uniform_int_distribution<size_t>(1, max_piece_bytes)(random);
    sizes.push_back(size);
    total += size + 7;  // room to start each piece at an odd offset
  }
  source.bytes.resize(total);
  for (char& c : source.bytes) c = static_cast<char>(random());
  size_t at = 0;
  for (size_t size : sizes) {
    at += random() % 8;
    source.pieces.emplace_back(source.bytes.data() + at, size);
    source.whole.append(source.bytes.data() + at, size);
    at += size;
  }
  return source;
}

// Copies [offset, offset + n) of the source into the middle of a buffer
// filled with a guard byte, through `pool` (null: Gather::CopyTo), and checks
// the copied bytes and that nothing around them was touched.
void CheckCopy(CopyPool* pool, const Source& source, const Gather& gather, size_t offset, size_t n,
               size_t misalign) {
  constexpr size_t kGuard = 64;
  std::string out(kGuard + misalign + n + kGuard, '\x5a');
  char* to = out.data() + kGuard + misalign;
  Copy(pool, gather, offset, n, to);
  ASSERT_EQ(std::string(to, n), source.whole.substr(offset, n))
      << "offset " << offset << " n " << n << " of " << source.whole.size();
  EXPECT_EQ(out.substr(0, kGuard + misalign), std::string(kGuard + misalign, '\x5a'));
  EXPECT_EQ(out.substr(kGuard + misalign + n), std::string(kGuard, '\x5a'));
}

// A random range of the source: the whole, empty, or anything between.
std::pair<size_t, size_t> RandomRange(std::mt19937_64& random, size_t size) {
  switch (random() % 4) {
    case 0:
      return {0, size};
    case 1: {
      const size_t at = std::uniform_int_distribution<size_t>(0, size)(random);
      return {at, 0};
    }
    default: {
      const size_t a = std::uniform_int_distribution<size_t>(0, size)(random);
      const size_t b = std::uniform_int_distribution<size_t>(0, size)(random);
      return {std::min(a, b), std::max(a, b) - std::min(a, b)};
    }
  }
}

TEST(GatherTest, SizeCountsEveryPiece) {
  const std::string a = "abc", b = "defgh";
  const Gather gather({a, absl::string_view(), b, absl::string_view()});
  EXPECT_EQ(gather.size(), 8u);
  std::string out(8, ' ');
  gather.CopyTo(0, 8, out.data());
  EXPECT_EQ(out, "abcdefgh");
  std::string middle(3, ' ');
  gather.CopyTo(2, 3, middle.data());  // across the empty piece
  EXPECT_EQ(middle, "cde");
}

TEST(GatherTest, NoPiecesCopiesNothing) {
  const Gather gather({});
  EXPECT_EQ(gather.size(), 0u);
  gather.CopyTo(0, 0, nullptr);
  const Gather empties({absl::string_view(), absl::string_view()});
  EXPECT_EQ(empties.size(), 0u);
  empties.CopyTo(0, 0, nullptr);
}

TEST(GatherTest, RandomRangesMatchTheConcatenation) {
  std::mt19937_64 random(1);
  for (int round = 0; round < 300; ++round) {
    const Source source = MakeSource(random, 40, 3000);
    const Gather gather(source.pieces);
    ASSERT_EQ(gather.size(), source.whole.size());
    const auto [offset, n] = RandomRange(random, gather.size());
    CheckCopy(nullptr, source, gather, offset, n, random() % 8);
  }
}

TEST(CopyPoolTest, ThreadsCountsTheCaller) {
  EXPECT_EQ(CopyPool(0).threads(), 1);
  EXPECT_EQ(CopyPool(1).threads(), 1);
  EXPECT_EQ(CopyPool(4).threads(), 4);
}

// Pools of every size, chunks small enough (and odd) that a copy is cut
// across piece boundaries many times, and ranges at random offsets.
TEST(CopyPoolTest, RandomCopiesMatchASerialCopy) {
  std::mt19937_64 random(2);
  for (int threads : {0, 1, 2, 3, 8}) {
    for (size_t chunk : {size_t{13}, size_t{999}, size_t{4096}, size_t{65536}}) {
      CopyPool pool(threads, chunk, /*min_parallel_bytes=*/1);
      for (int round = 0; round < 20; ++round) {
        const Source source = MakeSource(random, 40, 5000);
        const Gather gather(source.pieces);
        const auto [offset, n] = RandomRange(random, gather.size());
        CheckCopy(&pool, source, gather, offset, n, random() % 8);
      }
    }
  }
}

// Large pieces, each cut into many chunks; and one piece only.
TEST(CopyPoolTest, LargePiecesAreCutIntoChunks) {
  std::mt19937_64 random(3);
  CopyPool pool(4, /*chunk_bytes=*/10000, /*min_parallel_bytes=*/1);
  for (size_t max_pieces : {size_t{1}, size_t{3}}) {
    for (int round = 0; round < 4; ++round) {
      Source source;
      do source = MakeSource(random, max_pieces, 1 << 20);
      while (source.whole.empty());
      const Gather gather(source.pieces);
      CheckCopy(&pool, source, gather, 0, gather.size(), random() % 8);
      CheckCopy(&pool, source, gather, 1, gather.size() - 1, random() % 8);
    }
  }
}

// Copies below the threshold stay on the caller; above it they are shared.
// Either way the bytes are the same.
TEST(CopyPoolTest, SmallAndLargeCopiesAroundTheThreshold) {
  std::mt19937_64 random(4);
  CopyPool pool(3, /*chunk_bytes=*/1000, /*min_parallel_bytes=*/5000);
  for (int round = 0; round < 50; ++round) {
    const Source source = MakeSource(random, 20, 1000);
    const Gather gather(source.pieces);
    for (size_t n : {size_t{4999}, size_t{5000}, size_t{5001}}) {
      if (n > gather.size()) continue;
      const size_t offset = std::uniform_int_distribution<size_t>(0, gather.size() - n)(random);
      CheckCopy(&pool, source, gather, offset, n, random() % 8);
    }
  }
}

// Many callers at once share a small pool: every copy is exact, none waits
// for ever (the pool's workers go to the oldest copy; each caller copies its
// own chunks meanwhile).
TEST(CopyPoolTest, ConcurrentCallersShareThePool) {
  CopyPool pool(4, /*chunk_bytes=*/4096, /*min_parallel_bytes=*/8192);
  constexpr int kCallers = 8;
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&pool, c] {
      std::mt19937_64 random(100 + c);
      for (int round = 0; round < 15; ++round) {
        const Source source = MakeSource(random, 30, 20000);
        const Gather gather(source.pieces);
        const auto [offset, n] = RandomRange(random, gather.size());
        CheckCopy(&pool, source, gather, offset, n, random() % 8);
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
}

// One source read by many callers at once, each into its own buffer (as the
// chunks of one pending scan input are filled while others are read).
TEST(CopyPoolTest, ConcurrentCopiesOfOneSource) {
  std::mt19937_64 random(5);
  Source source;
  do source = MakeSource(random, 200, 8000);
  while (source.whole.size() < 100000);
  const Gather gather(source.pieces);
  CopyPool pool(3, /*chunk_bytes=*/3000, /*min_parallel_bytes=*/3000);
  std::vector<std::thread> callers;
  for (int c = 0; c < 8; ++c) {
    callers.emplace_back([&, c] {
      std::mt19937_64 own(200 + c);
      for (int round = 0; round < 20; ++round) {
        const auto [offset, n] = RandomRange(own, gather.size());
        CheckCopy(&pool, source, gather, offset, n, own() % 8);
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
}

TEST(CopyPoolTest, IdlePoolsComeAndGo) {
  for (int i = 0; i < 20; ++i) CopyPool pool(1 + i % 5);
}

}  // namespace
}  // namespace primserve::wire
