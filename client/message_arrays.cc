#include "client/message_arrays.h"

namespace primserve {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

std::vector<const FieldDescriptor*> SetArrays(const Message& message) {
  std::vector<const FieldDescriptor*> arrays;
  const google::protobuf::Descriptor* descriptor = message.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->message_type() == v1::Array::descriptor() && !field->is_repeated() &&
        message.GetReflection()->HasField(message, field)) {
      arrays.push_back(field);
    }
  }
  return arrays;
}

const v1::Array& ArrayIn(const Message& message, const FieldDescriptor* field) {
  return static_cast<const v1::Array&>(message.GetReflection()->GetMessage(message, field));
}

v1::Array* MutableArray(Message* message, const FieldDescriptor* field) {
  return static_cast<v1::Array*>(message->GetReflection()->MutableMessage(message, field));
}

}  // namespace primserve
