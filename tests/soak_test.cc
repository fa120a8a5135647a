// Reliability (issue #6) against a real in-process primserve with batching on:
// - Soak: --callers concurrent callers send a random mix of every RPC, dtype
//   and size for --soak_seconds, unary, through the streaming RPCs in random
//   pieces and in bursts on Multiplex streams; every answer is checked against
//   the CPU reference, none may fail, and the process's resident memory, settled
//   with no calls running, must be at the end what it was after a warm-up.
// - Callers that leave mid-request (cancelled, deadline, channel dropped,
//   connection cut): afterwards the server's own gauges (requests in flight,
//   queue depth, GPU pool in use) are back at their baseline, it still
//   answers correctly, and memory did not grow.
// - Resident buffers: callers put, name, store into, read back, replace and
//   free buffers asking far more than the quota; answers are checked, the
//   quota is the only refusal and bounds the buffers' bytes and the RSS.
// --backend=cuda runs both on the CUDA backend: copy the (statically linked)
// binary to a GPU machine. CI runs --backend=cpu.
#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/buffers_client.h"
#include "client/client.h"
#include "client/pipeline.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/create_channel_posix.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "reference/reference.h"
#include "reference/sort.h"
#include "server/cpu/cpu_backend.h"
#include "server/cuda/cuda_backend.h"
#include "server/engine/metrics.h"
#include "server/server.h"
#include "tests/array_diff.h"
#include "tests/http_testing.h"
#include "tests/stream_calls.h"

ABSL_FLAG(int, soak_seconds, 30, "How long the soak test sends load, in seconds.");
ABSL_FLAG(std::string, backend, "cpu", "Execution backend under test: cpu or cuda.");
ABSL_FLAG(int, callers, 16, "Concurrent callers, each with a connection of its own.");

namespace primserve {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(60);

// Float SUM and PROD are compared within tests/array_diff.h's tolerance:
// sums of the values generated below are exact in any order, and products of
// 4M float32 factors differ by about 1e-4.

// Resident memory: the soak's after its warm-up, and the leave test's after
// its first round, may grow by at most the larger of these.
constexpr double kRssGrowthFraction = 0.10;
constexpr double kRssGrowthMib = 64;

constexpr DType kDTypes[] = {DType::kInt32,  DType::kInt64,   DType::kUint32,
                             DType::kUint64, DType::kFloat32, DType::kFloat64};

// The process's resident set (VmRSS), in MiB.
double RssMib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  }
  return -1;
}

// The resident set once the allocator has returned the free pages it keeps
// between its live chunks, so that it counts what is live. Taken with no
// calls running.
double SettledRssMib() {
  malloc_trim(0);
  return RssMib();
}

struct MibFormatter {
  void operator()(std::string* out, double mib) const { absl::StrAppendFormat(out, "%.0f", mib); }
};

absl::StatusOr<std::unique_ptr<ExecutionBackend>> MakeBackend(Metrics* metrics) {
  const std::string backend = absl::GetFlag(FLAGS_backend);
  if (backend == "cpu") return std::unique_ptr<ExecutionBackend>(new CpuBackend(metrics));
  if (backend != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("--backend=", backend, " is not cpu or cuda"));
  }
  if (VisibleCudaDevices() == 0) {
    return absl::FailedPreconditionError(
        "--backend=cuda, but no CUDA device is visible (no GPU, or no NVIDIA driver)");
  }
  CudaBackendOptions options;
  // One device, so that its pool_in_use gauge is set by every batch (see the
  // leave test).
  options.devices = {0};
  options.metrics = metrics;
  absl::StatusOr<std::unique_ptr<CudaBackend>> cuda = CudaBackend::Create(options);
  if (!cuda.ok()) return cuda.status();
  std::printf("GPU: %s\n", (*cuda)->device_names().c_str());
  return std::unique_ptr<ExecutionBackend>(*std::move(cuda));
}

// A server on a free loopback port, with the default (batching) options but
// one: the soak's 16 callers share one address, which admission takes for one
// caller, and their Multiplex streams together read ahead past one caller's
// default bound on waiting bytes (a bound the hostile tests check).
absl::StatusOr<std::unique_ptr<PrimServer>> StartServer(Metrics* metrics) {
  absl::StatusOr<std::unique_ptr<ExecutionBackend>> backend = MakeBackend(metrics);
  if (!backend.ok()) return backend.status();
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.metrics = metrics;
  options.admission.max_peer_queued_bytes = uint64_t{16} << 30;
  return PrimServer::Start(options, *std::move(backend));
}

grpc::ChannelArguments OwnConnectionArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  // gRPC shares connections between channels to one target unless told not to.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

std::shared_ptr<grpc::Channel> OwnChannel(int port) {
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials(), OwnConnectionArgs());
}

// A channel over a socket of our own, which can be shut down under its calls
// (`fd` stays open until the channel is destroyed); null if connect fails.
std::shared_ptr<grpc::Channel> ChannelOverSocket(int port, int* fd) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  if (*fd < 0) return nullptr;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(*fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(*fd);
    return nullptr;
  }
  return grpc::CreateCustomInsecureChannelFromFd(absl::StrCat("127.0.0.1:", port), *fd,
                                                 OwnConnectionArgs());
}

// VisitDType over the integer dtypes only (flags, AggregateByKey keys).
template <typename F>
decltype(auto) VisitIntegerDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kUint32: return f(uint32_t{});
    default: break;
  }
  return f(uint64_t{});
}

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  uint64_t Below(uint64_t n) { return rng_() % n; }
  bool OneIn(uint64_t n) { return Below(n) == 0; }
  double Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::mt19937_64& engine() { return rng_; }

  // Mostly small requests, which the batcher fuses; one in eight of up to 1M
  // elements and one in 200 of 2M to 4M, which run alone.
  uint64_t Size() {
    const uint64_t pick = Below(1000);
    if (pick < 5) return (uint64_t{1} << 21) + Below(uint64_t{1} << 21);
    if (pick < 130) return 4097 + Below(uint64_t{1} << 20);
    return 1 + Below(4096);
  }

  // Fresh values. Floats are nonzero multiples of 1/4 with |x| * n < 2^22
  // (more distinct values in shorter arrays), so that every partial sum, in
  // any order, is exact in float32; all positive, all negative or of either
  // sign, with 0.0 and -0.0 now and then (the extreme, where they tie) and,
  // in one request in eight, a NaN. (Sums of millions of values with more bits
  // round at every step, and a left fold's error then differs from a tree's
  // by tenths of a percent.) For PROD: odd integers, whose products never
  // wrap to 0, and floats e^u, u uniform in [-0.01, 0.01): products of
  // millions neither overflow nor underflow (no inf * 0, whose NaN would
  // depend on the order), and with full mantissas they round without bias,
  // where factors like 1 + k/4096 lose their cross terms at every level of a
  // tree, 0.25% over 1M float32 factors.
  template <typename T>
  std::vector<T> Values(uint64_t n, bool for_prod = false) {
    const uint64_t distinct = OneIn(2) ? 1 + Below(4) : 1000 + Below(4);
    const bool wide = OneIn(4);  // integers over their whole range: sums wrap
    const bool nans = OneIn(8);
    // Quarters: |x| <= quarters / 4 and n * quarters < 2^24 (n < 2^22 here).
    const uint64_t quarters = std::min(distinct, (uint64_t{1} << 24) / n - 1);
    const uint64_t signs = Below(3);  // +, -, either
    std::vector<T> values(n);
    for (T& v : values) {
      if constexpr (std::is_floating_point_v<T>) {
        const uint64_t pick = Below(1000);
        if (nans && pick == 0) {
          v = std::numeric_limits<T>::quiet_NaN();
        } else if (for_prod) {
          v = static_cast<T>(std::exp(0.02 * (Uniform() - 0.5)));
        } else if (pick == 1 || pick == 2) {
          v = pick == 1 ? T(-0.0) : T(0.0);
        } else {
          const bool negative = signs == 2 ? OneIn(2) : signs == 1;
          v = T(1 + Below(quarters)) / T(negative ? -4 : 4);
        }
      } else if (for_prod) {
        v = static_cast<T>(rng_() | 1);
      } else if (wide) {
        v = static_cast<T>(rng_());
      } else {
        v = static_cast<T>(Below(distinct)) - (std::is_signed_v<T> ? T(distinct / 2) : T(0));
      }
    }
    return values;
  }

  // Runs of equal values, drawn from a few, so that neighbouring runs often
  // merge; for floats sometimes 0.0, -0.0 and NaN too (runs compare bits).
  template <typename T>
  std::vector<T> Runs(uint64_t n) {
    std::vector<T> alphabet = Values<T>(1 + Below(4));
    if constexpr (std::is_floating_point_v<T>) {
      if (OneIn(4)) {
        alphabet.insert(alphabet.end(),
                        {T(0.0), T(-0.0), std::numeric_limits<T>::quiet_NaN()});
      }
    }
    const uint64_t longest = OneIn(2) ? 4 : 300;
    std::vector<T> values;
    values.reserve(n);
    while (values.size() < n) {
      const T v = alphabet[Below(alphabet.size())];
      values.insert(values.end(), std::min<uint64_t>(n - values.size(), 1 + Below(longest)), v);
    }
    return values;
  }

  template <typename F>
  std::vector<F> Flags(uint64_t n) {
    const uint64_t kept_in_4 = Below(5);
    std::vector<F> flags(n);
    for (F& f : flags) f = Below(4) < kept_in_4 ? static_cast<F>(rng_() | 1) : F(0);
    return flags;
  }

  template <typename K>
  std::vector<K> KeysBelow(uint64_t n, uint64_t num_keys) {
    std::vector<K> keys(n);
    for (K& k : keys) k = static_cast<K>(Below(num_keys));
    return keys;
  }

  // None (one segment), or segment starts with empty segments among them.
  std::vector<uint64_t> Segments(uint64_t n) {
    std::vector<uint64_t> starts;
    if (OneIn(2)) return starts;
    starts.push_back(0);
    for (uint64_t i = Below(1 + std::min<uint64_t>(n, 64)); i > 0; --i) {
      starts.push_back(Below(n + 1));
    }
    std::sort(starts.begin(), starts.end());
    return starts;
  }

 private:
  std::mt19937_64 rng_;
};

