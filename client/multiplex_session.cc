#include "client/multiplex_session.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace primserve {
namespace {

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace

MultiplexSession::MultiplexSession(const PrimitivesClient& client)
    : channel_(client.channel()), routes_(client.routes()), timeout_(client.timeout()) {}

MultiplexSession::~MultiplexSession() { Finish(); }

MultiplexSession::Stream* MultiplexSession::StreamTo(const std::string& location) {
  std::unique_ptr<Stream>& stream = streams_[location];
  if (stream == nullptr) {
    stream = std::make_unique<Stream>();
    stream->location = location;
  }
  return stream.get();
}

void MultiplexSession::Open(Stream* stream) {
  absl::call_once(stream->opened, [this, stream] {
    stream->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
    stream->stub = v1::Primitives::NewStub(
        stream->location.empty() ? channel_ : routes_->ChannelTo(stream->location));
    stream->call = stream->stub->Multiplex(&stream->context);
    stream->reader = std::thread([this, stream] { Read(stream); });
  });
}

absl::StatusOr<size_t> MultiplexSession::Send(v1::MultiplexRequest request) {
  NamedBuffers buffers;
  std::string location;
  if (routes_ != nullptr) {
    buffers = BuffersOf(request);
    if (!buffers.empty()) {
      absl::StatusOr<std::string> at = routes_->LocationFor(buffers);
      if (!at.ok()) return at.status();
      location = *std::move(at);
    }
  }
  Stream* stream;
  size_t index;
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return absl::FailedPreconditionError("this Multiplex session is finished");
    stream = StreamTo(location);
    index = sent_.size();
    sent_.push_back({stream, std::move(buffers)});
    answers_.emplace_back();
    ++sending_;
  }
  Open(stream);
  request.set_id(index);
  {
    absl::MutexLock lock(&stream->write_mu);
    // A stream that broke answers this request with its status at Finish.
    if (stream->writable && !stream->call->Write(request)) stream->writable = false;
  }
  absl::MutexLock lock(&mu_);
  --sending_;
  return index;
}

void MultiplexSession::Read(Stream* stream) {
  for (;;) {
    v1::MultiplexResponse answer;
    if (!stream->call->Read(&answer)) return;
    absl::MutexLock lock(&mu_);
    const uint64_t index = answer.id();
    if (index >= sent_.size() || sent_[index].stream != stream || answers_[index].has_value()) {
      // The stream cannot be trusted further: its other requests get this.
      stream->broken = absl::InternalError(absl::StrCat(
          "the server answered Multiplex id ", index, ", which no unanswered request on its stream has"));
      stream->context.TryCancel();
      return;
    }
    if (answer.code() != 0) {
      answers_[index] =
          Routed(index, absl::Status(static_cast<absl::StatusCode>(answer.code()), answer.message()));
      continue;
    }
    if (!stream->location.empty()) {
      for (const std::string& name : sent_[index].buffers.outputs) {
        routes_->Remember(name, stream->location);
      }
    }
    answers_[index] = std::move(answer);
  }
}

absl::Status MultiplexSession::Routed(size_t index, absl::Status status) {
  const Sent& sent = sent_[index];
  if (sent.stream->location.empty()) return status;
  const NamedBuffers& named = sent.buffers;
  return BufferRoutes::Routed(std::move(status),
                              named.inputs.empty() ? named.outputs[0] : named.inputs[0],
                              sent.stream->location);
}

std::vector<absl::StatusOr<v1::MultiplexResponse>> MultiplexSession::Finish() {
  std::vector<Stream*> streams;
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return {};
    finished_ = true;
    // Sends that took an index finish writing first, so that each is answered.
    mu_.Await(absl::Condition(
        +[](int* sending) { return *sending == 0; }, &sending_));
    for (const auto& [location, stream] : streams_) streams.push_back(stream.get());
  }
  // Every stream is open: the Send that made it opened it before it was done.
  for (Stream* stream : streams) {
    absl::MutexLock lock(&stream->write_mu);
    if (stream->writable) stream->call->WritesDone();
    stream->writable = false;
  }
  for (Stream* stream : streams) {
    stream->reader.join();
    absl::Status status = ToAbsl(stream->call->Finish());
    absl::MutexLock lock(&mu_);
    if (!stream->broken.ok()) status = stream->broken;
    if (status.ok()) status = absl::UnknownError("the Multiplex stream ended before answering");
    for (size_t i = 0; i < sent_.size(); ++i) {
      if (sent_[i].stream == stream && !answers_[i].has_value()) answers_[i] = Routed(i, status);
    }
  }
  absl::MutexLock lock(&mu_);
  std::vector<absl::StatusOr<v1::MultiplexResponse>> answers;
  answers.reserve(answers_.size());
  for (std::optional<absl::StatusOr<v1::MultiplexResponse>>& answer : answers_) {
    answers.push_back(*std::move(answer));
  }
  answers_.clear();
  return answers;
}

}  // namespace primserve
