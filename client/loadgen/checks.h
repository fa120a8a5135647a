// Checks of response arrays against the reference's: exact, or within a
// tolerance for float SUM and PROD, whose results depend on the order of
// operations.
#ifndef PRIMSERVE_CLIENT_LOADGEN_CHECKS_H_
#define PRIMSERVE_CLIENT_LOADGEN_CHECKS_H_

#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/client.h"
#include "core/primitives.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {

// Relative tolerance of float SUM and PROD results, as the GPU tests use.
template <typename T>
constexpr double kTolerance = std::is_same_v<T, float> ? 1e-4 : 1e-12;

using ArrayCheck = std::function<bool(const v1::Array&)>;

inline ArrayCheck Exactly(v1::Array expected) {
  return [expected = std::move(expected)](const v1::Array& got) {
    return got.dtype() == expected.dtype() && got.data() == expected.data();
  };
}

template <typename T>
ArrayCheck Approximately(std::vector<T> want, std::vector<double> tolerance) {
  return [want = std::move(want), tolerance = std::move(tolerance)](const v1::Array& got) {
    absl::StatusOr<std::vector<T>> values = UnpackArray<T>(got);
    if (!values.ok() || values->size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i) {
      if (!(std::fabs(static_cast<double>((*values)[i]) - static_cast<double>(want[i])) <=
            tolerance[i]))
        return false;
    }
    return true;
  };
}

// Checks the results `want` that `compute(values)` derives from `input` with
// `op`: exactly, but for float SUM and PROD, whose results depend on the
// order of operations (the GPU's differs from the reference's loop): SUM
// within kTolerance of the same sums over |x|, PROD within kTolerance of the
// product plus T's smallest normal (long products underflow).
template <typename T, typename Compute>
ArrayCheck ResultCheck(const std::vector<T>& input, Op op, const std::vector<T>& want,
                       Compute compute) {
  if constexpr (std::is_floating_point_v<T>) {
    if (op == Op::kSum) {
      std::vector<double> magnitudes(input.size());
      for (size_t i = 0; i < input.size(); ++i)
        magnitudes[i] = std::fabs(static_cast<double>(input[i]));
      std::vector<double> tolerance = compute(absl::MakeConstSpan(magnitudes));
      for (double& t : tolerance) t *= kTolerance<T>;
      return Approximately<T>(want, std::move(tolerance));
    }
    if (op == Op::kProd) {
      std::vector<double> tolerance(want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        tolerance[i] =
            kTolerance<T> * std::fabs(static_cast<double>(want[i])) + std::numeric_limits<T>::min();
      }
      return Approximately<T>(want, std::move(tolerance));
    }
  }
  return Exactly(PackArray<T>(want));
}

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_CHECKS_H_
