#include "client/stream_messages.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "client/message_arrays.h"
#include "core/primitives.h"
#include "google/protobuf/field_mask.pb.h"
#include "google/protobuf/util/field_mask_util.h"

namespace primserve {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// Bytes [start, start + count) of `data`, or what of them it has.
std::string Slice(const std::string& data, uint64_t start, uint64_t count) {
  return start < data.size() ? data.substr(start, count) : std::string();
}

}  // namespace

StreamCutter::StreamCutter(Message* whole) : StreamCutter(*whole, whole) {}

StreamCutter::StreamCutter(const Message& whole) : StreamCutter(whole, nullptr) {}

StreamCutter::StreamCutter(const Message& whole, Message* to_take_from) : whole_(whole) {
  for (const FieldDescriptor* field : SetArrays(whole)) {
    const v1::Array& array = ArrayIn(whole, field);
    ArrayToCut cut{
        field, array.dtype(), DTypeSize(static_cast<DType>(array.dtype())), {}, &array.data()};
    if (to_take_from != nullptr) {
      cut.taken.swap(*MutableArray(to_take_from, field)->mutable_data());
      cut.in_whole = nullptr;
    }
    arrays_.push_back(std::move(cut));
  }
  if (!arrays_.empty()) elements_ = arrays_.front().bytes().size() / arrays_.front().element_bytes;
}

uint64_t StreamCutter::array_bytes() const {
  uint64_t bytes = 0;
  for (const ArrayToCut& array : arrays_) bytes += array.bytes().size();
  return bytes;
}

uint64_t StreamCutter::PieceElements(uint64_t piece_bytes) const {
  uint64_t bytes_per_element = 0;
  for (const ArrayToCut& array : arrays_) bytes_per_element += array.element_bytes;
  return std::max<uint64_t>(1, piece_bytes / std::max<uint64_t>(1, bytes_per_element));
}

void StreamCutter::Next(uint64_t count, Message* message) {
  if (!started_) {
    // The parameters: every field whole sets but its arrays, whose bytes
    // would be copied only to be replaced below.
    std::vector<const FieldDescriptor*> set;
    whole_.GetReflection()->ListFields(whole_, &set);
    google::protobuf::FieldMask parameters;
    for (const FieldDescriptor* field : set) {
      if (field->message_type() != v1::Array::descriptor()) parameters.add_paths(field->name());
    }
    google::protobuf::util::FieldMaskUtil::MergeMessageTo(whole_, parameters, {}, message);
  }
  for (const ArrayToCut& array : arrays_) {
    v1::Array* to = MutableArray(message, array.field);
    to->set_dtype(array.dtype);
    to->set_data(Slice(array.bytes(), cut_ * array.element_bytes, count * array.element_bytes));
  }
  started_ = true;
  cut_ += count;
}

void AppendAnswer(Message* answer, Message* joined) {
  for (const FieldDescriptor* field : SetArrays(*answer)) {
    const v1::Array& piece = ArrayIn(*answer, field);
    v1::Array* whole = MutableArray(joined, field);
    whole->set_dtype(piece.dtype());
    whole->mutable_data()->append(piece.data());
    answer->GetReflection()->ClearField(answer, field);
  }
  joined->MergeFrom(*answer);
}

}  // namespace primserve