template <typename Request, typename Response>
struct Exchange {
  Request request;
  Response expected;
};

// Alternatives in the order of the service's RPCs (and of core/rpc.h).
using AnyExchange = std::variant<Exchange<v1::ScanRequest, v1::ScanResponse>,
                                 Exchange<v1::ReduceRequest, v1::ReduceResponse>,
                                 Exchange<v1::SelectRequest, v1::SelectResponse>,
                                 Exchange<v1::UniqueRequest, v1::UniqueResponse>,
                                 Exchange<v1::RunLengthEncodeRequest, v1::RunLengthEncodeResponse>,
                                 Exchange<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>,
                                 Exchange<v1::AggregateByKeyRequest, v1::AggregateByKeyResponse>,
                                 Exchange<v1::SortRequest, v1::SortResponse>,
                                 Exchange<v1::GatherRequest, v1::GatherResponse>,
                                 Exchange<v1::PipelineRequest, v1::PipelineResponse>>;

// A random request with the CPU reference's answer to it.
struct Case {
  AnyExchange exchange;
  // Float results that may be reassociated: SUM and PROD (fused batches and
  // parallel trees fold in another order) and AggregateByKey's (atomics).
  bool tolerant = false;
  uint64_t elements = 0;
  std::string kind;  // RPC, dtypes, op...: failures are counted by kind
  std::string size;  // elements, segments...

  std::string what() const { return absl::StrCat(kind, " ", size); }
};

bool Reassociated(Op op, DType dtype) {
  return !IsIntegerDType(dtype) && (op == Op::kSum || op == Op::kProd);
}

std::string Kind(size_t rpc, DType dtype, const std::string& detail) {
  return absl::StrCat(RpcName(kAllRpcs[rpc]), " ", DTypeName(dtype), detail);
}

std::string Size(uint64_t n, size_t segments) {
  return absl::StrCat("n=", n, " segments=", segments);
}

Case ScanCase(Generator& gen, DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    const Op op = static_cast<Op>(1 + gen.Below(4));
    const bool exclusive = gen.OneIn(2);
    const std::vector<T> input = gen.Values<T>(n, op == Op::kProd);
    const std::vector<uint64_t> segments = gen.Segments(n);
    Exchange<v1::ScanRequest, v1::ScanResponse> e;
    *e.request.mutable_input() = PackArray<T>(input);
    e.request.set_op(static_cast<v1::Op>(op));
    e.request.set_exclusive(exclusive);
    e.request.mutable_segment_offsets()->Add(segments.begin(), segments.end());
    *e.expected.mutable_output() =
        PackArray<T>(reference::Scan<T>(input, op, exclusive, segments));
    return Case{std::move(e), Reassociated(op, dtype), n,
                Kind(0, dtype, absl::StrCat(" ", OpName(op), exclusive ? " exclusive" : "")),
                Size(n, segments.size())};
  });
}

Case ReduceCase(Generator& gen, DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    const Op op = static_cast<Op>(1 + gen.Below(6));
    const std::vector<T> input = gen.Values<T>(n, op == Op::kProd);
    const std::vector<uint64_t> segments = gen.Segments(n);
    Exchange<v1::ReduceRequest, v1::ReduceResponse> e;
    *e.request.mutable_input() = PackArray<T>(input);
    e.request.set_op(static_cast<v1::Op>(op));
    e.request.mutable_segment_offsets()->Add(segments.begin(), segments.end());
    reference::ReduceResult<T> want = reference::Reduce<T>(input, op, segments);
    *e.expected.mutable_values() = PackArray<T>(want.values);
    if (op == Op::kArgMin || op == Op::kArgMax) {
      *e.expected.mutable_indices() = PackArray<int64_t>(want.indices);
    }
    return Case{std::move(e), Reassociated(op, dtype), n,
                Kind(1, dtype, absl::StrCat(" ", OpName(op))), Size(n, segments.size())};
  });
}

Case SelectCase(Generator& gen, DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> input = gen.Values<T>(n);
    Exchange<v1::SelectRequest, v1::SelectResponse> e;
    *e.request.mutable_input() = PackArray<T>(input);
    std::vector<bool> keep;
    std::string criterion;
    if (gen.OneIn(2)) {
      const DType flag_dtype = kDTypes[gen.Below(4)];
      keep = VisitIntegerDType(flag_dtype, [&](auto flag_zero) {
        using F = decltype(flag_zero);
        const std::vector<F> flags = gen.Flags<F>(n);
        *e.request.mutable_flags() = PackArray<F>(flags);
        return reference::EvaluateFlags<F>(flags);
      });
      criterion = absl::StrCat(" flags ", DTypeName(flag_dtype));
    } else {
      Predicate<T> predicate;
      predicate.kind = static_cast<PredicateKind>(1 + gen.Below(8));
      predicate.operand = input[gen.Below(n)];
      predicate.upper = input[gen.Below(n)];
      if (predicate.upper < predicate.operand) std::swap(predicate.upper, predicate.operand);
      v1::Predicate* p = e.request.mutable_predicate();
      p->set_kind(static_cast<v1::Predicate::Kind>(predicate.kind));
      *p->mutable_operand() = ScalarOf(predicate.operand);
      *p->mutable_upper() = ScalarOf(predicate.upper);
      keep = reference::EvaluatePredicate<T>(input, predicate);
      criterion = absl::StrCat(" ", PredicateKindName(predicate.kind));
    }
    const auto output = static_cast<v1::SelectRequest::Output>(1 + gen.Below(4));
    const bool partition = gen.OneIn(3);
    e.request.set_output(output);
    e.request.set_partition(partition);
    reference::SelectResult<T> want = reference::Select<T>(input, keep, partition);
    if (output == v1::SelectRequest::VALUES || output == v1::SelectRequest::VALUES_AND_INDICES) {
      *e.expected.mutable_values() = PackArray<T>(want.values);
    }
    if (output == v1::SelectRequest::INDICES || output == v1::SelectRequest::VALUES_AND_INDICES) {
      *e.expected.mutable_indices() = PackArray<int64_t>(want.indices);
    }
    e.expected.set_count(want.count);
    return Case{std::move(e), false, n,
                Kind(2, dtype,
                     absl::StrCat(criterion, " output ", v1::SelectRequest::Output_Name(output),
                                  partition ? " partition" : "")),
                absl::StrCat("n=", n)};
  });
}

Case UniqueCase(Generator& gen, DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> input = gen.Runs<T>(n);
    Exchange<v1::UniqueRequest, v1::UniqueResponse> e;
    *e.request.mutable_input() = PackArray<T>(input);
    *e.expected.mutable_values() = PackArray<T>(reference::Unique<T>(input));
    return Case{std::move(e), false, n, Kind(3, dtype, ""), absl::StrCat("n=", n)};
  });
}

Case RunLengthEncodeCase(Generator& gen, DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> input = gen.Runs<T>(n);
    Exchange<v1::RunLengthEncodeRequest, v1::RunLengthEncodeResponse> e;
    *e.request.mutable_input() = PackArray<T>(input);
    reference::Runs<T> want = reference::RunLengthEncode<T>(input);
    *e.expected.mutable_values() = PackArray<T>(want.values);
    *e.expected.mutable_lengths() = PackArray<int64_t>(want.lengths);
    return Case{std::move(e), false, n, Kind(4, dtype, ""), absl::StrCat("n=", n)};
  });
}

