// The messages of a request stream (ScanStream and the rest), turned into one
// ordinary request per piece. The first message carries every parameter and
// the first piece of each array; a later message carries only the next piece
// of the same arrays, and may repeat a parameter only unchanged (an array's
// dtype included). Generic over the request types through reflection: an
// "array" is a field of type primserve.v1.Array, every other field is a
// parameter.
#ifndef PRIMSERVE_SERVER_RPC_STREAM_PIECES_H_
#define PRIMSERVE_SERVER_RPC_STREAM_PIECES_H_

#include <memory>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace primserve {

class StreamPieces {
 public:
  // Keeps the first message's parameters (not its arrays' data).
  explicit StreamPieces(const google::protobuf::Message& first);

  // Makes a later message the request of its piece: INVALID_ARGUMENT naming
  // the field if it sets a parameter differently from the first message, or
  // an array the first message does not have. Otherwise gives it the first
  // message's parameters and array dtypes, except repeated fields (segment
  // offsets), which are the caller's to fill for the piece.
  absl::Status MakePiece(google::protobuf::Message* later) const;

  // The first message's parameters and array dtypes, arrays empty.
  const google::protobuf::Message& parameters() const { return *reference_; }

 private:
  std::unique_ptr<google::protobuf::Message> reference_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_STREAM_PIECES_H_
