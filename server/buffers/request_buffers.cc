#include "server/buffers/request_buffers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace primserve::buffers {

RequestBuffers::RequestBuffers(Registry* registry, std::string owner)
    : registry_(registry), owner_(std::move(owner)) {}

absl::StatusOr<ArrayView> RequestBuffers::Input(const v1::BufferRef& ref, v1::DType dtype,
                                                absl::string_view field) {
  if (absl::Status named = CheckName(ref.name(), absl::StrCat(field, ".buffer.name"));
      !named.ok()) {
    return named;
  }
  absl::StatusOr<Contents> contents = registry_->Get(owner_, ref.name());
  if (!contents.ok()) return contents.status();
  if (dtype != v1::DTYPE_UNSPECIFIED && static_cast<DType>(dtype) != contents->dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".dtype is ", v1::DType_Name(dtype), " but buffer ", ref.name(), " holds ",
        DTypeName(contents->dtype), " elements; leave dtype unset or give the buffer's"));
  }
  const uint64_t length = contents->length;
  if (ref.offset() > length || ref.length() > length - ref.offset()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.buffer [%d, +%d) is past the end of buffer %s (%d elements)", field, ref.offset(),
        ref.length(), ref.name(), length));
  }
  const uint64_t elements = ref.length() != 0 ? ref.length() : length - ref.offset();
  const size_t element_size = DTypeSize(contents->dtype);
  const char* data = contents->storage->data() + ref.offset() * element_size;
  inputs_.push_back(std::move(contents->storage));
  return ArrayView{contents->dtype, absl::string_view(data, elements * element_size)};
}

absl::Status RequestBuffers::Place(int slot, absl::string_view field, const std::string& name,
                                   DType dtype, std::optional<uint64_t> elements,
                                   std::optional<uint64_t> max_elements) {
  if (absl::Status named = CheckName(name, field); !named.ok()) return named;
  for (int other = 0; other < kSlots; ++other) {
    if (outputs_[other] && outputs_[other]->name == name) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " names buffer ", name, " as another output does; outputs go to "
                       "different buffers"));
    }
  }
  Output output{name, dtype, nullptr};
  if (elements) {
    absl::StatusOr<std::shared_ptr<Storage>> storage =
        registry_->Allocate(owner_, *elements * DTypeSize(dtype), NearDevice());
    if (!storage.ok()) return storage.status();
    output.storage = *std::move(storage);
  } else if (max_elements && *max_elements != 0) {
    // Room for the largest answer lets the backend write it in place (on
    // the device); past a quota the answer is stored once its size is known.
    absl::StatusOr<std::shared_ptr<Storage>> storage = registry_->Allocate(
        owner_, *max_elements * DTypeSize(dtype), NearDevice(), /*count_refusal=*/false);
    if (storage.ok()) output.storage = *std::move(storage);
  }
  outputs_[slot] = std::move(output);
  return absl::OkStatus();
}

int RequestBuffers::NearDevice() const {
  return inputs_.empty() ? -1 : inputs_.front()->device();
}

char* RequestBuffers::PlacedData(int slot) const {
  const std::optional<Output>& o = outputs_[slot];
  return o && o->storage != nullptr ? o->storage->data() : nullptr;
}

uint64_t RequestBuffers::Room(int slot) const {
  const std::optional<Output>& o = outputs_[slot];
  return o && o->storage != nullptr ? o->storage->bytes() : 0;
}

absl::Status RequestBuffers::Deliver(absl::Span<const int> slots,
                                     absl::Span<HostArray* const> arrays,
                                     absl::Span<v1::Array* const> fields) {
  // Every output's contents first, so that a quota refusal replaces nothing.
  std::vector<Contents> stored(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    Output& output = *outputs_[slots[i]];
    HostArray& array = *arrays[i];
    const size_t element_size = DTypeSize(array.dtype);
    if (array.bytes_in_place != 0) {
      // The backend wrote it into the memory taken at Place; room taken for
      // a larger answer is given back, the answer moved where it lies.
      std::shared_ptr<Storage> storage = output.storage;
      if (storage->bytes() > array.bytes_in_place) {
        // Past a quota (both count until the copy is done) it keeps the room.
        absl::StatusOr<std::shared_ptr<Storage>> exact = registry_->Allocate(
            owner_, array.bytes_in_place, storage->device(), /*count_refusal=*/false);
        if (exact.ok()) {
          if (absl::Status copied = (*exact)->CopyFrom(*storage, array.bytes_in_place);
              !copied.ok()) {
            return copied;
          }
          storage = *std::move(exact);
        }
      }
      stored[i] = Contents{array.dtype, array.bytes_in_place / element_size, std::move(storage)};
      continue;
    }
    const absl::string_view bytes = array.data();
    std::shared_ptr<Storage> storage = output.storage;
    if (storage == nullptr || storage->bytes() != bytes.size()) {
      // Room taken at Place for a larger answer goes back first.
      storage.reset();
      output.storage.reset();
      absl::StatusOr<std::shared_ptr<Storage>> fresh =
          registry_->Allocate(owner_, bytes.size(), NearDevice());
      if (!fresh.ok()) return fresh.status();
      storage = *std::move(fresh);
    }
    if (absl::Status wrote = storage->Write(0, bytes.data(), bytes.size()); !wrote.ok()) {
      return wrote;
    }
    stored[i] = Contents{array.dtype, bytes.size() / element_size, std::move(storage)};
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    const Output& output = *outputs_[slots[i]];
    const uint64_t length = stored[i].length;
    const DType dtype = stored[i].dtype;
    if (absl::Status installed = registry_->Install(owner_, output.name, std::move(stored[i]));
        !installed.ok()) {
      return installed;
    }
    v1::Array* field = fields[i];
    field->set_dtype(static_cast<v1::DType>(dtype));
    field->clear_data();
    v1::BufferRef* ref = field->mutable_buffer();
    ref->set_name(output.name);
    ref->set_offset(0);
    ref->set_length(length);
  }
  return absl::OkStatus();
}

}  // namespace primserve::buffers