Case ReduceByKeyCase(Generator& gen, DType key_dtype, uint64_t n) {
  const DType value_dtype = kDTypes[gen.Below(6)];
  const Op op = static_cast<Op>(1 + gen.Below(4));
  return VisitDType(key_dtype, [&](auto key_zero) {
    using K = decltype(key_zero);
    return VisitDType(value_dtype, [&](auto value_zero) {
      using V = decltype(value_zero);
      const std::vector<K> keys = gen.Runs<K>(n);
      const std::vector<V> values = gen.Values<V>(n, op == Op::kProd);
      Exchange<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse> e;
      *e.request.mutable_keys() = PackArray<K>(keys);
      *e.request.mutable_values() = PackArray<V>(values);
      e.request.set_op(static_cast<v1::Op>(op));
      reference::KeyedValues<K, V> want = reference::ReduceByKey<K, V>(keys, values, op);
      *e.expected.mutable_keys() = PackArray<K>(want.keys);
      *e.expected.mutable_values() = PackArray<V>(want.values);
      return Case{std::move(e), Reassociated(op, value_dtype), n,
                  Kind(5, key_dtype, absl::StrCat(" values ", DTypeName(value_dtype), " ",
                                                  OpName(op))),
                  absl::StrCat("n=", n)};
    });
  });
}

Case AggregateByKeyCase(Generator& gen, DType value_dtype, uint64_t n) {
  const DType key_dtype = kDTypes[gen.Below(4)];
  const Op ops[] = {Op::kSum, Op::kMin, Op::kMax};
  const Op op = ops[gen.Below(3)];
  const uint64_t num_keys = gen.OneIn(2) ? 1 + gen.Below(300) : 1 + gen.Below(100000);
  return VisitIntegerDType(key_dtype, [&](auto key_zero) {
    using K = decltype(key_zero);
    return VisitDType(value_dtype, [&](auto value_zero) {
      using V = decltype(value_zero);
      const std::vector<K> keys = gen.KeysBelow<K>(n, num_keys);
      const std::vector<V> values = gen.Values<V>(n);
      Exchange<v1::AggregateByKeyRequest, v1::AggregateByKeyResponse> e;
      *e.request.mutable_keys() = PackArray<K>(keys);
      *e.request.mutable_values() = PackArray<V>(values);
      e.request.set_op(static_cast<v1::Op>(op));
      e.request.set_num_keys(num_keys);
      // Every key is below num_keys, so the reference answers.
      *e.expected.mutable_values() =
          PackArray<V>(reference::AggregateByKey<K, V>(keys, values, op, num_keys).value());
      return Case{std::move(e), !IsIntegerDType(value_dtype), n,
                  Kind(6, value_dtype,
                       absl::StrCat(" keys ", DTypeName(key_dtype), " ", OpName(op))),
                  absl::StrCat("n=", n, " num_keys=", num_keys)};
    });
  });
}

Case SortCase(Generator& gen, DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> keys = gen.Values<T>(n);
    const bool descending = gen.OneIn(2);
    Exchange<v1::SortRequest, v1::SortResponse> e;
    *e.request.mutable_keys() = PackArray<T>(keys);
    e.request.set_descending(descending);
    e.request.set_return_indices(true);
    const std::vector<int64_t> order = reference::SortPermutation<T>(keys, descending);
    *e.expected.mutable_keys() = PackArray<T>(reference::Permute<T>(keys, order));
    *e.expected.mutable_indices() = PackArray<int64_t>(order);
    return Case{std::move(e), false, n, Kind(7, dtype, descending ? " descending" : ""),
                absl::StrCat("n=", n)};
  });
}

Case GatherCase(Generator& gen, DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> values = gen.Values<T>(n);
    const std::vector<int64_t> indices =
        n == 0 ? std::vector<int64_t>{} : gen.KeysBelow<int64_t>(n / 2 + 1, n);
    std::vector<T> expected;
    for (int64_t i : indices) expected.push_back(values[i]);
    Exchange<v1::GatherRequest, v1::GatherResponse> e;
    *e.request.mutable_values() = PackArray<T>(values);
    *e.request.mutable_indices() = PackArray<int64_t>(indices);
    *e.expected.mutable_output() = PackArray<T>(expected);
    return Case{std::move(e), false, n, Kind(8, dtype, ""), absl::StrCat("n=", n)};
  });
}

// The filtered group-by: the rows flagged, their keys and values gathered,
// the values aggregated by key, only the last step returned.
Case PipelineCase(Generator& gen, DType dtype, uint64_t n) {
  const Op ops[] = {Op::kSum, Op::kMin, Op::kMax};
  const Op op = ops[gen.Below(3)];
  const uint64_t num_keys = 1 + gen.Below(500);
  return VisitDType(dtype, [&](auto zero) {
    using V = decltype(zero);
    const std::vector<int32_t> flags = gen.KeysBelow<int32_t>(n, 2);
    const std::vector<int32_t> keys = gen.KeysBelow<int32_t>(n, num_keys);
    const std::vector<V> values = gen.Values<V>(n);
    std::vector<int32_t> kept_keys;
    std::vector<V> kept_values;
    for (uint64_t i = 0; i < n; ++i) {
      if (flags[i] == 0) continue;
      kept_keys.push_back(keys[i]);
      kept_values.push_back(values[i]);
    }
    Exchange<v1::PipelineRequest, v1::PipelineResponse> e;
    v1::SelectRequest* select = e.request.add_steps()->mutable_select();
    *select->mutable_input() = PackArray<int32_t>(flags);
    *select->mutable_flags() = PackArray<int32_t>(flags);
    select->set_output(v1::SelectRequest::INDICES);
    v1::GatherRequest* k = e.request.add_steps()->mutable_gather();
    *k->mutable_values() = PackArray<int32_t>(keys);
    *k->mutable_indices() = PipelineBuilder::Output(0, v1::StepOutput::INDICES);
    v1::GatherRequest* v = e.request.add_steps()->mutable_gather();
    *v->mutable_values() = PackArray<V>(values);
    *v->mutable_indices() = PipelineBuilder::Output(0, v1::StepOutput::INDICES);
    v1::PipelineStep* group = e.request.add_steps();
    group->set_returned(true);
    v1::AggregateByKeyRequest* aggregate = group->mutable_aggregate_by_key();
    *aggregate->mutable_keys() = PipelineBuilder::Output(1, v1::StepOutput::VALUES);
    *aggregate->mutable_values() = PipelineBuilder::Output(2, v1::StepOutput::VALUES);
    aggregate->set_op(static_cast<v1::Op>(op));
    aggregate->set_num_keys(num_keys);
    v1::PipelineResult* result = e.expected.add_results();
    result->set_step(3);
    *result->mutable_aggregate_by_key()->mutable_values() = PackArray<V>(
        reference::AggregateByKey<int32_t, V>(kept_keys, kept_values, op, num_keys).value());
    return Case{std::move(e), !IsIntegerDType(dtype), n,
                Kind(9, dtype, absl::StrCat(" select-gather-aggregate ", OpName(op))),
                absl::StrCat("n=", n, " num_keys=", num_keys)};
  });
}

Case MakeCase(Generator& gen, size_t rpc, uint64_t n) {
  const DType dtype = kDTypes[gen.Below(6)];
  switch (rpc) {
    case 0: return ScanCase(gen, dtype, n);
    case 1: return ReduceCase(gen, dtype, n);
    case 2: return SelectCase(gen, dtype, n);
    case 3: return UniqueCase(gen, dtype, n);
    case 4: return RunLengthEncodeCase(gen, dtype, n);
    case 5: return ReduceByKeyCase(gen, dtype, n);
    case 7: return SortCase(gen, dtype, n);
    case 8: return GatherCase(gen, dtype, n);
    case 9: return PipelineCase(gen, dtype, n);
    default: break;
  }
  return AggregateByKeyCase(gen, dtype, n);
}

