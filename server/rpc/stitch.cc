#include "server/rpc/stitch.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"

namespace primserve {
namespace {

template <typename T>
uint64_t BitsOf(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <typename T>
T FromBits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// The answers edited here are the server's own wherever they are held (a
// string, or an answer buffer: HostArray::mutable_data), edited in place.
template <typename T>
T* Elements(HostArray* array) {
  return reinterpret_cast<T*>(array->mutable_data().data());
}

template <typename T>
uint64_t Count(const HostArray& array) {
  return array.data().size() / sizeof(T);
}

template <typename T>
T Get(const HostArray& array, uint64_t i) {
  T value;
  std::memcpy(&value, array.data().data() + i * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void Put(HostArray* array, uint64_t i, T value) {
  std::memcpy(array->mutable_data().data() + i * sizeof(T), &value, sizeof(T));
}

}  // namespace

absl::Status CheckStreamOffsets(absl::Span<const uint64_t> offsets, uint64_t max_offsets) {
  if (offsets.size() > max_offsets) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "segment_offsets has %d entries, over the server's limit of %d (--max_request_elements)",
        offsets.size(), max_offsets));
  }
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (i == 0 && offsets[0] != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "segment_offsets[0] = %d: the first segment must start at 0", offsets[0]));
    }
    if (i > 0 && offsets[i] < offsets[i - 1]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "segment_offsets[%d] = %d is less than segment_offsets[%d] = %d; offsets must be "
          "non-decreasing",
          i, offsets[i], i - 1, offsets[i - 1]));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOffsetsWithin(absl::Span<const uint64_t> offsets, uint64_t total) {
  if (offsets.empty() || offsets.back() <= total) return absl::OkStatus();
  const size_t first_past =
      std::upper_bound(offsets.begin(), offsets.end(), total) - offsets.begin();
  return absl::InvalidArgumentError(absl::StrFormat(
      "segment_offsets[%d] = %d is past the end of the stream's input (%d elements)", first_past,
      offsets[first_past], total));
}

std::vector<uint64_t> ScanStitch::PieceOffsets(uint64_t start, uint64_t n) const {
  if (offsets_.empty()) return {};
  std::vector<uint64_t> local = {0};
  for (auto it = std::upper_bound(offsets_.begin(), offsets_.end(), start);
       it != offsets_.end() && *it < start + n; ++it) {
    local.push_back(*it - start);
  }
  return local;
}

void ScanStitch::Stitch(const ArrayView& input, HostArray* output) {
  const uint64_t n = input.size();
  const uint64_t start = start_;
  start_ += n;
  // A segment starting at this piece's first element takes no carry.
  if (std::binary_search(offsets_.begin(), offsets_.end(), start)) carry_bits_.reset();
  if (n == 0) return;
  // The carry continues into the elements before the piece's next segment.
  const auto next_segment = std::upper_bound(offsets_.begin(), offsets_.end(), start);
  const uint64_t continued =
      next_segment == offsets_.end() ? n : std::min<uint64_t>(*next_segment - start, n);
  VisitDType(input.dtype, [&](auto zero) {
    using T = decltype(zero);
    T* out = Elements<T>(output);
    if (carry_bits_) {
      const T carry = FromBits<T>(*carry_bits_);
      for (uint64_t i = 0; i < continued; ++i) out[i] = Combine(op_, carry, out[i]);
    }
    const T last = exclusive_ ? Combine(op_, out[n - 1], input.as<T>()[n - 1]) : out[n - 1];
    carry_bits_ = BitsOf(last);
  });
}

absl::Status ScanStitch::Finish() const { return CheckOffsetsWithin(offsets_, start_); }

std::string ScanCut::Next(absl::string_view piece) {
  const uint64_t received = cut_ + held_elements() + piece.size() / element_size_;
  const uint64_t end = granule_ == 0 ? received : received / granule_ * granule_;
  const uint64_t take = end - cut_;  // elements, the held ones first
  std::string out;
  if (take == 0) {
    held_.append(piece.data(), piece.size());
    return out;
  }
  const size_t from_piece = take * element_size_ - held_.size();
  out.swap(held_);
  out.reserve(take * element_size_);
  out.append(piece.data(), from_piece);
  held_.assign(piece.data() + from_piece, piece.size() - from_piece);
  cut_ = end;
  return out;
}

std::string ScanCut::Flush() {
  cut_ += held_elements();
  std::string out;
  out.swap(held_);
  return out;
}

void SelectStitch::Stitch(uint64_t piece_elements, SelectResult* result) {
  if (result->indices) {
    int64_t* indices = Elements<int64_t>(&*result->indices);
    for (uint64_t i = 0, n = Count<int64_t>(*result->indices); i < n; ++i) {
      indices[i] += static_cast<int64_t>(start_);
    }
  }
  start_ += piece_elements;
  count_ += result->count;
  result->count = count_;
}

void UniqueStitch::Stitch(const ArrayView& input, HostArray* values) {
  VisitDType(input.dtype, [&](auto zero) {
    using T = decltype(zero);
    if (last_bits_ && Count<T>(*values) > 0 &&
        BitEqual(Get<T>(*values, 0), FromBits<T>(*last_bits_))) {
      // A held answer starts one element further into its buffer: no copy.
      values->RemovePrefix(sizeof(T));
    }
    if (input.size() > 0) last_bits_ = BitsOf(input.as<T>()[input.size() - 1]);
  });
}

