#include "client/array_text.h"

#include <charconv>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/client.h"

namespace primserve {
namespace {

template <typename T>
bool ParseNumber(absl::string_view text, T* value) {
  if constexpr (std::is_same_v<T, float>) {
    return absl::SimpleAtof(text, value);
  } else if constexpr (std::is_same_v<T, double>) {
    return absl::SimpleAtod(text, value);
  } else {
    return absl::SimpleAtoi(text, value);
  }
}

template <typename T>
std::string FormatNumber(T value) {
  char buffer[32];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof(buffer), value).ptr);
}

}  // namespace

absl::StatusOr<v1::Array> ParseText(DType dtype, absl::string_view text,
                                    absl::string_view source) {
  return VisitDType(dtype, [&](auto zero) -> absl::StatusOr<v1::Array> {
    using T = decltype(zero);
    std::vector<T> values;
    for (absl::string_view token :
         absl::StrSplit(text, absl::ByAnyChar(" \t\r\n,"), absl::SkipEmpty())) {
      T value;
      if (!ParseNumber(token, &value)) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": '", token, "' is not a valid ", DTypeName(dtype)));
      }
      values.push_back(value);
    }
    return PackArray<T>(values);
  });
}

absl::Status ParseScalar(DType dtype, absl::string_view flag, absl::string_view text,
                         v1::Scalar* scalar) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    using Wide = std::conditional_t<std::is_floating_point_v<T>, double,
                                    std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
    Wide value;
    if (!ParseNumber(text, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, "=", text, " is not a valid ", DTypeName(dtype), " operand"));
    }
    *scalar = ScalarOf(value);
    return absl::OkStatus();
  });
}

absl::StatusOr<v1::Array> ReadArrayFile(DType dtype, const std::string& path,
                                        ArrayFileFormat format) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::InvalidArgumentError(absl::StrCat("cannot open ", path));
  std::string contents(std::istreambuf_iterator<char>(file), {});
  if (format == ArrayFileFormat::kText) return ParseText(dtype, contents, path);
  if (contents.size() % DTypeSize(dtype) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", contents.size(), " bytes is not a whole number of ", DTypeName(dtype)));
  }
  v1::Array array;
  array.set_dtype(static_cast<v1::DType>(dtype));
  *array.mutable_data() = std::move(contents);
  return array;
}

absl::StatusOr<std::string> FormatArray(const v1::Array& array, absl::string_view separator,
                                        size_t edge) {
  if (!v1::DType_IsValid(array.dtype()) || array.dtype() == v1::DTYPE_UNSPECIFIED) {
    return absl::InternalError(absl::StrCat("response array has dtype ", array.dtype()));
  }
  return VisitDType(static_cast<DType>(array.dtype()), [&](auto zero) -> absl::StatusOr<std::string> {
    using T = decltype(zero);
    absl::StatusOr<std::vector<T>> values = UnpackArray<T>(array);
    if (!values.ok()) return values.status();
    const auto format = [](std::string* out, T value) { out->append(FormatNumber(value)); };
    if (edge == 0 || values->size() <= 2 * edge) return absl::StrJoin(*values, separator, format);
    return absl::StrCat(absl::StrJoin(values->begin(), values->begin() + edge, separator, format),
                        separator, "...", separator,
                        absl::StrJoin(values->end() - edge, values->end(), separator, format));
  });
}

}  // namespace primserve
