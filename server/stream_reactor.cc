#include "server/stream_reactor.h"

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "server/call_record.h"
#include "server/service.h"
#include "server/stitch.h"
#include "server/stream_pieces.h"

namespace primserve {
namespace {

template <typename Response>
using Responses = std::vector<std::unique_ptr<Response>>;

// Elements in an array's bytes as sent (0 for an unknown dtype: the piece's
// validation refuses it).
uint64_t RawElements(const v1::Array& array) {
  const int dtype = array.dtype();
  if (dtype < v1::INT32 || dtype > v1::FLOAT64) return 0;
  return array.data().size() / DTypeSize(static_cast<DType>(dtype));
}

ArrayView ViewOf(const v1::Array& array) {
  return ArrayView{static_cast<DType>(array.dtype()), array.data()};
}

template <typename Want>
absl::StatusOr<Want*> Get(Result& result) {
  if (auto* want = std::get_if<Want>(&result)) return want;
  return absl::InternalError("the backend returned a result of another kind");
}

template <typename Response>
absl::Status Append(Result result, Responses<Response>* out) {
  auto response = std::make_unique<Response>();
  if (absl::Status s = ToResponse(std::move(result), response.get()); !s.ok()) return s;
  out->push_back(std::move(response));
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

class ScanFamily {
 public:
  using Request = v1::ScanRequest;
  using Response = v1::ScanResponse;

  absl::Status Begin(const Request& first, const RequestLimits& limits) {
    const absl::Span<const uint64_t> offsets(first.segment_offsets().data(),
                                             first.segment_offsets().size());
    if (absl::Status s = CheckStreamOffsets(offsets, limits.max_elements); !s.ok()) return s;
    stitch_.emplace(static_cast<Op>(first.op()), first.exclusive(),
                    std::vector<uint64_t>(offsets.begin(), offsets.end()));
    return absl::OkStatus();
  }
  void Localize(uint64_t start, Request* piece) const {
    SetOffsets(stitch_->PieceOffsets(start, RawElements(piece->input())),
               piece->mutable_segment_offsets());
  }
  absl::Status Stitch(const Request& piece, Result result, Responses<Response>* out) {
    absl::StatusOr<ScanResult*> r = Get<ScanResult>(result);
    if (!r.ok()) return r.status();
    stitch_->Stitch(ViewOf(piece.input()), &(*r)->output);
    return Append(std::move(result), out);
  }
  absl::Status End(Responses<Response>*) { return stitch_->Finish(); }

 private:
  std::optional<ScanStitch> stitch_;
};

class SelectFamily {
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
  void Localize(uint64_t, Request*) const {}
  absl::Status Stitch(const Request& piece, Result result, Responses<Response>* out) {
    absl::StatusOr<SelectResult*> r = Get<SelectResult>(result);
    if (!r.ok()) return r.status();
    stitch_.Stitch(RawElements(piece.input()), *r);
    return Append(std::move(result), out);
  }
  absl::Status End(Responses<Response>*) { return absl::OkStatus(); }

 private:
  SelectStitch stitch_;
};

class UniqueFamily {
 public:
  using Request = v1::UniqueRequest;
  using Response = v1::UniqueResponse;

  absl::Status Begin(const Request&, const RequestLimits&) { return absl::OkStatus(); }
  void Localize(uint64_t, Request*) const {}
  absl::Status Stitch(const Request& piece, Result result, Responses<Response>* out) {
    absl::StatusOr<UniqueResult*> r = Get<UniqueResult>(result);
    if (!r.ok()) return r.status();
    stitch_.Stitch(ViewOf(piece.input()), &(*r)->values);
    return Append(std::move(result), out);
  }
  absl::Status End(Responses<Response>*) { return absl::OkStatus(); }

 private:
  UniqueStitch stitch_;
};

class RunLengthEncodeFamily {
 public:
  using Request = v1::RunLengthEncodeRequest;
  using Response = v1::RunLengthEncodeResponse;

  absl::Status Begin(const Request&, const RequestLimits&) { return absl::OkStatus(); }
  void Localize(uint64_t, Request*) const {}
  absl::Status Stitch(const Request&, Result result, Responses<Response>* out) {
    absl::StatusOr<RunLengthEncodeResult*> r = Get<RunLengthEncodeResult>(result);
    if (!r.ok()) return r.status();
    stitch_.Stitch(&(*r)->values, &(*r)->lengths);
    return Append(std::move(result), out);
  }
  // The last run, held back until now.
  absl::Status End(Responses<Response>* out) {
    RunLengthEncodeResult last;
    stitch_.Flush(&last.values, &last.lengths);
    return Append(Result(std::move(last)), out);
  }

 private:
  RunStitch stitch_;
};

class ReduceByKeyFamily {
 public:
  using Request = v1::ReduceByKeyRequest;
  using Response = v1::ReduceByKeyResponse;

  absl::Status Begin(const Request& first, const RequestLimits&) {
    stitch_.emplace(static_cast<Op>(first.op()));
    return absl::OkStatus();
  }
  void Localize(uint64_t, Request*) const {}
  absl::Status Stitch(const Request&, Result result, Responses<Response>* out) {
    absl::StatusOr<ReduceByKeyResult*> r = Get<ReduceByKeyResult>(result);
    if (!r.ok()) return r.status();
    stitch_->Stitch(&(*r)->keys, &(*r)->values);
    return Append(std::move(result), out);
  }
  // The last run, held back until now.
  absl::Status End(Responses<Response>* out) {
    ReduceByKeyResult last;
    stitch_->Flush(&last.keys, &last.values);
    return Append(Result(std::move(last)), out);
  }

 private:
  std::optional<RunStitch> stitch_;
};

class ReduceFamily {
 public:
  using Request = v1::ReduceRequest;
  using Response = v1::ReduceResponse;

  absl::Status Begin(const Request& first, const RequestLimits& limits) {
    const absl::Span<const uint64_t> offsets(first.segment_offsets().data(),
                                             first.segment_offsets().size());
    if (absl::Status s = CheckStreamOffsets(offsets, limits.max_elements); !s.ok()) return s;
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
    return absl::OkStatus();
  }
  void Localize(uint64_t start, Request* piece) const {
    SetOffsets(stitch_->PieceOffsets(start, RawElements(piece->input())),
               piece->mutable_segment_offsets());
  }
  absl::Status Stitch(const Request& piece, Result result, Responses<Response>*) {
    absl::StatusOr<ReduceResult*> r = Get<ReduceResult>(result);
    if (!r.ok()) return r.status();
    stitch_->Stitch(RawElements(piece.input()), std::move(**r));
    return absl::OkStatus();
  }
  absl::Status End(Responses<Response>* out) {
    absl::StatusOr<ReduceResult> whole = stitch_->Finish(dtype_);
    if (!whole.ok()) return whole.status();
    return Append(Result(*std::move(whole)), out);
  }

 private:
  DType dtype_ = DType::kInt32;
  std::optional<ReduceStitch> stitch_;
};

class AggregateByKeyFamily {
 public:
  using Request = v1::AggregateByKeyRequest;
  using Response = v1::AggregateByKeyResponse;

  absl::Status Begin(const Request& first, const RequestLimits&) {
    stitch_.emplace(static_cast<Op>(first.op()));
    return absl::OkStatus();
  }
  void Localize(uint64_t, Request*) const {}
  absl::Status Stitch(const Request&, Result result, Responses<Response>*) {
    absl::StatusOr<AggregateByKeyResult*> r = Get<AggregateByKeyResult>(result);
    if (!r.ok()) return r.status();
    stitch_->Stitch(std::move(**r));
    return absl::OkStatus();
  }
  absl::Status End(Responses<Response>* out) {
    return Append(Result(stitch_->Finish()), out);
  }

 private:
  std::optional<AggregateStitch> stitch_;
};

// The reactor of one stream. `Base` is ServerBidiReactor (an answer per
// piece, written as each is stitched) or ServerReadReactor (one answer, into
// the response the method was given).
template <typename Family, typename Base>
class StreamReactor final : public Base {
  using Request = typename Family::Request;
  using Response = typename Family::Response;
  static constexpr bool kAnswersEachPiece =
      std::is_same_v<Base, grpc::ServerBidiReactor<Request, Response>>;

 public:
  StreamReactor(grpc::CallbackServerContext* context, StreamEnvironment environment,
                Response* response)
      : context_(context), environment_(std::move(environment)), response_(response) {
    Advance();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Advance([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        reading_ = false;
        reads_done_ = true;
      });
      return;
    }
    std::unique_ptr<Request> request;
    uint64_t seq = 0;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;  // the stream failed while this read was out
      // The next read waits until this piece is scheduled: pieces start in
      // order, and the stream ends only after the last has started.
      processing_ = true;
      request = std::move(incoming_);
      seq = pieces_read_++;
      ++unanswered_;
    }
    Start(seq, std::move(request));
    Advance([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      processing_ = false;
      reading_ = false;
    });
  }