std::string Diff(const v1::ScanResponse& got, const v1::ScanResponse& want, bool tolerant) {
  return ArrayDiff("output", got.output(), want.output(), tolerant);
}
std::string Diff(const v1::ReduceResponse& got, const v1::ReduceResponse& want, bool tolerant) {
  return absl::StrCat(ArrayDiff("values", got.values(), want.values(), tolerant),
                      ArrayDiff("indices", got.indices(), want.indices(), false));
}
std::string Diff(const v1::SelectResponse& got, const v1::SelectResponse& want, bool) {
  return absl::StrCat(ArrayDiff("values", got.values(), want.values(), false),
                      ArrayDiff("indices", got.indices(), want.indices(), false),
                      got.count() == want.count()
                          ? ""
                          : absl::StrCat("count ", got.count(), ", want ", want.count()));
}
std::string Diff(const v1::UniqueResponse& got, const v1::UniqueResponse& want, bool) {
  return ArrayDiff("values", got.values(), want.values(), false);
}
std::string Diff(const v1::RunLengthEncodeResponse& got, const v1::RunLengthEncodeResponse& want,
                 bool) {
  return absl::StrCat(ArrayDiff("values", got.values(), want.values(), false),
                      ArrayDiff("lengths", got.lengths(), want.lengths(), false));
}
std::string Diff(const v1::ReduceByKeyResponse& got, const v1::ReduceByKeyResponse& want,
                 bool tolerant) {
  return absl::StrCat(ArrayDiff("keys", got.keys(), want.keys(), false),
                      ArrayDiff("values", got.values(), want.values(), tolerant));
}
std::string Diff(const v1::AggregateByKeyResponse& got, const v1::AggregateByKeyResponse& want,
                 bool tolerant) {
  return ArrayDiff("values", got.values(), want.values(), tolerant);
}
std::string Diff(const v1::SortResponse& got, const v1::SortResponse& want, bool) {
  return absl::StrCat(ArrayDiff("keys", got.keys(), want.keys(), false),
                      ArrayDiff("indices", got.indices(), want.indices(), false));
}
std::string Diff(const v1::GatherResponse& got, const v1::GatherResponse& want, bool) {
  return ArrayDiff("output", got.output(), want.output(), false);
}
// Pipelines here return one AggregateByKey step.
std::string Diff(const v1::PipelineResponse& got, const v1::PipelineResponse& want,
                 bool tolerant) {
  if (got.results_size() != 1 || got.results(0).step() != want.results(0).step() ||
      !got.results(0).has_aggregate_by_key()) {
    return absl::StrCat("results ", got.ShortDebugString().substr(0, 200), ", want step ",
                        want.results(0).step(), "'s aggregate_by_key");
  }
  return Diff(got.results(0).aggregate_by_key(), want.results(0).aggregate_by_key(), tolerant);
}

// Wrong answers or failed calls, counted by kind, with the first of each
// kind described.
class Failures {
 public:
  void Add(const std::string& kind, const std::string& first) {
    absl::MutexLock lock(&mu_);
    ++count_;
    ++by_kind_.try_emplace(kind, 0, first).first->second.first;
  }
  int count() const {
    absl::MutexLock lock(&mu_);
    return count_;
  }
  std::string Described() const {
    absl::MutexLock lock(&mu_);
    std::string out;
    for (const auto& [kind, seen] : by_kind_) {
      absl::StrAppend(&out, "\n", seen.first, " x ", kind, ", first: ", seen.second);
    }
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::pair<int, std::string>> by_kind_ ABSL_GUARDED_BY(mu_);
};

// One small request of each RPC; their failures described, empty when all
// were answered correctly.
std::string CheckOneOfEach(PrimitivesClient& client, uint64_t seed) {
  Generator gen(seed);
  std::string failures;
  for (size_t rpc = 0; rpc < kNumRpcs; ++rpc) {
    Case c = MakeCase(gen, rpc, 1000);
    std::visit(
        [&](const auto& exchange) {
          auto got = client.Call(exchange.request);
          if (!got.ok()) {
            absl::StrAppend(&failures, c.what(), ": ", got.status().ToString(), "\n");
          } else if (std::string diff = Diff(*got, exchange.expected, c.tolerant);
                     !diff.empty()) {
            absl::StrAppend(&failures, c.what(), ": ", diff, "\n");
          }
        },
        c.exchange);
  }
  return failures;
}

// The server's figures, scraped from its /metrics.
struct Gauges {
  double in_flight = -1;
  double queue_depth = -1;
  double pool_in_use = -1;  // device 0's; -1 without the CUDA backend
  double dropped_cancelled = -1;
  double dropped_deadline = -1;
  double batches = -1;
  // Page-locked host memory the payload and answer pools and the CUDA
  // lanes' staging keep (0 without them), in MiB: bounded by the options,
  // and kept by design.
  double pinned_mib = 0;
};

Gauges Scrape(int port) {
  Gauges gauges;
  absl::StatusOr<testing::HttpResponse> scrape = testing::HttpGet(port, "/metrics");
  if (!scrape.ok() || scrape->status != 200) return gauges;
  auto sample = [&](absl::string_view series) {
    return testing::SampleValue(scrape->body, series).value_or(-1);
  };
  gauges.in_flight = sample("primserve_requests_in_flight");
  gauges.queue_depth = sample("primserve_queue_depth");
  gauges.pool_in_use = sample(R"(primserve_gpu_memory_bytes{device="0",kind="pool_in_use"})");
  gauges.dropped_cancelled = sample(R"(primserve_rejections_total{reason="cancelled"})");
  gauges.dropped_deadline = sample(R"(primserve_rejections_total{reason="deadline"})");
  gauges.batches = sample("primserve_batches_total");
  for (const char* pool : {"payloads", "answers", "lane_staging"}) {
    const double pinned = sample(absl::StrCat(R"(primserve_pinned_host_bytes{kind="pinned",pool=")",
                                              pool, R"("})"));
    if (pinned > 0) gauges.pinned_mib += pinned / (1 << 20);
  }
  return gauges;
}

bool UsesCuda() { return absl::GetFlag(FLAGS_backend) == "cuda"; }

// How a soak caller sends a request: as a unary call, through its *Stream
// RPC in random pieces, or among a burst of requests on one Multiplex stream.
enum class Path { kUnary, kStream, kMultiplex };
constexpr int kNumPaths = 3;
constexpr const char* kPathNames[kNumPaths] = {"unary", "stream", "multiplex"};

// What the soak's callers got right and wrong.
struct Tally {
  std::array<std::atomic<int64_t>, kNumRpcs> by_rpc{};
  std::array<std::atomic<int64_t>, kNumPaths> by_path{};
  std::atomic<uint64_t> elements{0};
  Failures wrong;
  Failures errors;

  template <typename Response>
  void Check(const Case& c, size_t rpc, Path path, const grpc::Status& status,
             const Response& got, const Response& want) {
    const std::string kind = absl::StrCat(kPathNames[static_cast<int>(path)], " ", c.kind);
    if (!status.ok()) {
      errors.Add(kind, absl::StrCat(c.size, ": ", status.error_message()));
    } else if (std::string diff = Diff(got, want, c.tolerant); !diff.empty()) {
      wrong.Add(kind, absl::StrCat(c.size, ": ", diff));
    } else {
      ++by_rpc[rpc];
      ++by_path[static_cast<int>(path)];
      elements += c.elements;
    }
  }
};

// Piece sizes adding up to n: a single piece one time in four, else up to 32
// pieces of random sizes, empty ones among them.
std::vector<size_t> PieceSizes(Generator& gen, uint64_t n) {
  if (gen.OneIn(4)) return {n};
  const uint64_t pieces = 1 + gen.Below(32);
  std::vector<size_t> sizes;
  for (uint64_t left = n; left > 0;) {
    const uint64_t size = gen.OneIn(8) ? 0 : std::min(left, 1 + gen.Below(2 * n / pieces + 1));
    sizes.push_back(size);
    left -= size;
  }
  return sizes;
}

// The request sent through its streaming RPC in `pieces`, the answers joined
// into the one the unary call gives.
template <typename Request, typename Response>
grpc::Status CallStream(v1::Primitives::Stub& stub, const std::vector<Request>& pieces,
                        Response* answer) {
  using S = v1::Primitives::Stub;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
  if constexpr (std::is_same_v<Request, v1::ReduceRequest>) {
    return testing::ClientStream(stub, &S::ReduceStream, &context, pieces, answer);
  } else if constexpr (std::is_same_v<Request, v1::AggregateByKeyRequest>) {
    return testing::ClientStream(stub, &S::AggregateByKeyStream, &context, pieces, answer);
  } else {
    std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> (S::*method)(
        grpc::ClientContext*);
    if constexpr (std::is_same_v<Request, v1::ScanRequest>) method = &S::ScanStream;
    if constexpr (std::is_same_v<Request, v1::SelectRequest>) method = &S::SelectStream;
    if constexpr (std::is_same_v<Request, v1::UniqueRequest>) method = &S::UniqueStream;
    if constexpr (std::is_same_v<Request, v1::RunLengthEncodeRequest>) {
      method = &S::RunLengthEncodeStream;
    }
    if constexpr (std::is_same_v<Request, v1::ReduceByKeyRequest>) method = &S::ReduceByKeyStream;
    std::vector<Response> answers;
    const grpc::Status status = testing::Bidi(stub, method, &context, pieces, &answers);
    *answer = testing::Join(answers);
    return status;
  }
}