void RunStitch::Stitch(HostArray* keys, HostArray* payload) {
  key_dtype_ = keys->dtype;
  payload_dtype_ = payload->dtype;
  VisitDType(keys->dtype, [&](auto key_zero) {
    using K = decltype(key_zero);
    VisitDType(payload->dtype, [&](auto payload_zero) {
      using P = decltype(payload_zero);
      const uint64_t runs = Count<K>(*keys);
      if (runs == 0) return;
      // The piece's first run continues the held one, or the held run ends.
      const bool continues =
          held_key_bits_ && BitEqual(Get<K>(*keys, 0), FromBits<K>(*held_key_bits_));
      if (continues) {
        const P held = FromBits<P>(held_payload_bits_);
        const P first = Get<P>(*payload, 0);
        Put<P>(payload, 0, op_ ? Combine(*op_, held, first) : WrappingAdd(held, first));
      }
      const bool emits_held = held_key_bits_ && !continues;
      const K held_key = emits_held ? FromBits<K>(*held_key_bits_) : K{};
      const P held_payload = emits_held ? FromBits<P>(held_payload_bits_) : P{};
      held_key_bits_ = BitsOf(Get<K>(*keys, runs - 1));
      held_payload_bits_ = BitsOf(Get<P>(*payload, runs - 1));
      // Finished runs: the held one if it ended, then all but the piece's last.
      // The held run goes in front of the piece's runs where they lie: into
      // the room a stream's answer buffer leaves before them (no copy of the
      // answer; HostArray::Prepend). Emitting it in an answer of its own
      // would break one answer per piece, and holding the piece's answer
      // back until the next piece would delay every answer by one piece.
      keys->Truncate((runs - 1) * sizeof(K));
      payload->Truncate((runs - 1) * sizeof(P));
      if (emits_held) {
        keys->Prepend(absl::string_view(reinterpret_cast<const char*>(&held_key), sizeof(K)));
        payload->Prepend(
            absl::string_view(reinterpret_cast<const char*>(&held_payload), sizeof(P)));
      }
    });
  });
}

void RunStitch::Flush(HostArray* keys, HostArray* payload) {
  *keys = HostArray{key_dtype_, {}};
  *payload = HostArray{payload_dtype_, {}};
  if (!held_key_bits_) return;
  keys->bytes.assign(reinterpret_cast<const char*>(&*held_key_bits_), DTypeSize(key_dtype_));
  payload->bytes.assign(reinterpret_cast<const char*>(&held_payload_bits_),
                        DTypeSize(payload_dtype_));
  held_key_bits_.reset();
}

uint64_t ReduceStitch::FirstSegment(uint64_t start) const {
  if (offsets_.empty()) return 0;
  // The last segment starting at or before `start` (offsets_[0] is 0).
  return (std::upper_bound(offsets_.begin(), offsets_.end(), start) - offsets_.begin()) - 1;
}

std::vector<uint64_t> ReduceStitch::PieceOffsets(uint64_t start, uint64_t n) const {
  if (offsets_.empty() || n == 0) return {};
  const uint64_t first = FirstSegment(start);
  const uint64_t end = start + n;
  std::vector<uint64_t> local;
  for (uint64_t g = first; g < offsets_.size() && offsets_[g] < end; ++g) {
    local.push_back(std::max(offsets_[g], start) - start);
  }
  return local;
}

void ReduceStitch::Stitch(uint64_t n, ReduceResult result) {
  const uint64_t first = FirstSegment(start_);
  start_ += n;
  const bool arg = op_ == Op::kArgMin || op_ == Op::kArgMax;
  VisitDType(result.values.dtype, [&](auto zero) {
    using T = decltype(zero);
    if (value_bits_.empty()) {
      value_bits_.assign(Segments(), BitsOf(Identity<T>(op_)));
      if (arg) indices_.assign(Segments(), -1);
    }
    const uint64_t start = start_ - n;
    for (uint64_t j = 0, k = Count<T>(result.values); j < k; ++j) {
      const uint64_t g = first + j;
      const T partial = Get<T>(result.values, j);
      const T acc = FromBits<T>(value_bits_[g]);
      if (!arg) {
        value_bits_[g] = BitsOf(Combine(op_, acc, partial));
        continue;
      }
      const int64_t index = Get<int64_t>(*result.indices, j);
      if (index < 0) continue;  // an empty local segment
      if (indices_[g] < 0 || ArgReplaces(op_ == Op::kArgMin, acc, partial)) {
        value_bits_[g] = BitsOf(partial);
        indices_[g] = index + static_cast<int64_t>(start);
      }
    }
  });
}

absl::StatusOr<ReduceResult> ReduceStitch::Finish(DType dtype) {
  if (absl::Status s = CheckOffsetsWithin(offsets_, start_); !s.ok()) return s;
  const bool arg = op_ == Op::kArgMin || op_ == Op::kArgMax;
  ReduceResult result;
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    if (value_bits_.empty()) {
      value_bits_.assign(Segments(), BitsOf(Identity<T>(op_)));
      if (arg) indices_.assign(Segments(), -1);
    }
    std::vector<T> values(value_bits_.size());
    for (size_t i = 0; i < values.size(); ++i) values[i] = FromBits<T>(value_bits_[i]);
    result.values = HostArray::Of<T>(dtype, values);
  });
  if (arg) result.indices = HostArray::Of<int64_t>(DType::kInt64, indices_);
  return result;
}

void AggregateStitch::Stitch(AggregateByKeyResult result) {
  if (!values_) {
    values_ = std::move(result.values);
    return;
  }
  VisitDType(values_->dtype, [&](auto zero) {
    using T = decltype(zero);
    T* acc = Elements<T>(&*values_);
    for (uint64_t k = 0, n = Count<T>(*values_); k < n; ++k) {
      acc[k] = Combine(op_, acc[k], Get<T>(result.values, k));
    }
  });
}

AggregateByKeyResult AggregateStitch::Finish() { return {std::move(*values_)}; }

}  // namespace primserve
