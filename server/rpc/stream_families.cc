#include "server/rpc/stream_families.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/rpc/stitch.h"

namespace primserve {
namespace {

using streams::BidiStream;
using streams::Piece;
using streams::ReadStream;
using streams::Responses;

template <typename Want>
absl::StatusOr<Want*> Get(Result& result) {
  if (auto* want = std::get_if<Want>(&result)) return want;
  return absl::InternalError("the backend returned a result of another kind");
}

template <typename Response>
absl::Status Append(Result result, Responses* out) {
  Response response;
  absl::StatusOr<grpc::ByteBuffer> framed = FrameResponse(std::move(result), &response);
  if (!framed.ok()) return framed.status();
  out->push_back(*std::move(framed));
  return absl::OkStatus();
}

void SetOffsets(const std::vector<uint64_t>& offsets,
                google::protobuf::RepeatedField<uint64_t>* field) {
  field->Clear();
  field->Add(offsets.begin(), offsets.end());
}

// One family per streaming RPC: checks the stream-wide parameters of the
// first message (Begin), gives each piece its own parameters (Localize),
// stitches each piece's result into its answers (Stitch) and gives what is
// left at the end (End). Families that answer once give that answer at End.
//
// A serial family (reproducible float SUM/PROD scans and reduces) reshapes
// each validated piece into its operation (Shape: false for a piece with
// none, answered with EmptyResult), runs one operation at a time, each
// taking what the one before left (Continue), and ends with one more
// operation (TakeFlush) before End. The defaults: independent pieces.
template <typename Request>
class IndependentPieces {
 public:
  void Configure(const StreamEnvironment&) {}
  bool Serial() const { return false; }
  absl::StatusOr<bool> Shape(Piece<Request>*, const RequestLimits&) { return true; }
  void Continue(Operation*) const {}
  Result EmptyResult() const { return Result(); }
  absl::StatusOr<bool> TakeFlush(Piece<Request>*) { return false; }
};

// Whether a stream's float SUM/PROD must give the unary answer's bits.
template <typename Request>
bool StreamIsReproducible(const Request& first, const RequestLimits& limits, v1::DType dtype) {
  if (dtype < v1::INT32 || dtype > v1::FLOAT64) return false;  // the piece refuses it
  return (first.reproducible() || limits.reproducible_floats) &&
         OrderSensitive(static_cast<Op>(first.op()), static_cast<DType>(dtype));
}

// A reproducible stream gathered whole (a ReduceStream, a segmented
// ScanStream, one array of a keyed stream): its pieces' bytes, up to what one
// unary request may hold.
class Gathered {
 public:
  absl::Status Add(const ArrayView& piece, const RequestLimits& limits, absl::string_view rpc,
                   bool answer_is_input) {
    const size_t element = DTypeSize(piece.dtype);
    const uint64_t elements = (bytes_.size() + piece.bytes.size()) / element;
    const uint64_t most = answer_is_input
                              ? std::min(limits.max_elements, limits.max_response_bytes / element)
                              : limits.max_elements;
    if (elements > most) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "a reproducible float SUM/PROD %s is gathered whole and run as one request at its end "
          "(so that it gives the unary answer's bits), and one request holds at most %d "
          "elements (--max_request_elements, --max_response_bytes); this stream has %d by this "
          "message",
          rpc, most, elements));
    }
    bytes_.append(piece.bytes.data(), piece.bytes.size());
    return absl::OkStatus();
  }
  uint64_t elements(DType dtype) const { return bytes_.size() / DTypeSize(dtype); }
  std::string Take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class ScanFamily : public IndependentPieces<v1::ScanRequest> {
 public:
  using Request = v1::ScanRequest;
  using Response = v1::ScanResponse;

  void Configure(const StreamEnvironment& environment) { backend_ = environment.backend; }
  absl::Status Begin(const Request& first, const RequestLimits& limits) {
    const absl::Span<const uint64_t> offsets(first.segment_offsets().data(),
                                             first.segment_offsets().size());
    if (absl::Status s = CheckStreamOffsets(offsets, limits.max_elements); !s.ok()) return s;
    if (first.accumulator_dtype() != v1::DTYPE_UNSPECIFIED &&
        first.accumulator_dtype() != first.input().dtype()) {
      return absl::InvalidArgumentError(
          "accumulator_dtype is not taken by ScanStream (a unary Scan takes it)");
    }
    stitch_.emplace(static_cast<Op>(first.op()), first.exclusive(),
                    std::vector<uint64_t>(offsets.begin(), offsets.end()));
    dtype_ = static_cast<DType>(first.input().dtype());
    if (StreamIsReproducible(first, limits, first.input().dtype())) {
      if (offsets.empty()) {
        cut_.emplace(backend_ != nullptr ? backend_->ReproducibleScanGranule(dtype_) : 0,
                     DTypeSize(dtype_));
      } else {
        gathered_.emplace();
        offsets_.assign(offsets.begin(), offsets.end());
      }
    }
    return absl::OkStatus();
  }
  void Localize(uint64_t start, Piece<Request>* piece) const {
    SetOffsets(stitch_->PieceOffsets(start, piece->Elements(piece->request().input())),
               piece->request().mutable_segment_offsets());
  }
  bool Serial() const { return cut_.has_value() || gathered_.has_value(); }
  absl::StatusOr<bool> Shape(Piece<Request>* piece, const RequestLimits& limits) {
    absl::StatusOr<ArrayView> input = piece->View(piece->request().input());
    if (!input.ok()) return input.status();
    if (gathered_) {
      if (absl::Status s = gathered_->Add(*input, limits, "ScanStream", true); !s.ok()) return s;
      return false;
    }
    std::string elements = cut_->Next(input->bytes);
    if (elements.empty()) return false;
    piece->SetData(piece->request().mutable_input(), std::move(elements));
    return true;
  }
  void Continue(Operation* operation) const {
    if (!cut_) return;
    auto& scan = std::get<ScanOperation>(*operation);
    scan.carry_in = carry_;
    scan.wants_carry = true;
  }
  Result EmptyResult() const { return ScanResult{HostArray{dtype_, {}}}; }
  absl::StatusOr<bool> TakeFlush(Piece<Request>* last) {
    if (flushed_) return false;
    flushed_ = true;
    if (gathered_) {
      if (absl::Status s = CheckOffsetsWithin(offsets_, gathered_->elements(dtype_)); !s.ok()) {
        return s;
      }
      last->SetData(last->request().mutable_input(), gathered_->Take());
      return true;
    }
    if (cut_->held_elements() == 0) return false;
    last->SetData(last->request().mutable_input(), cut_->Flush());
    last->request().clear_segment_offsets();
    return true;
  }
  absl::Status Stitch(Piece<Request>& piece, Result result, Responses* out) {
    absl::StatusOr<ScanResult*> r = Get<ScanResult>(result);
    if (!r.ok()) return r.status();
    if (Serial()) {
      // Already the whole scan's bits; an operation's carry goes on to the next.
      if ((*r)->carry_out) carry_ = (*r)->carry_out;
    } else {
      absl::StatusOr<ArrayView> input = piece.View(piece.request().input());
      if (!input.ok()) return input.status();
      stitch_->Stitch(*input, &(*r)->output);
    }
    return Append<Response>(std::move(result), out);
  }
  absl::Status End(Responses*) {
    return Serial() ? absl::OkStatus() : stitch_->Finish();  // TakeFlush checked the offsets
  }

 private:
  const ExecutionBackend* backend_ = nullptr;
  DType dtype_ = DType::kFloat32;
  std::optional<ScanStitch> stitch_;
  // Reproducible float SUM/PROD: without segments, cut at whole tiles with
  // the carry; with segments, gathered whole.
  std::optional<ScanCut> cut_;
  std::optional<uint64_t> carry_;
  std::optional<Gathered> gathered_;
  std::vector<uint64_t> offsets_;
  bool flushed_ = false;
};

