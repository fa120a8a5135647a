// The Target whose calls are streams: a request cut into pieces and sent
// through the RPC's *Stream form (ScanStream, ...), or messages sent as they
// are (EchoStream).
#ifndef PRIMSERVE_CLIENT_LOADGEN_STREAM_TARGET_H_
#define PRIMSERVE_CLIENT_LOADGEN_STREAM_TARGET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/loadgen/target.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace primserve {

// One message of a stream: elements [start, end) of the whole request's arrays.
struct StreamPiece {
  std::unique_ptr<google::protobuf::Message> message;
  uint64_t start = 0;
  uint64_t end = 0;
};

// `whole` as the messages of a stream of pieces of about `piece_bytes`
// (StreamCutter), cut before the load starts. At least one message.
std::vector<StreamPiece> CutIntoPieces(const google::protobuf::Message& whole,
                                       uint64_t piece_bytes);

// Each call a stream of a request's pieces, to the RPC's *Stream form (Add)
// or to EchoStream (AddMessages).
class StreamTarget final : public Target {
 public:
  // Whether a stream's answers are right.
  using AnswersCheck = std::function<bool(const std::vector<grpc::ByteBuffer>&)>;

  // `response_type`: the unary response the answers join into (Add); null
  // for AddMessages only.
  StreamTarget(std::string name, std::string method,
               const std::vector<std::shared_ptr<grpc::Channel>>& channels,
               absl::Duration timeout, uint64_t piece_bytes,
               const google::protobuf::Message* response_type);

  const std::string& name() const override { return name_; }
  size_t num_requests() const override { return requests_.size(); }

  // `request` cut into pieces of about piece_bytes; `check` sees the
  // answers joined into the unary response.
  void Add(const google::protobuf::Message& request, Check check) override;

  // A stream of these messages, as they are.
  void AddMessages(const std::vector<const google::protobuf::Message*>& messages,
                   AnswersCheck check);

  void Start(size_t channel, size_t index, bool verify,
             std::function<void(const CallOutcome&)> done) const override;

 private:
  struct Request {
    std::vector<grpc::ByteBuffer> messages;
    uint64_t bytes = 0;
    AnswersCheck check;
  };

  const std::string name_;
  const std::string method_;
  const absl::Duration timeout_;
  const uint64_t piece_bytes_;
  const google::protobuf::Message* const response_type_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // one per channel
  std::vector<Request> requests_;
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_STREAM_TARGET_H_
