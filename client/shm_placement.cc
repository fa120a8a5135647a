#include "client/shm_placement.h"

#include <sys/mman.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/message_arrays.h"
#include "core/primitives.h"
#include "google/protobuf/descriptor.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

std::string LocationName(const FieldDescriptor* response_field) {
  return response_field->name() == "output" ? "values" : response_field->name();
}

v1::SharedMemoryRef MakeRef(const std::string& region, uint64_t offset, uint64_t bytes) {
  v1::SharedMemoryRef ref;
  ref.set_region(region);
  ref.set_offset(offset);
  ref.set_byte_size(bytes);
  return ref;
}

class SystemRegion final : public PlacementRegion {
 public:
  explicit SystemRegion(std::unique_ptr<SharedMemoryRegion> region) : region_(std::move(region)) {}
  const std::string& name() const override { return region_->name(); }
  uint64_t size() const override { return region_->size(); }
  absl::Status Write(uint64_t offset, absl::string_view bytes) override {
    if (absl::Status s = Inside(offset, bytes.size()); !s.ok()) return s;
    std::memcpy(region_->data() + offset, bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  absl::Status Read(uint64_t offset, uint64_t bytes, std::string* to) const override {
    if (absl::Status s = Inside(offset, bytes); !s.ok()) return s;
    to->assign(region_->data() + offset, bytes);
    return absl::OkStatus();
  }

 private:
  absl::Status Inside(uint64_t offset, uint64_t bytes) const {
    if (offset > size() || bytes > size() - offset) {
      return absl::OutOfRangeError(absl::StrCat("[", offset, ", +", bytes, ") is past the end of "
                                                "region '", name(), "' (", size(), " bytes)"));
    }
    return absl::OkStatus();
  }

  const std::unique_ptr<SharedMemoryRegion> region_;
};

char unlink_key[256];

void UnlinkAndRaise(int signal) {
  if (unlink_key[0] != '\0') shm_unlink(unlink_key);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

void UnlinkOnSignal(const std::string& key) {
  std::strncpy(unlink_key, key.c_str(), sizeof(unlink_key) - 1);
  std::signal(SIGINT, UnlinkAndRaise);
  std::signal(SIGTERM, UnlinkAndRaise);
}

// Sizes of an input array, for the room of the outputs it gives.
uint64_t Bytes(const v1::Array& array) { return array.data().size(); }
uint64_t Elements(const v1::Array& array) {
  return array.data().size() / std::max<size_t>(1, DTypeSize(static_cast<DType>(array.dtype())));
}
uint64_t ElementBytes(const v1::Array& array) {
  return DTypeSize(static_cast<DType>(array.dtype()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PlacementRegion>> CreateSystemPlacementRegion(
    std::shared_ptr<grpc::Channel> channel, std::string name, uint64_t bytes) {
  absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> region =
      SharedMemoryRegion::Create(std::move(channel), std::move(name), bytes);
  if (!region.ok()) return region.status();
  UnlinkOnSignal((*region)->key());
  return std::unique_ptr<PlacementRegion>(new SystemRegion(*std::move(region)));
}

OutputRoom RoomOf(const Message& expected) {
  OutputRoom room;
  for (const FieldDescriptor* field : SetArrays(expected)) {
    room[LocationName(field)] = ArrayIn(expected, field).data().size();
  }
  return room;
}

OutputRoom RoomFor(const v1::ScanRequest& r) { return {{"values", Bytes(r.input())}}; }
OutputRoom RoomFor(const v1::ReduceRequest& r) {
  const uint64_t count = std::max(1, r.segment_offsets_size());
  OutputRoom room = {{"values", count * ElementBytes(r.input())}};
  if (r.op() == v1::ARGMIN || r.op() == v1::ARGMAX) room["indices"] = count * sizeof(int64_t);
  return room;
}
OutputRoom RoomFor(const v1::SelectRequest& r) {
  OutputRoom room;
  if (r.output() == v1::SelectRequest::VALUES ||
      r.output() == v1::SelectRequest::VALUES_AND_INDICES) {
    room["values"] = Bytes(r.input());
  }
  if (r.output() == v1::SelectRequest::INDICES ||
      r.output() == v1::SelectRequest::VALUES_AND_INDICES) {
    room["indices"] = Elements(r.input()) * sizeof(int64_t);
  }
  return room;
}
OutputRoom RoomFor(const v1::UniqueRequest& r) { return {{"values", Bytes(r.input())}}; }
OutputRoom RoomFor(const v1::RunLengthEncodeRequest& r) {
  return {{"values", Bytes(r.input())}, {"lengths", Elements(r.input()) * sizeof(int64_t)}};
}
OutputRoom RoomFor(const v1::ReduceByKeyRequest& r) {
  return {{"keys", Bytes(r.keys())}, {"values", Bytes(r.values())}};
}
OutputRoom RoomFor(const v1::AggregateByKeyRequest& r) {
  return {{"values", r.num_keys() * ElementBytes(r.values())}};
}
OutputRoom RoomFor(const v1::SortRequest& r) {
  OutputRoom room = {{"keys", Bytes(r.keys())}};
  if (r.has_values()) room["values"] = Bytes(r.values());
  if (r.return_indices()) room["indices"] = Elements(r.keys()) * sizeof(int64_t);
  return room;
}


uint64_t PlacedBytes(const Message& request, const OutputRoom& room, bool in_place) {
  uint64_t bytes = 0;
  for (const FieldDescriptor* field : SetArrays(request)) {
    bytes += AlignPlacement(ArrayIn(request, field).data().size());
  }
  if (!in_place) {
    for (const auto& [name, size] : room) bytes += AlignPlacement(size);
  }
  return bytes;
}

absl::Status PlaceRequest(Message* request, const OutputRoom& room, bool in_place,
                          PlacementRegion& region, uint64_t* cursor) {
  const google::protobuf::Reflection* reflection = request->GetReflection();
  const FieldDescriptor* location_field =
      request->GetDescriptor()->FindFieldByName("output_location");
  if (location_field == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(request->GetDescriptor()->name(), " has no output_location"));
  }
  const v1::SharedMemoryRef* input_ref = nullptr;
  for (const FieldDescriptor* field : SetArrays(*request)) {
    v1::Array* array = MutableArray(request, field);
    if (array->data().empty()) continue;  // nothing to place: stays inline
    const uint64_t bytes = array->data().size();
    if (absl::Status s = region.Write(*cursor, array->data()); !s.ok()) return s;
    *array->mutable_shm() = MakeRef(region.name(), *cursor, bytes);
    array->clear_data();
    if (field->name() == "input") input_ref = &array->shm();
    *cursor += AlignPlacement(bytes);
  }
  auto* location =
      static_cast<v1::OutputLocation*>(reflection->MutableMessage(request, location_field));
  if (in_place) {
    if (request->GetDescriptor() != v1::ScanRequest::descriptor() || input_ref == nullptr) {
      return absl::InvalidArgumentError("only a Scan of a non-empty input runs in place");
    }
    *location->mutable_values() = *input_ref;
    return absl::OkStatus();
  }
  const google::protobuf::Reflection* location_reflection = location->GetReflection();
  for (const auto& [name, bytes] : room) {
    if (bytes == 0) continue;
    const FieldDescriptor* ref_field = location->GetDescriptor()->FindFieldByName(name);
    if (ref_field == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("no output '", name, "' to place"));
    }
    static_cast<v1::SharedMemoryRef*>(location_reflection->MutableMessage(location, ref_field))
        ->CopyFrom(MakeRef(region.name(), *cursor, bytes));
    *cursor += AlignPlacement(bytes);
  }
  return absl::OkStatus();
}

absl::Status ReadBack(Message* response, const PlacementRegion& region) {
  for (const FieldDescriptor* field : SetArrays(*response)) {
    v1::Array* array = MutableArray(response, field);
    if (!array->has_shm()) continue;
    const v1::SharedMemoryRef ref = array->shm();
    if (ref.region() != region.name()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the answer's ", field->name(), " is in region '", ref.region(), "', not '",
          region.name(), "'"));
    }
    std::string bytes;
    if (absl::Status s = region.Read(ref.offset(), ref.byte_size(), &bytes); !s.ok()) return s;
    array->clear_shm();
    *array->mutable_data() = std::move(bytes);
  }
  return absl::OkStatus();
}

}  // namespace primserve