class SelectFamily : public IndependentPieces<v1::SelectRequest> {
 public:
  using Request = v1::SelectRequest;
  using Response = v1::SelectResponse;

  absl::Status Begin(const Request& first, const RequestLimits&) {
    if (first.partition()) {
      return absl::InvalidArgumentError(
          "partition is not supported by SelectStream (the rejected part would follow the whole "
          "kept part); use Select, or two SelectStreams with opposite predicates");
    }
    return absl::OkStatus();
  }
  void Localize(uint64_t, Piece<Request>*) const {}
  absl::Status Stitch(Piece<Request>& piece, Result result, Responses* out) {
    absl::StatusOr<SelectResult*> r = Get<SelectResult>(result);
    if (!r.ok()) return r.status();
    stitch_.Stitch(piece.Elements(piece.request().input()), *r);
    return Append<Response>(std::move(result), out);
  }
  absl::Status End(Responses*) { return absl::OkStatus(); }

 private:
  SelectStitch stitch_;
};

class UniqueFamily : public IndependentPieces<v1::UniqueRequest> {
 public:
  using Request = v1::UniqueRequest;
  using Response = v1::UniqueResponse;

  absl::Status Begin(const Request&, const RequestLimits&) { return absl::OkStatus(); }
  void Localize(uint64_t, Piece<Request>*) const {}
  absl::Status Stitch(Piece<Request>& piece, Result result, Responses* out) {
    absl::StatusOr<UniqueResult*> r = Get<UniqueResult>(result);
    if (!r.ok()) return r.status();
    absl::StatusOr<ArrayView> input = piece.View(piece.request().input());
    if (!input.ok()) return input.status();
    stitch_.Stitch(*input, &(*r)->values);
    return Append<Response>(std::move(result), out);
  }
  absl::Status End(Responses*) { return absl::OkStatus(); }

