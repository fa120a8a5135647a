// Definitions of the templates declared in reference/reference.h. Include
// reference/reference.h rather than this file.
//
// One rule for every reduction here (Reduce, ReduceByKey, AggregateByKey and
// the running value of Scan): a non-empty sequence x0, x1, ..., xk reduces to
// (((x0 op x1) op x2) ... op xk), folded left to right from its first element;
// an empty one reduces to Identity(op). The identity is therefore never
// combined into a non-empty result (this only shows bitwise: a float SUM of
// {-0.0} is -0.0, not 0.0 + -0.0 = +0.0). An exclusive scan is the inclusive
// scan shifted right by one within each segment, with Identity(op) at each
// segment start.
#ifndef PRIMSERVE_KERNELS_REFERENCE_IMPL_H_
#define PRIMSERVE_KERNELS_REFERENCE_IMPL_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/messages.h"
#include "core/primitives.h"
#include "reference/reference.h"

namespace primserve::reference {
namespace internal {

inline bool IsArgOp(Op op) { return op == Op::kArgMin || op == Op::kArgMax; }

inline bool IsCombineOp(Op op) {
  return op == Op::kSum || op == Op::kProd || op == Op::kMin ||
         op == Op::kMax;
}

// Calls f(begin, end) for each segment [begin, end) of an input of size n, in
// order; one segment [0, n) when segment_starts is empty.
template <typename F>
void ForEachSegment(size_t n, absl::Span<const uint64_t> segment_starts,
                    F&& f) {
  if (segment_starts.empty()) {
    f(size_t{0}, n);
    return;
  }
  assert(segment_starts[0] == 0);
  for (size_t s = 0; s < segment_starts.size(); ++s) {
    const size_t begin = static_cast<size_t>(segment_starts[s]);
    const size_t end = s + 1 < segment_starts.size()
                           ? static_cast<size_t>(segment_starts[s + 1])
                           : n;
    assert(begin <= end && end <= n);
    f(begin, end);
  }
}

// Left fold of input[begin, end) with op (SUM, PROD, MIN or MAX), starting
// from input[begin]; Identity(op) when the range is empty.
template <typename T>
T FoldRange(absl::Span<const T> input, size_t begin, size_t end, Op op) {
  if (begin == end) return Identity<T>(op);
  T acc = input[begin];
  for (size_t i = begin + 1; i < end; ++i) acc = Combine(op, acc, input[i]);
  return acc;
}

// Index of the ARGMIN (is_min) or ARGMAX of input[begin, end), -1 if empty.
template <typename T>
int64_t ArgRange(absl::Span<const T> input, size_t begin, size_t end,
                 bool is_min) {
  int64_t best = -1;
  for (size_t i = begin; i < end; ++i) {
    if (best < 0 ||
        ArgReplaces(is_min, input[static_cast<size_t>(best)], input[i])) {
      best = static_cast<int64_t>(i);
    }
  }
  return best;
}

}  // namespace internal

template <typename T>
std::vector<T> Scan(absl::Span<const T> input, Op op, bool exclusive,
                    absl::Span<const uint64_t> segment_starts) {
  assert(internal::IsCombineOp(op));
  std::vector<T> out(input.size());
  internal::ForEachSegment(
      input.size(), segment_starts, [&](size_t begin, size_t end) {
        T acc{};  // inclusive prefix up to and including input[i]
        for (size_t i = begin; i < end; ++i) {
          const T before = i == begin ? Identity<T>(op) : acc;
          acc = i == begin ? input[i] : Combine(op, acc, input[i]);
          out[i] = exclusive ? before : acc;
        }
      });
  return out;
}

template <typename T>
ReduceResult<T> Reduce(absl::Span<const T> input, Op op,
                       absl::Span<const uint64_t> segment_starts) {
  const bool is_arg = internal::IsArgOp(op);
  assert(is_arg || internal::IsCombineOp(op));
  ReduceResult<T> result;
  internal::ForEachSegment(
      input.size(), segment_starts, [&](size_t begin, size_t end) {
        if (is_arg) {
          const int64_t index =
              internal::ArgRange(input, begin, end, op == Op::kArgMin);
          result.indices.push_back(index);
          result.values.push_back(index < 0
                                      ? Identity<T>(op)
                                      : input[static_cast<size_t>(index)]);
        } else {
          result.values.push_back(internal::FoldRange(input, begin, end, op));
        }
      });
  return result;
}

template <typename T>
SelectResult<T> Select(absl::Span<const T> input, const std::vector<bool>& keep,
                       bool partition) {
  assert(keep.size() == input.size());
  SelectResult<T> result;
  for (size_t i = 0; i < input.size(); ++i) {
    if (keep[i]) {
      result.values.push_back(input[i]);
      result.indices.push_back(static_cast<int64_t>(i));
    }
  }
  result.count = result.values.size();
  if (partition) {
    for (size_t i = 0; i < input.size(); ++i) {
      if (!keep[i]) {
        result.values.push_back(input[i]);
        result.indices.push_back(static_cast<int64_t>(i));
      }
    }
  }
  return result;
}

template <typename T>
std::vector<bool> EvaluatePredicate(absl::Span<const T> input,
                                    const Predicate<T>& predicate) {
  std::vector<bool> keep(input.size());
  for (size_t i = 0; i < input.size(); ++i) keep[i] = predicate(input[i]);
  return keep;
}

template <typename F>
std::vector<bool> EvaluateFlags(absl::Span<const F> flags) {
  std::vector<bool> keep(flags.size());
  for (size_t i = 0; i < flags.size(); ++i) keep[i] = flags[i] != F(0);
  return keep;
}

template <typename T>
std::vector<T> Unique(absl::Span<const T> input) {
  std::vector<T> out;
  for (size_t i = 0; i < input.size(); ++i) {
    if (i == 0 || !BitEqual(input[i], input[i - 1])) out.push_back(input[i]);
  }
  return out;
}

template <typename T>
Runs<T> RunLengthEncode(absl::Span<const T> input) {
  Runs<T> runs;
  size_t begin = 0;
  while (begin < input.size()) {
    size_t end = begin + 1;
    while (end < input.size() && BitEqual(input[end], input[begin])) ++end;
    runs.values.push_back(input[begin]);
    runs.lengths.push_back(static_cast<int64_t>(end - begin));
    begin = end;
  }
  return runs;
}

template <typename K, typename V>
KeyedValues<K, V> ReduceByKey(absl::Span<const K> keys,
                              absl::Span<const V> values, Op op) {
  assert(keys.size() == values.size());
  assert(internal::IsCombineOp(op));
  KeyedValues<K, V> out;
  size_t begin = 0;
  while (begin < keys.size()) {
    size_t end = begin + 1;
    while (end < keys.size() && BitEqual(keys[end], keys[begin])) ++end;
    out.keys.push_back(keys[begin]);
    out.values.push_back(internal::FoldRange(values, begin, end, op));
    begin = end;
  }
  return out;
}

template <typename K>
absl::Status KeyOutOfRange(uint64_t position, K key, uint64_t num_keys) {
  return absl::InvalidArgumentError(KeyOutOfRangeMessage(position, key, num_keys));
}

template <typename K, typename V>
absl::StatusOr<std::vector<V>> AggregateByKey(absl::Span<const K> keys,
                                              absl::Span<const V> values,
                                              Op op, uint64_t num_keys) {
  static_assert(std::is_integral_v<K>, "AggregateByKey keys are integers");
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("keys and values differ in length (", keys.size(),
                     " vs ", values.size(), ")"));
  }
  if (op != Op::kSum && op != Op::kMin && op != Op::kMax) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AggregateByKey supports SUM, MIN and MAX, not ", OpName(op)));
  }
  // Validate every key before allocating the output.
  for (size_t i = 0; i < keys.size(); ++i) {
    bool negative = false;
    if constexpr (std::is_signed_v<K>) negative = keys[i] < 0;
    if (negative || static_cast<uint64_t>(keys[i]) >= num_keys) {
      return KeyOutOfRange<K>(i, keys[i], num_keys);
    }
  }
  std::vector<V> out(static_cast<size_t>(num_keys), Identity<V>(op));
  std::vector<bool> seen(static_cast<size_t>(num_keys), false);
  for (size_t i = 0; i < keys.size(); ++i) {
    const size_t k = static_cast<size_t>(keys[i]);
    out[k] = seen[k] ? Combine(op, out[k], values[i]) : values[i];
    seen[k] = true;
  }
  return out;
}

}  // namespace primserve::reference

#endif  // PRIMSERVE_KERNELS_REFERENCE_IMPL_H_
