#include "server/shm/request_memory.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace primserve::shm {
namespace {

constexpr const char* kSlotNames[] = {"values", "indices", "lengths", "keys"};

const v1::SharedMemoryRef* RefIn(const v1::OutputLocation& location, Slot slot) {
  switch (slot) {
    case Slot::kValues:
      return location.has_values() ? &location.values() : nullptr;
    case Slot::kIndices:
      return location.has_indices() ? &location.indices() : nullptr;
    case Slot::kLengths:
      return location.has_lengths() ? &location.lengths() : nullptr;
    case Slot::kKeys:
      return location.has_keys() ? &location.keys() : nullptr;
  }
  return nullptr;
}

const std::string& NameIn(const v1::OutputBuffers& names, Slot slot) {
  switch (slot) {
    case Slot::kValues:
      return names.values();
    case Slot::kIndices:
      return names.indices();
    case Slot::kLengths:
      return names.lengths();
    case Slot::kKeys:
      return names.keys();
  }
  return names.values();
}

absl::Status NoBuffers() {
  return absl::FailedPreconditionError("this server serves no resident buffers");
}

}  // namespace

RequestMemory::RequestMemory(const Registry* registry) : registry_(registry) {}

RequestMemory::RequestMemory(absl::Status refusal) : refusal_(std::move(refusal)) {}

absl::StatusOr<size_t> RequestMemory::LeaseOn(absl::string_view region) {
  if (registry_ == nullptr) return refusal_;
  for (size_t i = 0; i < leases_.size(); ++i) {
    if (leases_[i].name() == region) return i;
  }
  absl::StatusOr<Lease> lease = registry_->Acquire(region);
  if (!lease.ok()) return lease.status();
  leases_.push_back(*std::move(lease));
  return leases_.size() - 1;
}

absl::StatusOr<absl::string_view> RequestMemory::Input(const v1::SharedMemoryRef& ref,
                                                       DType dtype, absl::string_view field) {
  absl::StatusOr<size_t> lease = LeaseOn(ref.region());
  if (!lease.ok()) return lease.status();
  absl::StatusOr<char*> data = leases_[*lease].Range(ref.offset(), ref.byte_size(), DTypeSize(dtype),
                                               absl::StrCat(field, ".shm"));
  if (!data.ok()) return data.status();
  return absl::string_view(*data, ref.byte_size());
}

absl::StatusOr<ArrayView> RequestMemory::BufferInput(const v1::BufferRef& ref, v1::DType dtype,
                                                     absl::string_view field) {
  if (buffers_ == nullptr) return NoBuffers();
  return buffers_->Input(ref, dtype, field);
}

absl::Status RequestMemory::PlaceOutputs(const v1::OutputBuffers& names,
                                         absl::Span<const OutputSpec> produced,
                                         absl::string_view rpc) {
  for (int slot = 0; slot < 4; ++slot) {
    const std::string& name = NameIn(names, static_cast<Slot>(slot));
    if (name.empty()) continue;
    if (buffers_ == nullptr) return NoBuffers();
    const std::string field = absl::StrCat("output_buffers.", kSlotNames[slot]);
    const OutputSpec* spec = nullptr;
    for (const OutputSpec& s : produced) {
      if (s.slot == static_cast<Slot>(slot)) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " is set but this ", rpc, " request produces no ", kSlotNames[slot]));
    }
    if (placed_[slot]) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " and output_location.", kSlotNames[slot], " are both set; set one"));
    }
    if (absl::Status placed = buffers_->Place(slot, field, name, spec->dtype, spec->elements,
                                              spec->max_elements);
        !placed.ok()) {
      return placed;
    }
  }
  return absl::OkStatus();
}

bool RequestMemory::IsPlaced(Slot slot) const {
  return placed_[static_cast<int>(slot)].has_value() ||
         (buffers_ != nullptr && buffers_->Placed(static_cast<int>(slot)));
}

absl::Status RequestMemory::PlaceOutputs(const v1::OutputLocation& location,
                                         absl::Span<const OutputSpec> produced,
                                         absl::string_view rpc) {
  for (int slot = 0; slot < 4; ++slot) {
    const v1::SharedMemoryRef* ref = RefIn(location, static_cast<Slot>(slot));
    if (ref == nullptr) continue;
    const std::string field = absl::StrCat("output_location.", kSlotNames[slot]);
    const OutputSpec* spec = nullptr;
    for (const OutputSpec& s : produced) {
      if (s.slot == static_cast<Slot>(slot)) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " is set but this ", rpc, " request produces no ", kSlotNames[slot]));
    }
    absl::StatusOr<size_t> lease = LeaseOn(ref->region());
    if (!lease.ok()) return lease.status();
    const size_t element_size = DTypeSize(spec->dtype);
    absl::StatusOr<char*> data =
        leases_[*lease].Range(ref->offset(), ref->byte_size(), element_size, field);
    if (!data.ok()) return data.status();
    if (spec->elements && ref->byte_size() < *spec->elements * element_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s has room for %d bytes but the answer takes %d (%d %s elements)", field,
          ref->byte_size(), *spec->elements * element_size, *spec->elements,
          DTypeName(spec->dtype)));
    }
    for (int other = 0; other < slot; ++other) {
      const std::optional<Placed>& p = placed_[other];
      if (p && p->ref.region() == ref->region() &&
          p->ref.offset() < ref->offset() + ref->byte_size() &&
          ref->offset() < p->ref.offset() + p->ref.byte_size()) {
        return absl::InvalidArgumentError(absl::StrCat(field, " overlaps output_location.",
                                                       kSlotNames[other], "; outputs must not"));
      }
    }
    placed_[slot] = Placed{*ref, *data, *lease};
  }
  return absl::OkStatus();
}