 private:
  UniqueStitch stitch_;
};

class RunLengthEncodeFamily : public IndependentPieces<v1::RunLengthEncodeRequest> {
 public:
  using Request = v1::RunLengthEncodeRequest;
  using Response = v1::RunLengthEncodeResponse;

  absl::Status Begin(const Request&, const RequestLimits&) { return absl::OkStatus(); }
  void Localize(uint64_t, Piece<Request>*) const {}
  absl::Status Stitch(Piece<Request>&, Result result, Responses* out) {
    absl::StatusOr<RunLengthEncodeResult*> r = Get<RunLengthEncodeResult>(result);
    if (!r.ok()) return r.status();
    stitch_.Stitch(&(*r)->values, &(*r)->lengths);
    return Append<Response>(std::move(result), out);
  }
  // The last run, held back until now.
  absl::Status End(Responses* out) {
    RunLengthEncodeResult last;
    stitch_.Flush(&last.values, &last.lengths);
    return Append<Response>(Result(std::move(last)), out);
  }

 private:
  RunStitch stitch_;
};

// A reproducible keyed stream's two arrays, gathered whole (keys and
// values arrive in equal pieces: each piece is validated as sent).
class GatheredPairs {
 public:
  template <typename Request>
  absl::Status Add(Piece<Request>* piece, const RequestLimits& limits, absl::string_view rpc,
                   bool answer_is_input) {
    absl::StatusOr<ArrayView> keys = piece->View(piece->request().keys());
    if (!keys.ok()) return keys.status();
    absl::StatusOr<ArrayView> values = piece->View(piece->request().values());
    if (!values.ok()) return values.status();
    if (absl::Status s = keys_.Add(*keys, limits, rpc, answer_is_input); !s.ok()) return s;
    return values_.Add(*values, limits, rpc, answer_is_input);
  }
  // Puts the whole arrays into the last request.
  template <typename Request>
  void TakeInto(Piece<Request>* last) {
    last->SetData(last->request().mutable_keys(), keys_.Take());
    last->SetData(last->request().mutable_values(), values_.Take());
  }

 private:
  Gathered keys_;
  Gathered values_;
};

class ReduceByKeyFamily : public IndependentPieces<v1::ReduceByKeyRequest> {
 public:
  using Request = v1::ReduceByKeyRequest;
  using Response = v1::ReduceByKeyResponse;

  absl::Status Begin(const Request& first, const RequestLimits& limits) {
    stitch_.emplace(static_cast<Op>(first.op()));
    key_dtype_ = static_cast<DType>(first.keys().dtype());
    value_dtype_ = static_cast<DType>(first.values().dtype());
    if (StreamIsReproducible(first, limits, first.values().dtype())) gathered_.emplace();
    return absl::OkStatus();
  }
  void Localize(uint64_t, Piece<Request>*) const {}
  bool Serial() const { return gathered_.has_value(); }
  absl::StatusOr<bool> Shape(Piece<Request>* piece, const RequestLimits& limits) {
    if (absl::Status s = gathered_->Add(piece, limits, "ReduceByKeyStream", true); !s.ok()) {
      return s;
    }
    return false;
  }
  Result EmptyResult() const {
    return ReduceByKeyResult{HostArray{key_dtype_, {}}, HostArray{value_dtype_, {}}};
  }
  absl::StatusOr<bool> TakeFlush(Piece<Request>* last) {
    if (flushed_) return false;
    flushed_ = true;
    gathered_->TakeInto(last);
    return true;
  }
  absl::Status Stitch(Piece<Request>&, Result result, Responses* out) {
    absl::StatusOr<ReduceByKeyResult*> r = Get<ReduceByKeyResult>(result);
    if (!r.ok()) return r.status();
    // Gathered: the pieces' empty answers, then the whole stream's.
    if (!gathered_) stitch_->Stitch(&(*r)->keys, &(*r)->values);
    return Append<Response>(std::move(result), out);
  }
  // The last run, held back until now (gathered: nothing is held).
  absl::Status End(Responses* out) {
    if (gathered_) return absl::OkStatus();
    ReduceByKeyResult last;
    stitch_->Flush(&last.keys, &last.values);
    return Append<Response>(Result(std::move(last)), out);
  }

