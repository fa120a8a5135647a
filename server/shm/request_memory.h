// The memory outside its message one request uses: the leases on shared
// memory that keep its input views valid from validation until its answer
// is written, the places its outputs go (OutputLocation), and its resident
// buffers (Array.buffer, output_buffers: server/buffers/request_buffers.h).
#ifndef PRIMSERVE_SERVER_SHM_REQUEST_MEMORY_H_
#define PRIMSERVE_SERVER_SHM_REQUEST_MEMORY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "server/buffers/request_buffers.h"
#include "server/engine/task.h"
#include "server/shm/registry.h"

namespace primserve::shm {

// The outputs an OutputLocation can place.
enum class Slot { kValues = 0, kIndices = 1, kLengths = 2, kKeys = 3 };

// What a request produces in one slot: its dtype, and its exact size when
// the request alone tells it (else the ref's room is checked once computed).
struct OutputSpec {
  Slot slot = Slot::kValues;
  DType dtype = DType::kInt32;
  std::optional<uint64_t> elements;
  // Where `elements` is unknown: the most there can be (a Select's input
  // length), so that a buffer output may take room for it up front and be
  // written in place (RequestBuffers::Place).
  std::optional<uint64_t> max_elements;
};

// One output to deliver: the result's array and the response's field.
struct Delivery {
  Slot slot = Slot::kValues;
  HostArray* array = nullptr;
  v1::Array* field = nullptr;
};

// Resolves Array.step, an output of an earlier step, for a Pipeline's step
// (server/rpc/pipeline_validation.cc); outside a Pipeline there is none.
class StepInputs {
 public:
  virtual ~StepInputs() = default;
  // A view of the output's dtype and largest size, which the pipeline binds
  // to the output once the step that makes it has run; INVALID_ARGUMENT,
  // naming `field`, for a step or output there is none of, or a dtype set.
  virtual absl::StatusOr<ArrayView> Input(const v1::StepOutput& ref, v1::DType dtype,
                                          absl::string_view field) = 0;
};

class RequestMemory final {
 public:
  // Refs resolve in `registry`.
  explicit RequestMemory(const Registry* registry);
  // Refs are refused with `refusal` (shared memory is off, or the RPC takes
  // inline bytes only).
  explicit RequestMemory(absl::Status refusal);

  // Resolves Array.buffer and output_buffers in `buffers`; without it they
  // are FAILED_PRECONDITION.
  void UseBuffers(std::unique_ptr<buffers::RequestBuffers> buffers) {
    buffers_ = std::move(buffers);
  }
  // The elements an Array.buffer names (see RequestBuffers::Input).
  absl::StatusOr<ArrayView> BufferInput(const v1::BufferRef& ref, v1::DType dtype,
                                        absl::string_view field);

  // The bytes an Array.shm names, for elements of `dtype`, read in place.
  absl::StatusOr<absl::string_view> Input(const v1::SharedMemoryRef& ref, DType dtype,
                                          absl::string_view field);

  // Resolves the request's output_location against the outputs it produces:
  // INVALID_ARGUMENT for a ref to an output not produced, a bad or
  // overlapping range, or too little room for an output of known size.
  absl::Status PlaceOutputs(const v1::OutputLocation& location,
                            absl::Span<const OutputSpec> produced, absl::string_view rpc);
  // The same for output_buffers (after the OutputLocation: an output placed
  // by both is INVALID_ARGUMENT). See RequestBuffers::Place.
  absl::Status PlaceOutputs(const v1::OutputBuffers& names,
                            absl::Span<const OutputSpec> produced, absl::string_view rpc);

  // Whether the output of `slot` goes to shared memory or a buffer.
  bool IsPlaced(Slot slot) const;
  // Where the backend may write the output of `slot` itself once placed
  // (PlaceOutputs): its shared memory, or its buffer's memory when its size
  // was known; else null.
  char* PlacedData(Slot slot) const;
  // Every placed output with its room (the operation's OutputPlaces).
  OutputPlaces Places() const;
  // Those of them bound for buffers only: a Pipeline's outputs reach shared
  // memory through Deliver, once every step has run.
  OutputPlaces BufferPlaces() const;

  // The memory of one step of a Pipeline: a request of its own, on the same
  // registries for the same caller, kept (and destroyed) with this one.
  RequestMemory* AddStep();
  RequestMemory* step(size_t index) const { return steps_[index].get(); }
  // Where this step's Array.step inputs resolve (not owned; null: none).
  void UseStepInputs(StepInputs* inputs) { step_inputs_ = inputs; }
  StepInputs* step_inputs() const { return step_inputs_; }

  // Writes placed outputs into their regions (the response's Array then
  // carries `shm` with the bytes written) or stores them in their buffers
  // (the Array carries `buffer`), and moves the others inline. Any
  // placed output without room is INVALID_ARGUMENT, naming the bytes needed,
  // before anything is written. An answer the backend already wrote in place
  // (HostArray::bytes_in_place) is only reported.
  absl::Status Deliver(absl::Span<const Delivery> outputs);

 private:
  struct Placed {
    v1::SharedMemoryRef ref;
    char* data = nullptr;
    size_t lease = 0;  // index into leases_
  };

  // FAILED_PRECONDITION if an object this request uses was truncated (now,
  // or while the request used it: SystemRegion::CheckObjectSize).
  absl::Status CheckLeases() const;
  // The index in leases_ of this request's lease on the region.
  absl::StatusOr<size_t> LeaseOn(absl::string_view region);

  const Registry* const registry_ = nullptr;
  const absl::Status refusal_;
  std::vector<Lease> leases_;  // one per region used
  std::array<std::optional<Placed>, 4> placed_;  // by Slot
  std::unique_ptr<buffers::RequestBuffers> buffers_;
  std::vector<std::unique_ptr<RequestMemory>> steps_;
  StepInputs* step_inputs_ = nullptr;
};

// The places of a request's outputs (none without shared memory).
inline OutputPlaces PlacesOf(const RequestMemory* memory) {
  return memory != nullptr ? memory->Places() : OutputPlaces{};
}

}  // namespace primserve::shm

#endif  // PRIMSERVE_SERVER_SHM_REQUEST_MEMORY_H_
