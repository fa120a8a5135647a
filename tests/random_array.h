// A v1.Array of small random integers in any dtype, for tests whose answers
// must compare byte for byte: every value is exact in every dtype, so a float
// SUM is the same whatever the order of its additions.
#ifndef PRIMSERVE_TESTS_RANDOM_ARRAY_H_
#define PRIMSERVE_TESTS_RANDOM_ARRAY_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {
namespace testing {

// n elements of `dtype` in [-spread/2, spread/2) (runs, repeats and both
// signs for small spreads).
inline v1::Array RandomArray(std::mt19937_64& rng, v1::DType dtype, size_t n, int spread) {
  v1::Array array;
  array.set_dtype(dtype);
  const size_t element = dtype == v1::INT32 || dtype == v1::UINT32 || dtype == v1::FLOAT32 ? 4 : 8;
  std::string* data = array.mutable_data();
  data->resize(n * element);
  for (size_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(rng() % spread) - spread / 2;
    if (dtype == v1::FLOAT32) {
      const float x = static_cast<float>(v);
      std::memcpy(&(*data)[i * 4], &x, 4);
    } else if (dtype == v1::FLOAT64) {
      const double x = static_cast<double>(v);
      std::memcpy(&(*data)[i * 8], &x, 8);
    } else {
      std::memcpy(&(*data)[i * element], &v, element);  // little-endian
    }
  }
  return array;
}

}  // namespace testing
}  // namespace primserve

#endif  // PRIMSERVE_TESTS_RANDOM_ARRAY_H_
