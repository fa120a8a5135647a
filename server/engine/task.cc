#include "server/engine/task.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

namespace primserve {
namespace {

template <Rpc rpc, typename Alternative>
constexpr bool kAt =
    std::is_same_v<std::variant_alternative_t<RpcIndex(rpc), Operation>, Alternative>;
static_assert(std::variant_size_v<Operation> == kNumRpcs);
static_assert(kAt<Rpc::kScan, ScanOperation> && kAt<Rpc::kReduce, ReduceOperation> &&
              kAt<Rpc::kSelect, SelectOperation> && kAt<Rpc::kUnique, UniqueOperation> &&
              kAt<Rpc::kRunLengthEncode, RunLengthEncodeOperation> &&
              kAt<Rpc::kReduceByKey, ReduceByKeyOperation> &&
              kAt<Rpc::kAggregateByKey, AggregateByKeyOperation> &&
              kAt<Rpc::kSort, SortOperation> && kAt<Rpc::kGather, GatherOperation> &&
              kAt<Rpc::kPipeline, PipelineOperation>);
static_assert(std::variant_size_v<Result> == kNumRpcs);

int DTypeInt(DType dtype) { return static_cast<int>(dtype); }

}  // namespace

void HostArray::Truncate(size_t n) {
  if (held != nullptr) {
    held_bytes = std::min(held_bytes, n);
  } else if (n < bytes.size()) {
    bytes.resize(n);
  }
}

void HostArray::RemovePrefix(size_t n) {
  if (held == nullptr) {
    bytes.erase(0, n);
    return;
  }
  n = std::min(n, held_bytes);
  held = std::shared_ptr<char>(held, held.get() + n);  // the same buffer, further in
  held_bytes -= n;
  held_room += n;
}

void HostArray::Prepend(absl::string_view front) {
  if (held == nullptr) {
    bytes.insert(0, front.data(), front.size());
    return;
  }
  if (front.size() <= held_room) {
    held = std::shared_ptr<char>(held, held.get() - front.size());
    std::memcpy(held.get(), front.data(), front.size());
    held_bytes += front.size();
    held_room -= front.size();
    return;
  }
  std::string moved;
  moved.reserve(front.size() + held_bytes);
  moved.append(front.data(), front.size());
  moved.append(held.get(), held_bytes);
  bytes.swap(moved);
  held.reset();
  held_bytes = 0;
  held_room = 0;
}

BatchKey BatchKeyOf(const Operation& operation) {
  BatchKey key;
  key.rpc = RpcOf(operation);
  std::visit(
      Overloaded{
          [&](const ScanOperation& o) {
            key.op = static_cast<int>(o.op);
            key.dtype = DTypeInt(o.input.dtype);
            key.second_dtype = DTypeInt(ValuesDType(o));
            key.detail = o.exclusive;
            key.reproducible = RunsReproducibly(o);
          },
          [&](const ReduceOperation& o) {
            key.op = static_cast<int>(o.op);
            key.dtype = DTypeInt(o.input.dtype);
            key.second_dtype = DTypeInt(ValuesDType(o));
            key.reproducible = RunsReproducibly(o);
          },
          [&](const SelectOperation& o) {
            key.dtype = DTypeInt(o.input.dtype);
            key.second_dtype = o.flags ? DTypeInt(o.flags->dtype) : 0;
            key.op = o.predicate ? static_cast<int>(o.predicate->kind) : 0;
            key.detail = static_cast<int>(o.output) * 2 + o.partition;
            if (o.predicate) {
              key.operand_bits = o.predicate->operand_bits;
              key.upper_bits = o.predicate->upper_bits;
            }
          },
          [&](const UniqueOperation& o) { key.dtype = DTypeInt(o.input.dtype); },
          [&](const RunLengthEncodeOperation& o) { key.dtype = DTypeInt(o.input.dtype); },
          [&](const ReduceByKeyOperation& o) {
            key.op = static_cast<int>(o.op);
            key.dtype = DTypeInt(o.keys.dtype);
            key.second_dtype = DTypeInt(o.values.dtype);
            key.reproducible = o.reproducible && OrderSensitive(o.op, o.values.dtype);
          },
          [&](const AggregateByKeyOperation& o) {
            key.op = static_cast<int>(o.op);
            key.dtype = DTypeInt(o.keys.dtype);
            key.second_dtype = DTypeInt(o.values.dtype);
            key.reproducible = o.reproducible && OrderSensitive(o.op, o.values.dtype);
          },
          [&](const SortOperation& o) {
            key.dtype = DTypeInt(o.keys.dtype);
            key.second_dtype = o.values ? DTypeInt(o.values->dtype) : 0;
            key.detail = o.descending * 2 + o.return_indices;
          },
          [&](const GatherOperation& o) {
            key.dtype = DTypeInt(o.values.dtype);
            key.second_dtype = DTypeInt(o.indices.dtype);
          },
          // Each runs alone, whatever it is batched with.
          [&](const PipelineOperation&) {},
      },
      operation);
  return key;
}

uint64_t ItemCount(const Operation& operation) {
  return std::visit(
      Overloaded{
          [](const ReduceByKeyOperation& o) { return o.keys.size(); },
          [](const AggregateByKeyOperation& o) { return o.keys.size(); },
          [](const SortOperation& o) { return o.keys.size(); },
          [](const GatherOperation& o) { return o.indices.size(); },
          [](const PipelineOperation& o) {
            uint64_t items = 0;
            for (const PipelineStep& step : o.steps) items += ItemCount(step.operation);
            return items;
          },
          [](const auto& o) { return o.input.size(); },
      },
      operation);
}

uint64_t MaxAnswerBytes(const Operation& operation) {
  constexpr uint64_t kIndex = sizeof(int64_t);  // indices and lengths are INT64
  auto bytes = [](uint64_t n, uint64_t each) {
    // Saturates: no request is near 2^64 bytes, but num_keys is the client's.
    return each != 0 && n > UINT64_MAX / each ? UINT64_MAX : n * each;
  };
  return std::visit(
      Overloaded{
          [&](const ScanOperation& o) { return bytes(o.input.size(), DTypeSize(ValuesDType(o))); },
          [&](const ReduceOperation& o) {
            const uint64_t segments = std::max<uint64_t>(1, o.segment_offsets.size());
            const bool arg = o.op == Op::kArgMin || o.op == Op::kArgMax;
            return bytes(segments, DTypeSize(ValuesDType(o)) + (arg ? kIndex : 0));
          },
          [&](const SelectOperation& o) {
            const uint64_t n = o.input.size();
            uint64_t each = 0;
            if (o.output == SelectOutput::kValues || o.output == SelectOutput::kValuesAndIndices) {
              each += DTypeSize(o.input.dtype);
            }
            if (o.output == SelectOutput::kIndices || o.output == SelectOutput::kValuesAndIndices) {
              each += kIndex;
            }
            return bytes(n, each);
          },
          [&](const UniqueOperation& o) { return o.input.bytes.size(); },
          [&](const RunLengthEncodeOperation& o) {
            return bytes(o.input.size(), DTypeSize(o.input.dtype) + kIndex);
          },
          [&](const ReduceByKeyOperation& o) {
            return o.keys.bytes.size() + o.values.bytes.size();
          },
          [&](const AggregateByKeyOperation& o) {
            return bytes(o.num_keys, DTypeSize(o.values.dtype));
          },
          [&](const SortOperation& o) {
            return o.keys.bytes.size() + (o.values ? o.values->bytes.size() : 0) +
                   (o.return_indices ? bytes(o.keys.size(), kIndex) : 0);
          },
          [&](const GatherOperation& o) {
            return bytes(o.indices.size(), DTypeSize(o.values.dtype));
          },
          [&](const PipelineOperation& o) {
            uint64_t total = 0;
            for (const PipelineStep& step : o.steps) {
              if (!step.returned) continue;
              total = SaturatingAdd(total, MaxAnswerBytes(step.operation));
            }
            return total;
          },
      },
      operation);
}

}  // namespace primserve
