// The RPCs of primserve.v1.Primitives, in one table. The server's Operation
// variant, metric labels, backend dispatch and the fuzzer all index by Rpc;
// anything that needs the list of RPCs iterates kAllRpcs.
#ifndef PRIMSERVE_CORE_RPC_H_
#define PRIMSERVE_CORE_RPC_H_

#include <cstddef>

namespace primserve {

enum class Rpc : int {
  kScan,
  kReduce,
  kSelect,
  kUnique,
  kRunLengthEncode,
  kReduceByKey,
  kAggregateByKey,
  kSort,
  kGather,
  kPipeline,
};

inline constexpr Rpc kAllRpcs[] = {Rpc::kScan,           Rpc::kReduce,      Rpc::kSelect,
                                   Rpc::kUnique,         Rpc::kRunLengthEncode,
                                   Rpc::kReduceByKey,    Rpc::kAggregateByKey,
                                   Rpc::kSort,           Rpc::kGather,
                                   Rpc::kPipeline};
inline constexpr size_t kNumRpcs = sizeof(kAllRpcs) / sizeof(kAllRpcs[0]);

inline constexpr size_t RpcIndex(Rpc rpc) { return static_cast<size_t>(rpc); }

// The method's name in primserve.v1.Primitives ("Scan", ...), also the
// metrics' "rpc" label.
inline constexpr const char* RpcName(Rpc rpc) {
  switch (rpc) {
    case Rpc::kScan: return "Scan";
    case Rpc::kReduce: return "Reduce";
    case Rpc::kSelect: return "Select";
    case Rpc::kUnique: return "Unique";
    case Rpc::kRunLengthEncode: return "RunLengthEncode";
    case Rpc::kReduceByKey: return "ReduceByKey";
    case Rpc::kAggregateByKey: return "AggregateByKey";
    case Rpc::kSort: return "Sort";
    case Rpc::kGather: return "Gather";
    case Rpc::kPipeline: return "Pipeline";
  }
  return "unknown";
}

}  // namespace primserve

#endif  // PRIMSERVE_CORE_RPC_H_
