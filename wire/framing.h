// Messages sent with their Array.data payloads as gRPC slices over the memory
// that already holds them, instead of serialized into one protobuf buffer.
// The bytes on the wire are a valid encoding of the same message (fields
// that lead to an Array come after the others), so any protobuf parser reads
// them as it would the message serialized by protobuf.
#ifndef PRIMSERVE_WIRE_FRAMING_H_
#define PRIMSERVE_WIRE_FRAMING_H_

#include <cstddef>
#include <functional>
#include <optional>

#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace primserve::v1 {
class Array;
}  // namespace primserve::v1

namespace primserve::wire {

// Payloads smaller than this are copied into the framing bytes: a slice of
// their own would cost more than the copy.
inline constexpr size_t kMinSlicePayload = 16 * 1024;

// Where an Array.data stands for bytes held elsewhere (a token of the
// caller's): the bytes, which must stay valid until gRPC is done sending
// them, or nullopt-like empty function result for data sent as it is.
using ExternalPayload = std::function<bool(absl::string_view data, absl::string_view* bytes)>;

// Serializes `message` into a ByteBuffer. Every Array.data at any depth of
// at least kMinSlicePayload bytes is moved out of the message (left empty)
// into a slice of its own, freed when gRPC is done with it: no copy of it is
// made. With `external`, an Array.data for which it returns true is sent as
// the bytes it names instead, without a copy.
grpc::ByteBuffer Frame(google::protobuf::Message* message,
                       const ExternalPayload& external = nullptr);

// Where an Array of the message being framed (by its address) has its data
// held elsewhere: a slice that holds a reference to those bytes, released
// when gRPC is done with it; nullopt for an Array sent as it is.
using ArraySlice = std::function<std::optional<grpc::Slice>(const v1::Array& array)>;

// As Frame, with each Array for which `slices` gives a slice sent as that
// slice (its data field in the message is ignored).
grpc::ByteBuffer FrameWithSlices(google::protobuf::Message* message, const ArraySlice& slices);

}  // namespace primserve::wire

#endif  // PRIMSERVE_WIRE_FRAMING_H_
