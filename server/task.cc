#include "server/task.h"

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
              kAt<Rpc::kAggregateByKey, AggregateByKeyOperation>);

int DTypeInt(DType dtype) { return static_cast<int>(dtype); }

}  // namespace

BatchKey BatchKeyOf(const Operation& operation) {
  BatchKey key;
  key.rpc = RpcOf(operation);
  std::visit(
      Overloaded{
          [&](const ScanOperation& o) {
            key.op = static_cast<int>(o.op);
            key.dtype = DTypeInt(o.input.dtype);
            key.detail = o.exclusive;
          },
          [&](const ReduceOperation& o) {
            key.op = static_cast<int>(o.op);
            key.dtype = DTypeInt(o.input.dtype);
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
          },
          [&](const AggregateByKeyOperation& o) {
            key.op = static_cast<int>(o.op);
            key.dtype = DTypeInt(o.keys.dtype);
            key.second_dtype = DTypeInt(o.values.dtype);
          },
      },
      operation);
  return key;
}

uint64_t ItemCount(const Operation& operation) {
  return std::visit(
      Overloaded{
          [](const ReduceByKeyOperation& o) { return o.keys.size(); },
          [](const AggregateByKeyOperation& o) { return o.keys.size(); },
          [](const auto& o) { return o.input.size(); },
      },
      operation);
}

}  // namespace primserve