  // Overrides ServerBidiReactor's; a ServerReadReactor writes nothing.
  void OnWriteDone(bool ok) {
    Advance([this, ok]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if constexpr (kAnswersEachPiece) {
        writing_ = false;
        if (writes_.front().second) --unanswered_;
        writes_.pop_front();
        if (!ok) {
          // The client is gone: nothing more is written.
          broken_ = true;
          writes_.clear();
        }
      }
    });
  }

  void OnDone() override { delete this; }

 private:
  // Validates and schedules piece `seq`; called for one piece at a time, in
  // stream order.
  void Start(uint64_t seq, std::unique_ptr<Request> request) {
    const uint64_t start = elements_read_;
    absl::Status status;
    if (seq == 0) {
      status = family_.Begin(*request, environment_.limits);
      if (status.ok()) pieces_.emplace(*request);
    } else {
      status = pieces_->MakePiece(request.get());
    }
    if (status.ok()) family_.Localize(start, request.get());
    const CallRecord call =
        CallRecord::Start(environment_.metrics, LabelsOf(*request), *request);
    absl::StatusOr<Operation> operation =
        status.ok() ? ToOperation(*request, environment_.limits) : status;
    if (!operation.ok()) {
      RecordRefusal(environment_.metrics, operation.status());
      call.Done(operation.status(), nullptr, 0);
      Fail(InPiece(operation.status(), seq, start));
      return;
    }
    const uint64_t elements = ItemCount(*operation);
    elements_read_ += elements;
    auto task = std::make_unique<Task>();
    task->operation = *std::move(operation);
    task->deadline = DeadlineOf(*context_);
    task->is_cancelled = [context = context_] { return context->IsCancelled(); };
    task->peer = environment_.caller;
    // The operation views `request`, which the task keeps until it is done.
    task->done = [this, seq, start, call, elements,
                  request = std::move(request)](absl::StatusOr<Result> result) mutable {
      call.Done(result.status(), nullptr, result.ok() ? elements : 0);
      Completed(seq, start, std::move(request), std::move(result));
      // Nothing of the reactor after this: it may be gone.
    };
    {
      absl::MutexLock lock(&mu_);
      ++in_flight_;
    }
    if (absl::Status scheduled = environment_.scheduler->Schedule(&task); !scheduled.ok()) {
      call.Done(scheduled, nullptr, 0);
      {
        absl::MutexLock lock(&mu_);
        --in_flight_;
      }
      Fail(InPiece(scheduled, seq, start));
    }
  }

