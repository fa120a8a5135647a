// The streaming RPCs (ScanStream, SelectStream, ...): a large array sent as
// a stream of pieces. Each piece becomes an ordinary request (validated,
// limited, batched and scheduled like a unary call), pieces of one stream are
// stitched in order (server/rpc/stitch.h), and each piece's answer is written as
// soon as it and the pieces before it are done. A piece's large answer may be
// written by the backend into an answer buffer (Task::answers), stitched
// there and sent from there, as a unary answer is. The stream reads at most
// kStreamWindow pieces ahead of the answers written (or, for the RPCs with
// one answer, of the pieces stitched), so its memory is a few pieces and a
// client that stops reading stalls only its own stream.
//
// Reproducible float SUM/PROD (the request's `reproducible`, or
// RequestLimits::reproducible_floats) go otherwise, so that the stream gives
// the unary answer's bits: an unsegmented ScanStream runs one operation at a
// time, each starting at a multiple of the backend's tile size and carrying
// the prefix of the ones before (ScanCut), the rest of the stream held back
// for one last operation at its end; a segmented ScanStream, a ReduceStream,
// a ReduceByKeyStream and an AggregateByKeyStream are gathered whole and run
// as one operation at the end.
#ifndef PRIMSERVE_SERVER_RPC_STREAM_REACTOR_H_
#define PRIMSERVE_SERVER_RPC_STREAM_REACTOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"

#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/engine/backend.h"
#include "server/engine/metrics.h"
#include "server/engine/scheduler.h"
#include "server/rpc/call_context.h"
#include "server/rpc/call_record.h"
#include "server/rpc/request_limits.h"
#include "server/rpc/request_validation.h"
#include "server/rpc/response_framing.h"
#include "server/rpc/stitch.h"
#include "server/rpc/stream_pieces.h"
#include "wire/parallel_copy.h"
#include "wire/received.h"

namespace primserve {

inline constexpr uint64_t kStreamWindow = 4;

// What every stream needs from the service. `caller` keys the stream's pieces
// for admission (CallerOf).
struct StreamEnvironment {
  Scheduler* scheduler = nullptr;
  RequestLimits limits;
  Metrics* metrics = nullptr;  // may be null
  std::string caller;
  // Where a reproducible float SUM/PROD ScanStream learns the tile size it
  // cuts at (ReproducibleScanGranule); null: cut anywhere.
  const ExecutionBackend* backend = nullptr;
  // Where the pieces' arrays are made contiguous (the unary requests' too:
  // PrimitivesService's payload_allocator); empty: the heap.
  wire::PayloadAllocator payload_allocator;
  // What copies them there (not owned; null: the thread that makes them
  // contiguous).
  wire::CopyPool* payload_copies = nullptr;
  // Where the backend may write the pieces' large answers (Task::answers:
  // PrimitivesService's answer_allocator), stitched and sent from there;
  // empty: strings.
  AnswerAllocator answer_allocator;
};

// The streams take and give raw buffers: each message is parsed with its
// arrays left where gRPC received them (wire::ReceivedMessage) and each
// answer framed with its arrays as slices (wire::Frame); the bytes are v1's
// messages all the same.
using RawBidiReactor = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;
using RawReadReactor = grpc::ServerReadReactor<grpc::ByteBuffer>;

// The generic reactor and what it asks of a family (server/rpc/stream_families.cc
// has the seven families).
namespace streams {


// A stream's answers, framed (their arrays as slices over the results'
// bytes, as the unary answers).
using Responses = std::vector<grpc::ByteBuffer>;

// Bytes a stream's answer buffers keep before each answer
// (HostArray::held_room): room for the one element RunStitch puts in front
// of a piece's runs.
inline constexpr size_t kAnswerRoom = 8;

// The deleter of the buffers WithRoom gives: it holds the allocator's buffer
// (kAnswerRoom bytes before the one given). Only an answer whose buffer has
// it has that room: a backend may hold answers in memory of its own.
struct RoomedAnswer {
  std::shared_ptr<char> buffer;
  void operator()(char*) { buffer.reset(); }
};

// `answers` with kAnswerRoom bytes before each buffer it gives.
inline AnswerAllocator WithRoom(AnswerAllocator answers) {
  if (!answers) return nullptr;
  return [answers = std::move(answers)](size_t bytes) -> std::shared_ptr<char> {
    std::shared_ptr<char> buffer = answers(bytes + kAnswerRoom);
    if (buffer == nullptr) return nullptr;
    char* given = buffer.get() + kAnswerRoom;
    return std::shared_ptr<char>(given, RoomedAnswer{std::move(buffer)});
  };
}

// kAnswerRoom where `array` is held in a buffer WithRoom gave, else 0.
inline size_t RoomBefore(const HostArray& array) {
  return array.held != nullptr && std::get_deleter<RoomedAnswer>(array.held) != nullptr
             ? kAnswerRoom
             : 0;
}

// One message of a stream as received: its Array.data fields are tokens for
// payloads left in gRPC's slices (wire::ReceivedMessage), made contiguous
// once, into the service's payload allocator, when the piece is validated.
// The piece's operation and its stitching view them: the piece lives until
// it is stitched.
template <typename Request>
class Piece {
 public:
  Piece(wire::PayloadAllocator allocator, wire::CopyPool* copies)
      : received_(std::move(allocator), copies) {}

