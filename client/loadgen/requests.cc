#include "client/loadgen/requests.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "client/client.h"
#include "client/generators.h"
#include "client/loadgen/checks.h"
#include "core/primitives.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "reference/reference.h"
#include "reference/sort.h"

namespace primserve {
namespace {

// Random values in runs: each element starts a new run with probability
// 1 / mean_run_length.
template <typename T>
std::vector<T> RandomRuns(size_t n, double mean_run_length, std::mt19937_64& rng) {
  std::bernoulli_distribution new_run(1 / mean_run_length);
  std::vector<T> values(n);
  for (size_t i = 0; i < n; ++i)
    values[i] = i == 0 || new_run(rng) ? RandomValue<T>(rng) : values[i - 1];
  return values;
}

// Equal segments; none (one segment over all) for one.
std::vector<uint64_t> SegmentStarts(const RequestSpec& spec) {
  std::vector<uint64_t> starts;
  if (spec.segments == 1) return starts;
  for (int k = 0; k < spec.segments; ++k) starts.push_back(spec.n * k / spec.segments);
  return starts;
}

template <typename T>
void AddScan(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> input = RandomValues<T>(spec.n, rng);
  const std::vector<uint64_t> segments = SegmentStarts(spec);
  v1::ScanRequest request;
  *request.mutable_input() = PackArray<T>(input);
  request.set_op(static_cast<v1::Op>(spec.op));
  request.mutable_segment_offsets()->Add(segments.begin(), segments.end());
  const auto scan = [&](auto values) {
    return reference::Scan(values, spec.op, /*exclusive=*/false, segments);
  };
  const std::vector<T> want = scan(absl::MakeConstSpan(input));
  v1::ScanResponse expected;
  *expected.mutable_output() = PackArray<T>(want);
  std::function<bool(const v1::ScanResponse&)> check;
  if (workload->verify()) {
    check = [output = ResultCheck(input, spec.op, want, scan)](const v1::ScanResponse& r) {
      return output(r.output());
    };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddReduce(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> input = RandomValues<T>(spec.n, rng);
  const std::vector<uint64_t> segments = SegmentStarts(spec);
  v1::ReduceRequest request;
  *request.mutable_input() = PackArray<T>(input);
  request.set_op(static_cast<v1::Op>(spec.op));
  request.mutable_segment_offsets()->Add(segments.begin(), segments.end());
  const auto reduce = [&](auto values) {
    return reference::Reduce(values, spec.op, segments).values;
  };
  const reference::ReduceResult<T> want = reference::Reduce<T>(input, spec.op, segments);
  v1::ReduceResponse expected;
  *expected.mutable_values() = PackArray<T>(want.values);
  if (spec.op == Op::kArgMin || spec.op == Op::kArgMax) {
    *expected.mutable_indices() = PackArray<int64_t>(want.indices);
  }
  std::function<bool(const v1::ReduceResponse&)> check;
  if (workload->verify()) {
    check = [values = ResultCheck(input, spec.op, want.values, reduce),
             indices = Exactly(expected.indices())](const v1::ReduceResponse& r) {
      return values(r.values()) && indices(r.indices());
    };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddSelect(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> input = RandomValues<T>(spec.n, rng);
  const Predicate<T> predicate{spec.predicate, static_cast<T>(spec.operand), T{}};
  v1::SelectRequest request;
  *request.mutable_input() = PackArray<T>(input);
  request.mutable_predicate()->set_kind(static_cast<v1::Predicate::Kind>(spec.predicate));
  *request.mutable_predicate()->mutable_operand() = ScalarOf(predicate.operand);
  request.set_output(spec.output);
  const reference::SelectResult<T> want = reference::Select<T>(
      input, reference::EvaluatePredicate<T>(input, predicate), /*partition=*/false);
  v1::SelectResponse expected;
  if (spec.output != v1::SelectRequest::INDICES && spec.output != v1::SelectRequest::COUNT) {
    *expected.mutable_values() = PackArray<T>(want.values);
  }
  if (spec.output == v1::SelectRequest::INDICES ||
      spec.output == v1::SelectRequest::VALUES_AND_INDICES) {
    *expected.mutable_indices() = PackArray<int64_t>(want.indices);
  }
  expected.set_count(want.count);
  std::function<bool(const v1::SelectResponse&)> check;
  if (workload->verify()) {
    check = [values = Exactly(expected.values()), indices = Exactly(expected.indices()),
             count = want.count](const v1::SelectResponse& r) {
      return values(r.values()) && indices(r.indices()) && r.count() == count;
    };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddUnique(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> input = RandomRuns<T>(spec.n, spec.run_length, rng);
  v1::UniqueRequest request;
  *request.mutable_input() = PackArray<T>(input);
  v1::UniqueResponse expected;
  *expected.mutable_values() = PackArray<T>(reference::Unique<T>(input));
  std::function<bool(const v1::UniqueResponse&)> check;
  if (workload->verify()) {
    check = [values = Exactly(expected.values())](const v1::UniqueResponse& r) {
      return values(r.values());
    };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddRunLengthEncode(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> input = RandomRuns<T>(spec.n, spec.run_length, rng);
  v1::RunLengthEncodeRequest request;
  *request.mutable_input() = PackArray<T>(input);
  const reference::Runs<T> runs = reference::RunLengthEncode<T>(input);
  v1::RunLengthEncodeResponse expected;
  *expected.mutable_values() = PackArray<T>(runs.values);
  *expected.mutable_lengths() = PackArray<int64_t>(runs.lengths);
  std::function<bool(const v1::RunLengthEncodeResponse&)> check;
  if (workload->verify()) {
    check = [values = Exactly(expected.values()),
             lengths = Exactly(expected.lengths())](const v1::RunLengthEncodeResponse& r) {
      return values(r.values()) && lengths(r.lengths());
    };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddReduceByKey(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<int32_t> keys = RunKeys<int32_t>(spec.n, spec.run_length, rng);
  const std::vector<T> values = RandomValues<T>(spec.n, rng);
  v1::ReduceByKeyRequest request;
  *request.mutable_keys() = PackArray<int32_t>(keys);
  *request.mutable_values() = PackArray<T>(values);
  request.set_op(static_cast<v1::Op>(spec.op));
  const auto reduce = [&](auto v) {
    return reference::ReduceByKey(absl::MakeConstSpan(keys), v, spec.op).values;
  };
  const reference::KeyedValues<int32_t, T> want =
      reference::ReduceByKey<int32_t, T>(keys, values, spec.op);
  v1::ReduceByKeyResponse expected;
  *expected.mutable_keys() = PackArray<int32_t>(want.keys);
  *expected.mutable_values() = PackArray<T>(want.values);
  std::function<bool(const v1::ReduceByKeyResponse&)> check;
  if (workload->verify()) {
    check = [keys = Exactly(expected.keys()),
             sums = ResultCheck(values, spec.op, want.values, reduce)](
                const v1::ReduceByKeyResponse& r) { return keys(r.keys()) && sums(r.values()); };
  }
  workload->Add(request, expected, std::move(check));
}

template <typename T>
void AddAggregateByKey(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<int32_t> keys = RandomKeys<int32_t>(spec.n, spec.num_keys, rng);
  const std::vector<T> values = RandomValues<T>(spec.n, rng);
  v1::AggregateByKeyRequest request;
  *request.mutable_keys() = PackArray<int32_t>(keys);
  *request.mutable_values() = PackArray<T>(values);
  request.set_op(static_cast<v1::Op>(spec.op));
  request.set_num_keys(spec.num_keys);
  // The keys are in range and the op is one AggregateByKey takes (ParseOp).
  const auto aggregate = [&](auto v) {
    return *reference::AggregateByKey(absl::MakeConstSpan(keys), v, spec.op, spec.num_keys);
  };
  const std::vector<T> want = aggregate(absl::MakeConstSpan(values));
  v1::AggregateByKeyResponse expected;
  *expected.mutable_values() = PackArray<T>(want);
  std::function<bool(const v1::AggregateByKeyResponse&)> check;
  if (workload->verify()) {
    check = [groups = ResultCheck(values, spec.op, want, aggregate)](
                const v1::AggregateByKeyResponse& r) { return groups(r.values()); };
  }
  workload->Add(request, expected, std::move(check));
}

// Keys only, ascending: the sorted keys must match the reference's bits.
template <typename T>
void AddSort(const RequestSpec& spec, std::mt19937_64& rng, Workload* workload) {
  const std::vector<T> keys = RandomValues<T>(spec.n, rng);
  v1::SortRequest request;
  *request.mutable_keys() = PackArray<T>(keys);
  v1::SortResponse expected;
  *expected.mutable_keys() = PackArray<T>(
      reference::Permute<T>(keys, reference::SortPermutation<T>(keys, /*descending=*/false)));
  std::function<bool(const v1::SortResponse&)> check;
  if (workload->verify()) {
    check = [sorted = Exactly(expected.keys())](const v1::SortResponse& r) {
      return sorted(r.keys());
    };
  }
  workload->Add(request, expected, std::move(check));
}

}  // namespace

void AddRequest(const Options& options, uint32_t index, Workload* workload) {
  std::mt19937_64 rng = SeededRng(options.seed, index);
  VisitDType(options.spec.dtype, [&](auto zero) {
    using T = decltype(zero);
    switch (options.rpc.rpc) {
      case Rpc::kScan:
        return AddScan<T>(options.spec, rng, workload);
      case Rpc::kReduce:
        return AddReduce<T>(options.spec, rng, workload);
      case Rpc::kSelect:
        return AddSelect<T>(options.spec, rng, workload);
      case Rpc::kUnique:
        return AddUnique<T>(options.spec, rng, workload);
      case Rpc::kRunLengthEncode:
        return AddRunLengthEncode<T>(options.spec, rng, workload);
      case Rpc::kReduceByKey:
        return AddReduceByKey<T>(options.spec, rng, workload);
      case Rpc::kAggregateByKey:
        return AddAggregateByKey<T>(options.spec, rng, workload);
      case Rpc::kSort:
        return AddSort<T>(options.spec, rng, workload);
    }
  });
}

}  // namespace primserve
