#include "server/cuda/staging.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace primserve::cuda {
namespace {

TEST(LayoutTest, EverySliceIsAlignedAndInside) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 1000; ++trial) {
    Layout layout;
    std::vector<std::pair<size_t, size_t>> slices;  // offset, bytes
    const int count = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < count; ++i) {
      const size_t bytes = rng() % 4 == 0 ? 0 : rng() % 100000;
      slices.emplace_back(layout.Add(bytes), bytes);
    }
    size_t end = 0;
    for (const auto& [offset, bytes] : slices) {
      EXPECT_EQ(offset % kAlignment, 0u);
      EXPECT_GE(offset, end) << "slices overlap";
      end = offset + bytes;
      EXPECT_LE(end, layout.size());
    }
  }
}

TEST(LayoutTest, EmptyLayoutStillAllocates) {
  EXPECT_EQ(Layout().size(), kAlignment);
}

// An ARGMIN's answer is the values and then, aligned, the indices. Staging
// sized as segments * (element + 8) (as it once was) is short of where the
// indices end; a Layout's size holds them.
TEST(LayoutTest, ArgMinValuesAndIndicesFitTheirStaging) {
  struct Case {
    uint64_t segments;
    size_t element;
  };
  // One segment: an ARGMIN over an empty input. 1,365 int32 segments: the
  // old sizing rounded to 16 KiB and the indices ran 168 bytes past it.
  for (const Case& c : {Case{1, 4}, Case{1365, 4}, Case{1000, 1}, Case{77, 8}}) {
    SCOPED_TRACE(testing::Message() << c.segments << " segments of " << c.element << " bytes");
    Layout staging;
    const size_t values = staging.Add(c.segments * c.element);
    const size_t indices = staging.Add(c.segments * sizeof(int64_t));
    EXPECT_EQ(values, 0u);
    EXPECT_LE(indices + c.segments * sizeof(int64_t), staging.size());
    const size_t old_size = AlignUp(c.segments * (c.element + sizeof(int64_t)));
    if (c.segments == 1 || c.segments == 1365) {
      EXPECT_GT(indices + c.segments * sizeof(int64_t), old_size)
          << "the old sizing held this case; the test no longer shows the overrun";
    }
  }
}

TEST(ConcatenationTest, RequestsEndToEndWithTheirSegments) {
  Concatenation all;
  const std::vector<uint64_t> segments = {0, 2, 2, 5};
  all.Append(7, segments);  // four segments, one of them empty
  all.Append(0, {});        // an empty request is one (empty) segment
  all.Append(3, {});
  EXPECT_EQ(all.total, 10u);
  EXPECT_EQ(all.offsets, (std::vector<uint64_t>{0, 7, 7}));
  EXPECT_EQ(all.first_segment, (std::vector<uint64_t>{0, 4, 5}));
  EXPECT_EQ(all.segment_starts, (std::vector<uint64_t>{0, 2, 2, 5, 7, 7}));
  EXPECT_EQ(all.segments_of(0), 4u);
  EXPECT_EQ(all.segments_of(1), 1u);
  EXPECT_EQ(all.segments_of(2), 1u);
}

}  // namespace
}  // namespace primserve::cuda