// Whether a request can go through its streaming RPC (SelectStream refuses
// partitions; Sort has none).
template <typename Request>
bool Streamable(const Request& request) {
  if constexpr (std::is_same_v<Request, v1::SelectRequest>) return !request.partition();
  // Sort, Gather and Pipeline have no streaming form.
  return std::is_same_v<Request, v1::ScanRequest> || std::is_same_v<Request, v1::ReduceRequest> ||
         std::is_same_v<Request, v1::UniqueRequest> ||
         std::is_same_v<Request, v1::RunLengthEncodeRequest> ||
         std::is_same_v<Request, v1::ReduceByKeyRequest> ||
         std::is_same_v<Request, v1::AggregateByKeyRequest>;
}

// The field of `message` whose type is `type` (a Multiplex oneof's member).
const google::protobuf::FieldDescriptor* FieldOfType(const google::protobuf::Descriptor& message,
                                                     const google::protobuf::Descriptor& type) {
  for (int i = 0; i < message.field_count(); ++i) {
    if (message.field(i)->message_type() == &type) return message.field(i);
  }
  return nullptr;
}

// A burst of 1 to 64 random requests on one Multiplex stream, written from
// another thread while the answers are read; each answer is matched to its
// request by id.
void MultiplexBurst(v1::Primitives::Stub& stub, Generator& gen, Tally* tally) {
  struct Sent {
    size_t rpc;
    Case c;
  };
  std::vector<Sent> sent;
  std::vector<v1::MultiplexRequest> messages;
  for (uint64_t i = 0, k = 1 + gen.Below(64); i < k; ++i) {
    const size_t rpc = gen.Below(kNumRpcs);
    sent.push_back({rpc, MakeCase(gen, rpc, gen.Size())});
    v1::MultiplexRequest& m = messages.emplace_back();
    m.set_id(i);
    // MultiplexRequest's oneof field of the request's type (and the
    // response's of the response's type).
    std::visit(
        [&](const auto& exchange) {
          m.GetReflection()
              ->MutableMessage(&m, FieldOfType(*m.GetDescriptor(), *exchange.request.GetDescriptor()))
              ->CopyFrom(exchange.request);
        },
        sent.back().c.exchange);
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
  auto stream = stub.Multiplex(&context);
  std::thread writer([&] {
    for (const v1::MultiplexRequest& m : messages) {
      if (!stream->Write(m)) break;
    }
    stream->WritesDone();
  });
  std::vector<std::optional<v1::MultiplexResponse>> answers(sent.size());
  v1::MultiplexResponse answer;
  int misrouted = 0;
  while (stream->Read(&answer)) {
    if (answer.id() >= answers.size() || answers[answer.id()].has_value()) {
      ++misrouted;
    } else {
      answers[answer.id()] = answer;
    }
  }
  writer.join();
  const grpc::Status status = stream->Finish();
  if (!status.ok() || misrouted > 0) {
    tally->errors.Add("multiplex stream",
                      absl::StrCat(status.error_message(), "; ", misrouted,
                                   " answers with an unknown or repeated id"));
  }
  for (size_t i = 0; i < sent.size(); ++i) {
    std::visit(
        [&](const auto& exchange) {
          using Response = std::decay_t<decltype(exchange.expected)>;
          const std::optional<v1::MultiplexResponse>& got = answers[i];
          grpc::Status inner = grpc::Status::OK;
          Response response;
          if (!got.has_value()) {
            inner = grpc::Status(grpc::StatusCode::INTERNAL, "no answer on the stream");
          } else if (got->code() != 0) {
            inner = grpc::Status(static_cast<grpc::StatusCode>(got->code()), got->message());
          } else {
            response.CopyFrom(got->GetReflection()->GetMessage(
                *got, FieldOfType(*got->GetDescriptor(), *exchange.expected.GetDescriptor())));
          }
          tally->Check(sent[i].c, sent[i].rpc, Path::kMultiplex, inner, response,
                       exchange.expected);
        },
        sent[i].c.exchange);
  }
}

// Sends random requests until `end`, each unary (half of them), through its
// streaming RPC (a quarter), or in a Multiplex burst (a quarter).
void SoakCaller(int port, uint64_t seed, absl::Time end, Tally* tally) {
  std::shared_ptr<grpc::Channel> channel = OwnChannel(port);
  PrimitivesClient client(channel, kCallTimeout);
  std::unique_ptr<v1::Primitives::Stub> stub = v1::Primitives::NewStub(channel);
  Generator gen(seed);
  while (absl::Now() < end) {
    const uint64_t pick = gen.Below(4);
    if (pick == 3) {
      MultiplexBurst(*stub, gen, tally);
      continue;
    }
    const size_t rpc = gen.Below(kNumRpcs);
    Case c = MakeCase(gen, rpc, gen.Size());
    std::visit(
        [&](const auto& exchange) {
          if (pick == 2 && Streamable(exchange.request)) {
            std::decay_t<decltype(exchange.expected)> got;
            const grpc::Status status = CallStream(
                *stub, testing::Cut(exchange.request, PieceSizes(gen, c.elements), gen.engine()),
                &got);
            tally->Check(c, rpc, Path::kStream, status, got, exchange.expected);
            return;
          }
          auto got = client.Call(exchange.request);
          const grpc::Status status =
              got.ok() ? grpc::Status::OK
                       : grpc::Status(grpc::StatusCode::UNKNOWN, got.status().ToString());
          tally->Check(c, rpc, Path::kUnary, status,
                       got.ok() ? *got : std::decay_t<decltype(exchange.expected)>(),
                       exchange.expected);
        },
        c.exchange);
  }
}

TEST(SoakTest, MixedLoadIsAnsweredCorrectlyAndMemoryStaysFlat) {
  const absl::Duration duration = absl::Seconds(absl::GetFlag(FLAGS_soak_seconds));
  const absl::Duration warm_up = duration / 4;
  const int callers = absl::GetFlag(FLAGS_callers);
  Metrics metrics;
  ASSERT_TRUE(metrics.ServeHttp("127.0.0.1:0").ok());
  absl::StatusOr<std::unique_ptr<PrimServer>> server = StartServer(&metrics);
  ASSERT_TRUE(server.ok()) << server.status();
  const uint64_t seed = std::random_device{}();
  std::printf("soak: seed %llu\n", static_cast<unsigned long long>(seed));

  Tally tally;
  const absl::Time start = absl::Now();
  std::vector<double> rss_samples;  // MiB, one a second
  absl::Notification stop_sampling;
  std::thread sampler([&] {
    do {
      rss_samples.push_back(RssMib());
    } while (!stop_sampling.WaitForNotificationWithTimeout(absl::Seconds(1)));
  });
  // The load runs in two stretches, the first a warm-up; memory is compared
  // between their ends, each time with the calls just drained, so that the
  // requests in flight at the moment of sampling do not count. The pinned
  // pools fill towards their bounds as large answers and payloads need
  // buffers, and keep them: that memory is counted apart.
  struct Settled {
    double rss_mib;
    double pinned_mib;
  };
  auto load = [&](absl::Duration length, int stretch) {
    const absl::Time end = absl::Now() + length;
    std::vector<std::thread> threads;
    for (int c = 0; c < callers; ++c) {
      threads.emplace_back(SoakCaller, (*server)->port(), seed + stretch * callers + c, end,
                           &tally);
    }
    for (std::thread& thread : threads) thread.join();
    const double rss = SettledRssMib();
    return Settled{rss, Scrape(metrics.http_port()).pinned_mib};
  };
  const Settled warm = load(warm_up, 0);
  const Settled end = load(duration - warm_up, 1);
  const double warm_rss = warm.rss_mib - warm.pinned_mib;
  const double end_rss = end.rss_mib - end.pinned_mib;
  stop_sampling.Notify();
  sampler.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  const double peak_rss = *std::max_element(rss_samples.begin(), rss_samples.end());
  const double rss_bound = std::max(kRssGrowthFraction * warm_rss, kRssGrowthMib);
  int64_t requests = 0;
  std::string by_rpc;
  for (size_t rpc = 0; rpc < kNumRpcs; ++rpc) {
    requests += tally.by_rpc[rpc];
    absl::StrAppend(&by_rpc, rpc == 0 ? "" : ", ", RpcName(kAllRpcs[rpc]), " ",
                    tally.by_rpc[rpc].load());
  }
  for (int path = 0; path < kNumPaths; ++path) {
    absl::StrAppend(&by_rpc, path == 0 ? "; " : ", ", kPathNames[path], " ",
                    tally.by_path[path].load());
  }
  const Gauges gauges = Scrape(metrics.http_port());
  std::printf("soak: RSS MiB each second: %s\n",
              absl::StrJoin(rss_samples, " ", MibFormatter()).c_str());
  std::printf(
      "soak: %s backend, %d callers, %.1f s: %lld requests answered (%.0f/s; %s), "
      "%.1f M elements, in %.0f batches; wrong=%d errors=%d; RSS MiB peak %.0f, warm %.0f and "
      "end %.0f besides the pinned pools' %.0f and %.0f (warm and end settled with no calls "
      "running; end may exceed warm by %.0f)\n",
      absl::GetFlag(FLAGS_backend).c_str(), callers, seconds, static_cast<long long>(requests),
      requests / seconds, by_rpc.c_str(), tally.elements.load() / 1e6, gauges.batches,
      tally.wrong.count(), tally.errors.count(), peak_rss, warm_rss, end_rss, warm.pinned_mib,
      end.pinned_mib, rss_bound);

  EXPECT_EQ(tally.wrong.count(), 0) << tally.wrong.Described();
  EXPECT_EQ(tally.errors.count(), 0) << tally.errors.Described();
  for (size_t rpc = 0; rpc < kNumRpcs; ++rpc) {
    EXPECT_GT(tally.by_rpc[rpc].load(), 0) << RpcName(kAllRpcs[rpc]) << " was never answered";
  }
  for (int path = 0; path < kNumPaths; ++path) {
    EXPECT_GT(tally.by_path[path].load(), 0) << "nothing was answered " << kPathNames[path];
  }
  EXPECT_LE(end_rss - warm_rss, rss_bound) << "resident memory grew under steady load";
  const ServerOptions defaults;
  EXPECT_LE(end.pinned_mib,
            (defaults.pinned_payload_bytes + defaults.pinned_answer_bytes) / double{1 << 20})
      << "the pinned pools outgrew their bounds";
}

// Resident buffers under load: callers Put arrays into buffers (far more
// names than the quota holds), run Scans and Reduces naming them (whole and
// sub-ranges, some stored into other buffers or in place), Get them back,
// replace and free them; every answer is checked, the only refusals allowed
// are the quota's RESOURCE_EXHAUSTED, the buffers' bytes never pass the
// quota, and resident memory stays within the quota plus the calls' own.
constexpr uint64_t kBufferQuotaBytes = uint64_t{32} << 20;
constexpr size_t kBufferNamesPerCaller = 16;
constexpr size_t kMostBufferElements = size_t{1} << 19;  // 4 MiB of int64

// What one of a caller's buffers holds, kept as how to make it so that the
// caller's own memory stays small: `length` values from `seed`, scanned
// (inclusive sums) `scans` times.
struct Held {
  uint64_t seed = 0;
  size_t length = 0;
  int scans = 0;
};

std::vector<int64_t> ContentsOf(const Held& held) {
  std::mt19937_64 rng(held.seed);
  std::vector<int64_t> values(held.length);
  for (int64_t& x : values) x = static_cast<int64_t>(rng() % 2001) - 1000;
  for (int s = 0; s < held.scans; ++s) std::partial_sum(values.begin(), values.end(), values.begin());
  return values;
}

struct BufferTally {
  std::atomic<int64_t> puts{0}, calls{0}, stored{0}, gets{0}, frees{0}, refused{0};
  Failures wrong, errors;

  // True for OK; counts a quota refusal, else records the error.
  bool Ok(const absl::Status& status, const std::string& what) {
    if (status.ok()) return true;
    if (status.code() == absl::StatusCode::kResourceExhausted) {
      ++refused;
    } else {
      errors.Add(what, status.ToString());
    }
    return false;
  }
};

void BufferCaller(int port, int caller, uint64_t seed, absl::Time end, BufferTally* tally) {
  const std::vector<std::shared_ptr<grpc::Channel>> channels = {OwnChannel(port), OwnChannel(port)};
  PrimitivesClient client(channels[0], kCallTimeout);
  BuffersClient buffers(channels, kCallTimeout);
  std::mt19937_64 rng(seed);
  std::map<std::string, Held> held;
  const auto name_of = [caller](size_t j) { return absl::StrCat("soak-", caller, "-", j); };
  while (absl::Now() < end) {
    const std::string name = name_of(rng() % kBufferNamesPerCaller);
    const auto it = held.find(name);
    const uint64_t action = rng() % 6;
    if (it == held.end() || action == 0) {  // put, replacing what the name held
      if (it != held.end()) {
        if (!tally->Ok(buffers.Free(name), "free before put")) continue;
        held.erase(it);
        ++tally->frees;
      }
      const Held fresh{rng(), 1 + rng() % kMostBufferElements, 0};
      const std::vector<int64_t> values = ContentsOf(fresh);
      absl::StatusOr<v1::BufferInfo> put = buffers.Put<int64_t>(name, values);
      if (!put.ok() && put.status().code() != absl::StatusCode::kResourceExhausted) {
        tally->errors.Add("put", put.status().ToString());
        continue;
      }
      if (!put.ok()) {
        ++tally->refused;
        continue;
      }
      held[name] = fresh;
      ++tally->puts;
      continue;
    }
    const Held& have = it->second;
    if (action == 1) {  // a Scan and a Reduce of a sub-range, answered inline
      const uint64_t offset = rng() % have.length;
      const uint64_t length = 1 + rng() % (have.length - offset);
      const std::vector<int64_t> contents = ContentsOf(have);
      std::vector<int64_t> expected(contents.begin() + offset,
                                    contents.begin() + offset + length);
      const int64_t min = *std::min_element(expected.begin(), expected.end());
      std::partial_sum(expected.begin(), expected.end(), expected.begin());
      absl::StatusOr<std::vector<int64_t>> scan =
          client.Scan<int64_t>(BufferRef(name, offset, length), Op::kSum);
      absl::StatusOr<Reduction<int64_t>> reduce =
          client.Reduce<int64_t>(BufferRef(name, offset, length), Op::kMin);
      if (!tally->Ok(scan.status(), "scan") || !tally->Ok(reduce.status(), "reduce")) continue;
      if (*scan != expected) tally->wrong.Add("scan of a buffer", name);
      if (reduce->values != std::vector<int64_t>{min}) tally->wrong.Add("reduce", name);
      tally->calls += 2;
    } else if (action == 2 || action == 3) {  // scanned into another buffer, or in place
      const std::string into = action == 2 ? name_of(rng() % kBufferNamesPerCaller) : name;
      v1::OutputBuffers outputs;
      outputs.set_values(into);
      const Held scanned{have.seed, have.length, have.scans + 1};
      absl::StatusOr<std::vector<int64_t>> stored =
          client.Into(outputs).Scan<int64_t>(BufferRef(name), Op::kSum);
      if (!tally->Ok(stored.status(), "scan into a buffer")) continue;
      held[into] = scanned;
      ++tally->stored;
    } else if (action == 4) {  // read back
      absl::StatusOr<std::vector<int64_t>> got = buffers.Get<int64_t>(name);
      if (!tally->Ok(got.status(), "get")) continue;
      if (*got != ContentsOf(have)) tally->wrong.Add("get", name);
      ++tally->gets;
    } else {
      if (!tally->Ok(buffers.Free(name), "free")) continue;
      held.erase(it);
      ++tally->frees;
    }
  }
  for (const auto& [name, unused] : held) {
    if (tally->Ok(buffers.Free(name), "free at the end")) ++tally->frees;
  }
}

TEST(SoakTest, ResidentBuffersStayWithinTheQuota) {
  const absl::Duration duration = absl::Seconds(absl::GetFlag(FLAGS_soak_seconds)) / 3;
  const int callers = 4;
  absl::StatusOr<std::unique_ptr<ExecutionBackend>> backend = MakeBackend(nullptr);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.admission.max_peer_queued_bytes = uint64_t{16} << 30;
  options.buffer_limits.max_bytes = kBufferQuotaBytes;
  options.buffer_limits.max_bytes_per_caller = kBufferQuotaBytes;
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, *std::move(backend));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const uint64_t seed = std::random_device{}();
  std::printf("buffer soak: seed %llu\n", static_cast<unsigned long long>(seed));
  const double before_mib = SettledRssMib();

  // Sampled as the load runs: resident memory, and the buffers' bytes as
  // List tells them (all callers share one namespace without a caller
  // header, so these are all of them).
  std::vector<double> rss_samples;
  uint64_t most_bytes_used = 0, bytes_limit = 0;
  absl::Notification stop_sampling;
  std::thread sampler([&] {
    BuffersClient lister({OwnChannel(port)}, kCallTimeout);
    do {
      rss_samples.push_back(RssMib());
      absl::StatusOr<v1::ListBuffersResponse> list = lister.List();
      if (list.ok()) {
        most_bytes_used = std::max<uint64_t>(most_bytes_used, list->bytes_used());
        bytes_limit = list->bytes_limit();
      }
    } while (!stop_sampling.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  });
  BufferTally tally;
  const absl::Time end = absl::Now() + duration;
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c) threads.emplace_back(BufferCaller, port, c, seed + c, end, &tally);
  for (std::thread& thread : threads) thread.join();
  stop_sampling.Notify();
  sampler.join();
  const double after_mib = SettledRssMib();
  absl::StatusOr<v1::ListBuffersResponse> left = BuffersClient({OwnChannel(port)}).List();
  ASSERT_TRUE(left.ok()) << left.status();

  const double peak_mib = *std::max_element(rss_samples.begin(), rss_samples.end());
  // Each caller's own memory at once: an array it puts or checks, a copy of
  // it in flight and the answer's, on both sides of the loopback.
  const double calls_mib = callers * 6.0 * kMostBufferElements * sizeof(int64_t) / (1 << 20);
  const double quota_mib = kBufferQuotaBytes / double{1 << 20};
  std::printf(
      "buffer soak: %s backend, %d callers x %zu names of up to %.0f MiB, %.1f s: %lld puts, "
      "%lld calls answered inline, %lld stored into buffers, %lld gets, %lld frees, %lld quota "
      "refusals; wrong=%d errors=%d; buffer bytes at most %.1f MiB of the %.0f MiB quota; RSS MiB "
      "before %.0f, peak %.0f (bound %.0f), after %.0f\n",
      absl::GetFlag(FLAGS_backend).c_str(), callers, kBufferNamesPerCaller,
      kMostBufferElements * sizeof(int64_t) / double{1 << 20}, absl::ToDoubleSeconds(duration),
      static_cast<long long>(tally.puts.load()), static_cast<long long>(tally.calls.load()),
      static_cast<long long>(tally.stored.load()), static_cast<long long>(tally.gets.load()),
      static_cast<long long>(tally.frees.load()), static_cast<long long>(tally.refused.load()),
      tally.wrong.count(), tally.errors.count(), most_bytes_used / double{1 << 20}, quota_mib,
      before_mib, peak_mib, before_mib + quota_mib + calls_mib + kRssGrowthMib, after_mib);

  EXPECT_EQ(tally.wrong.count(), 0) << tally.wrong.Described();
  EXPECT_EQ(tally.errors.count(), 0) << tally.errors.Described();
  EXPECT_GT(tally.puts.load(), 0);
  EXPECT_GT(tally.calls.load(), 0);
  EXPECT_GT(tally.stored.load(), 0);
  EXPECT_GT(tally.gets.load(), 0);
  // The callers ask for far more than the quota: it is what bounds them.
  EXPECT_GT(tally.refused.load(), 0) << "the quota was never reached";
  EXPECT_EQ(bytes_limit, kBufferQuotaBytes);
  EXPECT_LE(most_bytes_used, kBufferQuotaBytes);
  EXPECT_EQ(left->buffers_size(), 0);
  EXPECT_EQ(left->bytes_used(), 0u);
  if (!UsesCuda()) {
    EXPECT_LE(peak_mib - before_mib, quota_mib + calls_mib + kRssGrowthMib)
        << "resident memory outgrew the buffer quota and the calls' own";
  }
  EXPECT_LE(after_mib - before_mib, kRssGrowthMib) << "freed buffers' memory was kept";
}

