// Between the wire and the internal form: validates a request and turns it
// into an Operation of views into the request (no copies), and moves a Result
// into a response. Every malformed request gets INVALID_ARGUMENT (or
// RESOURCE_EXHAUSTED when over a limit) with a message that says what is
// wrong.
#ifndef PRIMSERVE_SERVER_CONVERT_H_
#define PRIMSERVE_SERVER_CONVERT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "server/shm/request_memory.h"
#include "wire/received.h"
#include "server/task.h"

namespace primserve {

struct RequestLimits {
  // Most elements in any array of a request (segment_offsets included), and
  // most AggregateByKey groups.
  uint64_t max_elements = uint64_t{1} << 31;
  // Largest answer a request may ask for, in bytes of array data (checked at
  // validation, from the request's sizes, before anything is allocated).
  uint64_t max_response_bytes = uint64_t{1} << 30;
  // Requests one Multiplex stream may have read and not yet answered; the
  // stream reads no further until answers are written.
  uint64_t multiplex_window = 1024;
  // Every request reproducible (--reproducible_floats): float SUM/PROD give
  // the same bits alone, batched or streamed. Off (the default: it costs
  // more than 10% on some RPCs, README "Reproducible floats"), only requests
  // that set `reproducible` are.
  bool reproducible_floats = false;
};

// A request's large arrays left in gRPC's receive slices when it is parsed,
// to be copied into pinned memory range by range by the backend as it works
// (ArrayView::pending), instead of whole before the request is scheduled:
// the one copy then overlaps the work on the device. Owns that memory and
// the pending copies; must outlive the operation.
class DeferredInputs {
 public:
  // `allocator` gives the memory (page-locked: server/pinned_payloads.h);
  // payloads of fewer than `min_bytes` bytes, those that lie in one slice
  // (used in place), and those it gives no memory for are made contiguous
  // at once as usual (wire::Payload::Contiguous). `copies` (not owned; null:
  // the thread that fills) makes the pending copies.
  DeferredInputs(wire::PayloadAllocator allocator, size_t min_bytes,
                 wire::CopyPool* copies = nullptr);
  ~DeferredInputs();
  DeferredInputs(const DeferredInputs&) = delete;
  DeferredInputs& operator=(const DeferredInputs&) = delete;

  // `payload` as an ArrayView of `dtype` whose bytes are pending, or
  // nullopt. `payload` must outlive this.
  std::optional<ArrayView> Defer(const wire::Payload& payload, DType dtype);

 private:
  class Copy;
  const wire::PayloadAllocator allocator_;
  const size_t min_bytes_;
  wire::CopyPool* const copies_;
  std::vector<std::unique_ptr<Copy>> pending_;
};

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

// Moves the result's arrays into the response, or writes those the request
// placed in shared memory there (see RequestMemory::Deliver; null: all
// inline). INTERNAL if the result is not the response's kind. An array held
// in an answer buffer (HostArray::held) is copied into the response.
// `Response` is one of the unary responses (v1::ScanResponse, ...).
template <typename Response>
absl::Status ToResponse(Result result, Response* response, shm::RequestMemory* memory = nullptr);

// The response to `result` as gRPC sends it: ToResponse's, framed by
// wire::Frame, except that every inline array held in an answer buffer
// (HostArray::held, from Task::answers) goes out as a slice over that buffer,
// which returns to its pool when gRPC is done with it: no copy of the answer
// on the host. `response` is left with its other fields (the bytes sent are
// the framed buffer's; Length() is their size). Any protobuf parser reads
// the bytes as the v1 message ToResponse would have given. `message`, if
// not null, is the message sent, which holds `response` (a Multiplex
// answer): it is framed instead, the response's arrays within it alike.
template <typename Response>
absl::StatusOr<grpc::ByteBuffer> FrameResponse(Result result, Response* response,
                                               shm::RequestMemory* memory = nullptr,
                                               google::protobuf::Message* message = nullptr);

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_CONVERT_H_