  // The error of one piece, saying which.
  static absl::Status InPiece(const absl::Status& status, uint64_t seq, uint64_t start) {
    return absl::Status(status.code(), absl::StrFormat("stream message %d (from element %d): %s",
                                                       seq, start, status.message()));
  }

  void Fail(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      FailLocked(status);
    }
    Advance();
  }

  void FailLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!error_.ok()) return;
    error_ = status;
    completed_.clear();
    if constexpr (kAnswersEachPiece) {
      // Answers not yet started are dropped: the stream ends with the error.
      while (writes_.size() > (writing_ ? 1 : 0)) writes_.pop_back();
    }
  }

  // A piece's task is done: stitches it and every piece after it that is
  // done too, in stream order.
  void Completed(uint64_t seq, uint64_t start, std::unique_ptr<Request> request,
                 absl::StatusOr<Result> result) {
    {
      absl::MutexLock lock(&mu_);
      if (!error_.ok()) {
        // The stream has failed: the piece's answer is not wanted.
      } else if (!result.ok()) {
        FailLocked(InPiece(result.status(), seq, start));
      } else {
        completed_.emplace(seq, Done{std::move(request), *std::move(result)});
        StitchReadyLocked();
      }
    }
    // The task counts in flight until here, so the stream cannot finish (and
    // the reactor be deleted) before this call is done with it.
    Advance([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { --in_flight_; });
  }

  void StitchReadyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = completed_.begin(); it != completed_.end() && it->first == next_stitch_;
         it = completed_.erase(it), ++next_stitch_) {
      Responses<Response> answers;
      if (absl::Status s = family_.Stitch(*it->second.request, std::move(it->second.result),
                                          &answers);
          !s.ok()) {
        FailLocked(s);
        return;
      }
      if constexpr (kAnswersEachPiece) {
        for (auto& answer : answers) writes_.emplace_back(std::move(answer), true);
      } else {
        --unanswered_;
      }
    }
  }

  // After a state change (`update`, applied under mu_): reads the next
  // piece, writes the next answer, ends the stream or finishes it, as the
  // state allows. Called without mu_ held. The stream finishes only when no
  // thread is between deciding on a read or write and starting it, so
  // nothing touches the reactor once Finish may have deleted it.
  void Advance(absl::FunctionRef<void()> update = [] {}) {
    bool started = false;
    for (bool first = true;; first = false) {
      const Response* write = nullptr;
      Request* read = nullptr;
      std::optional<grpc::Status> finish;
      {
        absl::MutexLock lock(&mu_);
        if (first) update();
        if (started) --starting_;
        started = false;
        if (finished_) return;
        if (error_.ok() && !broken_ && reads_done_ && !ended_ && in_flight_ == 0 &&
            completed_.empty()) {
          End();
        }
        if constexpr (kAnswersEachPiece) {
          if (!writing_ && !writes_.empty() && !broken_ && error_.ok()) {
            writing_ = true;
            write = writes_.front().first.get();
          }
        }
        if (!reading_ && !reads_done_ && error_.ok() && !broken_ &&
            unanswered_ < kStreamWindow) {
          reading_ = true;
          incoming_ = std::make_unique<Request>();
          read = incoming_.get();
        }
        started = write != nullptr || read != nullptr;
        if (started) ++starting_;
        const bool quiet =
            in_flight_ == 0 && !writing_ && starting_ == 0 && !processing_;
        if (quiet && (!error_.ok() || broken_ || (ended_ && writes_.empty()))) {
          finished_ = true;
          if (context_->IsCancelled() || broken_) {
            finish = grpc::Status::CANCELLED;
          } else {
            finish = ToGrpc(error_);
          }
        }
      }
      if constexpr (kAnswersEachPiece) {
        if (write != nullptr) this->StartWrite(write);
      }
      if (read != nullptr) this->StartRead(read);
      if (finish) {
        this->Finish(*finish);
        return;
      }
      if (!started) return;
    }
  }

  // Every piece is stitched: the stream's last answers.
  void End() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ended_ = true;
    if (pieces_read_ == 0) {
      FailLocked(absl::InvalidArgumentError(
          "the stream carried no message; the first must carry every parameter"));
      return;
    }
    Responses<Response> answers;
    if (absl::Status s = family_.End(&answers); !s.ok()) {
      FailLocked(s);
      return;
    }
    if constexpr (kAnswersEachPiece) {
      for (auto& answer : answers) writes_.emplace_back(std::move(answer), false);
    } else {
      response_->Swap(answers.front().get());
    }
  }

  struct Done {
    std::unique_ptr<Request> request;
    Result result;
  };

  grpc::CallbackServerContext* const context_;
  const StreamEnvironment environment_;
  Response* const response_;  // the single answer's, else null

  // Touched only on the read path, one piece at a time (and Family::Begin
  // happens before any stitch, which runs under mu_).
  std::optional<StreamPieces> pieces_;
  uint64_t elements_read_ = 0;

  absl::Mutex mu_;
  Family family_;  // Begin and Localize on the read path, the rest under mu_
  std::unique_ptr<Request> incoming_ ABSL_GUARDED_BY(mu_);
  uint64_t pieces_read_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool processing_ ABSL_GUARDED_BY(mu_) = false;  // a piece read is being started
  // Threads between deciding on a read or write and starting it.
  int starting_ ABSL_GUARDED_BY(mu_) = 0;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // a write failed: the client is gone
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  // Pieces read whose answers are not yet written (or stitched, with one
  // answer): the stream reads no further at kStreamWindow.
  uint64_t unanswered_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // tasks scheduled, not done
  uint64_t next_stitch_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Done> completed_ ABSL_GUARDED_BY(mu_);
  // Answers to write, each marked whether it answers a piece.
  std::deque<std::pair<std::unique_ptr<Response>, bool>> writes_ ABSL_GUARDED_BY(mu_);
};

