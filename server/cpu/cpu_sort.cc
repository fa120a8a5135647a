#include "server/cpu/cpu_sort.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "reference/sort.h"
#include "server/cpu/parts.h"
#include "server/cpu/scratch.h"

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

// Sorts keys[begin, end) stably by std::stable_sort into sorted and order,
// through `items` (kept by the caller, to be reused).
template <typename K>
void SortShort(const K* keys, uint64_t begin, uint64_t end, bool descending,
               std::vector<Item<K>>& items, K* sorted, int64_t* order) {
  items.clear();
  for (uint64_t i = begin; i < end; ++i) items.push_back({keys[i], static_cast<int64_t>(i)});
  std::stable_sort(items.begin(), items.end(), [descending](const Item<K>& a, const Item<K>& b) {
    return reference::SortsBefore(a.key, b.key, descending);
  });
  for (uint64_t i = begin; i < end; ++i) {
    sorted[i] = items[i - begin].key;
    order[i] = items[i - begin].position;
  }
}

// The unsigned integer of K's width.
template <typename K>
using RadixKey = std::conditional_t<sizeof(K) == 4, uint32_t, uint64_t>;

template <typename K>
constexpr RadixKey<K> kSignBit = RadixKey<K>{1} << (8 * sizeof(K) - 1);

// Every NaN's key: after every other key, in both directions.
template <typename K>
constexpr RadixKey<K> kNanKey = ~RadixKey<K>{0};

// The key whose unsigned order is reference::SortsBefore's: integers with the
// sign bit flipped, floats with every bit flipped when negative and the sign
// bit when not; -0.0 as +0.0 and every NaN as kNanKey, so that they tie;
// descending flips every bit but a NaN's.
template <typename K>
RadixKey<K> SortKey(K k, bool descending) {
  using U = RadixKey<K>;
  U bits;
  std::memcpy(&bits, &k, sizeof(K));
  if constexpr (std::is_floating_point_v<K>) {
    if (k != k) return kNanKey<K>;
    if (k == K(0)) bits = 0;
    bits ^= (bits & kSignBit<K>) ? ~U{0} : kSignBit<K>;
  } else if constexpr (std::is_signed_v<K>) {
    bits ^= kSignBit<K>;
  }
  return descending ? ~bits : bits;
}

// The key SortKey(k) came from, but for a float key of a zero or a NaN,
// which stands for more than one key (`exact` false: look the key up).
template <typename K>
K FromSortKey(RadixKey<K> key, bool descending, bool& exact) {
  using U = RadixKey<K>;
  exact = true;
  if constexpr (std::is_floating_point_v<K>) {
    if (key == kNanKey<K>) {
      exact = false;
      return K(0);
    }
  }
  U bits = descending ? ~key : key;
  if constexpr (std::is_floating_point_v<K>) {
    exact = bits != kSignBit<K>;  // the key of both zeros
    bits ^= (bits & kSignBit<K>) ? kSignBit<K> : ~U{0};
  } else if constexpr (std::is_signed_v<K>) {
    bits ^= kSignBit<K>;
  }
  K k;
  std::memcpy(&k, &bits, sizeof(K));
  return k;
}

// A radix key beside its position in the segment, moved together in one
// store (8 bytes for 4-byte keys).
template <typename K>
struct RadixItem {
  RadixKey<K> key;
  uint32_t position;
};

