// For tests and the fuzzer: a message parsed by ReceivedMessage made whole
// again, to compare with protobuf's own parse.
#ifndef PRIMSERVE_WIRE_TESTING_H_
#define PRIMSERVE_WIRE_TESTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "wire/received.h"

namespace primserve::wire {

// Replaces every non-empty Array.data of `message`, at any depth, with the
// bytes `received` resolves it to. INTERNAL where one is not a token of this
// parse (when the payloads stayed in slices) or resolves to bytes not
// aligned to 8.
inline absl::Status ResolveAll(ReceivedMessage& received, google::protobuf::Message* message) {
  if (auto* array = dynamic_cast<v1::Array*>(message)) {
    if (array->data().empty()) return absl::OkStatus();
    if (received.tokens() && received.Find(array->data()) == nullptr) {
      return absl::InternalError("an Array.data is not a payload token");
    }
    absl::StatusOr<absl::string_view> bytes = received.Resolve(array->data());
    if (!bytes.ok()) return bytes.status();
    if (received.tokens() && reinterpret_cast<uintptr_t>(bytes->data()) % 8 != 0) {
      return absl::InternalError("a payload resolved to bytes not aligned to 8");
    }
    array->set_data(std::string(*bytes));
    return absl::OkStatus();
  }
  const google::protobuf::Reflection* reflection = message->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
        absl::Status s = ResolveAll(received, reflection->MutableRepeatedMessage(message, field, i));
        if (!s.ok()) return s;
      }
    } else if (absl::Status s = ResolveAll(received, reflection->MutableMessage(message, field));
               !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace primserve::wire

#endif  // PRIMSERVE_WIRE_TESTING_H_
