#include "client/loadgen/stream_target.h"

#include <algorithm>
#include <utility>

#include "client/stream_messages.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/client_callback.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/slice.h"

namespace primserve {
namespace {

// The answers of a stream as the one response the unary call gives.
bool JoinAnswers(const std::vector<grpc::ByteBuffer>& answers, google::protobuf::Message* joined) {
  joined->Clear();
  std::unique_ptr<google::protobuf::Message> answer(joined->New());
  for (grpc::ByteBuffer buffer : answers) {
    if (!grpc::GenericDeserialize<grpc::ProtoBufferReader, google::protobuf::Message>(
             &buffer, answer.get())
             .ok()) {
      return false;
    }
    AppendAnswer(answer.get(), joined);
  }
  return true;
}

// One call of a stream: writes the messages in order, one at a time, while
// reading the answers; deletes itself when done.
class StreamCall final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `done` gets the call's status, its answers' bytes and (with
  // `keep_answers`) the answers.
  using Done = std::function<void(const grpc::Status&, uint64_t response_bytes,
                                  std::vector<grpc::ByteBuffer> answers)>;

  StreamCall(const std::vector<grpc::ByteBuffer>* messages, bool keep_answers, Done done)
      : messages_(messages), keep_answers_(keep_answers), done_(std::move(done)) {}

  void Start(grpc::GenericStub& stub, const std::string& method, absl::Duration timeout) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    stub.PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    StartRead(&incoming_);
    WriteNext();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();  // else the call is ending: OnDone says how
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    response_bytes_ += incoming_.Length();
    if (keep_answers_) answers_.push_back(incoming_);
    StartRead(&incoming_);
  }

  void OnDone(const grpc::Status& status) override {
    done_(status, response_bytes_, std::move(answers_));
    delete this;
  }

 private:
  void WriteNext() {
    if (next_ < messages_->size()) {
      StartWrite(&(*messages_)[next_++]);
    } else {
      StartWritesDone();
    }
  }

  const std::vector<grpc::ByteBuffer>* const messages_;
  const bool keep_answers_;
  const Done done_;
  grpc::ClientContext context_;
  grpc::ByteBuffer incoming_;
  size_t next_ = 0;
  uint64_t response_bytes_ = 0;
  std::vector<grpc::ByteBuffer> answers_;
};

}  // namespace

// `whole` as the messages of a stream of pieces of about `piece_bytes`
// (StreamCutter), cut before the load starts. At least one message.
std::vector<StreamPiece> CutIntoPieces(const google::protobuf::Message& whole,
                                       uint64_t piece_bytes) {
  StreamCutter cutter(whole);
  const uint64_t step = cutter.PieceElements(piece_bytes);
  std::vector<StreamPiece> pieces;
  while (!cutter.done()) {
    StreamPiece piece{std::unique_ptr<google::protobuf::Message>(whole.New()), cutter.cut(),
                      std::min(cutter.elements(), cutter.cut() + step)};
    cutter.Next(step, piece.message.get());
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

StreamTarget::StreamTarget(std::string name, std::string method,
                           const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                           absl::Duration timeout, uint64_t piece_bytes,
                           const google::protobuf::Message* response_type)
    : name_(std::move(name)),
      method_(std::move(method)),
      timeout_(timeout),
      piece_bytes_(piece_bytes),
      response_type_(response_type) {
  for (const auto& channel : channels) {
    stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
  }
}

void StreamTarget::Add(const google::protobuf::Message& request, Check check) {
  std::vector<const google::protobuf::Message*> messages;
  const std::vector<StreamPiece> pieces = CutIntoPieces(request, piece_bytes_);
  for (const StreamPiece& piece : pieces) messages.push_back(piece.message.get());
  AnswersCheck answers_check;
  if (check) {
    answers_check = [check = std::move(check), type = response_type_](
                        const std::vector<grpc::ByteBuffer>& answers) {
      std::unique_ptr<google::protobuf::Message> joined(type->New());
      if (!JoinAnswers(answers, joined.get())) return false;
      grpc::Slice bytes(joined->SerializeAsString());
      return check(grpc::ByteBuffer(&bytes, 1));
    };
  }
  AddMessages(messages, std::move(answers_check));
}

void StreamTarget::AddMessages(const std::vector<const google::protobuf::Message*>& messages,
                               AnswersCheck check) {
  Request request;
  for (const google::protobuf::Message* message : messages) {
    grpc::Slice bytes(message->SerializeAsString());
    request.messages.emplace_back(&bytes, 1);
    request.bytes += request.messages.back().Length();
  }
  request.check = std::move(check);
  requests_.push_back(std::move(request));
}

void StreamTarget::Start(size_t channel, size_t index, bool verify,
                         std::function<void(const CallOutcome&)> done) const {
  const Request& request = requests_[index];
  auto* call = new StreamCall(
      &request.messages, verify,
      [&request, verify, done = std::move(done)](const grpc::Status& status,
                                                 uint64_t response_bytes,
                                                 std::vector<grpc::ByteBuffer> answers) {
        CallOutcome outcome;
        outcome.status = status;
        if (status.ok()) {
          outcome.bytes = request.bytes + response_bytes;
          outcome.verified = verify;
          outcome.mismatch = verify && !request.check(answers);
        }
        done(outcome);
      });
  call->Start(*stubs_[channel], method_, timeout_);
}

}  // namespace primserve
