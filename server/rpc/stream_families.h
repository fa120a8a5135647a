// The seven streaming RPCs, each a family (what its pieces mean and how
// their answers are stitched) over the generic reactor (stream_reactor.h).
#ifndef PRIMSERVE_SERVER_RPC_STREAM_FAMILIES_H_
#define PRIMSERVE_SERVER_RPC_STREAM_FAMILIES_H_

#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/rpc/stream_reactor.h"

namespace primserve {

// Each starts reading at once and deletes itself when the stream is done.
RawBidiReactor* NewScanStream(grpc::CallbackServerContext* context,
                              StreamEnvironment environment);
RawBidiReactor* NewSelectStream(grpc::CallbackServerContext* context,
                                StreamEnvironment environment);
RawBidiReactor* NewUniqueStream(grpc::CallbackServerContext* context,
                                StreamEnvironment environment);
RawBidiReactor* NewRunLengthEncodeStream(grpc::CallbackServerContext* context,
                                         StreamEnvironment environment);
RawBidiReactor* NewReduceByKeyStream(grpc::CallbackServerContext* context,
                                     StreamEnvironment environment);
// The answer is written into *response, which outlives the reactor.
RawReadReactor* NewReduceStream(grpc::CallbackServerContext* context,
                                StreamEnvironment environment, grpc::ByteBuffer* response);
RawReadReactor* NewAggregateByKeyStream(grpc::CallbackServerContext* context,
                                        StreamEnvironment environment,
                                        grpc::ByteBuffer* response);

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_STREAM_FAMILIES_H_
