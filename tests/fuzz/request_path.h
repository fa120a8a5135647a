// The request path below gRPC, for the fuzzer and for replaying its corpus:
// bytes -> request message -> validation (ToOperation) -> CPU backend
// (RunOnCpu) -> response (ToResponse).
//
// Input format: the first byte picks the RPC (modulo kNumRpcs, in the order
// of core/rpc.h); the rest is the serialized request.
//
// Every input's rest is also parsed by wire::ReceivedMessage (the raw-buffer
// parser, wire/received.h) as that RPC's request, as a MultiplexRequest and
// as an EchoRequest, from a ByteBuffer cut into 1 to 4 slices at positions
// derived from the input; each verdict must be protobuf's, and an accepted
// message's fields, once its tokens are resolved, protobuf's. Each message
// protobuf accepts is also framed (wire::Frame, its payloads as slices) and
// must parse back to itself.
//
// Aborts with a message when an invariant breaks: a rejection whose code is
// not INVALID_ARGUMENT or RESOURCE_EXHAUSTED, a result ToResponse refuses, a
// response whose shape does not fit its request, or a wire parse or frame
// that differs from protobuf's.
#ifndef PRIMSERVE_TESTS_FUZZ_REQUEST_PATH_H_
#define PRIMSERVE_TESTS_FUZZ_REQUEST_PATH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/rpc.h"
#include "google/protobuf/message.h"
#include "server/rpc/request_validation.h"
#include "server/rpc/response_framing.h"

namespace primserve::fuzz {

// Small, so that no input can make the path allocate much (AggregateByKey
// allocates num_keys groups whatever the input's size).
inline constexpr RequestLimits kFuzzLimits{uint64_t{1} << 16};

// How wire::ReceivedMessage parsed the rest as one message type (its
// verdict and fields were checked against protobuf's).
struct WireOutcome {
  bool accepted = false;
  bool tokens = false;  // payloads left in the slices (else protobuf parsed it whole)
  size_t payloads = 0;  // Array.data payloads left in the slices
  size_t slices = 0;    // slices the bytes were cut into
};

struct Outcome {
  Rpc rpc = Rpc::kScan;  // which RPC the first byte picked
  bool parsed = false;  // whether the rest parsed as that RPC's request
  absl::Status status;  // the rejection, or OK when a response was made
  WireOutcome wire_request;    // the rest as that RPC's request
  WireOutcome wire_multiplex;  // the rest as a MultiplexRequest
  WireOutcome wire_echo;       // the rest as an EchoRequest
};

Outcome RunRequestBytes(absl::Span<const uint8_t> bytes);

// The bytes RunRequestBytes reads as `request` for RPC number `rpc`.
std::string EncodeRequest(Rpc rpc, const google::protobuf::Message& request);

}  // namespace primserve::fuzz

#endif  // PRIMSERVE_TESTS_FUZZ_REQUEST_PATH_H_
