#include "wire/framing.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "grpcpp/support/slice.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "wire/format.h"

namespace primserve::wire {
namespace {

void DeleteString(void* s) { delete static_cast<std::string*>(s); }

std::string TagAndLength(int field, size_t length) {
  std::string out;
  AppendTag(field, kLengthDelimited, &out);
  AppendVarint(length, &out);
  return out;
}

Pieces FrameArray(v1::Array* array, const ExternalPayload& external, const ArraySlice& slices) {
  std::optional<grpc::Slice> payload;
  absl::string_view bytes;
  if (slices && (payload = slices(*array)).has_value()) {
    array->clear_data();
  } else if (external && !array->data().empty() && external(array->data(), &bytes)) {
    // The caller keeps the bytes alive until the call is done.
    payload.emplace(bytes.data(), bytes.size(), grpc::Slice::STATIC_SLICE);
    array->clear_data();
  } else if (array->data().size() >= kMinSlicePayload) {
    auto* taken = new std::string;
    taken->swap(*array->mutable_data());
    payload.emplace(taken->data(), taken->size(), DeleteString, taken);
  }
  Pieces out;
  out.AppendBytes(array->SerializeAsString());
  if (payload.has_value()) {
    out.AppendBytes(TagAndLength(kArrayDataField, payload->size()));
    out.AppendSlice(*std::move(payload));
  }
  return out;
}

Pieces FrameMessage(google::protobuf::Message* message, const ExternalPayload& external,
                    const ArraySlice& slices) {
  if (auto* array = dynamic_cast<v1::Array*>(message)) return FrameArray(array, external, slices);
  const google::protobuf::Reflection* reflection = message->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  // Fields that lead to an Array are framed on their own (their payloads as
  // slices), cleared from the message, and sent after the rest of it.
  std::vector<std::pair<int, std::vector<Pieces>>> bearing;
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->message_type() == nullptr || !BearsArray(field->message_type())) continue;
    std::vector<Pieces> elements;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
        elements.push_back(
            FrameMessage(reflection->MutableRepeatedMessage(message, field, i), external, slices));
      }
    } else {
      elements.push_back(
          FrameMessage(reflection->MutableMessage(message, field), external, slices));
    }
    reflection->ClearField(message, field);
    bearing.emplace_back(field->number(), std::move(elements));
  }
  Pieces out;
  out.AppendBytes(message->SerializeAsString());
  for (auto& [number, elements] : bearing) {
    for (Pieces& element : elements) {
      out.AppendBytes(TagAndLength(number, element.size()));
      out.Append(std::move(element));
    }
  }
  return out;
}

}  // namespace

grpc::ByteBuffer Frame(google::protobuf::Message* message, const ExternalPayload& external) {
  return FrameMessage(message, external, nullptr).ToByteBuffer();
}

grpc::ByteBuffer FrameWithSlices(google::protobuf::Message* message, const ArraySlice& slices) {
  return FrameMessage(message, nullptr, slices).ToByteBuffer();
}

}  // namespace primserve::wire
