// The resident buffers one request uses: the contents its Array.buffer
// inputs name, held until its answer is written (Free or a replacement
// meanwhile does not pull them away), and the buffers its output_buffers
// name, stored once it has answered.
#ifndef PRIMSERVE_SERVER_BUFFERS_REQUEST_BUFFERS_H_
#define PRIMSERVE_SERVER_BUFFERS_REQUEST_BUFFERS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "server/buffers/registry.h"
#include "server/engine/task.h"

namespace primserve::buffers {

// Outputs by OutputBuffers field number - 1: values, indices, lengths, keys.
inline constexpr int kSlots = 4;

class RequestBuffers final {
 public:
  // Names resolve among `owner`'s buffers in `registry` (not owned).
  RequestBuffers(Registry* registry, std::string owner);
  // Another request's, for the same owner (a Pipeline's step).
  std::unique_ptr<RequestBuffers> ForAnotherRequest() const {
    return std::make_unique<RequestBuffers>(registry_, owner_);
  }

  // The elements `ref` names, read in place, and their dtype: the buffer's,
  // which `dtype` (the Array's, as sent) must be unless unset.
  // INVALID_ARGUMENT, naming `field`, for another dtype or a range past the
  // end; NOT_FOUND for an unknown name.
  absl::StatusOr<ArrayView> Input(const v1::BufferRef& ref, v1::DType dtype,
                                  absl::string_view field);

  // Output `slot` (OutputBuffers field `field`) goes to buffer `name`, in
  // elements of `dtype`: INVALID_ARGUMENT for a bad name or one another
  // output takes. With its size known from the request (`elements`), its
  // memory is taken now, so that the backend may write it in place and a
  // quota refuses it (RESOURCE_EXHAUSTED) before the request runs. With
  // only its largest size known (`max_elements`), room for that is taken
  // where the quotas allow (else the answer is stored once computed), and
  // Deliver gives the buffer memory of the answer's size.
  absl::Status Place(int slot, absl::string_view field, const std::string& name, DType dtype,
                     std::optional<uint64_t> elements,
                     std::optional<uint64_t> max_elements = std::nullopt);
  bool Placed(int slot) const { return outputs_[slot].has_value(); }
  // The memory taken for a placed output of known size, and its bytes;
  // null / 0 otherwise.
  char* PlacedData(int slot) const;
  uint64_t Room(int slot) const;

  // Stores each placed output of `slots` (the result's arrays, in order) in
  // its buffer, creating or replacing it, and sets the response's `fields`
  // to the ref {name, 0, elements}. RESOURCE_EXHAUSTED past a quota before
  // any buffer is replaced.
  absl::Status Deliver(absl::Span<const int> slots, absl::Span<HostArray* const> arrays,
                       absl::Span<v1::Array* const> fields);

 private:
  // Where outputs go: beside the first input buffer (the request runs on
  // its device), else -1 (the backend chooses).
  int NearDevice() const;

  struct Output {
    std::string name;
    DType dtype = DType::kInt32;
    std::shared_ptr<Storage> storage;  // taken at Place when the size is known
  };

  Registry* const registry_;
  const std::string owner_;
  std::vector<std::shared_ptr<const Storage>> inputs_;  // held until the answer
  std::array<std::optional<Output>, kSlots> outputs_;
};

}  // namespace primserve::buffers

#endif  // PRIMSERVE_SERVER_BUFFERS_REQUEST_BUFFERS_H_
