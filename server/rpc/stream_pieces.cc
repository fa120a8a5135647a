#include "server/rpc/stream_pieces.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

bool IsArray(const FieldDescriptor* field) {
  return field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !field->is_repeated() &&
         field->message_type() == v1::Array::descriptor();
}

// Whether `a` and `b` hold the same value in `field` (not an array).
bool SameValue(const Message& a, const Message& b, const FieldDescriptor* field) {
  const Reflection* ra = a.GetReflection();
  const Reflection* rb = b.GetReflection();
  if (field->is_repeated()) {
    const int n = ra->FieldSize(a, field);
    if (n != rb->FieldSize(b, field)) return false;
    for (int i = 0; i < n; ++i) {
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_UINT64:
          if (ra->GetRepeatedUInt64(a, field, i) != rb->GetRepeatedUInt64(b, field, i)) {
            return false;
          }
          break;
        default:  // the requests have no other repeated fields
          return false;
      }
    }
    return true;
  }
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return ra->GetInt32(a, field) == rb->GetInt32(b, field);
    case FieldDescriptor::CPPTYPE_INT64:
      return ra->GetInt64(a, field) == rb->GetInt64(b, field);
    case FieldDescriptor::CPPTYPE_UINT32:
      return ra->GetUInt32(a, field) == rb->GetUInt32(b, field);
    case FieldDescriptor::CPPTYPE_UINT64:
      return ra->GetUInt64(a, field) == rb->GetUInt64(b, field);
    case FieldDescriptor::CPPTYPE_BOOL:
      return ra->GetBool(a, field) == rb->GetBool(b, field);
    case FieldDescriptor::CPPTYPE_ENUM:
      return ra->GetEnumValue(a, field) == rb->GetEnumValue(b, field);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      // Small parameter messages (a predicate): equal content, equal bytes.
      return ra->HasField(a, field) == rb->HasField(b, field) &&
             ra->GetMessage(a, field).SerializeAsString() ==
                 rb->GetMessage(b, field).SerializeAsString();
    default:
      return false;
  }
}

}  // namespace

StreamPieces::StreamPieces(const Message& first) : reference_(first.New()) {
  reference_->CopyFrom(first);
  const Reflection* reflection = reference_->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(*reference_, &fields);
  for (const FieldDescriptor* field : fields) {
    if (!IsArray(field)) continue;
    static_cast<v1::Array*>(reflection->MutableMessage(reference_.get(), field))->clear_data();
  }
}

absl::Status StreamPieces::MakePiece(Message* later) const {
  const Reflection* reflection = later->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(*later, &fields);
  for (const FieldDescriptor* field : fields) {
    if (!IsArray(field)) {
      if (!SameValue(*later, *reference_, field)) {
        return absl::InvalidArgumentError(
            absl::StrCat(field->name(),
                         " differs from the stream's first message; a later message may only "
                         "repeat it unchanged"));
      }
      continue;
    }
    if (!reflection->HasField(*reference_, field)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field->name(), " is set but the stream's first message has no ", field->name()));
    }
    const auto& piece = static_cast<const v1::Array&>(reflection->GetMessage(*later, field));
    const auto& first = static_cast<const v1::Array&>(reflection->GetMessage(*reference_, field));
    if (piece.dtype() != v1::DTYPE_UNSPECIFIED && piece.dtype() != first.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field->name(), ".dtype differs from the stream's first message; a later message may "
                         "only repeat it unchanged"));
    }
  }
  // Parameters and dtypes from the first message; the piece keeps its data.
  std::vector<const FieldDescriptor*> parameters;
  const Reflection* reference = reference_->GetReflection();
  reference->ListFields(*reference_, &parameters);
  for (const FieldDescriptor* field : parameters) {
    if (field->is_repeated()) continue;
    if (IsArray(field)) {
      const auto& first = static_cast<const v1::Array&>(reference->GetMessage(*reference_, field));
      static_cast<v1::Array*>(reflection->MutableMessage(later, field))->set_dtype(first.dtype());
      continue;
    }
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        reflection->SetInt32(later, field, reference->GetInt32(*reference_, field));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        reflection->SetInt64(later, field, reference->GetInt64(*reference_, field));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        reflection->SetUInt32(later, field, reference->GetUInt32(*reference_, field));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        reflection->SetUInt64(later, field, reference->GetUInt64(*reference_, field));
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        reflection->SetBool(later, field, reference->GetBool(*reference_, field));
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        reflection->SetEnumValue(later, field, reference->GetEnumValue(*reference_, field));
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        reflection->MutableMessage(later, field)
            ->CopyFrom(reference->GetMessage(*reference_, field));
        break;
      default:
        return absl::InternalError(
            absl::StrCat("a stream cannot carry parameter ", field->name(), " of its type"));
    }
  }
  return absl::OkStatus();
}

}  // namespace primserve