template <typename Family>
using BidiStream = StreamReactor<
    Family, grpc::ServerBidiReactor<typename Family::Request, typename Family::Response>>;
template <typename Family>
using ReadStream = StreamReactor<Family, grpc::ServerReadReactor<typename Family::Request>>;

}  // namespace

grpc::ServerBidiReactor<v1::ScanRequest, v1::ScanResponse>* NewScanStream(
    grpc::CallbackServerContext* context, StreamEnvironment environment) {
  return new BidiStream<ScanFamily>(context, std::move(environment), nullptr);
}

grpc::ServerBidiReactor<v1::SelectRequest, v1::SelectResponse>* NewSelectStream(
    grpc::CallbackServerContext* context, StreamEnvironment environment) {
  return new BidiStream<SelectFamily>(context, std::move(environment), nullptr);
}

grpc::ServerBidiReactor<v1::UniqueRequest, v1::UniqueResponse>* NewUniqueStream(
    grpc::CallbackServerContext* context, StreamEnvironment environment) {
  return new BidiStream<UniqueFamily>(context, std::move(environment), nullptr);
}

grpc::ServerBidiReactor<v1::RunLengthEncodeRequest, v1::RunLengthEncodeResponse>*
NewRunLengthEncodeStream(grpc::CallbackServerContext* context, StreamEnvironment environment) {
  return new BidiStream<RunLengthEncodeFamily>(context, std::move(environment), nullptr);
}

grpc::ServerBidiReactor<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>* NewReduceByKeyStream(
    grpc::CallbackServerContext* context, StreamEnvironment environment) {
  return new BidiStream<ReduceByKeyFamily>(context, std::move(environment), nullptr);
}

grpc::ServerReadReactor<v1::ReduceRequest>* NewReduceStream(grpc::CallbackServerContext* context,
                                                             StreamEnvironment environment,
                                                             v1::ReduceResponse* response) {
  return new ReadStream<ReduceFamily>(context, std::move(environment), response);
}

grpc::ServerReadReactor<v1::AggregateByKeyRequest>* NewAggregateByKeyStream(
    grpc::CallbackServerContext* context, StreamEnvironment environment,
    v1::AggregateByKeyResponse* response) {
  return new ReadStream<AggregateByKeyFamily>(context, std::move(environment), response);
}

}  // namespace primserve
