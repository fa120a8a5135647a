// Compares a response array with the expected one, as the GPU tests need:
// integers exactly; floats bit for bit (any NaN matching any NaN) or, where
// `tolerant` (float SUM/PROD, which a GPU associates differently), within a
// relative tolerance of max(1, |want|) (equal values, so zeros of either
// sign, pass).
#ifndef PRIMSERVE_TESTS_ARRAY_DIFF_H_
#define PRIMSERVE_TESTS_ARRAY_DIFF_H_

#include <string>

#include "absl/strings/string_view.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {

inline constexpr double kFloat32Tolerance = 1e-3;
inline constexpr double kFloat64Tolerance = 1e-9;

// Empty when `got` matches `want`; else the first difference, named after
// `field`. Arrays absent from both (DTYPE_UNSPECIFIED, no data) match.
std::string ArrayDiff(absl::string_view field, const v1::Array& got, const v1::Array& want,
                      bool tolerant);

}  // namespace primserve

#endif  // PRIMSERVE_TESTS_ARRAY_DIFF_H_