// How a caller leaves its call.
enum class Leave { kCancel, kDeadline, kDropChannel, kCutConnection };
constexpr int kNumLeaves = 4;
constexpr const char* kLeaveNames[kNumLeaves] = {"cancelled", "short deadline",
                                                 "channel dropped", "connection cut"};

// The code of a call whose caller left before it ended (those that ended
// first are OK).
grpc::StatusCode CodeOfLeaving(Leave leave) {
  switch (leave) {
    case Leave::kCancel: return grpc::StatusCode::CANCELLED;
    case Leave::kDeadline: return grpc::StatusCode::DEADLINE_EXCEEDED;
    // gRPC keeps a call's connection until the call ends: the call runs to
    // completion, and what is checked is that nothing is left behind.
    case Leave::kDropChannel: return grpc::StatusCode::OK;
    case Leave::kCutConnection: break;
  }
  return grpc::StatusCode::UNAVAILABLE;
}

void Start(v1::Primitives::Stub& stub, grpc::ClientContext* context,
           const v1::ScanRequest* request, v1::ScanResponse* response,
           std::function<void(grpc::Status)> done) {
  stub.async()->Scan(context, request, response, std::move(done));
}
void Start(v1::Primitives::Stub& stub, grpc::ClientContext* context,
           const v1::ReduceRequest* request, v1::ReduceResponse* response,
           std::function<void(grpc::Status)> done) {
  stub.async()->Reduce(context, request, response, std::move(done));
}
void Start(v1::Primitives::Stub& stub, grpc::ClientContext* context,
           const v1::SelectRequest* request, v1::SelectResponse* response,
           std::function<void(grpc::Status)> done) {
  stub.async()->Select(context, request, response, std::move(done));
}
void Start(v1::Primitives::Stub& stub, grpc::ClientContext* context,
           const v1::UniqueRequest* request, v1::UniqueResponse* response,
           std::function<void(grpc::Status)> done) {
  stub.async()->Unique(context, request, response, std::move(done));
}
void Start(v1::Primitives::Stub& stub, grpc::ClientContext* context,
           const v1::RunLengthEncodeRequest* request, v1::RunLengthEncodeResponse* response,
           std::function<void(grpc::Status)> done) {
  stub.async()->RunLengthEncode(context, request, response, std::move(done));
}
void Start(v1::Primitives::Stub& stub, grpc::ClientContext* context,
           const v1::ReduceByKeyRequest* request, v1::ReduceByKeyResponse* response,
           std::function<void(grpc::Status)> done) {
  stub.async()->ReduceByKey(context, request, response, std::move(done));
}
void Start(v1::Primitives::Stub& stub, grpc::ClientContext* context,
           const v1::AggregateByKeyRequest* request, v1::AggregateByKeyResponse* response,
           std::function<void(grpc::Status)> done) {
  stub.async()->AggregateByKey(context, request, response, std::move(done));
}
void Start(v1::Primitives::Stub& stub, grpc::ClientContext* context,
           const v1::SortRequest* request, v1::SortResponse* response,
           std::function<void(grpc::Status)> done) {
  stub.async()->Sort(context, request, response, std::move(done));
}
void Start(v1::Primitives::Stub& stub, grpc::ClientContext* context,
           const v1::GatherRequest* request, v1::GatherResponse* response,
           std::function<void(grpc::Status)> done) {
  stub.async()->Gather(context, request, response, std::move(done));
}
void Start(v1::Primitives::Stub& stub, grpc::ClientContext* context,
           const v1::PipelineRequest* request, v1::PipelineResponse* response,
           std::function<void(grpc::Status)> done) {
  stub.async()->Pipeline(context, request, response, std::move(done));
}