  // INVALID_ARGUMENT if `raw` is not a Request.
  absl::Status Parse(const grpc::ByteBuffer& raw) {
    bytes_in_ = raw.Length();
    return received_.Parse(raw, &request_);
  }

  Request& request() { return request_; }
  const Request& request() const { return request_; }
  // The message's size on the wire (0 for one the server made).
  uint64_t bytes_in() const { return bytes_in_; }

  // Elements in an array of the request as sent (0 for an unknown dtype:
  // the piece's validation refuses it).
  uint64_t Elements(const v1::Array& array) {
    const int dtype = array.dtype();
    if (dtype < v1::INT32 || dtype > v1::FLOAT64) return 0;
    const wire::Payload* payload = inline_ ? nullptr : received_.Find(array.data());
    const size_t bytes = payload != nullptr ? payload->size() : array.data().size();
    return bytes / DTypeSize(static_cast<DType>(dtype));
  }

  // An array of the request, contiguous (no copy once the piece's
  // operation is made: ToOperation made it so).
  absl::StatusOr<ArrayView> View(const v1::Array& array) {
    if (inline_) return ArrayView{static_cast<DType>(array.dtype()), array.data()};
    absl::StatusOr<absl::string_view> bytes = received_.Resolve(array.data());
    if (!bytes.ok()) return bytes.status();
    return ArrayView{static_cast<DType>(array.dtype()), *bytes};
  }

  // A serial stream reshapes a piece's arrays into bytes of its own: from
  // then on every array's data is held in the request itself.
  void SetData(v1::Array* array, std::string bytes) {
    array->set_data(std::move(bytes));
    inline_ = true;
  }

  absl::StatusOr<Operation> ToOperation(const RequestLimits& limits) {
    // No shared memory: the streaming RPCs carry inline bytes only.
    return primserve::ToOperation(request_, limits, /*memory=*/nullptr,
                                  inline_ ? nullptr : &received_);
  }

 private:
  Request request_;
  wire::ReceivedMessage received_;
  uint64_t bytes_in_ = 0;
  bool inline_ = false;
};

// The reactor of one stream, over raw buffers: each message read is parsed
// into a Piece, each answer framed with its arrays as slices (wire/). `Base`
// is RawBidiReactor (an answer per piece, written as each is stitched) or
// RawReadReactor (one answer, into the response the method was given).
template <typename Family, typename Base>
class StreamReactor final : public Base {
  using Request = typename Family::Request;
  using Response = typename Family::Response;
  static constexpr bool kAnswersEachPiece = std::is_same_v<Base, RawBidiReactor>;

