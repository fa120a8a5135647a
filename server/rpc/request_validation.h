// From the wire to the engine: validates a request and turns it into an
// Operation of views into the request (no copies). Every malformed request
// gets INVALID_ARGUMENT (or RESOURCE_EXHAUSTED when over a limit) with a
// message that says what is wrong.
#ifndef PRIMSERVE_SERVER_RPC_REQUEST_VALIDATION_H_
#define PRIMSERVE_SERVER_RPC_REQUEST_VALIDATION_H_

#include "absl/status/statusor.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "server/engine/task.h"
#include "server/rpc/deferred_inputs.h"
#include "server/rpc/request_limits.h"
#include "server/shm/request_memory.h"
#include "wire/received.h"

namespace primserve {

// The returned Operation views the request, which must outlive it, and the
// shared memory its Array.shm fields name: `memory` resolves those and its
// output_location, and holds the leases that keep them mapped (it must
// outlive the Operation too, and is the one to pass to ToResponse). Null
// refuses both with INVALID_ARGUMENT, as the streaming RPCs do. `payloads`:
// the request was parsed by wire::ReceivedMessage, whose tokens its
// Array.data fields hold (it must outlive the Operation too); null: the
// data is in the request. A Scan's input may be left pending in `deferred`
// (null: never), for a backend that takes pending inputs
// (ExecutionBackend::MinPendingInputBytes).
absl::StatusOr<Operation> ToOperation(const v1::ScanRequest& request, const RequestLimits& limits,
                                      shm::RequestMemory* memory = nullptr,
                                      wire::ReceivedMessage* payloads = nullptr,
                                      DeferredInputs* deferred = nullptr);
absl::StatusOr<Operation> ToOperation(const v1::ReduceRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory = nullptr,
                                      wire::ReceivedMessage* payloads = nullptr);
absl::StatusOr<Operation> ToOperation(const v1::SelectRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory = nullptr,
                                      wire::ReceivedMessage* payloads = nullptr);
absl::StatusOr<Operation> ToOperation(const v1::UniqueRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory = nullptr,
                                      wire::ReceivedMessage* payloads = nullptr);
absl::StatusOr<Operation> ToOperation(const v1::RunLengthEncodeRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory = nullptr,
                                      wire::ReceivedMessage* payloads = nullptr);
absl::StatusOr<Operation> ToOperation(const v1::ReduceByKeyRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory = nullptr,
                                      wire::ReceivedMessage* payloads = nullptr);
absl::StatusOr<Operation> ToOperation(const v1::AggregateByKeyRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory = nullptr,
                                      wire::ReceivedMessage* payloads = nullptr);
absl::StatusOr<Operation> ToOperation(const v1::SortRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory = nullptr,
                                      wire::ReceivedMessage* payloads = nullptr);

absl::StatusOr<Operation> ToOperation(const v1::GatherRequest& request,
                                      const RequestLimits& limits,
                                      shm::RequestMemory* memory = nullptr,
                                      wire::ReceivedMessage* payloads = nullptr);
// Every step validated as its own RPC would be, with its Array.step inputs
// resolved against the steps before it (server/rpc/pipeline_validation.cc);
// each error names its step ("step 2: ..."). `memory` is required: each
// step's leases and places live in a step of it (RequestMemory::AddStep).
absl::StatusOr<Operation> ToOperation(const v1::PipelineRequest& request,
                                      const RequestLimits& limits, shm::RequestMemory* memory,
                                      wire::ReceivedMessage* payloads = nullptr);

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_REQUEST_VALIDATION_H_
