// What the parser and the framer share: protobuf's wire-format integers,
// and which message types lead to an Array.
#ifndef PRIMSERVE_WIRE_FORMAT_H_
#define PRIMSERVE_WIRE_FORMAT_H_

#include <cstdint>
#include <string>

#include "google/protobuf/descriptor.h"

namespace primserve::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

inline void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

inline void AppendTag(int field, WireType type, std::string* out) {
  AppendVarint((static_cast<uint64_t>(field) << 3) | type, out);
}

inline constexpr char kArrayType[] = "primserve.v1.Array";
inline constexpr int kArrayDataField = 2;

// Whether a message of this type holds an Array at some depth (the parser
// and the framer follow such fields into it). Cached per type.
bool BearsArray(const google::protobuf::Descriptor* type);

}  // namespace primserve::wire

#endif  // PRIMSERVE_WIRE_FORMAT_H_
