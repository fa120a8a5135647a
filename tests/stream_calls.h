// A request sent through its streaming RPC, for tests: the request cut into
// the messages of a stream (Cut), the stream's answers joined into the one
// answer the unary call gives (Join), the two kinds of streaming call made
// with the generated stub, writing from another thread while reading, and
// the checks that a stream answers as the unary call does.
#ifndef PRIMSERVE_TESTS_STREAM_CALLS_H_
#define PRIMSERVE_TESTS_STREAM_CALLS_H_

#include <memory>
#include <thread>
#include <vector>

#include "client/message_arrays.h"
#include "client/stream_messages.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
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

// The unary call, whose answer a stream's joined answers must equal.
template <typename Request, typename Response>
Response Unary(v1::Primitives::Stub& stub,
               grpc::Status (v1::Primitives::Stub::*method)(grpc::ClientContext*, const Request&,
                                                            Response*),
               const Request& request) {
  grpc::ClientContext context;
  Response response;
  const grpc::Status status = (stub.*method)(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

// `whole` cut into pieces of `sizes` elements through the bidirectional
// `stream` answers as the `unary` call does.
template <typename Request, typename Response, typename Rng>
void ExpectBidiEqualsUnary(
    v1::Primitives::Stub& stub,
    std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> (
        v1::Primitives::Stub::*stream)(grpc::ClientContext*),
    grpc::Status (v1::Primitives::Stub::*unary)(grpc::ClientContext*, const Request&, Response*),
    const Request& whole, const std::vector<size_t>& sizes, Rng& rng) {
  grpc::ClientContext context;
  std::vector<Response> answers;
  const grpc::Status status = Bidi(stub, stream, &context, Cut(whole, sizes, rng), &answers);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << whole.GetTypeName();
  EXPECT_GE(answers.size(), sizes.size());
  EXPECT_EQ(Join(answers).SerializeAsString(), Unary(stub, unary, whole).SerializeAsString())
      << whole.DebugString().substr(0, 300) << " in " << sizes.size() << " pieces";
}

// The same through the client-streaming `stream` (one answer at the end).
template <typename Request, typename Response, typename Rng>
void ExpectClientStreamEqualsUnary(
    v1::Primitives::Stub& stub,
    std::unique_ptr<grpc::ClientWriter<Request>> (v1::Primitives::Stub::*stream)(
        grpc::ClientContext*, Response*),
    grpc::Status (v1::Primitives::Stub::*unary)(grpc::ClientContext*, const Request&, Response*),
    const Request& whole, const std::vector<size_t>& sizes, Rng& rng) {
  grpc::ClientContext context;
  Response answer;
  const grpc::Status status =
      ClientStream(stub, stream, &context, Cut(whole, sizes, rng), &answer);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << whole.GetTypeName();
  EXPECT_EQ(answer.SerializeAsString(), Unary(stub, unary, whole).SerializeAsString())
      << whole.DebugString().substr(0, 300) << " in " << sizes.size() << " pieces";
}

}  // namespace testing
}  // namespace primserve

#endif  // PRIMSERVE_TESTS_STREAM_CALLS_H_