// Radix sorts keys[begin, end) (fewer than 2^32 keys) into sorted and
// order: least significant byte first, each pass stable, so the last pass
// leaves equal keys in input order. A pass counts each part's bytes, gives
// each (bucket, part) its slots, bucket by bucket and in each bucket part by
// part, and moves each part's items on its own thread; a byte that every key
// shares is skipped.
template <typename K>
void RadixSort(const K* keys, uint64_t begin, uint64_t end, bool descending,
               const Parallelism& parallelism, K* sorted, int64_t* order) {
  const uint64_t n = end - begin;
  Scratch<RadixItem<K>> buffers[2] = {NewScratch<RadixItem<K>>(n), NewScratch<RadixItem<K>>(n)};
  RadixItem<K>* from = buffers[0].get();
  RadixItem<K>* to = buffers[1].get();
  ForEachPart(n, parallelism, [&](int, uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      from[i] = {SortKey(keys[begin + i], descending), static_cast<uint32_t>(i)};
    }
  });
  std::vector<std::array<uint64_t, 256>> slots(PartCount(n, parallelism));
  for (unsigned shift = 0; shift < 8 * sizeof(K); shift += 8) {
    ForEachPart(n, parallelism, [&](int p, uint64_t b, uint64_t e) {
      std::array<uint64_t, 256>& count = slots[p];
      count.fill(0);
      for (uint64_t i = b; i < e; ++i) ++count[(from[i].key >> shift) & 255];
    });
    uint64_t next = 0;
    bool shared = false;
    for (int digit = 0; digit < 256; ++digit) {
      uint64_t in_bucket = 0;
      for (std::array<uint64_t, 256>& part : slots) {
        in_bucket += part[digit];
        part[digit] = std::exchange(next, next + part[digit]);
      }
      shared = shared || in_bucket == n;
    }
    if (shared) continue;
    ForEachPart(n, parallelism, [&](int p, uint64_t b, uint64_t e) {
      std::array<uint64_t, 256>& at = slots[p];
      for (uint64_t i = b; i < e; ++i) to[at[(from[i].key >> shift) & 255]++] = from[i];
    });
    std::swap(from, to);
  }
  ForEachPart(n, parallelism, [&](int, uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      const uint64_t position = begin + from[i].position;
      bool exact;
      const K key = FromSortKey<K>(from[i].key, descending, exact);
      sorted[begin + i] = exact ? key : keys[position];
      order[begin + i] = static_cast<int64_t>(position);
    }
  });
}

}  // namespace

template <typename K>
void Sort(absl::Span<const K> keys, bool descending, absl::Span<const uint64_t> segment_starts,
          const Parallelism& parallelism, absl::Span<K> sorted, absl::Span<int64_t> order) {
  const uint64_t n = keys.size();
  const size_t segments = segment_starts.empty() ? 1 : segment_starts.size();
  auto segment_begin = [&](size_t s) { return segment_starts.empty() ? 0 : segment_starts[s]; };
  auto segment_end = [&](size_t s) {
    return s + 1 < segment_starts.size() ? segment_starts[s + 1] : n;
  };
  // Radix positions are 32-bit, relative to the segment.
  auto radix = [](uint64_t length) {
    return length >= kRadixSortItems && length < (uint64_t{1} << 32);
  };
  // Short segments: each part of [0, n) sorts the segments that start in it.
  ForEachPart(n, parallelism, [&](int, uint64_t begin, uint64_t end) {
    std::vector<Item<K>> items;
    size_t s = segment_starts.empty()
                   ? 0
                   : std::lower_bound(segment_starts.begin(), segment_starts.end(), begin) -
                         segment_starts.begin();
    for (; s < segments && segment_begin(s) < end; ++s) {
      const uint64_t b = segment_begin(s);
      const uint64_t e = segment_end(s);
      if (b < begin || radix(e - b)) continue;
      SortShort(keys.data(), b, e, descending, items, sorted.data(), order.data());
    }
  });
  for (size_t s = 0; s < segments; ++s) {
    if (radix(segment_end(s) - segment_begin(s))) {
      RadixSort(keys.data(), segment_begin(s), segment_end(s), descending, parallelism,
                sorted.data(), order.data());
    }
  }
}

#define PRIMSERVE_CPU_SORT(K)                                                                \
  template void Sort<K>(absl::Span<const K>, bool, absl::Span<const uint64_t>,               \
                        const Parallelism&, absl::Span<K>, absl::Span<int64_t>);
PRIMSERVE_CPU_SORT(int32_t)
PRIMSERVE_CPU_SORT(int64_t)
PRIMSERVE_CPU_SORT(uint32_t)
PRIMSERVE_CPU_SORT(uint64_t)
PRIMSERVE_CPU_SORT(float)
PRIMSERVE_CPU_SORT(double)
#undef PRIMSERVE_CPU_SORT

}  // namespace primserve::cpu
