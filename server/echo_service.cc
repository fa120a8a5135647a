#include "server/echo_service.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace primserve {
namespace {

// A protobuf message must stay under 2 GiB; leave room for the framing.
constexpr uint64_t kMaxProtobufPayloadBytes = (uint64_t{1} << 31) - 1024;

}  // namespace

grpc::ServerUnaryReactor* EchoService::Echo(grpc::CallbackServerContext* context,
                                            const v1::EchoRequest* request,
                                            v1::EchoResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  uint64_t request_bytes = 0;
  for (const v1::Array& array : request->arrays()) request_bytes += array.data().size();
  const uint64_t response_bytes =
      request->has_response_bytes() ? request->response_bytes() : request_bytes;
  const uint64_t limit = std::min(max_response_bytes_, kMaxProtobufPayloadBytes);
  if (response_bytes > limit) {
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 absl::StrCat("response_bytes = ", response_bytes,
                                              " is over the server's limit of ", limit,
                                              " (--max_response_bytes)")));
    return reactor;
  }
  // gRPC owns the request message, which is not const and is not read after
  // this handler, so its bytes can be moved instead of copied: an echo must
  // cost no more than the transport does.
  auto* arrays = const_cast<v1::EchoRequest*>(request)->mutable_arrays();
  std::string* payload = response->mutable_payload();
  if (arrays->size() == 1) {
    payload->swap(*arrays->Mutable(0)->mutable_data());
  } else {
    for (const v1::Array& array : *arrays) {
      if (payload->size() >= response_bytes) break;
      payload->append(array.data(), 0, response_bytes - payload->size());
    }
  }
  payload->resize(response_bytes);  // cuts, or pads with zeros
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace primserve
