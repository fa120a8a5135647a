// Requests parsed straight from gRPC's receive buffers. The message's small
// fields are parsed by protobuf as always; each Array.data payload (the bulk
// of every request) stays in the slices gRPC received it in, and the parsed
// message holds a token in its place. A payload is copied at most once: into
// one aligned buffer where a backend needs it contiguous, or not at all where
// it already is (or where it is only sent on, as Echo does).
//
// Verdicts are protobuf's: bytes protobuf's parser rejects are rejected, and
// a message it accepts parses to the same fields once tokens are resolved
// (tests/fuzz compares the two on every fuzz input).
#ifndef PRIMSERVE_WIRE_RECEIVED_H_
#define PRIMSERVE_WIRE_RECEIVED_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "wire/parallel_copy.h"

namespace primserve::wire {

// Memory for a payload made contiguous: `bytes` or more, 64-byte aligned,
// freed by its deleter; null to take the default (the heap).
using PayloadBuffer = std::unique_ptr<char, std::function<void(char*)>>;
using PayloadAllocator = std::function<PayloadBuffer(size_t bytes)>;

// The bytes of one Array.data as gRPC received them: references to one or
// more of its slices, not a copy.
class Payload {
 public:
  // `allocator` (may be null or empty) and `copies` (may be null: copies on
  // the calling thread) must outlive the payload.
  Payload(std::vector<grpc::Slice> slices, const PayloadAllocator* allocator,
          CopyPool* copies = nullptr);

  size_t size() const { return size_; }
  const std::vector<grpc::Slice>& slices() const { return slices_; }
  // The bytes in one piece, aligned to 8 bytes (the largest element): the
  // received slice itself where the payload lies in one and is aligned, else
  // a copy this payload owns, made on the first call (large ones backed by
  // 2 MB pages where the kernel allows, so that hundreds of MB take hundreds
  // of page faults, not tens of thousands).
  // The copy comes from the ReceivedMessage's allocator where it gives one,
  // and is made by its copy pool.
  absl::string_view Contiguous();
  // The slices' bytes as one range to copy from.
  Gather AsGather() const;

 private:
  std::vector<grpc::Slice> slices_;
  size_t size_ = 0;
  const PayloadAllocator* allocator_;
  CopyPool* copies_;
  PayloadBuffer copy_;
};

class ReceivedMessage {
 public:
  // `allocator`: where payloads made contiguous are copied to (e.g. memory
  // a GPU copies from directly); empty: the heap. `copies` (not owned; null:
  // the calling thread) makes those copies.
  explicit ReceivedMessage(PayloadAllocator allocator = nullptr, CopyPool* copies = nullptr)
      : allocator_(std::move(allocator)), copies_(copies) {}
  ReceivedMessage(const ReceivedMessage&) = delete;
  ReceivedMessage& operator=(const ReceivedMessage&) = delete;

  // Parses `buffer` into `message` (cleared first) as protobuf would, with
  // every non-empty Array.data, at any depth, a token standing for a Payload.
  // Occurrences protobuf merges into one field share one Payload, the last
  // one's: what a parse keeps is bounded by the fields the message has, not
  // by how often the sender repeats them.
  // INVALID_ARGUMENT where protobuf's parser rejects the bytes. Bytes this
  // parser does not follow (groups, malformed fields; nothing a well-behaved
  // client sends) are handed to protobuf's parser whole, and then the data
  // stays in the message and Resolve returns it as it is.
  absl::Status Parse(const grpc::ByteBuffer& buffer, google::protobuf::Message* message);

  // The payload an Array.data of the parsed message stands for (null for an
  // empty one, or when protobuf parsed the message whole).
  Payload* Find(absl::string_view data);
  // The bytes an Array.data of the parsed message stands for, contiguous and
  // aligned (see Payload::Contiguous). INTERNAL for data that is not a token
  // of this message.
  absl::StatusOr<absl::string_view> Resolve(absl::string_view data);

  // Whether the payloads were left in gRPC's slices (false: protobuf parsed
  // the message whole).
  bool tokens() const { return tokens_; }
  size_t num_payloads() const { return payloads_.size(); }

 private:
  const PayloadAllocator allocator_;
  CopyPool* const copies_;
  std::deque<Payload> payloads_;  // addresses stay put as it grows
  bool tokens_ = false;
};

}  // namespace primserve::wire

#endif  // PRIMSERVE_WIRE_RECEIVED_H_
