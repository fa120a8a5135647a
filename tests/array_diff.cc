#include "tests/array_diff.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/primitives.h"

namespace primserve {

std::string ArrayDiff(absl::string_view field, const v1::Array& got, const v1::Array& want,
                      bool tolerant) {
  if (got.dtype() != want.dtype() || got.data().size() != want.data().size()) {
    return absl::StrCat(field, ": dtype/bytes ", got.dtype(), "/", got.data().size(),
                        ", want ", want.dtype(), "/", want.data().size(), "; ");
  }
  if (want.dtype() == v1::DTYPE_UNSPECIFIED) return "";
  return VisitDType(static_cast<DType>(want.dtype()), [&](auto zero) -> std::string {
    using T = decltype(zero);
    const size_t n = want.data().size() / sizeof(T);
    for (size_t i = 0; i < n; ++i) {
      T g, w;
      std::memcpy(&g, got.data().data() + i * sizeof(T), sizeof(T));
      std::memcpy(&w, want.data().data() + i * sizeof(T), sizeof(T));
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(g) && std::isnan(w)) continue;
        if (tolerant) {
          const double tolerance = (sizeof(T) == 4 ? kFloat32Tolerance : kFloat64Tolerance) *
                                   std::max(1.0, std::fabs(double(w)));
          if (g == w || std::fabs(double(g) - double(w)) <= tolerance) continue;
        } else if (std::memcmp(&g, &w, sizeof(T)) == 0) {
          continue;
        }
      } else if (g == w) {
        continue;
      }
      return absl::StrCat(field, "[", i, "] = ", g, ", want ", w, "; ");
    }
    return "";
  });
}

}  // namespace primserve
