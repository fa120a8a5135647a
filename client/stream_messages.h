// A request cut into the messages of its *Stream RPC, and a stream's answers
// joined into the one answer the unary call gives: for primctl, primload and
// the stream tests, on any request or response (protobuf reflection over its
// primserve.v1.Array fields).
#ifndef PRIMSERVE_CLIENT_STREAM_MESSAGES_H_
#define PRIMSERVE_CLIENT_STREAM_MESSAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {

// Cuts a request into the messages of a stream, in order: the first carries
// every parameter, later ones only their pieces of the arrays; each message
// carries the same elements of every array.
class StreamCutter {
 public:
  // Takes the arrays' bytes out of `*whole` (swapped, not copied: a large
  // request is not held twice), which keeps its parameters and the arrays'
  // dtypes. `whole` must outlive the cutter.
  explicit StreamCutter(google::protobuf::Message* whole);
  // Reads the arrays' bytes in `whole`, left as it is; it must outlive the
  // cutter.
  explicit StreamCutter(const google::protobuf::Message& whole);

  // The elements of each array (of the first: the server refuses arrays of
  // different lengths).
  uint64_t elements() const { return elements_; }
  // The bytes of every array together.
  uint64_t array_bytes() const;
  // Where the next message's elements start.
  uint64_t cut() const { return cut_; }
  // Every element is in a message, and there is at least one message (an
  // empty request is still one).
  bool done() const { return started_ && cut_ >= elements_; }

  // The elements in a message of about `piece_bytes` (all arrays together);
  // at least one.
  uint64_t PieceElements(uint64_t piece_bytes) const;

  // Sets `message` (empty, of whole's type) to the next message: the next
  // `count` elements of every array (fewer where an array ends), each with
  // its dtype.
  void Next(uint64_t count, google::protobuf::Message* message);

 private:
  struct ArrayToCut {
    const google::protobuf::FieldDescriptor* field;
    v1::DType dtype;
    size_t element_bytes;
    std::string taken;            // the bytes, where taken out of whole
    const std::string* in_whole;  // else where they are
    const std::string& bytes() const { return in_whole != nullptr ? *in_whole : taken; }
  };

  StreamCutter(const google::protobuf::Message& whole, google::protobuf::Message* to_take_from);

  const google::protobuf::Message& whole_;
  std::vector<ArrayToCut> arrays_;
  uint64_t elements_ = 0;
  uint64_t cut_ = 0;
  bool started_ = false;
};

// Adds one answer of a stream to `joined`: its arrays appended to joined's,
// its other fields (Select's running count) merged in, so the last answer's
// stand. `answer`'s arrays are cleared (merging then copies nothing twice).
void AppendAnswer(google::protobuf::Message* answer, google::protobuf::Message* joined);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_STREAM_MESSAGES_H_