constexpr int kNumCodes = 17;  // gRPC's status codes, 0..16

// Outcomes of the leaving calls: by how they left and status code.
struct Left {
  std::array<std::array<std::atomic<int>, kNumCodes>, kNumLeaves> codes{};
  Failures wrong;       // answered OK, but not correctly
  Failures unexpected;  // ended with a code their leaving does not explain
  Failures hung;        // never ended

  int Count(grpc::StatusCode code) const {
    int sum = 0;
    for (const auto& by_code : codes) sum += by_code[code];
    return sum;
  }
};

// Sends `c` and leaves it as `leave` says after a random short while, then
// waits for the call to end.
void CallAndLeave(Case c, Leave leave, int port, Generator& gen, Left* left) {
  const absl::Duration after = absl::Microseconds(1 + gen.Below(40'000));
  std::visit(
      [&](auto& exchange) {
        using Request = std::decay_t<decltype(exchange.request)>;
        using Response = std::decay_t<decltype(exchange.expected)>;
        // On the heap: a call that never ends is left to gRPC, not freed.
        struct Call {
          Request request;
          Response response;
          grpc::ClientContext context;
          grpc::Status status;
          absl::Notification done;
        };
        auto call = std::make_unique<Call>();
        call->request = std::move(exchange.request);
        call->context.set_deadline(
            absl::ToChronoTime(absl::Now() + (leave == Leave::kDeadline ? after : kCallTimeout)));
        int fd = -1;
        std::shared_ptr<grpc::Channel> channel =
            leave == Leave::kCutConnection ? ChannelOverSocket(port, &fd) : OwnChannel(port);
        if (channel == nullptr) {
          left->unexpected.Add("connect", absl::StrCat("127.0.0.1:", port, ": ", strerror(errno)));
          return;
        }
        std::unique_ptr<v1::Primitives::Stub> stub = v1::Primitives::NewStub(channel);
        Call* raw = call.get();
        Start(*stub, &raw->context, &raw->request, &raw->response, [raw](grpc::Status status) {
          raw->status = std::move(status);
          raw->done.Notify();
        });
        if (leave != Leave::kDeadline) absl::SleepFor(after);
        switch (leave) {
          case Leave::kCancel:
            call->context.TryCancel();
            break;
          case Leave::kDeadline:
            break;
          case Leave::kDropChannel:
            stub.reset();
            channel.reset();
            break;
          case Leave::kCutConnection:
            shutdown(fd, SHUT_RDWR);  // the channel closes it
            break;
        }
        if (!call->done.WaitForNotificationWithTimeout(kCallTimeout + absl::Seconds(10))) {
          left->hung.Add(kLeaveNames[static_cast<int>(leave)], c.what());
          call.release();
          return;
        }
        const grpc::StatusCode code = call->status.error_code();
        ++left->codes[static_cast<int>(leave)][code];
        if (code == grpc::StatusCode::OK) {
          if (std::string diff = Diff(call->response, exchange.expected, c.tolerant);
              !diff.empty()) {
            left->wrong.Add(c.kind, absl::StrCat(c.size, ": ", diff));
          }
        } else if (code != CodeOfLeaving(leave)) {
          left->unexpected.Add(
              absl::StrCat(kLeaveNames[static_cast<int>(leave)], " ",
                           absl::StatusCodeToString(static_cast<absl::StatusCode>(code))),
              absl::StrCat(c.what(), ": ", call->status.error_message()));
        }
      },
      c.exchange);
}

TEST(SoakTest, CallersLeavingMidRequestLeaveNothingBehind) {
  constexpr int kRounds = 3;  // the first warms the allocator up
  constexpr int kCallsPerRound = 8;
  const int callers = absl::GetFlag(FLAGS_callers);
  Metrics metrics;
  ASSERT_TRUE(metrics.ServeHttp("127.0.0.1:0").ok());
  absl::StatusOr<std::unique_ptr<PrimServer>> server = StartServer(&metrics);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const uint64_t seed = std::random_device{}();
  std::printf("leave: seed %llu\n", static_cast<unsigned long long>(seed));

  // The same good requests before and after: the GPU pool gauge, set after
  // each batch, then reads the same unless something was kept.
  PrimitivesClient good_client(OwnChannel(port), kCallTimeout);
  ASSERT_EQ(CheckOneOfEach(good_client, seed), "");
  const Gauges before = Scrape(metrics.http_port());
  ASSERT_GE(before.in_flight, 0) << "no primserve_requests_in_flight in /metrics";
  ASSERT_GE(before.queue_depth, 0) << "no primserve_queue_depth in /metrics";
  if (UsesCuda()) {
    ASSERT_GE(before.pool_in_use, 0) << "no pool_in_use gauge for device 0";
  }

  Left left;
  std::vector<double> rss_after_round;
  Gauges after;
  absl::Duration quiet_after;
  const absl::Time start = absl::Now();
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::thread> threads;
    for (int caller = 0; caller < callers; ++caller) {
      threads.emplace_back([&, caller] {
        Generator gen(seed + 1 + round * callers + caller);
        for (int i = 0; i < kCallsPerRound; ++i) {
          // Half large (run alone, a few MB each way), half small (batched).
          const uint64_t n = gen.OneIn(2) ? (uint64_t{1} << 18) + gen.Below(uint64_t{3} << 18)
                                          : 1 + gen.Below(4096);
          Case c = MakeCase(gen, gen.Below(kNumRpcs), n);
          // Half cancel; the rest leave the other ways.
          const Leave leave = gen.OneIn(2) ? Leave::kCancel : static_cast<Leave>(1 + gen.Below(3));
          CallAndLeave(std::move(c), leave, port, gen, &left);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    // What the server had received when its callers left may still be queued
    // or running: it must answer (or drop) every call and come to rest.
    const absl::Time left_at = absl::Now();
    do {
      absl::SleepFor(absl::Milliseconds(20));
      after = Scrape(metrics.http_port());
    } while ((after.in_flight != 0 || after.queue_depth != 0) &&
             absl::Now() - left_at < absl::Seconds(30));
    quiet_after = absl::Now() - left_at;
    rss_after_round.push_back(SettledRssMib());
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const std::string good_after = CheckOneOfEach(good_client, seed);
  const Gauges final_gauges = Scrape(metrics.http_port());

  std::string by_leave;
  for (int leave = 0; leave < kNumLeaves; ++leave) {
    int calls = 0;
    std::string codes;
    for (int code = 0; code < kNumCodes; ++code) {
      if (const int n = left.codes[leave][code]; n > 0) {
        calls += n;
        absl::StrAppend(&codes, codes.empty() ? "" : ", ", n, " ",
                        absl::StatusCodeToString(static_cast<absl::StatusCode>(code)));
      }
    }
    absl::StrAppend(&by_leave, leave == 0 ? "" : "; ", kLeaveNames[leave], " ", calls, " (",
                    codes, ")");
  }
  const double rss_bound = std::max(kRssGrowthFraction * rss_after_round.front(), kRssGrowthMib);
  std::printf(
      "leave: %s backend, %d callers x %d calls x %d rounds in %.1f s: %d started, %d CANCELLED, "
      "%d DEADLINE_EXCEEDED, %d UNAVAILABLE, %d OK; wrong=%d unexpected=%d hung=%d\n"
      "leave: by how they left: %s\n"
      "leave: server dropped from its queue %.0f cancelled, %.0f past deadline; at rest %s "
      "after the last round\n"
      "leave: gauges before/after: requests_in_flight %.0f/%.0f, queue_depth %.0f/%.0f, "
      "gpu pool_in_use %.0f/%.0f bytes%s\n"
      "leave: RSS MiB after each round: %s (the last may exceed the first by %.0f)\n",
      absl::GetFlag(FLAGS_backend).c_str(), callers, kCallsPerRound, kRounds, seconds,
      callers * kCallsPerRound * kRounds, left.Count(grpc::StatusCode::CANCELLED),
      left.Count(grpc::StatusCode::DEADLINE_EXCEEDED), left.Count(grpc::StatusCode::UNAVAILABLE),
      left.Count(grpc::StatusCode::OK), left.wrong.count(), left.unexpected.count(),
      left.hung.count(), by_leave.c_str(), after.dropped_cancelled - before.dropped_cancelled,
      after.dropped_deadline - before.dropped_deadline,
      absl::FormatDuration(quiet_after).c_str(), before.in_flight, after.in_flight,
      before.queue_depth, after.queue_depth, before.pool_in_use, final_gauges.pool_in_use,
      UsesCuda() ? "" : " (-1: no GPU backend)",
      absl::StrJoin(rss_after_round, " ", MibFormatter()).c_str(),
      rss_bound);

  EXPECT_EQ(left.wrong.count(), 0) << left.wrong.Described();
  EXPECT_EQ(left.unexpected.count(), 0) << left.unexpected.Described();
  EXPECT_EQ(left.hung.count(), 0) << left.hung.Described();
  // Each way of leaving left some calls before they ended, or this tested little.
  EXPECT_GT(left.Count(grpc::StatusCode::CANCELLED), 0);
  EXPECT_GT(left.Count(grpc::StatusCode::DEADLINE_EXCEEDED), 0);
  EXPECT_GT(left.Count(grpc::StatusCode::UNAVAILABLE), 0);
  EXPECT_EQ(after.in_flight, 0) << "calls the server never answered";
  EXPECT_EQ(after.queue_depth, 0) << "tasks left in the batcher's queue";
  EXPECT_EQ(good_after, "") << "the server no longer answers correctly";
  if (UsesCuda()) {
    EXPECT_EQ(final_gauges.pool_in_use, before.pool_in_use) << "GPU memory kept by left calls";
  }
  EXPECT_LE(rss_after_round.back() - rss_after_round.front(), rss_bound)
      << "resident memory grew with every round of left calls";
}

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) {
  // Buffers of 1 MiB and more come from mmap and go back when freed. By
  // default glibc raises this threshold to the largest buffer freed (up to
  // 32 MiB), then keeps such buffers in its per-thread arenas, where
  // malloc_trim cannot reach them: resident memory would read as the
  // allocator's high-water mark (hundreds of MiB here), not as what is live.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
