// What the parser and the framer share: protobuf's wire-format integers,
// and which message types lead to an Array.
#ifndef PRIMSERVE_WIRE_FORMAT_H_
#define PRIMSERVE_WIRE_FORMAT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

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

inline std::string Varint(uint64_t value) {
  std::string out;
  AppendVarint(value, &out);
  return out;
}

inline void AppendTag(int field, WireType type, std::string* out) {
  AppendVarint((static_cast<uint64_t>(field) << 3) | type, out);
}

// The bytes of a message being built: runs of small bytes and slices of
// received or held memory, in order.
class Pieces {
 public:
  size_t size() const { return size_; }

  void AppendBytes(absl::string_view bytes) {
    if (segments_.empty() || segments_.back().is_slice) segments_.push_back(Segment{});
    segments_.back().bytes.append(bytes.data(), bytes.size());
    size_ += bytes.size();
  }
  void AppendSlice(grpc::Slice slice) {
    size_ += slice.size();
    segments_.push_back(Segment{true, {}, std::move(slice)});
  }
  void Append(Pieces&& other) {
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
      slices.push_back(s.is_slice ? std::move(s.slice) : TakeBytes(std::move(s.bytes)));
    }
    return grpc::ByteBuffer(slices.data(), slices.size());
  }

 private:
  // A slice over `bytes` itself when it is large (no second copy of a large
  // header), else over a copy.
  static grpc::Slice TakeBytes(std::string bytes) {
    if (bytes.size() < 4096) return grpc::Slice(bytes);
    auto* owned = new std::string(std::move(bytes));
    return grpc::Slice(
        owned->data(), owned->size(), [](void* p) { delete static_cast<std::string*>(p); }, owned);
  }

  struct Segment {
    bool is_slice = false;
    std::string bytes;
    grpc::Slice slice;
  };
  std::vector<Segment> segments_;
  size_t size_ = 0;
};

inline constexpr char kArrayType[] = "primserve.v1.Array";
inline constexpr int kArrayDataField = 2;

// Whether a message of this type holds an Array at some depth (the parser
// and the framer follow such fields into it). Cached per type.
bool BearsArray(const google::protobuf::Descriptor* type);

}  // namespace primserve::wire

#endif  // PRIMSERVE_WIRE_FORMAT_H_
