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

// The bytes of a message being framed: runs of small bytes and slices of
// payloads, in order.
class Framed {
 public:
  size_t size() const { return size_; }

  void AppendBytes(absl::string_view bytes) {
    if (segments_.empty() || !segments_.back().is_slice) segments_.push_back(Segment{});
    segments_.back().bytes.append(bytes.data(), bytes.size());
    size_ += bytes.size();
  }
  void AppendSlice(grpc::Slice slice) {
    size_ += slice.size();
    segments_.push_back(Segment{true, {}, std::move(slice)});
  }
  void Append(Framed&& other) {
    for (Segment& s : other.segments_) {
      if (s.is_slice) {
        AppendSlice(std::move(s.slice));
      } else {
        AppendBytes(s.bytes);
      }
    }
  }

  grpc::ByteBuffer ToByteBuffer() && {
    std::vector<grpc::Slice> slices;
    slices.reserve(segments_.size());
    for (Segment& s : segments_) {
      slices.push_back(s.is_slice ? std::move(s.slice) : grpc::Slice(s.bytes));
    }
    return grpc::ByteBuffer(slices.data(), slices.size());
  }

 private:
  struct Segment {
    bool is_slice = false;
    std::string bytes;
    grpc::Slice slice;
  };
  std::vector<Segment> segments_;
  size_t size_ = 0;
};

void DeleteString(void* s) { delete static_cast<std::string*>(s); }

std::string TagAndLength(int field, size_t length) {
  std::string out;
  AppendTag(field, kLengthDelimited, &out);
  AppendVarint(length, &out);
  return out;
}

Framed FrameArray(v1::Array* array, const ExternalPayload& external) {
  std::optional<grpc::Slice> payload;
  absl::string_view bytes;
  if (external && !array->data().empty() && external(array->data(), &bytes)) {
    // The caller keeps the bytes alive until the call is done.
    payload.emplace(bytes.data(), bytes.size(), grpc::Slice::STATIC_SLICE);
    array->clear_data();
  } else if (array->data().size() >= kMinSlicePayload) {
    auto* taken = new std::string;
    taken->swap(*array->mutable_data());
    payload.emplace(taken->data(), taken->size(), DeleteString, taken);
  }
  Framed out;
  out.AppendBytes(array->SerializeAsString());
  if (payload.has_value()) {
    out.AppendBytes(TagAndLength(kArrayDataField, payload->size()));
    out.AppendSlice(*std::move(payload));
  }
  return out;
}

Framed FrameMessage(google::protobuf::Message* message, const ExternalPayload& external) {
  if (auto* array = dynamic_cast<v1::Array*>(message)) return FrameArray(array, external);
  const google::protobuf::Reflection* reflection = message->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  // Fields that lead to an Array are framed on their own (their payloads as
  // slices), cleared from the message, and sent after the rest of it.
  std::vector<std::pair<int, std::vector<Framed>>> bearing;
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->message_type() == nullptr || !BearsArray(field->message_type())) continue;
    std::vector<Framed> elements;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
        elements.push_back(
            FrameMessage(reflection->MutableRepeatedMessage(message, field, i), external));
      }
    } else {
      elements.push_back(FrameMessage(reflection->MutableMessage(message, field), external));
    }
    reflection->ClearField(message, field);
    bearing.emplace_back(field->number(), std::move(elements));
  }
  Framed out;
  out.AppendBytes(message->SerializeAsString());
  for (auto& [number, elements] : bearing) {
    for (Framed& element : elements) {
      out.AppendBytes(TagAndLength(number, element.size()));
      out.Append(std::move(element));
    }
  }
  return out;
}

}  // namespace

grpc::ByteBuffer Frame(google::protobuf::Message* message, const ExternalPayload& external) {
  return FrameMessage(message, external).ToByteBuffer();
}

}  // namespace primserve::wire
