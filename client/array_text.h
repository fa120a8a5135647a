// Arrays as text and files: the numbers a user writes (primctl --values,
// --input, --operand) parsed into the messages' arrays and scalars, array
// files read, and arrays formatted for printing.
#ifndef PRIMSERVE_CLIENT_ARRAY_TEXT_H_
#define PRIMSERVE_CLIENT_ARRAY_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/primitives.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {

enum class ArrayFileFormat {
  kText,    // numbers separated by whitespace or commas
  kBinary,  // packed little-endian elements
};

// Numbers separated by whitespace or commas, as elements of `dtype`; `source`
// names where they came from in errors.
absl::StatusOr<v1::Array> ParseText(DType dtype, absl::string_view text,
                                    absl::string_view source);

// Parses the --`flag` number `text` into `scalar` as the kind `dtype` takes:
// int_value for signed, uint_value for unsigned, float_value for float dtypes.
absl::Status ParseScalar(DType dtype, absl::string_view flag, absl::string_view text,
                         v1::Scalar* scalar);

// The array of `dtype` elements in the file at `path`.
absl::StatusOr<v1::Array> ReadArrayFile(DType dtype, const std::string& path,
                                        ArrayFileFormat format);

// The elements of `array` joined by `separator`; with `edge` > 0, only the
// first and last `edge` of them, "..." between, when there are more.
absl::StatusOr<std::string> FormatArray(const v1::Array& array, absl::string_view separator,
                                        size_t edge);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_ARRAY_TEXT_H_
