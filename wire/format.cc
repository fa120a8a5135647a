#include "wire/format.h"

#include "absl/container/flat_hash_map.h"

namespace primserve::wire {
namespace {

bool Bears(const google::protobuf::Descriptor* type, int depth) {
  if (type->full_name() == kArrayType) return true;
  // Deeper than any of our messages nest: not followed.
  if (depth > 8) return false;
  for (int i = 0; i < type->field_count(); ++i) {
    const google::protobuf::Descriptor* sub = type->field(i)->message_type();
    if (sub != nullptr && Bears(sub, depth + 1)) return true;
  }
  return false;
}

}  // namespace

bool BearsArray(const google::protobuf::Descriptor* type) {
  // Asked for every message field of every request: one cache per thread,
  // so that parsing takes no lock (a handful of types, a few bytes each).
  thread_local absl::flat_hash_map<const google::protobuf::Descriptor*, bool> cache;
  auto [it, inserted] = cache.try_emplace(type, false);
  if (inserted) it->second = Bears(type, 0);
  return it->second;
}

}  // namespace primserve::wire