 private:
  std::optional<RunStitch> stitch_;
  DType key_dtype_ = DType::kInt32;
  DType value_dtype_ = DType::kFloat32;
  // Reproducible float SUM/PROD: the stream gathered whole, run at the end.
  std::optional<GatheredPairs> gathered_;
  bool flushed_ = false;
};

class ReduceFamily : public IndependentPieces<v1::ReduceRequest> {
 public:
  using Request = v1::ReduceRequest;
  using Response = v1::ReduceResponse;

  absl::Status Begin(const Request& first, const RequestLimits& limits) {
    const absl::Span<const uint64_t> offsets(first.segment_offsets().data(),
                                             first.segment_offsets().size());
    if (absl::Status s = CheckStreamOffsets(offsets, limits.max_elements); !s.ok()) return s;
    if (first.accumulator_dtype() != v1::DTYPE_UNSPECIFIED &&
        first.accumulator_dtype() != first.input().dtype()) {
      return absl::InvalidArgumentError(
          "accumulator_dtype is not taken by ReduceStream (a unary Reduce takes it)");
    }
    // The answer holds one value (and an index) per segment, at most 16 bytes.
    const uint64_t answer_bytes = std::max<uint64_t>(offsets.size(), 1) * 16;
    if (answer_bytes > limits.max_response_bytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the answer to this ReduceStream could take %d bytes, over the server's limit of %d "
          "(--max_response_bytes)",
          answer_bytes, limits.max_response_bytes));
    }
    dtype_ = static_cast<DType>(first.input().dtype());
    stitch_.emplace(static_cast<Op>(first.op()),
                    std::vector<uint64_t>(offsets.begin(), offsets.end()));
    if (StreamIsReproducible(first, limits, first.input().dtype())) {
      gathered_.emplace();
      offsets_.assign(offsets.begin(), offsets.end());
    }
    return absl::OkStatus();
  }
  void Localize(uint64_t start, Piece<Request>* piece) const {
    SetOffsets(stitch_->PieceOffsets(start, piece->Elements(piece->request().input())),
               piece->request().mutable_segment_offsets());
  }
  bool Serial() const { return gathered_.has_value(); }
  absl::StatusOr<bool> Shape(Piece<Request>* piece, const RequestLimits& limits) {
    absl::StatusOr<ArrayView> input = piece->View(piece->request().input());
    if (!input.ok()) return input.status();
    if (absl::Status s = gathered_->Add(*input, limits, "ReduceStream", false); !s.ok()) return s;
    return false;
  }
  Result EmptyResult() const { return ReduceResult{HostArray{dtype_, {}}, std::nullopt}; }
  absl::StatusOr<bool> TakeFlush(Piece<Request>* last) {
    if (flushed_) return false;
    flushed_ = true;
    if (absl::Status s = CheckOffsetsWithin(offsets_, gathered_->elements(dtype_)); !s.ok()) {
      return s;
    }
    last->SetData(last->request().mutable_input(), gathered_->Take());
    return true;
  }
  absl::Status Stitch(Piece<Request>& piece, Result result, Responses*) {
    absl::StatusOr<ReduceResult*> r = Get<ReduceResult>(result);
    if (!r.ok()) return r.status();
    if (gathered_) {
      // The pieces' empty answers, then the whole stream's.
      if (flushed_) whole_ = std::move(**r);
      return absl::OkStatus();
    }
    stitch_->Stitch(piece.Elements(piece.request().input()), std::move(**r));
    return absl::OkStatus();
  }
  absl::Status End(Responses* out) {
    if (gathered_) {
      if (!whole_) return absl::InternalError("a gathered ReduceStream ended without its answer");
      return Append<Response>(Result(*std::move(whole_)), out);
    }
    absl::StatusOr<ReduceResult> whole = stitch_->Finish(dtype_);
    if (!whole.ok()) return whole.status();
    return Append<Response>(Result(*std::move(whole)), out);
  }

 private:
  DType dtype_ = DType::kInt32;
  std::optional<ReduceStitch> stitch_;
  // Reproducible float SUM/PROD: the stream gathered whole, reduced at the end.
  std::optional<Gathered> gathered_;
  std::vector<uint64_t> offsets_;
  bool flushed_ = false;
  std::optional<ReduceResult> whole_;
};

