#include "server/rpc/echo_service.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/slice.h"
#include "wire/format.h"
#include "wire/received.h"

namespace primserve {
namespace {

// A protobuf message must stay under 2 GiB; leave room for the framing.
constexpr uint64_t kMaxProtobufPayloadBytes = (uint64_t{1} << 31) - 1024;

void DeleteString(void* s) { delete static_cast<std::string*>(s); }

grpc::Status GrpcStatusOf(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace

absl::StatusOr<grpc::ByteBuffer> EchoService::Answer(const grpc::ByteBuffer& raw_request) const {
  v1::EchoRequest request;
  wire::ReceivedMessage received;
  if (absl::Status parsed = received.Parse(raw_request, &request); !parsed.ok()) return parsed;
  // The arrays' bytes as gRPC received them: an echo costs no more than the
  // transport does.
  std::vector<grpc::Slice> received_bytes;
  uint64_t request_bytes = 0;
  for (const v1::Array& array : request.arrays()) {
    if (const wire::Payload* payload = received.Find(array.data())) {
      received_bytes.insert(received_bytes.end(), payload->slices().begin(),
                            payload->slices().end());
      request_bytes += payload->size();
    } else if (!array.data().empty()) {  // protobuf parsed the request whole
      received_bytes.emplace_back(array.data());
      request_bytes += array.data().size();
    }
  }
  const uint64_t response_bytes =
      request.has_response_bytes() ? request.response_bytes() : request_bytes;
  const uint64_t limit = std::min(max_response_bytes_, kMaxProtobufPayloadBytes);
  if (response_bytes > limit) {
    return absl::ResourceExhaustedError(absl::StrCat("response_bytes = ", response_bytes,
                                                     " is over the server's limit of ", limit,
                                                     " (--max_response_bytes)"));
  }
  // EchoResponse.payload: the received bytes, cut, or padded with zeros.
  std::string header;
  wire::AppendTag(v1::EchoResponse::kPayloadFieldNumber, wire::kLengthDelimited, &header);
  wire::AppendVarint(response_bytes, &header);
  std::vector<grpc::Slice> answer = {grpc::Slice(header)};
  uint64_t left = response_bytes;
  for (const grpc::Slice& slice : received_bytes) {
    if (left == 0) break;
    const size_t take = std::min<uint64_t>(left, slice.size());
    answer.push_back(take == slice.size() ? slice : slice.sub(0, take));
    left -= take;
  }
  if (left > 0) {
    auto* zeros = new std::string(left, '\0');
    answer.emplace_back(zeros->data(), zeros->size(), DeleteString, zeros);
  }
  return grpc::ByteBuffer(answer.data(), answer.size());
}

grpc::ServerUnaryReactor* EchoService::Echo(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<grpc::ByteBuffer> answer = Answer(*request);
  if (answer.ok()) *response = *std::move(answer);
  reactor->Finish(GrpcStatusOf(answer.status()));
  return reactor;
}

namespace {

// Reads a message, writes its answer, reads the next: one message in flight
// each way, so a client that stops reading stalls only its own stream.
class EchoStreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit EchoStreamReactor(const EchoService* service) : service_(service) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed (or went away)
      Finish(grpc::Status::OK);
      return;
    }
    absl::StatusOr<grpc::ByteBuffer> answer = service_->Answer(request_);
    request_.Clear();
    if (!answer.ok()) {
      Finish(GrpcStatusOf(answer.status()));
      return;
    }
    response_ = *std::move(answer);
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    response_.Clear();
    if (!ok) {
      Finish(grpc::Status::CANCELLED);
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  const EchoService* const service_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* EchoService::EchoStream(
    grpc::CallbackServerContext* /*context*/) {
  return new EchoStreamReactor(this);
}

}  // namespace primserve
