#include "client/loadgen/multiplex_target.h"

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/client_callback.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "wire/format.h"

namespace primserve {

using wire::Varint;

// One Multiplex stream: requests go out in order (one write at a time),
// answers come back in any order and are matched to their calls by id.
class MultiplexStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  struct Call {
    uint64_t request_bytes = 0;
    const Check* check = nullptr;  // null: not verified
    std::function<void(const CallOutcome&)> done;
  };

  MultiplexStream(grpc::GenericStub& stub, const std::string& method) {
    stub.PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    StartRead(&incoming_);
    StartCall();
  }

  // Sends `body` (the request's oneof field, tag and length included) as call
  // `id`'s request.
  void Send(const grpc::Slice& body, Call call) {
    const std::string id = Varint(next_id_.fetch_add(1));
    grpc::Slice slices[] = {grpc::Slice("\x08" + id), body};
    grpc::ByteBuffer request(slices, 2);
    const uint64_t key = DecodeId(id);
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      call.request_bytes = request.Length();
      calls_.emplace(key, std::move(call));
      writes_.push_back(std::move(request));
      if (!writing_) start = writing_ = true;
    }
    if (start) StartWrite(&writes_.front());
  }

  // Half-closes the stream once every request is written, and waits for its
  // end. Every call must have been answered.
  void Close() {
    bool now = false;
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      now = !writing_;
    }
    if (now) StartWritesDone();
    done_.WaitForNotification();
  }

  void OnWriteDone(bool ok) override {
    bool next = false, more = false, close = false;
    {
      absl::MutexLock lock(&mu_);
      writes_.pop_front();
      if (!ok) writes_.clear();
      next = !writes_.empty();
      more = writes_.size() > 1;
      writing_ = next;
      close = !next && closing_;
    }
    // With more requests queued behind it, a request may wait in gRPC's
    // buffer for the next: several go out in one write to the socket.
    if (next) StartWrite(&writes_.front(), more ? grpc::WriteOptions().set_buffer_hint()
                                                : grpc::WriteOptions());
    if (close) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    v1::MultiplexResponse answer;
    const uint64_t response_bytes = incoming_.Length();
    const bool parsed =
        grpc::SerializationTraits<v1::MultiplexResponse>::Deserialize(&incoming_, &answer).ok();
    StartRead(&incoming_);
    Call call;
    {
      absl::MutexLock lock(&mu_);
      auto it = calls_.find(answer.id());
      if (!parsed || it == calls_.end()) return;
      call = std::move(it->second);
      calls_.erase(it);
    }
    CallOutcome outcome;
    outcome.status = answer.code() == 0
                         ? grpc::Status::OK
                         : grpc::Status(static_cast<grpc::StatusCode>(answer.code()),
                                        answer.message());
    if (outcome.status.ok()) {
      outcome.bytes = call.request_bytes + response_bytes;
      outcome.verified = call.check != nullptr;
      outcome.mismatch = call.check != nullptr && !(*call.check)(InnerResponse(answer));
    }
    call.done(outcome);
  }

  void OnDone(const grpc::Status& status) override {
    std::vector<Call> orphans;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [id, call] : calls_) orphans.push_back(std::move(call));
      calls_.clear();
    }
    for (Call& call : orphans) {
      CallOutcome outcome;
      outcome.status = status.ok() ? grpc::Status(grpc::StatusCode::UNKNOWN,
                                                  "the stream ended without this answer")
                                   : status;
      call.done(outcome);
    }
    done_.Notify();
  }

 private:
  static uint64_t DecodeId(const std::string& varint) {
    uint64_t value = 0;
    for (size_t i = 0; i < varint.size(); ++i) {
      value |= static_cast<uint64_t>(static_cast<uint8_t>(varint[i]) & 0x7f) << (7 * i);
    }
    return value;
  }

  // The answer's response (the oneof) serialized alone, as a unary call
  // would have returned it.
  static grpc::ByteBuffer InnerResponse(const v1::MultiplexResponse& answer) {
    const google::protobuf::Reflection* reflection = answer.GetReflection();
    const google::protobuf::OneofDescriptor* oneof =
        answer.GetDescriptor()->FindOneofByName("response");
    const google::protobuf::FieldDescriptor* field =
        reflection->GetOneofFieldDescriptor(answer, oneof);
    std::string bytes;
    if (field != nullptr) bytes = reflection->GetMessage(answer, field).SerializeAsString();
    grpc::Slice slice(bytes);
    return grpc::ByteBuffer(&slice, 1);
  }

  grpc::ClientContext context_;
  grpc::ByteBuffer incoming_;
  std::atomic<uint64_t> next_id_{0};
  absl::Mutex mu_;
  std::map<uint64_t, Call> calls_ ABSL_GUARDED_BY(mu_);
  // The front is being written; deque keeps its address while others queue.
  std::deque<grpc::ByteBuffer> writes_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Notification done_;
};

MultiplexTarget::MultiplexTarget(std::string name, Rpc rpc,
                                 const std::vector<std::shared_ptr<grpc::Channel>>& channels)
    : name_(std::move(name)),
      field_tag_(Varint(((RpcIndex(rpc) + 2) << 3) | 2)) {  // MultiplexRequest's oneof
  const std::string method = absl::StrCat("/", v1::Primitives::service_full_name(), "/Multiplex");
  for (const auto& channel : channels) {
    stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
    streams_.push_back(std::make_unique<MultiplexStream>(*stubs_.back(), method));
  }
}

MultiplexTarget::~MultiplexTarget() {
  for (auto& stream : streams_) stream->Close();
}

void MultiplexTarget::Add(const google::protobuf::Message& request, Check check) {
  const std::string bytes = request.SerializeAsString();
  requests_.push_back({grpc::Slice(field_tag_ + Varint(bytes.size()) + bytes), std::move(check)});
}

void MultiplexTarget::Start(size_t channel, size_t index, bool verify,
                            std::function<void(const CallOutcome&)> done) const {
  const Request& request = requests_[index];
  streams_[channel]->Send(request.body, {0, verify ? &request.check : nullptr, std::move(done)});
}

}  // namespace primserve