class AggregateByKeyFamily : public IndependentPieces<v1::AggregateByKeyRequest> {
 public:
  using Request = v1::AggregateByKeyRequest;
  using Response = v1::AggregateByKeyResponse;

  absl::Status Begin(const Request& first, const RequestLimits& limits) {
    stitch_.emplace(static_cast<Op>(first.op()));
    value_dtype_ = static_cast<DType>(first.values().dtype());
    if (StreamIsReproducible(first, limits, first.values().dtype())) gathered_.emplace();
    return absl::OkStatus();
  }
  void Localize(uint64_t, Piece<Request>*) const {}
  bool Serial() const { return gathered_.has_value(); }
  absl::StatusOr<bool> Shape(Piece<Request>* piece, const RequestLimits& limits) {
    if (absl::Status s = gathered_->Add(piece, limits, "AggregateByKeyStream", false); !s.ok()) {
      return s;
    }
    return false;
  }
  Result EmptyResult() const { return AggregateByKeyResult{HostArray{value_dtype_, {}}}; }
  absl::StatusOr<bool> TakeFlush(Piece<Request>* last) {
    if (flushed_) return false;
    flushed_ = true;
    gathered_->TakeInto(last);
    return true;
  }
  absl::Status Stitch(Piece<Request>&, Result result, Responses*) {
    absl::StatusOr<AggregateByKeyResult*> r = Get<AggregateByKeyResult>(result);
    if (!r.ok()) return r.status();
    if (gathered_) {
      // The pieces' empty answers, then the whole stream's.
      if (flushed_) whole_ = std::move(**r);
      return absl::OkStatus();
    }
    stitch_->Stitch(std::move(**r));
    return absl::OkStatus();
  }
  absl::Status End(Responses* out) {
    if (gathered_) {
      if (!whole_) {
        return absl::InternalError("a gathered AggregateByKeyStream ended without its answer");
      }
      return Append<Response>(Result(*std::move(whole_)), out);
    }
    return Append<Response>(Result(stitch_->Finish()), out);
  }

 private:
  std::optional<AggregateStitch> stitch_;
  DType value_dtype_ = DType::kFloat32;
  // Reproducible float SUM: the stream gathered whole, aggregated at the end.
  std::optional<GatheredPairs> gathered_;
  bool flushed_ = false;
  std::optional<AggregateByKeyResult> whole_;
};
}  // namespace


RawBidiReactor* NewScanStream(grpc::CallbackServerContext* context,
                              StreamEnvironment environment) {
  return new BidiStream<ScanFamily>(context, std::move(environment), nullptr);
}

RawBidiReactor* NewSelectStream(grpc::CallbackServerContext* context,
                                StreamEnvironment environment) {
  return new BidiStream<SelectFamily>(context, std::move(environment), nullptr);
}

RawBidiReactor* NewUniqueStream(grpc::CallbackServerContext* context,
                                StreamEnvironment environment) {
  return new BidiStream<UniqueFamily>(context, std::move(environment), nullptr);
}

RawBidiReactor* NewRunLengthEncodeStream(grpc::CallbackServerContext* context,
                                         StreamEnvironment environment) {
  return new BidiStream<RunLengthEncodeFamily>(context, std::move(environment), nullptr);
}

RawBidiReactor* NewReduceByKeyStream(grpc::CallbackServerContext* context,
                                     StreamEnvironment environment) {
  return new BidiStream<ReduceByKeyFamily>(context, std::move(environment), nullptr);
}

RawReadReactor* NewReduceStream(grpc::CallbackServerContext* context,
                                StreamEnvironment environment, grpc::ByteBuffer* response) {
  return new ReadStream<ReduceFamily>(context, std::move(environment), response);
}

RawReadReactor* NewAggregateByKeyStream(grpc::CallbackServerContext* context,
                                        StreamEnvironment environment,
                                        grpc::ByteBuffer* response) {
  return new ReadStream<AggregateByKeyFamily>(context, std::move(environment), response);
}

}  // namespace primserve
