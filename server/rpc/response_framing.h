// From the engine to the wire: moves a Result into its response, or frames
// the response as gRPC sends it with large answers as slices over the memory
// that holds them (no copy), or writes outputs to shared memory.
#ifndef PRIMSERVE_SERVER_RPC_RESPONSE_FRAMING_H_
#define PRIMSERVE_SERVER_RPC_RESPONSE_FRAMING_H_

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "server/engine/task.h"
#include "server/shm/request_memory.h"

namespace primserve {

// Moves the result's arrays into the response, or writes those the request
// placed in shared memory there (see RequestMemory::Deliver; null: all
// inline). INTERNAL if the result is not the response's kind. An array held
// in an answer buffer (HostArray::held) is copied into the response.
// `Response` is one of the unary responses (v1::ScanResponse, ...).
template <typename Response>
absl::Status ToResponse(Result result, Response* response, shm::RequestMemory* memory = nullptr);

// The response to `result` as gRPC sends it: ToResponse's, framed by
// wire::Frame, except that every inline array held in an answer buffer
// (HostArray::held, from Task::answers) goes out as a slice over that buffer,
// which returns to its pool when gRPC is done with it: no copy of the answer
// on the host. `response` is left with its other fields (the bytes sent are
// the framed buffer's; Length() is their size). Any protobuf parser reads
// the bytes as the v1 message ToResponse would have given. `message`, if
// not null, is the message sent, which holds `response` (a Multiplex
// answer): it is framed instead, the response's arrays within it alike.
template <typename Response>
absl::StatusOr<grpc::ByteBuffer> FrameResponse(Result result, Response* response,
                                               shm::RequestMemory* memory = nullptr,
                                               google::protobuf::Message* message = nullptr);

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_RESPONSE_FRAMING_H_
