// primload's run, as its command line describes it: what each request holds,
// how the calls go out, and the load levels.
#ifndef PRIMSERVE_CLIENT_LOADGEN_OPTIONS_H_
#define PRIMSERVE_CLIENT_LOADGEN_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/primitives.h"
#include "core/rpc.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {

enum class Mode { kPrimitive, kEcho, kBoth };

// Where the requests' arrays go: in the messages, in a POSIX shared-memory
// region (--shm) or in device memory registered by CUDA IPC (--cuda_shm).
enum class Placement { kInline, kSystem, kCuda };

struct RpcInfo {
  Rpc rpc;
  absl::string_view flag;  // --rpc value
  std::vector<Op> ops;     // those it takes; empty: it takes none
};

// What every request of the run shares, from the flags.
struct RequestSpec {
  DType dtype = DType::kInt32;
  Op op = Op::kSum;
  size_t n = 0;
  int segments = 1;
  PredicateKind predicate = PredicateKind::kGt;
  double operand = 0;
  v1::SelectRequest::Output output = v1::SelectRequest::VALUES;
  double run_length = 4;
  int64_t num_keys = 16;
};

struct Options {
  std::string address;
  RpcInfo rpc;
  Mode mode = Mode::kPrimitive;
  RequestSpec spec;
  int distinct_requests = 0;
  uint64_t seed = 0;
  bool open_loop = false;  // levels are rates, else concurrencies
  std::vector<double> levels;
  int max_outstanding = 0;
  int channels = 0;
  bool multiplex = false;  // primitive calls as requests on Multiplex streams
  uint64_t stream_piece_bytes = 0;  // 0: unary calls
  absl::Duration warmup;
  absl::Duration measure;
  absl::Duration timeout;
  int verify_every = 0;  // 0: no verification
  std::string csv;
  Placement placement = Placement::kInline;
  bool in_place = false;  // a scan's output over its input
  int cuda_device = 0;
};

// The options the flags give, or INVALID_ARGUMENT saying which flag is wrong.
// `cuda_build`: this binary can place arrays in device memory (--cuda_shm).
absl::StatusOr<Options> ParseOptions(bool cuda_build);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_OPTIONS_H_
