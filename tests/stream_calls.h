// A request sent through its streaming RPC, for tests: the request cut into
// the messages of a stream (Cut), the stream's answers joined into the one
// answer the unary call gives (Join), and the two kinds of streaming call
// made with the generated stub, writing from another thread while reading.
#ifndef PRIMSERVE_TESTS_STREAM_CALLS_H_
#define PRIMSERVE_TESTS_STREAM_CALLS_H_

#include <memory>
#include <thread>
#include <vector>

#include "client/message_arrays.h"
#include "client/stream_messages.h"
#include "grpcpp/grpcpp.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"

namespace primserve {
namespace testing {

// `whole` cut into messages of `sizes` elements (StreamCutter): the first
// keeps every parameter, later ones only their pieces of the arrays, each
// array's dtype left out one time in two (the server takes the first's).
template <typename Request, typename Rng>
std::vector<Request> Cut(const Request& whole, const std::vector<size_t>& sizes, Rng& rng) {
  StreamCutter cutter(whole);
  std::vector<Request> messages(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    cutter.Next(sizes[i], &messages[i]);
    if (i == 0) continue;
    for (const google::protobuf::FieldDescriptor* field : SetArrays(messages[i])) {
      if (rng() % 2 == 0) MutableArray(&messages[i], field)->clear_dtype();
    }
  }
  return messages;
}

// The answers of a stream joined into the one answer of the unary call.
template <typename Response>
Response Join(std::vector<Response> answers) {
  Response joined;
  for (Response& answer : answers) AppendAnswer(&answer, &joined);
  return joined;
}

// A bidirectional streaming call: writes the messages from another thread
// while reading every answer.
template <typename Request, typename Response>
grpc::Status Bidi(v1::Primitives::Stub& stub,
                  std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> (
                      v1::Primitives::Stub::*method)(grpc::ClientContext*),
                  grpc::ClientContext* context, const std::vector<Request>& messages,
                  std::vector<Response>* answers) {
  auto stream = (stub.*method)(context);
  std::thread writer([&] {
    for (const Request& m : messages) {
      if (!stream->Write(m)) break;
    }
    stream->WritesDone();
  });
  Response answer;
  while (stream->Read(&answer)) answers->push_back(answer);
  writer.join();
  return stream->Finish();
}

// A client-streaming call (one answer at the end).
template <typename Request, typename Response>
grpc::Status ClientStream(v1::Primitives::Stub& stub,
                          std::unique_ptr<grpc::ClientWriter<Request>> (
                              v1::Primitives::Stub::*method)(grpc::ClientContext*, Response*),
                          grpc::ClientContext* context, const std::vector<Request>& messages,
                          Response* answer) {
  auto stream = (stub.*method)(context, answer);
  for (const Request& m : messages) {
    if (!stream->Write(m)) break;
  }
  stream->WritesDone();
  return stream->Finish();
}

}  // namespace testing
}  // namespace primserve

#endif  // PRIMSERVE_TESTS_STREAM_CALLS_H_
