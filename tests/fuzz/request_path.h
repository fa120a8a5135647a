// The request path below gRPC, for the fuzzer and for replaying its corpus:
// bytes -> request message -> validation (ToOperation) -> CPU backend
// (RunOnCpu) -> response (ToResponse).
//
// Input format: the first byte picks the RPC (modulo kNumRpcs, in the order
// of core/rpc.h); the rest is the serialized request.
//
// Aborts with a message when an invariant breaks: a rejection whose code is
// not INVALID_ARGUMENT or RESOURCE_EXHAUSTED, a result ToResponse refuses, or
// a response whose shape does not fit its request.
#ifndef PRIMSERVE_TESTS_FUZZ_REQUEST_PATH_H_
#define PRIMSERVE_TESTS_FUZZ_REQUEST_PATH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/rpc.h"
#include "google/protobuf/message.h"
#include "server/convert.h"

namespace primserve::fuzz {

// Small, so that no input can make the path allocate much (AggregateByKey
// allocates num_keys groups whatever the input's size).
inline constexpr RequestLimits kFuzzLimits{uint64_t{1} << 16};

struct Outcome {
  Rpc rpc = Rpc::kScan;  // which RPC the first byte picked
  bool parsed = false;  // whether the rest parsed as that RPC's request
  absl::Status status;  // the rejection, or OK when a response was made
};

Outcome RunRequestBytes(absl::Span<const uint8_t> bytes);

// The bytes RunRequestBytes reads as `request` for RPC number `rpc`.
std::string EncodeRequest(Rpc rpc, const google::protobuf::Message& request);

}  // namespace primserve::fuzz

#endif  // PRIMSERVE_TESTS_FUZZ_REQUEST_PATH_H_
