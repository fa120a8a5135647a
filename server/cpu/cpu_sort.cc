#include "server/cpu/cpu_sort.h"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "reference/sort.h"
#include "server/cpu/parts.h"

namespace primserve::cpu {
namespace {

// A key beside its input position: sorting these moves the keys with their
// positions through contiguous memory, where sorting positions by key would
// look each key up at random on every comparison.
template <typename K>
struct Item {
  K key;
  int64_t position;
};

// Sorts items[begin, end) stably by key (ties keep the items' order, which
// is their positions' order).
template <typename K>
void SortRange(std::vector<Item<K>>& items, uint64_t begin, uint64_t end, bool descending) {
  std::stable_sort(items.begin() + begin, items.begin() + end,
                   [descending](const Item<K>& a, const Item<K>& b) {
                     return reference::SortsBefore(a.key, b.key, descending);
                   });
}

// Sorts items[begin, end) over up to parallelism.threads threads: parts
// sorted at once, then merged in rounds of neighbour pairs, each pair on its
// own thread. std::merge takes the left run's item first among equals, and
// the left run holds the earlier positions, so the whole stays stable.
template <typename K>
void SortLarge(std::vector<Item<K>>& items, uint64_t begin, uint64_t end, bool descending,
               const Parallelism& parallelism) {
  // Runs as offsets from begin: run r is [bounds[r], bounds[r + 1]).
  std::vector<uint64_t> firsts(std::max(1, parallelism.threads));
  const int count = ForEachPart(end - begin, parallelism, [&](int p, uint64_t b, uint64_t e) {
    SortRange(items, begin + b, begin + e, descending);
    firsts[p] = b;
  });
  std::vector<uint64_t> bounds(firsts.begin(), firsts.begin() + count);
  bounds.push_back(end - begin);
  std::vector<Item<K>> scratch(end - begin);
  Item<K>* from = items.data() + begin;
  Item<K>* to = scratch.data();
  auto before = [descending](const Item<K>& a, const Item<K>& b) {
    return reference::SortsBefore(a.key, b.key, descending);
  };
  while (bounds.size() > 2) {
    std::vector<uint64_t> merged;
    std::vector<std::thread> threads;
    for (size_t r = 0; r + 1 < bounds.size(); r += 2) {
      merged.push_back(bounds[r]);
      const uint64_t lo = bounds[r];
      const uint64_t mid = bounds[r + 1];
      const uint64_t hi = r + 2 < bounds.size() ? bounds[r + 2] : mid;
      threads.emplace_back([=] {
        std::merge(from + lo, from + mid, from + mid, from + hi, to + lo, before);
      });
    }
    merged.push_back(end - begin);
    for (std::thread& t : threads) t.join();
    std::swap(from, to);
    bounds = std::move(merged);
  }
  if (from != items.data() + begin) std::copy(from, from + (end - begin), items.data() + begin);
}

}  // namespace

template <typename K>
std::vector<int64_t> SortPermutation(absl::Span<const K> keys, bool descending,
                                     absl::Span<const uint64_t> segment_starts,
                                     const Parallelism& parallelism) {
  const uint64_t n = keys.size();
  std::vector<Item<K>> items(n);
  ForEachPart(n, parallelism, [&](int, uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) items[i] = {keys[i], static_cast<int64_t>(i)};
  });
  const size_t segments = segment_starts.empty() ? 1 : segment_starts.size();
  auto segment_begin = [&](size_t s) { return segment_starts.empty() ? 0 : segment_starts[s]; };
  auto segment_end = [&](size_t s) {
    return s + 1 < segment_starts.size() ? segment_starts[s + 1] : n;
  };
  const uint64_t large = 2 * std::max<uint64_t>(1, parallelism.min_items);
  const bool threaded = parallelism.threads > 1;
  // Short segments: each part of [0, n) sorts the segments that start in it.
  ForEachPart(n, parallelism, [&](int, uint64_t begin, uint64_t end) {
    size_t s = segment_starts.empty()
                   ? 0
                   : std::lower_bound(segment_starts.begin(), segment_starts.end(), begin) -
                         segment_starts.begin();
    for (; s < segments && segment_begin(s) < end; ++s) {
      const uint64_t b = segment_begin(s);
      const uint64_t e = segment_end(s);
      if (b < begin || (threaded && e - b >= large)) continue;
      SortRange(items, b, e, descending);
    }
  });
  if (threaded) {
    for (size_t s = 0; s < segments; ++s) {
      if (segment_end(s) - segment_begin(s) >= large) {
        SortLarge(items, segment_begin(s), segment_end(s), descending, parallelism);
      }
    }
  }
  std::vector<int64_t> order(n);
  ForEachPart(n, parallelism, [&](int, uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) order[i] = items[i].position;
  });
  return order;
}

#define PRIMSERVE_CPU_SORT(K)                                                                   \
  template std::vector<int64_t> SortPermutation<K>(absl::Span<const K>, bool,                  \
                                                   absl::Span<const uint64_t>, const Parallelism&);
PRIMSERVE_CPU_SORT(int32_t)
PRIMSERVE_CPU_SORT(int64_t)
PRIMSERVE_CPU_SORT(uint32_t)
PRIMSERVE_CPU_SORT(uint64_t)
PRIMSERVE_CPU_SORT(float)
PRIMSERVE_CPU_SORT(double)
#undef PRIMSERVE_CPU_SORT

}  // namespace primserve::cpu
