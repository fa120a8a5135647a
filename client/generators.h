// The data the client tools generate for requests (primctl --generate,
// primload's requests): seeded, so a seed gives the same arrays every run.
#ifndef PRIMSERVE_CLIENT_GENERATORS_H_
#define PRIMSERVE_CLIENT_GENERATORS_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

namespace primserve {

// A generator seeded by `seed`; `stream` tells apart the generators of a run.
inline std::mt19937_64 SeededRng(uint64_t seed, uint32_t stream) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), stream};
  return std::mt19937_64(seq);
}

// Integers in [-100, 100], unsigned in [0, 200], floats uniform in [-1, 1).
template <typename T>
T RandomValue(std::mt19937_64& rng) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::uniform_real_distribution<T>(-1, 1)(rng);
  } else {
    return static_cast<T>(std::uniform_int_distribution<int64_t>(
        std::is_signed_v<T> ? -100 : 0, std::is_signed_v<T> ? 100 : 200)(rng));
  }
}

template <typename T>
std::vector<T> RandomValues(size_t n, std::mt19937_64& rng) {
  std::vector<T> values(n);
  for (T& value : values) value = RandomValue<T>(rng);
  return values;
}

// Keys 0, 0, 1, 2, 2, 2, ...: each element after the first starts a new run
// with probability 1 / mean_run_length, so runs have that mean length.
template <typename Key>
std::vector<Key> RunKeys(size_t n, double mean_run_length, std::mt19937_64& rng) {
  std::bernoulli_distribution new_run(1 / mean_run_length);
  std::vector<Key> keys(n);
  for (size_t i = 1; i < n; ++i) keys[i] = keys[i - 1] + new_run(rng);
  return keys;
}

// Keys uniform in [0, num_keys).
template <typename Key>
std::vector<Key> RandomKeys(size_t n, uint64_t num_keys, std::mt19937_64& rng) {
  std::uniform_int_distribution<uint64_t> uniform(0, num_keys - 1);
  std::vector<Key> keys(n);
  for (Key& key : keys) key = static_cast<Key>(uniform(rng));
  return keys;
}

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_GENERATORS_H_
