#include "server/echo_service.h"

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

}  // namespace

grpc::ServerUnaryReactor* EchoService::Echo(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* raw_request,
                                            grpc::ByteBuffer* raw_response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  v1::EchoRequest request;
  wire::ReceivedMessage received;
  if (absl::Status parsed = received.Parse(*raw_request, &request); !parsed.ok()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(parsed.message())));
    return reactor;
  }
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
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 absl::StrCat("response_bytes = ", response_bytes,
                                              " is over the server's limit of ", limit,
                                              " (--max_response_bytes)")));
    return reactor;
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
  *raw_response = grpc::ByteBuffer(answer.data(), answer.size());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace primserve
