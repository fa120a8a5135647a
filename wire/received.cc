#include "wire/received.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "wire/format.h"

namespace primserve::wire {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kHugePage = size_t{2} << 20;
// Array-bearing messages nest this deep at most in our protos (Multiplex ->
// request -> Array); deeper is not ours, so protobuf parses it.
constexpr int kMaxDepth = 8;
// Protobuf's parser rejects a tag or a length spread over more bytes than
// these (a small value padded with 0x80 bytes), whatever its value: such
// bytes are handed to it.
constexpr int kMaxTagBytes = 5;
constexpr int kMaxLengthBytes = 5;
// Other fields' values this large (segment offsets, say) are referenced in
// the received slices rather than copied.
constexpr size_t kMinReferencedBytes = 4096;

// A forward-only reader over a message's slices.
class Cursor {
 public:
  explicit Cursor(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& s : slices_) size_ += s.size();
    Advance(0);  // past leading empty slices
  }

  size_t position() const { return position_; }
  size_t size() const { return size_; }

  bool ReadByte(uint8_t* byte) {
    if (position_ >= size_) return false;
    *byte = slices_[slice_].begin()[offset_];
    Advance(1);
    return true;
  }

  // A varint of at most `max_bytes` (at most 10) bytes whose value fits in
  // 64 bits.
  bool ReadVarint(uint64_t* value, int max_bytes = 10) {
    *value = 0;
    for (int shift = 0; shift < 7 * max_bytes; shift += 7) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      if (shift == 63 && byte > 1) return false;
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  // Copies the next `n` bytes to `out`.
  void CopyTo(size_t n, std::string* out) {
    while (n > 0) {
      const size_t take = std::min(n, slices_[slice_].size() - offset_);
      out->append(reinterpret_cast<const char*>(slices_[slice_].begin()) + offset_, take);
      Advance(take);
      n -= take;
    }
  }

  // References to the next `n` bytes (n > 0, within size()).
  std::vector<grpc::Slice> Take(size_t n) {
    std::vector<grpc::Slice> pieces;
    while (n > 0) {
      const size_t take = std::min(n, slices_[slice_].size() - offset_);
      pieces.push_back(slices_[slice_].sub(offset_, offset_ + take));
      Advance(take);
      n -= take;
    }
    return pieces;
  }

 private:
  void Advance(size_t n) {
    position_ += n;
    offset_ += n;
    while (slice_ < slices_.size() && offset_ >= slices_[slice_].size()) {
      offset_ -= slices_[slice_].size();
      ++slice_;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t size_ = 0;
  size_t position_ = 0;
  size_t slice_ = 0;
  size_t offset_ = 0;
};

enum class Walk { kOk, kHandOver };

// Where a message's payloads go: one Payload per Array.data occurrence,
// except that occurrences protobuf merges into one field (an Array reached
// by the same singular fields: its data, or the message holding it, given
// again) share one, the later replacing the earlier. A message of many
// repeated occurrences then holds one payload, not one per occurrence.
struct PayloadSlots {
  const PayloadAllocator* allocator;
  CopyPool* copies;
  std::deque<Payload>& payloads;
  // The field numbers from the message to the Array being walked, while
  // every field on the way is singular.
  std::string path;
  bool singular_path = true;
  absl::flat_hash_map<std::string, uint64_t> by_path;

  // The token index for a payload of these slices at the current path.
  uint64_t Put(std::vector<grpc::Slice> slices) {
    if (singular_path) {
      auto [it, added] = by_path.try_emplace(path, payloads.size());
      if (!added) {
        payloads[it->second] = Payload(std::move(slices), allocator, copies);
        return it->second;
      }
    }
    payloads.emplace_back(std::move(slices), allocator, copies);
    return payloads.size() - 1;
  }
};

// Rewrites the fields of one message of `type` in [cursor, end) into
// `header`: fields that lead to an Array are followed, Array.data payloads
// become tokens, everything else is copied (tags and varints re-encoded
// canonically, which protobuf reads as the same values; large values as
// references to the received slices). kHandOver for
// anything this walk does not follow: protobuf then parses the whole message.
Walk Rewrite(Cursor& cursor, size_t end, const google::protobuf::Descriptor* type, int depth,
             PayloadSlots& slots, Pieces* header) {
  std::string scratch;
  const auto append_varint = [&](uint64_t value) {
    scratch.clear();
    AppendVarint(value, &scratch);
    header->AppendBytes(scratch);
  };
  const bool is_array = type->full_name() == kArrayType;
  while (cursor.position() < end) {
    uint64_t tag;
    if (!cursor.ReadVarint(&tag, kMaxTagBytes) || tag > 0xffffffffu || (tag >> 3) == 0) {
      return Walk::kHandOver;
    }
    const int number = static_cast<int>(tag >> 3);
    const uint32_t wire_type = tag & 7;
    append_varint(tag);
    if (wire_type == kVarint) {
      uint64_t value;
      if (!cursor.ReadVarint(&value) || cursor.position() > end) return Walk::kHandOver;
      append_varint(value);
      continue;
    }
    uint64_t length;
    if (wire_type == kFixed64) {
      length = 8;
    } else if (wire_type == kFixed32) {
      length = 4;
    } else if (wire_type == kLengthDelimited) {
      if (!cursor.ReadVarint(&length, kMaxLengthBytes) || length > 0x7fffffff) {
        return Walk::kHandOver;
      }
    } else {  // groups, and wire types protobuf rejects
      return Walk::kHandOver;
    }
    if (cursor.position() > end || length > end - cursor.position()) return Walk::kHandOver;
    const google::protobuf::FieldDescriptor* field = type->FindFieldByNumber(number);
    if (wire_type == kLengthDelimited && is_array && number == kArrayDataField && length > 0) {
      const uint64_t index = slots.Put(cursor.Take(length));
      append_varint(sizeof(index));
      header->AppendBytes(absl::string_view(reinterpret_cast<const char*>(&index), sizeof(index)));
    } else if (wire_type == kLengthDelimited && field != nullptr &&
               field->message_type() != nullptr && depth < kMaxDepth &&
               BearsArray(field->message_type())) {
      Pieces sub;
      const size_t path_size = slots.path.size();
      const bool singular_path = slots.singular_path;
      slots.path.append(reinterpret_cast<const char*>(&number), sizeof(number));
      slots.singular_path = singular_path && !field->is_repeated();
      const Walk walk =
          Rewrite(cursor, cursor.position() + length, field->message_type(), depth + 1, slots, &sub);
      slots.path.resize(path_size);
      slots.singular_path = singular_path;
      if (walk == Walk::kHandOver) return Walk::kHandOver;
      append_varint(sub.size());
      header->Append(std::move(sub));
    } else {
      if (wire_type == kLengthDelimited) append_varint(length);
      if (length >= kMinReferencedBytes) {
        for (grpc::Slice& piece : cursor.Take(length)) header->AppendSlice(std::move(piece));
      } else {
        scratch.clear();
        cursor.CopyTo(length, &scratch);
        header->AppendBytes(scratch);
      }
    }
  }
  return Walk::kOk;
}

void* AllocateAligned(size_t bytes) {
  const size_t alignment = bytes >= kHugePage ? kHugePage : kAlignment;
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, rounded);
  if (p != nullptr && alignment == kHugePage) madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

}  // namespace

Payload::Payload(std::vector<grpc::Slice> slices, const PayloadAllocator* allocator,
                 CopyPool* copies)
    : slices_(std::move(slices)), allocator_(allocator), copies_(copies) {
  for (const grpc::Slice& s : slices_) size_ += s.size();
}

absl::string_view Payload::Contiguous() {
  if (slices_.size() == 1 && reinterpret_cast<uintptr_t>(slices_[0].begin()) % 8 == 0) {
    return absl::string_view(reinterpret_cast<const char*>(slices_[0].begin()), size_);
  }
  if (copy_ == nullptr) {
    if (allocator_ != nullptr && *allocator_) copy_ = (*allocator_)(size_);
    if (copy_ == nullptr) {
      copy_ = PayloadBuffer(static_cast<char*>(AllocateAligned(size_)), [](char* p) { std::free(p); });
      if (copy_ == nullptr) throw std::bad_alloc();
    }
    Copy(copies_, AsGather(), 0, size_, copy_.get());
  }
  return absl::string_view(copy_.get(), size_);
}

Gather Payload::AsGather() const {
  std::vector<absl::string_view> pieces;
  pieces.reserve(slices_.size());
  for (const grpc::Slice& s : slices_) {
    pieces.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return Gather(pieces);
}

absl::Status ReceivedMessage::Parse(const grpc::ByteBuffer& buffer,
                                    google::protobuf::Message* message) {
  message->Clear();
  payloads_.clear();
  tokens_ = false;
  std::vector<grpc::Slice> slices;
  if (!buffer.Valid() || !buffer.Dump(&slices).ok()) {
    return absl::InvalidArgumentError("the request could not be read");
  }
  Cursor cursor(slices);
  Pieces header;
  PayloadSlots slots{&allocator_, copies_, payloads_};
  if (Rewrite(cursor, cursor.size(), message->GetDescriptor(), 0, slots, &header) == Walk::kOk) {
    grpc::ByteBuffer header_bytes = std::move(header).ToByteBuffer();
    grpc::ProtoBufferReader header_reader(&header_bytes);
    if (!message->ParseFromZeroCopyStream(&header_reader)) {
      payloads_.clear();
      return absl::InvalidArgumentError(
          absl::StrCat("the request is not a valid ", message->GetTypeName()));
    }
    tokens_ = true;
    return absl::OkStatus();
  }
  payloads_.clear();
  grpc::ByteBuffer copy(buffer);  // shares the slices; the reader takes a mutable buffer
  grpc::ProtoBufferReader reader(&copy);
  if (!message->ParseFromZeroCopyStream(&reader)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request is not a valid ", message->GetTypeName()));
  }
  return absl::OkStatus();
}

Payload* ReceivedMessage::Find(absl::string_view data) {
  uint64_t index;
  if (!tokens_ || data.size() != sizeof(index)) return nullptr;
  std::memcpy(&index, data.data(), sizeof(index));
  return index < payloads_.size() ? &payloads_[index] : nullptr;
}

absl::StatusOr<absl::string_view> ReceivedMessage::Resolve(absl::string_view data) {
  if (!tokens_ || data.empty()) return data;
  Payload* payload = Find(data);
  if (payload == nullptr) return absl::InternalError("an array's data is not a payload token");
  return payload->Contiguous();
}

}  // namespace primserve::wire