 public:
  StreamReactor(grpc::CallbackServerContext* context, StreamEnvironment environment,
                grpc::ByteBuffer* response)
      : context_(context),
        environment_(std::move(environment)),
        response_(response),
        answers_(WithRoom(environment_.answer_allocator)) {
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
    grpc::ByteBuffer raw;
    uint64_t seq = 0;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;  // the stream failed while this read was out
      // The next read waits until this piece is scheduled: pieces start in
      // order, and the stream ends only after the last has started.
      processing_ = true;
      raw.Swap(&incoming_);
      seq = pieces_read_++;
      ++unanswered_;
    }
    Start(seq, raw);
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
        if (writes_.front().answers_piece) --unanswered_;
        DropFrontWriteLocked();
        if (!ok) {
          // The client is gone: nothing more is written.
          broken_ = true;
          while (!writes_.empty()) DropFrontWriteLocked();
        }
      }
    });
  }

  void OnDone() override { delete this; }

 private:
  // Parses, validates and schedules piece `seq` from its message `raw`;
  // called for one piece at a time, in stream order.
  void Start(uint64_t seq, const grpc::ByteBuffer& raw) {
    const uint64_t start = elements_read_;
    auto piece = std::make_unique<Piece<Request>>(environment_.payload_allocator,
                                                  environment_.payload_copies);
    if (absl::Status parsed = piece->Parse(raw); !parsed.ok()) {
      RecordRefusal(environment_.metrics, parsed);
      Fail(InPiece(parsed, seq, start));
      return;
    }
    Request& request = piece->request();
    absl::Status status;
    if (seq == 0) {
      family_.Configure(environment_);
      status = family_.Begin(request, environment_.limits);
      if (status.ok()) pieces_.emplace(request);
      serial_ = status.ok() && family_.Serial();
    } else {
      status = pieces_->MakePiece(&request);
    }
    if (status.ok()) family_.Localize(start, piece.get());
    const CallRecord call =
        CallRecord::Start(environment_.metrics, LabelsOf(request), piece->bytes_in());
    // The piece is validated as sent; a serial stream then reshapes it.
    absl::StatusOr<Operation> operation =
        status.ok() ? piece->ToOperation(environment_.limits) : status;
    const uint64_t elements = operation.ok() ? ItemCount(*operation) : 0;
    bool runs = true;
    if (operation.ok() && serial_) {
      absl::StatusOr<bool> shaped = family_.Shape(piece.get(), environment_.limits);
      if (!shaped.ok()) {
        operation = shaped.status();
      } else if ((runs = *shaped)) {
        operation = piece->ToOperation(ReshapedLimits());
      }
    }
    if (!operation.ok()) {
      RecordRefusal(environment_.metrics, operation.status());
      call.Done(operation.status(), nullptr, 0);
      Fail(InPiece(operation.status(), seq, start));
      return;
    }
    elements_read_ += elements;
    std::unique_ptr<Task> task =
        MakeTask(seq, start, call, elements, std::move(piece), *std::move(operation));
    {
      absl::MutexLock lock(&mu_);
      ++in_flight_;
      if (serial_ && runs) parked_.emplace_back(seq, std::move(task));
    }
    if (serial_) {
      // A piece with no operation of its own is answered empty, in order.
      if (!runs) task->done(family_.EmptyResult());
      RunSerial();
      return;
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

  // The task of the operation of piece `seq` (from element `start`), which
  // views `piece`: the task keeps it until it is done, and then the stream
  // until it is stitched.
  std::unique_ptr<Task> MakeTask(uint64_t seq, uint64_t start, const CallRecord& call,
                                 uint64_t elements, std::unique_ptr<Piece<Request>> piece,
                                 Operation operation) {
    auto task = std::make_unique<Task>();
    task->operation = std::move(operation);
    task->deadline = DeadlineOf(*context_);
    task->is_cancelled = [context = context_] { return context->IsCancelled(); };
    task->peer = environment_.caller;
    task->answers = answers_;
    // Admission keeps the piece's cost counted until its answer is written.
    task->sent = std::make_shared<AnswerSent>();
    task->done = [this, seq, start, call, elements, piece = std::move(piece),
                  sent = task->sent](absl::StatusOr<Result> result) mutable {
      call.Done(result.status(), nullptr, result.ok() ? elements : 0);
      if (result.ok()) {
        // The answers held in answers_'s buffers have room before them.
        ForEachArray(*result, [](HostArray& array) { array.held_room = RoomBefore(array); });
      }
      Completed(seq, start, std::move(piece), std::move(result), std::move(sent));
      // Nothing of the reactor after this: it may be gone.
    };
    return task;
  }

  // A serial stream's reshaped operations: the pieces were checked against
  // the limits as sent, and a gathered stream against one request's.
  RequestLimits ReshapedLimits() const {
    RequestLimits limits = environment_.limits;
    limits.max_elements = UINT64_MAX;
    limits.max_response_bytes = UINT64_MAX;
    return limits;
  }

  // A serial stream: hands the next parked operation to the scheduler once
  // the one before it is done, continuing what that one left (the carry);
  // once the stream has failed, answers the parked ones unrun. Touches
  // nothing of the reactor after the last task it hands on or answers.
  void RunSerial() {
    std::unique_ptr<Task> next;
    std::vector<std::unique_ptr<Task>> unrun;
    {
      absl::MutexLock lock(&mu_);
      if (parked_.empty() || (running_seq_ && error_.ok() && !broken_)) return;
      if (error_.ok() && !broken_) {
        running_seq_ = parked_.front().first;
        next = std::move(parked_.front().second);
        parked_.pop_front();
        family_.Continue(&next->operation);
      }
      if (!error_.ok() || broken_) {
        for (auto& [seq, task] : parked_) unrun.push_back(std::move(task));
        parked_.clear();
      }
    }
    if (next != nullptr) {
      const absl::Status scheduled = environment_.scheduler->Schedule(&next);
      if (scheduled.ok()) return;
      {
        absl::MutexLock lock(&mu_);
        for (auto& [seq, task] : parked_) unrun.push_back(std::move(task));
        parked_.clear();
      }
      // Fails the stream with the refusal (through Completed); the reactor
      // may be gone after it unless tasks are left to answer.
      next->done(scheduled);
    }
    for (auto& task : unrun) {
      task->done(absl::CancelledError("the stream failed before this operation ran"));
    }
  }

  // At the end of a serial stream: parks its last operation (TakeFlush) as
  // one more piece, or fails the stream; false if there is none.
  bool ParkFlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto piece = std::make_unique<Piece<Request>>(nullptr, nullptr);
    piece->request().CopyFrom(pieces_->parameters());
    absl::StatusOr<bool> flush = family_.TakeFlush(piece.get());
    if (!flush.ok()) {
      FailLocked(flush.status());
      return false;
    }
    if (!*flush) return false;
    const CallRecord call =
        CallRecord::Start(environment_.metrics, LabelsOf(piece->request()), piece->request());
    absl::StatusOr<Operation> operation = piece->ToOperation(ReshapedLimits());
    if (!operation.ok()) {
      call.Done(operation.status(), nullptr, 0);
      FailLocked(operation.status());
      return false;
    }
    const uint64_t seq = pieces_read_++;
    const uint64_t elements = ItemCount(*operation);
    parked_.emplace_back(seq, MakeTask(seq, elements_read_, call, elements, std::move(piece),
                                       *std::move(operation)));
    ++unanswered_;
    ++in_flight_;
    return true;
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
    for (auto& [seq, done] : completed_) to_signal_.push_back(std::move(done.sent));
    completed_.clear();
    if constexpr (kAnswersEachPiece) {
      // Answers not yet started are dropped: the stream ends with the error.
      while (writes_.size() > (writing_ ? 1 : 0)) {
        for (auto& sent : writes_.back().sent) to_signal_.push_back(std::move(sent));
        writes_.pop_back();
      }
    }
  }

  // The front answer is written or dropped: its pieces' signals go out once
  // the lock is let go.
  void DropFrontWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto& sent : writes_.front().sent) to_signal_.push_back(std::move(sent));
    writes_.pop_front();
  }

  // A piece's task is done: stitches it and every piece after it that is
  // done too, in stream order.
  void Completed(uint64_t seq, uint64_t start, std::unique_ptr<Piece<Request>> piece,
                 absl::StatusOr<Result> result, std::shared_ptr<AnswerSent> sent) {
    {
      absl::MutexLock lock(&mu_);
      if (!error_.ok()) {
        // The stream has failed: the piece's answer is not wanted.
        to_signal_.push_back(std::move(sent));
      } else if (!result.ok()) {
        to_signal_.push_back(std::move(sent));
        FailLocked(InPiece(result.status(), seq, start));
      } else {
        completed_.emplace(seq, Done{std::move(piece), *std::move(result), std::move(sent)});
        StitchReadyLocked();
      }
      if (running_seq_ == seq) running_seq_.reset();
    }
    // The task counts in flight until here, so the stream cannot finish (and
    // the reactor be deleted) before this call is done with it.
    if (serial_) RunSerial();
    Advance([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { --in_flight_; });
  }

  void StitchReadyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = completed_.begin(); it != completed_.end() && it->first == next_stitch_;
         it = completed_.erase(it), ++next_stitch_) {
      Responses answers;
      std::shared_ptr<AnswerSent> sent = std::move(it->second.sent);
      if (absl::Status s =
              family_.Stitch(*it->second.piece, std::move(it->second.result), &answers);
          !s.ok()) {
        to_signal_.push_back(std::move(sent));
        FailLocked(s);
        return;
      }
      if constexpr (kAnswersEachPiece) {
        for (grpc::ByteBuffer& answer : answers) {
          writes_.push_back(Write{std::move(answer), /*answers_piece=*/true, {}});
        }
        // Sent with the piece's last answer; a piece whose answer the stitch
        // holds for later (or that gave none) holds no answer memory itself.
        if (!answers.empty()) {
          writes_.back().sent.push_back(std::move(sent));
        } else {
          to_signal_.push_back(std::move(sent));
        }
      } else {
        --unanswered_;
        to_signal_.push_back(std::move(sent));
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
      const grpc::ByteBuffer* write = nullptr;
      grpc::ByteBuffer* read = nullptr;
      std::optional<grpc::Status> finish;
      bool run_serial = false;
      std::vector<std::shared_ptr<AnswerSent>> signal;
      {
        absl::MutexLock lock(&mu_);
        if (first) update();
        signal.swap(to_signal_);
        if (started) --starting_;
        started = false;
        if (finished_) return;
        if (error_.ok() && !broken_ && reads_done_ && !ended_ && in_flight_ == 0 &&
            completed_.empty()) {
          // A serial stream's last operation first (the held elements).
          if (serial_ && pieces_read_ > 0 && !flush_parked_) {
            flush_parked_ = true;
            run_serial = ParkFlushLocked();
          }
          if (in_flight_ == 0 && error_.ok()) End();
        }
        if constexpr (kAnswersEachPiece) {
          if (!writing_ && !writes_.empty() && !broken_ && error_.ok()) {
            writing_ = true;
            write = &writes_.front().framed;
          }
        }
        if (!reading_ && !reads_done_ && error_.ok() && !broken_ &&
            unanswered_ < kStreamWindow) {
          reading_ = true;
          incoming_.Clear();
          read = &incoming_;
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
      // Before anything that may let the stream finish: a signal can answer
      // another of this stream's tasks (admission hands on or drops more).
      for (const auto& sent : signal) {
        if (sent != nullptr) sent->Signal();
      }
      if constexpr (kAnswersEachPiece) {
        if (write != nullptr) this->StartWrite(write);
      }
      if (read != nullptr) this->StartRead(read);
      if (run_serial) {
        // The flush counts in flight: the stream cannot finish meanwhile;
        // unless a read or write started here, nothing of the reactor is
        // touched after it.
        RunSerial();
      }
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
    Responses answers;
    if (absl::Status s = family_.End(&answers); !s.ok()) {
      FailLocked(s);
      return;
    }
    if constexpr (kAnswersEachPiece) {
      for (grpc::ByteBuffer& answer : answers) {
        writes_.push_back(Write{std::move(answer), /*answers_piece=*/false, {}});
      }
    } else {
      *response_ = std::move(answers.front());
    }
  }

  struct Done {
    std::unique_ptr<Piece<Request>> piece;
    Result result;
    std::shared_ptr<AnswerSent> sent;
  };

  // An answer to write, framed: whether it answers a piece, and the signals
  // of the pieces it completes (their cost stays in admission until then).
  struct Write {
    grpc::ByteBuffer framed;
    bool answers_piece = false;
    std::vector<std::shared_ptr<AnswerSent>> sent;
  };

  grpc::CallbackServerContext* const context_;
  const StreamEnvironment environment_;
  grpc::ByteBuffer* const response_;  // the single answer's, else null
  // The pieces' Task::answers: environment_'s, with room in front.
  const AnswerAllocator answers_;

  // Touched only on the read path, one piece at a time (and Family::Begin
  // happens before any stitch, which runs under mu_).
  std::optional<StreamPieces> pieces_;
  uint64_t elements_read_ = 0;

  absl::Mutex mu_;
  Family family_;  // Begin and Localize on the read path, the rest under mu_
  grpc::ByteBuffer incoming_ ABSL_GUARDED_BY(mu_);
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
  // A serial family (set with the first piece, before any task): its
  // operations wait here in stream order, one running at a time.
  bool serial_ = false;
  std::deque<std::pair<uint64_t, std::unique_ptr<Task>>> parked_ ABSL_GUARDED_BY(mu_);
  std::optional<uint64_t> running_seq_ ABSL_GUARDED_BY(mu_);
  bool flush_parked_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, Done> completed_ ABSL_GUARDED_BY(mu_);
  std::deque<Write> writes_ ABSL_GUARDED_BY(mu_);
  // Pieces' answers written or dropped, signalled by Advance once mu_ is let
  // go (a signal may call back into this stream).
  std::vector<std::shared_ptr<AnswerSent>> to_signal_ ABSL_GUARDED_BY(mu_);
};

template <typename Family>
using BidiStream = StreamReactor<Family, RawBidiReactor>;
template <typename Family>
using ReadStream = StreamReactor<Family, RawReadReactor>;

}  // namespace streams
}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_STREAM_REACTOR_H_
