#include "server/task.h"

namespace primserve {
namespace {

int DTypeInt(DType dtype) { return static_cast<int>(dtype); }

}  // namespace

BatchKey BatchKeyOf(const Operation& operation) {
  BatchKey key;
  key.rpc = operation.index();
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

const char* RpcName(const Operation& operation) {
  static constexpr const char* kNames[] = {"Scan",   "Reduce",          "Select",
                                           "Unique", "RunLengthEncode", "ReduceByKey",
                                           "AggregateByKey"};
  static_assert(std::size(kNames) == std::variant_size_v<Operation>);
  return kNames[operation.index()];
}

}  // namespace primserve
