// A request sent through its streaming RPC, for tests: the request cut into
// the messages of a stream (Cut), the stream's answers joined into the one
// answer the unary call gives (Join), and the two kinds of streaming call
// made with the generated stub, writing from another thread while reading.
#ifndef PRIMSERVE_TESTS_STREAM_CALLS_H_
#define PRIMSERVE_TESTS_STREAM_CALLS_H_

#include <memory>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"

namespace primserve {
namespace testing {

// The array fields of a message (of type primserve.v1.Array).
inline std::vector<const google::protobuf::FieldDescriptor*> ArrayFields(
    const google::protobuf::Message& m) {
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  for (int i = 0; i < m.GetDescriptor()->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = m.GetDescriptor()->field(i);
    if (f->message_type() == v1::Array::descriptor()) fields.push_back(f);
  }
  return fields;
}

// `whole` cut into messages of `sizes` elements: the first keeps every
// parameter, later ones only their pieces of the arrays (dtype repeated one
// time in two).
template <typename Request, typename Rng>
std::vector<Request> Cut(const Request& whole, const std::vector<size_t>& sizes, Rng& rng) {
  std::vector<Request> messages;
  size_t start = 0;
  for (size_t size : sizes) {
    Request m;
    if (messages.empty()) m = whole;
    for (const google::protobuf::FieldDescriptor* f : ArrayFields(whole)) {
      if (!whole.GetReflection()->HasField(whole, f)) continue;
      const auto& array = static_cast<const v1::Array&>(whole.GetReflection()->GetMessage(whole, f));
      const size_t element = array.dtype() == v1::INT32 || array.dtype() == v1::UINT32 ||
                                     array.dtype() == v1::FLOAT32
                                 ? 4
                                 : 8;
      auto* to = static_cast<v1::Array*>(m.GetReflection()->MutableMessage(&m, f));
      to->set_data(array.data().substr(start * element, size * element));
      if (messages.empty() || rng() % 2) to->set_dtype(array.dtype());
    }
    messages.push_back(std::move(m));
    start += size;
  }
  return messages;
}

// The answers of a stream joined into one: arrays concatenated, other fields
// (Select's count) from the last answer.
template <typename Response>
Response Join(const std::vector<Response>& answers) {
  Response joined;
  for (const Response& answer : answers) {
    const std::vector<const google::protobuf::FieldDescriptor*> arrays = ArrayFields(answer);
    Response rest = answer;
    for (const google::protobuf::FieldDescriptor* f : arrays) {
      rest.GetReflection()->ClearField(&rest, f);
    }
    joined.MergeFrom(rest);
    for (const google::protobuf::FieldDescriptor* f : arrays) {
      if (!answer.GetReflection()->HasField(answer, f)) continue;
      const auto& piece =
          static_cast<const v1::Array&>(answer.GetReflection()->GetMessage(answer, f));
      auto* to = static_cast<v1::Array*>(joined.GetReflection()->MutableMessage(&joined, f));
      to->set_dtype(piece.dtype());
      to->mutable_data()->append(piece.data());
    }
  }
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
