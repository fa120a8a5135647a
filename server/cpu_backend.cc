#include "server/cpu_backend.h"

#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "reference/reference.h"

namespace primserve {
namespace {

template <typename T>
HostArray ToHost(DType dtype, const std::vector<T>& values) {
  return HostArray::Of<T>(dtype, absl::MakeConstSpan(values));
}

HostArray ToHostIndices(const std::vector<int64_t>& indices) {
  return ToHost(DType::kInt64, indices);
}

absl::StatusOr<Result> Run(const ScanOperation& o) {
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    return ScanResult{ToHost(o.input.dtype, reference::Scan<T>(o.input.as<T>(), o.op, o.exclusive,
                                                               o.segment_offsets))};
  });
}

absl::StatusOr<Result> Run(const ReduceOperation& o) {
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    reference::ReduceResult<T> r = reference::Reduce<T>(o.input.as<T>(), o.op, o.segment_offsets);
    ReduceResult result{ToHost(o.input.dtype, r.values), std::nullopt};
    if (o.op == Op::kArgMin || o.op == Op::kArgMax) result.indices = ToHostIndices(r.indices);
    return result;
  });
}

absl::StatusOr<Result> Run(const SelectOperation& o) {
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    const absl::Span<const T> input = o.input.as<T>();
    const std::vector<bool> keep =
        o.predicate ? reference::EvaluatePredicate<T>(input, o.predicate->As<T>())
                    : VisitDType(o.flags->dtype, [&](auto flag_zero) {
                        using F = decltype(flag_zero);
                        return reference::EvaluateFlags<F>(o.flags->as<F>());
                      });
    reference::SelectResult<T> r = reference::Select<T>(input, keep, o.partition);
    SelectResult result;
    result.count = r.count;
    if (o.output == SelectOutput::kValues || o.output == SelectOutput::kValuesAndIndices) {
      result.values = ToHost(o.input.dtype, r.values);
    }
    if (o.output == SelectOutput::kIndices || o.output == SelectOutput::kValuesAndIndices) {
      result.indices = ToHostIndices(r.indices);
    }
    return result;
  });
}

absl::StatusOr<Result> Run(const UniqueOperation& o) {
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    return UniqueResult{ToHost(o.input.dtype, reference::Unique<T>(o.input.as<T>()))};
  });
}

absl::StatusOr<Result> Run(const RunLengthEncodeOperation& o) {
  return VisitDType(o.input.dtype, [&](auto zero) -> absl::StatusOr<Result> {
    using T = decltype(zero);
    reference::Runs<T> runs = reference::RunLengthEncode<T>(o.input.as<T>());
    return RunLengthEncodeResult{ToHost(o.input.dtype, runs.values), ToHostIndices(runs.lengths)};
  });
}

absl::StatusOr<Result> Run(const ReduceByKeyOperation& o) {
  return VisitDType(o.keys.dtype, [&](auto key_zero) {
    using K = decltype(key_zero);
    return VisitDType(o.values.dtype, [&](auto value_zero) -> absl::StatusOr<Result> {
      using V = decltype(value_zero);
      reference::KeyedValues<K, V> r =
          reference::ReduceByKey<K, V>(o.keys.as<K>(), o.values.as<V>(), o.op);
      return ReduceByKeyResult{ToHost(o.keys.dtype, r.keys), ToHost(o.values.dtype, r.values)};
    });
  });
}

absl::StatusOr<Result> Run(const AggregateByKeyOperation& o) {
  return VisitDType(o.keys.dtype, [&](auto key_zero) {
    using K = decltype(key_zero);
    return VisitDType(o.values.dtype, [&](auto value_zero) -> absl::StatusOr<Result> {
      using V = decltype(value_zero);
      if constexpr (!std::is_integral_v<K>) {
        return absl::InternalError("AggregateByKey reached the backend with float keys");
      } else {
        absl::StatusOr<std::vector<V>> aggregates = reference::AggregateByKey<K, V>(
            o.keys.as<K>(), o.values.as<V>(), o.op, o.num_keys);
        if (!aggregates.ok()) return aggregates.status();
        return AggregateByKeyResult{ToHost(o.values.dtype, *aggregates)};
      }
    });
  });
}

}  // namespace

absl::StatusOr<Result> RunOnCpu(const Operation& operation) {
  return std::visit([](const auto& o) { return Run(o); }, operation);
}

void CpuBackend::Execute(std::vector<std::unique_ptr<Task>> batch) {
  for (std::unique_ptr<Task>& task : batch) {
    const absl::Time start = absl::Now();
    absl::StatusOr<Result> result = RunOnCpu(task->operation);
    if (metrics_ != nullptr) {
      metrics_->ObserveStage(RpcOf(task->operation), Stage::kCompute, absl::Now() - start);
    }
    task->done(std::move(result));
  }
}

}  // namespace primserve