char* RequestMemory::PlacedData(Slot slot) const {
  const std::optional<Placed>& p = placed_[static_cast<int>(slot)];
  if (p) return p->data;
  return buffers_ != nullptr ? buffers_->PlacedData(static_cast<int>(slot)) : nullptr;
}

OutputPlaces RequestMemory::Places() const {
  auto place = [this](Slot slot) {
    const std::optional<Placed>& p = placed_[static_cast<int>(slot)];
    if (p) return OutputPlace{p->data, p->ref.byte_size()};
    if (buffers_ != nullptr && buffers_->PlacedData(static_cast<int>(slot)) != nullptr) {
      return OutputPlace{buffers_->PlacedData(static_cast<int>(slot)),
                         buffers_->Room(static_cast<int>(slot))};
    }
    return OutputPlace{};
  };
  return OutputPlaces{place(Slot::kValues), place(Slot::kIndices), place(Slot::kLengths),
                      place(Slot::kKeys)};
}

OutputPlaces RequestMemory::BufferPlaces() const {
  auto place = [this](Slot slot) {
    const int i = static_cast<int>(slot);
    if (buffers_ == nullptr || buffers_->PlacedData(i) == nullptr) return OutputPlace{};
    return OutputPlace{buffers_->PlacedData(i), buffers_->Room(i)};
  };
  return OutputPlaces{place(Slot::kValues), place(Slot::kIndices), place(Slot::kLengths),
                      place(Slot::kKeys)};
}

RequestMemory* RequestMemory::AddStep() {
  auto step = registry_ != nullptr ? std::make_unique<RequestMemory>(registry_)
                                   : std::make_unique<RequestMemory>(refusal_);
  if (buffers_ != nullptr) step->UseBuffers(buffers_->ForAnotherRequest());
  steps_.push_back(std::move(step));
  return steps_.back().get();
}

absl::Status RequestMemory::Deliver(absl::Span<const Delivery> all) {
  // Outputs bound for buffers are stored by them; the rest as before.
  std::vector<Delivery> outputs;
  std::vector<int> buffer_slots;
  std::vector<HostArray*> buffer_arrays;
  std::vector<v1::Array*> buffer_fields;
  for (const Delivery& d : all) {
    if (buffers_ != nullptr && buffers_->Placed(static_cast<int>(d.slot))) {
      buffer_slots.push_back(static_cast<int>(d.slot));
      buffer_arrays.push_back(d.array);
      buffer_fields.push_back(d.field);
    } else {
      outputs.push_back(d);
    }
  }
  // An object truncated while the request read it gave zeros: no answer.
  // One shrunk since would fault the writes below.
  if (absl::Status holds = CheckLeases(); !holds.ok()) return holds;
  for (const Delivery& d : outputs) {
    const std::optional<Placed>& p = placed_[static_cast<int>(d.slot)];
    if (p && d.array->bytes.size() > p->ref.byte_size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "output_location.%s has room for %d bytes but the answer takes %d (%d elements); "
          "nothing was written",
          kSlotNames[static_cast<int>(d.slot)], p->ref.byte_size(), d.array->bytes.size(),
          d.array->bytes.size() / DTypeSize(d.array->dtype)));
    }
  }
  if (!buffer_slots.empty()) {
    if (absl::Status stored = buffers_->Deliver(buffer_slots, buffer_arrays, buffer_fields);
        !stored.ok()) {
      return stored;
    }
  }
  for (const Delivery& d : outputs) {
    d.field->set_dtype(static_cast<v1::DType>(d.array->dtype));
    const std::optional<Placed>& p = placed_[static_cast<int>(d.slot)];
    if (!p) {
      if (d.array->bytes_in_place != 0) {
        return absl::InternalError("the backend wrote an answer in place that was not placed");
      }
      d.field->mutable_data()->swap(d.array->bytes);
      continue;
    }
    // Into a CUDA region this is a copy to the device (an answer the engine
    // could not write there in place).
    if (absl::Status wrote =
            leases_[p->lease].Write(p->data, d.array->bytes.data(), d.array->bytes.size());
        !wrote.ok()) {
      return wrote;
    }
    v1::SharedMemoryRef* written = d.field->mutable_shm();
    written->set_region(p->ref.region());
    written->set_offset(p->ref.offset());
    written->set_byte_size(d.array->bytes_in_place != 0 ? d.array->bytes_in_place
                                                        : d.array->bytes.size());
  }
  // Nor when it was truncated while the outputs were written there.
  return CheckLeases();
}

absl::Status RequestMemory::CheckLeases() const {
  for (const Lease& lease : leases_) {
    if (absl::Status holds = lease.CheckObjectSize(); !holds.ok()) return holds;
  }
  return absl::OkStatus();
}

}  // namespace primserve::shm
