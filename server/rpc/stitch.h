// Stitching for the streaming RPCs: each piece of a stream runs as an
// ordinary, independent operation, and these classes carry the state between
// pieces (a scan's prefix, a select's count and position, the last element or
// run, per-segment and per-key partials) so that the stitched answers are the
// answer to the whole array. One object per stream; pieces are stitched in
// stream order. Engine-level types only: no protobuf here.
#ifndef PRIMSERVE_SERVER_RPC_STITCH_H_
#define PRIMSERVE_SERVER_RPC_STITCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/engine/task.h"

namespace primserve {

// Checks a stream's global segment offsets as far as the first message
// allows (the total length is known only at the end): the first is 0, they
// are non-decreasing, and there are at most `max_offsets`.
absl::Status CheckStreamOffsets(absl::Span<const uint64_t> offsets, uint64_t max_offsets);

// At the end of a stream of `total` elements: every offset is <= total.
absl::Status CheckOffsetsWithin(absl::Span<const uint64_t> offsets, uint64_t total);

// Scan: the piece's own scan continued with the carry of the pieces before.
class ScanStitch {
 public:
  // `segment_offsets` are global (empty: one segment).
  ScanStitch(Op op, bool exclusive, std::vector<uint64_t> segment_offsets)
      : op_(op), exclusive_(exclusive), offsets_(std::move(segment_offsets)) {}

  // The segment offsets of the piece [start, start + n) for its own scan:
  // empty without segments, else 0 and each global offset inside the piece.
  std::vector<uint64_t> PieceOffsets(uint64_t start, uint64_t n) const;
  // `output` is the scan of the next piece `input` with PieceOffsets; makes
  // it that piece's part of the whole scan.
  void Stitch(const ArrayView& input, HostArray* output);
  // At the end of the stream: INVALID_ARGUMENT if a segment offset is past
  // its end.
  absl::Status Finish() const;

 private:
  const Op op_;
  const bool exclusive_;
  const std::vector<uint64_t> offsets_;
  uint64_t start_ = 0;
  // The inclusive scan at the previous piece's last element, as its bits,
  // while the segment it ends continues.
  std::optional<uint64_t> carry_bits_;
};

// A reproducible float SUM/PROD ScanStream without segments, cut into
// operations that each start at a multiple of `granule` elements of the
// stream (the backend's ReproducibleScanGranule; 0: anywhere) and continue
// the running prefix of the ones before (ScanOperation::carry_in): their
// answers are then the bits of one scan of the whole. The elements past the
// last whole granule received are held back for the next operation.
class ScanCut {
 public:
  ScanCut(uint64_t granule, size_t element_size)
      : granule_(granule), element_size_(element_size) {}

  // The next operation's elements, as bytes, once the next piece (whole
  // elements) has arrived: the held ones, then the piece's, up to the last
  // multiple of the granule (perhaps none); the rest is held.
  std::string Next(absl::string_view piece);
  // At the end of the stream: the elements still held, now released.
  std::string Flush();

  uint64_t held_elements() const { return held_.size() / element_size_; }
  // Elements handed out in operations so far.
  uint64_t cut_elements() const { return cut_; }

 private:
  const uint64_t granule_;
  const size_t element_size_;
  uint64_t cut_ = 0;
  std::string held_;
};

// Select: positions made global and the count a running total.
class SelectStitch {
 public:
  void Stitch(uint64_t piece_elements, SelectResult* result);

 private:
  uint64_t start_ = 0;
  uint64_t count_ = 0;
};

// Unique: drops a piece's first value when it repeats the element before it.
class UniqueStitch {
 public:
  void Stitch(const ArrayView& input, HostArray* values);

 private:
  std::optional<uint64_t> last_bits_;
};

// RunLengthEncode and ReduceByKey: runs of equal keys (bit patterns) with a
// payload each (a run's length, or its reduced value). The last run of a
// piece is held back, since the next piece may continue it; Flush gives it.
class RunStitch {
 public:
  // RunLengthEncode: lengths add up.
  RunStitch() = default;
  // ReduceByKey: values combine with `op`.
  explicit RunStitch(Op op) : op_(op) {}

  // `keys` and `payload` are the piece's runs; leaves the finished ones.
  void Stitch(HostArray* keys, HostArray* payload);
  // At the end of the stream: the held run, if any (else empty arrays). Only
  // after at least one Stitch.
  void Flush(HostArray* keys, HostArray* payload);

 private:
  const std::optional<Op> op_ = std::nullopt;
  DType key_dtype_ = DType::kInt32;
  DType payload_dtype_ = DType::kInt64;
  std::optional<uint64_t> held_key_bits_;
  uint64_t held_payload_bits_ = 0;
};

// Reduce: each global segment's partial, combined over the pieces.
class ReduceStitch {
 public:
  ReduceStitch(Op op, std::vector<uint64_t> segment_offsets)
      : op_(op), offsets_(std::move(segment_offsets)) {}

  // The piece [start, start + n)'s own segment offsets: one local segment
  // for each global segment it holds elements of (or none without segments).
  std::vector<uint64_t> PieceOffsets(uint64_t start, uint64_t n) const;
  // The reduction of the next piece (of `n` elements) with PieceOffsets.
  void Stitch(uint64_t n, ReduceResult result);
  // The whole answer, once every piece is stitched. INVALID_ARGUMENT if a
  // segment offset is past the end of the stream.
  absl::StatusOr<ReduceResult> Finish(DType dtype);

 private:
  // The first global segment of the piece [start, ...).
  uint64_t FirstSegment(uint64_t start) const;
  uint64_t Segments() const { return offsets_.empty() ? 1 : offsets_.size(); }

  const Op op_;
  const std::vector<uint64_t> offsets_;
  uint64_t start_ = 0;
  // One bit pattern per segment, allocated with the first piece.
  std::vector<uint64_t> value_bits_;
  std::vector<int64_t> indices_;  // ARGMIN/ARGMAX
};

// AggregateByKey: the pieces' aggregates combined key by key.
class AggregateStitch {
 public:
  explicit AggregateStitch(Op op) : op_(op) {}

  void Stitch(AggregateByKeyResult result);
  // Only after at least one Stitch.
  AggregateByKeyResult Finish();

 private:
  const Op op_;
  std::optional<HostArray> values_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_STITCH_H_
