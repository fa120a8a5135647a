// Error messages that the CPU reference and the CUDA engine word alike, so a
// caller sees the same text from either backend.
#ifndef PRIMSERVE_CORE_MESSAGES_H_
#define PRIMSERVE_CORE_MESSAGES_H_

#include <cstdint>
#include <string>

namespace primserve {

// AggregateByKey: keys[position] = key is not a key index.
template <typename K>
std::string KeyOutOfRangeMessage(uint64_t position, K key, uint64_t num_keys) {
  return "keys[" + std::to_string(position) + "] = " + std::to_string(+key) +
         " is outside [0, num_keys=" + std::to_string(num_keys) + ")";
}

// Gather: indices[position] = index is not a position in values.
inline std::string IndexOutOfRangeMessage(uint64_t position, int64_t index, uint64_t n) {
  return "indices[" + std::to_string(position) + "] = " + std::to_string(index) +
         " is outside [0, len(values)=" + std::to_string(n) + "); nothing was written";
}

}  // namespace primserve

#endif  // PRIMSERVE_CORE_MESSAGES_H_
