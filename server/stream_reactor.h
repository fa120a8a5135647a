// The streaming RPCs (ScanStream, SelectStream, ...): a large array sent as
// a stream of pieces. Each piece becomes an ordinary request (validated,
// limited, batched and scheduled like a unary call), pieces of one stream are
// stitched in order (server/stitch.h), and each piece's answer is written as
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
#ifndef PRIMSERVE_SERVER_STREAM_REACTOR_H_
#define PRIMSERVE_SERVER_STREAM_REACTOR_H_

#include <cstdint>
#include <string>

#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "server/backend.h"
#include "server/convert.h"
#include "server/metrics.h"
#include "server/scheduler.h"
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

#endif  // PRIMSERVE_SERVER_STREAM_REACTOR_H_
