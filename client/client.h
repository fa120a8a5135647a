// The C++ client of primserve: typed helpers that pack std::vector-like
// inputs into requests and unpack responses, plus raw calls that take any
// request. Errors come back as absl::Status with the server's code and message.
//
// The typed helpers copy each array once at most: inputs are sent as gRPC
// slices over the caller's memory (wire/framing.h; the caller's span is read
// while the call runs, never copied into a protobuf string), and each output
// is copied from the slices gRPC received it in straight into the returned
// std::vector (wire/received.h). The bytes on the wire are the v1 proto's.
//
//   auto channel = primserve::PrimitivesClient::Connect("localhost:50051");
//   // or several replicas: "ipv4:10.0.0.1:50051,10.0.0.2:50051",
//   // "dns:///primserve-headless.default.svc.cluster.local:50051"
//   primserve::PrimitivesClient client(channel);
//   absl::StatusOr<std::vector<float>> sums =
//       client.Scan<float>(values, primserve::Op::kSum);
#ifndef PRIMSERVE_CLIENT_CLIENT_H_
#define PRIMSERVE_CLIENT_CLIENT_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/channel_arguments.h"
#include "client/buffer_routes.h"
#include "core/primitives.h"
#include "proto/grpc/health/v1/health.pb.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"
#include "wire/framing.h"
#include "wire/received.h"

namespace primserve {

// An array argument of the typed calls: the caller's elements (sent inline,
// read in place while the call runs; anything absl::Span<const T> takes) or
// a range of a resident buffer (BufferRef(...)), which the server reads
// where it lies. A buffer's dtype must be T (else INVALID_ARGUMENT).
template <typename T>
class Input {
 public:
  Input() = default;
  Input(absl::Span<const T> values) : values_(values) {}  // NOLINT: implicit, as a span
  template <typename C,
            typename = std::enable_if_t<std::is_convertible_v<const C&, absl::Span<const T>>>>
  Input(const C& values) : values_(values) {}  // NOLINT: implicit, as a span
  Input(std::initializer_list<T> values) : values_(values) {}
  Input(v1::BufferRef buffer) : buffer_(std::move(buffer)), resident_(true) {}  // NOLINT

  bool resident() const { return resident_; }
  const v1::BufferRef& buffer() const { return buffer_; }
  // The inline elements (none for a buffer).
  absl::Span<const T> values() const { return values_; }
  size_t size() const { return values_.size(); }
  size_t bytes() const { return values_.size() * sizeof(T); }
  bool empty() const { return !resident_ && values_.empty(); }

 private:
  absl::Span<const T> values_;
  v1::BufferRef buffer_;
  bool resident_ = false;
};

// Packs elements into an Array (little-endian, as the wire wants).
template <typename T>
v1::Array PackArray(absl::Span<const T> values) {
  v1::Array array;
  array.set_dtype(static_cast<v1::DType>(DTypeOf<T>()));
  array.mutable_data()->assign(reinterpret_cast<const char*>(values.data()),
                               values.size() * sizeof(T));
  return array;
}

// The elements of an Array of dtype T; INTERNAL if it holds another dtype.
template <typename T>
absl::StatusOr<std::vector<T>> UnpackArray(const v1::Array& array) {
  if (array.dtype() != static_cast<v1::DType>(DTypeOf<T>()) ||
      array.data().size() % sizeof(T) != 0) {
    return absl::InternalError("response array is not of the expected dtype");
  }
  std::vector<T> values(array.data().size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), array.data().data(), array.data().size());
  return values;
}

// The operand of a predicate as a Scalar of the kind T calls for.
template <typename T>
v1::Scalar ScalarOf(T value) {
  v1::Scalar scalar;
  if constexpr (std::is_floating_point_v<T>) {
    scalar.set_float_value(value);
  } else if constexpr (std::is_signed_v<T>) {
    scalar.set_int_value(value);
  } else {
    scalar.set_uint_value(value);
  }
  return scalar;
}

template <typename T>
struct Reduction {
  std::vector<T> values;         // one per segment
  std::vector<int64_t> indices;  // ARGMIN/ARGMAX: one per segment, -1 if empty
};

template <typename T>
struct Selection {
  std::vector<T> values;         // kept (then rejected, with partition)
  std::vector<int64_t> indices;  // their positions in the input
  uint64_t count = 0;            // number kept
};

template <typename T>
struct RunLengths {
  std::vector<T> values;
  std::vector<int64_t> lengths;
};

template <typename K, typename V>
struct KeyedReduction {
  std::vector<K> keys;
  std::vector<V> values;
};

// A Sort's answer: the keys in order, the values moved with them (empty
// without values) and each output position's input position (empty without
// indices).
template <typename K, typename V>
struct Sorted {
  std::vector<K> keys;
  std::vector<V> values;
  std::vector<int64_t> indices;
};

// How a channel spreads calls over the servers its target names, and what it
// does when one goes away. The defaults suit a pool of primserve replicas;
// with a single server they change nothing but the retries.
struct ConnectOptions {
  // The gRPC load-balancing policy over the addresses the target resolves to:
  // "round_robin" sends successive calls to successive ready servers;
  // "pick_first" keeps one connection.
  std::string load_balancing = "round_robin";
  // Client-side health checking (round_robin only): each connection watches
  // the server's grpc.health.v1 status, and a server reporting NOT_SERVING
  // (draining after SIGTERM, or a sticky CUDA error) gets no new calls.
  bool health_check = true;
  // Attempts per call, the first included, while the answer is UNAVAILABLE
  // (server gone, connection reset, refusing calls as it drains) or a
  // CANCELLED the server sent (a server shutting down cancels calls it had
  // received but not started, and calls that outlive its drain). Every
  // primitive is idempotent, so a retry on another server is safe; a call the
  // caller cancels or whose deadline passes is not retried. A Multiplex
  // stream is retried only until its first answer arrives; after that an
  // error ends it, and the caller opens another. gRPC caps this at 5; 1
  // turns retries off. Retries back off exponentially from `initial_backoff` to
  // `max_backoff`, with jitter.
  int max_attempts = 4;
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(1);
  // gRPC keeps a call's request to resend it only up to this many bytes; a
  // larger call is not retried (gRPC's default is 256 KiB).
  int retry_buffer_bytes = 64 << 20;
  // The longest wait between attempts to reconnect to a server that went
  // away, so a replica that comes back gets calls within about this long
  // (gRPC's default is 120 s).
  absl::Duration max_reconnect_backoff = absl::Seconds(5);
  // Channels to one target with the same arguments share their
  // connections; a distinct index gives a channel connections of its own
  // (BuffersClient stripes a transfer over several such channels).
  int channel_index = 0;
};

class PrimitivesClient final {
 public:
  // A channel to `target` that takes messages of any size. `target` is a
  // gRPC target: one server "host:port", several as
  // "ipv4:10.0.0.1:50051,10.0.0.2:50051" (or "ipv6:[::1]:50051,..."), or a
  // DNS name whose every address is a server, "dns:///primserve-headless:50051".
  static std::shared_ptr<grpc::Channel> Connect(const std::string& target,
                                                const ConnectOptions& options = {});

  // As Connect, over TLS. The server's certificate must chain to a CA in
  // `ca_pem` (PEM; empty: the system's roots) and name the host of `target`.
  // For a server that requires client certificates (--tls_client_ca), pass
  // this client's certificate chain and private key (PEM).
  static std::shared_ptr<grpc::Channel> ConnectTls(const std::string& target,
                                                   const std::string& ca_pem,
                                                   const std::string& client_cert_pem = "",
                                                   const std::string& client_key_pem = "",
                                                   const ConnectOptions& options = {});

  // The channel arguments Connect uses, for callers that add their own.
  static grpc::ChannelArguments ChannelArgs(const ConnectOptions& options);
  // Their service config (JSON): balancing, health checking and retries.
  static std::string ServiceConfig(const ConnectOptions& options);

  // Each call gets `timeout` as its deadline.
  explicit PrimitivesClient(std::shared_ptr<grpc::Channel> channel,
                            absl::Duration timeout = absl::Seconds(120));

  // The channel the calls go on (e.g. to register shared memory on it).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  // The routes RouteBuffers set (null: none) and each call's deadline, for
  // a MultiplexSession over this client.
  const std::shared_ptr<BufferRoutes>& routes() const { return routes_; }
  absl::Duration timeout() const { return timeout_; }

  // Routes for `target`, which spreads calls over several instances
  // (TargetSpreads), `home` being a channel to it: each location reached
  // with Connect(location, options), one connection per index. Share them
  // with a BuffersClient.
  static std::shared_ptr<BufferRoutes> Routes(const std::string& target,
                                              std::shared_ptr<grpc::Channel> home,
                                              const ConnectOptions& options = {});
  // From now on, every call naming a buffer (Array.buffer, output_buffers,
  // in a Pipeline's steps too; a MultiplexSession's requests likewise) goes
  // to the instance holding it (see client/buffer_routes.h); outputs stored
  // on an instance are remembered there. Null: every call goes to
  // channel() (one server).
  void RouteBuffers(std::shared_ptr<BufferRoutes> routes) { routes_ = std::move(routes); }

  // A client over the same channel, routes and settings whose typed calls
  // store the outputs `outputs` names in those buffers (created, or
  // replaced) instead of answering them: each such output comes back empty,
  // and BuffersClient::Get reads it. Never streamed.
  PrimitivesClient Into(const v1::OutputBuffers& outputs) const;

  // Raw calls.
  absl::StatusOr<v1::ScanResponse> Call(const v1::ScanRequest& request);
  absl::StatusOr<v1::ReduceResponse> Call(const v1::ReduceRequest& request);
  absl::StatusOr<v1::SelectResponse> Call(const v1::SelectRequest& request);
  absl::StatusOr<v1::UniqueResponse> Call(const v1::UniqueRequest& request);
  absl::StatusOr<v1::RunLengthEncodeResponse> Call(const v1::RunLengthEncodeRequest& request);
  absl::StatusOr<v1::ReduceByKeyResponse> Call(const v1::ReduceByKeyRequest& request);
  absl::StatusOr<v1::AggregateByKeyResponse> Call(const v1::AggregateByKeyRequest& request);
  absl::StatusOr<v1::SortResponse> Call(const v1::SortRequest& request);
  absl::StatusOr<v1::GatherResponse> Call(const v1::GatherRequest& request);
  absl::StatusOr<v1::PipelineResponse> Call(const v1::PipelineRequest& request);

  // Raw streaming calls (ScanStream, SelectStream, UniqueStream,
  // RunLengthEncodeStream, ReduceByKeyStream): `next` fills the next message
  // (the first carries every parameter) and returns false when there is
  // none; each answer goes to `on_answer` as it arrives. Messages are
  // written from another thread while answers are read. The deadline covers
  // the whole stream.
  absl::Status CallStream(const std::function<bool(v1::ScanRequest*)>& next,
                          const std::function<absl::Status(const v1::ScanResponse&)>& on_answer);
  absl::Status CallStream(
      const std::function<bool(v1::SelectRequest*)>& next,
      const std::function<absl::Status(const v1::SelectResponse&)>& on_answer);
  absl::Status CallStream(
      const std::function<bool(v1::UniqueRequest*)>& next,
      const std::function<absl::Status(const v1::UniqueResponse&)>& on_answer);
  absl::Status CallStream(
      const std::function<bool(v1::RunLengthEncodeRequest*)>& next,
      const std::function<absl::Status(const v1::RunLengthEncodeResponse&)>& on_answer);
  absl::Status CallStream(
      const std::function<bool(v1::ReduceByKeyRequest*)>& next,
      const std::function<absl::Status(const v1::ReduceByKeyResponse&)>& on_answer);

  // The typed Scan, Select (without partition), Unique, RunLengthEncode and
  // ReduceByKey send inputs of more than `above_bytes` (all arrays
  // together) as a stream (their *Stream RPC) of pieces of about
  // `piece_bytes`: the arrays may exceed one message's 2 GiB, and answers
  // come back while the input is still sent. Defaults: kStreamAboveBytes,
  // kStreamPieceBytes.
  static constexpr size_t kStreamAboveBytes = size_t{64} << 20;
  static constexpr size_t kStreamPieceBytes = size_t{4} << 20;
  void SetStreaming(size_t above_bytes, size_t piece_bytes) {
    stream_above_bytes_ = above_bytes;
    stream_piece_bytes_ = piece_bytes;
  }

  // Reproducible floats (docs/API.md "Reproducible floats"): with `reproducible`
  // true, the typed Scan, ScanStream, Reduce, ReduceByKey and AggregateByKey
  // set `reproducible` in their requests, so float (FLOAT32, FLOAT64) SUM and
  // PROD get the same bits every time: alone, batched with other requests,
  // or streamed in any piece sizes (same GPU model, driver, CUDA runtime and
  // server build; not across those, nor between the CPU and CUDA backends).
  // Integer dtypes and the other ops are exact in any order anyway. It costs
  // speed (a reproducible ReduceByKey/AggregateByKey float SUM most), so it
  // is off by default; false sends no flag and keeps the server's default
  // (--reproducible_floats). Raw Call/CallStream send requests as given. For
  // both kinds of call on one channel, use two clients over it.
  void SetReproducible(bool reproducible) { reproducible_ = reproducible; }
  bool reproducible() const { return reproducible_; }

  // The server's overall health (SERVING, NOT_SERVING while it drains or
  // after its backend failed), or the call's error when nothing answers
  // (UNAVAILABLE with gRPC's reason, DEADLINE_EXCEEDED after 5 s). With
  // `service` "primserve.device.N", GPU N's health on a server with several
  // (NOT_FOUND for a device it does not serve).
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Health(
      const std::string& service = "");
  // True when Health() is SERVING.
  bool IsServing();

  // Through ScanStream above the streaming threshold (SetStreaming).
  template <typename T>
  absl::StatusOr<std::vector<T>> Scan(Input<T> input, Op op, bool exclusive = false,
                                      absl::Span<const uint64_t> segment_offsets = {}) {
    if (Streams(input)) {
      return ScanStream(input.values(), op, exclusive, PieceElements(sizeof(T)), segment_offsets);
    }
    Payloads payloads;
    v1::ScanRequest request;
    payloads.Set(input, request.mutable_input());
    request.set_op(static_cast<v1::Op>(op));
    request.set_exclusive(exclusive);
    request.mutable_segment_offsets()->Add(segment_offsets.begin(), segment_offsets.end());
    request.set_reproducible(reproducible_);
    v1::ScanResponse response;
    wire::ReceivedMessage received;
    if (absl::Status s = CallFramed("Scan", &request, payloads, &response, &received); !s.ok()) {
      return s;
    }
    std::vector<T> output;
    if (absl::Status s = AppendReceived(received, response.output(), &output); !s.ok()) return s;
    return output;
  }

  // Scan through ScanStream, `piece_elements` (at least 1) elements a
  // message; the answer is Scan's (float SUM and PROD may round differently,
  // unless SetReproducible(true): then the same bits).
  template <typename T>
  absl::StatusOr<std::vector<T>> ScanStream(absl::Span<const T> input, Op op, bool exclusive,
                                            size_t piece_elements,
                                            absl::Span<const uint64_t> segment_offsets = {}) {
    v1::ScanRequest parameters;
    parameters.set_op(static_cast<v1::Op>(op));
    parameters.set_exclusive(exclusive);
    parameters.mutable_segment_offsets()->Add(segment_offsets.begin(), segment_offsets.end());
    parameters.set_reproducible(reproducible_);
    std::vector<T> output;
    output.reserve(input.size());
    const auto on_answer = [&](const grpc::ByteBuffer& buffer) {
      v1::ScanResponse answer;
      wire::ReceivedMessage received;
      if (absl::Status s = ParseAnswer(buffer, &answer, &received); !s.ok()) return s;
      return AppendReceived(received, answer.output(), &output);
    };
    if (absl::Status s = StreamArrays<v1::ScanRequest>(
            "ScanStream", parameters, input.size(), piece_elements,
            {PieceOf(input, &v1::ScanRequest::mutable_input)}, on_answer);
        !s.ok()) {
      return s;
    }
    return output;
  }

  template <typename T>
  absl::StatusOr<Reduction<T>> Reduce(Input<T> input, Op op,
                                      absl::Span<const uint64_t> segment_offsets = {}) {
    Payloads payloads;
    v1::ReduceRequest request;
    payloads.Set(input, request.mutable_input());
    request.set_op(static_cast<v1::Op>(op));
    request.mutable_segment_offsets()->Add(segment_offsets.begin(), segment_offsets.end());
    request.set_reproducible(reproducible_);
    v1::ReduceResponse response;
    wire::ReceivedMessage received;
    if (absl::Status s = CallFramed("Reduce", &request, payloads, &response, &received); !s.ok()) {
      return s;
    }
    Reduction<T> result;
    if (absl::Status s = AppendReceived(received, response.values(), &result.values); !s.ok()) {
      return s;
    }
    if (response.has_indices()) {
      if (absl::Status s = AppendReceived(received, response.indices(), &result.indices);
          !s.ok()) {
        return s;
      }
    }
    return result;
  }

  // Through SelectStream above the streaming threshold (SetStreaming),
  // unless `partition` (a stream has none).
  template <typename T>
  absl::StatusOr<Selection<T>> Select(
      Input<T> input, const Predicate<T>& predicate,
      v1::SelectRequest::Output output = v1::SelectRequest::VALUES, bool partition = false) {
    if (!partition && Streams(input)) {
      return SelectStream(input.values(), predicate, PieceElements(sizeof(T)), output);
    }
    Payloads payloads;
    v1::SelectRequest request;
    payloads.Set(input, request.mutable_input());
    v1::Predicate* p = request.mutable_predicate();
    p->set_kind(static_cast<v1::Predicate::Kind>(predicate.kind));
    *p->mutable_operand() = ScalarOf(predicate.operand);
    *p->mutable_upper() = ScalarOf(predicate.upper);
    return Select<T>(&request, payloads, output, partition);
  }

  // Select through SelectStream, `piece_elements` (at least 1) elements a
  // message (no partition there); the answer is Select's.
  template <typename T>
  absl::StatusOr<Selection<T>> SelectStream(
      absl::Span<const T> input, const Predicate<T>& predicate, size_t piece_elements,
      v1::SelectRequest::Output output = v1::SelectRequest::VALUES) {
    v1::SelectRequest parameters;
    v1::Predicate* p = parameters.mutable_predicate();
    p->set_kind(static_cast<v1::Predicate::Kind>(predicate.kind));
    *p->mutable_operand() = ScalarOf(predicate.operand);
    *p->mutable_upper() = ScalarOf(predicate.upper);
    parameters.set_output(output);
    Selection<T> result;
    const auto on_answer = [&](const grpc::ByteBuffer& buffer) {
      v1::SelectResponse answer;
      wire::ReceivedMessage received;
      if (absl::Status s = ParseAnswer(buffer, &answer, &received); !s.ok()) return s;
      return AppendSelection(received, answer, &result);
    };
    if (absl::Status s = StreamArrays<v1::SelectRequest>(
            "SelectStream", parameters, input.size(), piece_elements,
            {PieceOf(input, &v1::SelectRequest::mutable_input)}, on_answer);
        !s.ok()) {
      return s;
    }
    return result;
  }

  template <typename T, typename F>
  absl::StatusOr<Selection<T>> SelectFlagged(
      Input<T> input, Input<F> flags,
      v1::SelectRequest::Output output = v1::SelectRequest::VALUES, bool partition = false) {
    Payloads payloads;
    v1::SelectRequest request;
    payloads.Set(input, request.mutable_input());
    payloads.Set(flags, request.mutable_flags());
    return Select<T>(&request, payloads, output, partition);
  }

  // Through UniqueStream above the streaming threshold (SetStreaming).
  template <typename T>
  absl::StatusOr<std::vector<T>> Unique(Input<T> input) {
    if (Streams(input)) {
      return UniqueStream(input.values(), PieceElements(sizeof(T)));
    }
    Payloads payloads;
    v1::UniqueRequest request;
    payloads.Set(input, request.mutable_input());
    v1::UniqueResponse response;
    wire::ReceivedMessage received;
    if (absl::Status s = CallFramed("Unique", &request, payloads, &response, &received); !s.ok()) {
      return s;
    }
    std::vector<T> values;
    if (absl::Status s = AppendReceived(received, response.values(), &values); !s.ok()) return s;
    return values;
  }

  // Unique through UniqueStream, `piece_elements` (at least 1) elements a
  // message; the answer is Unique's.
  template <typename T>
  absl::StatusOr<std::vector<T>> UniqueStream(absl::Span<const T> input, size_t piece_elements) {
    std::vector<T> values;
    const auto on_answer = [&](const grpc::ByteBuffer& buffer) {
      v1::UniqueResponse answer;
      wire::ReceivedMessage received;
      if (absl::Status s = ParseAnswer(buffer, &answer, &received); !s.ok()) return s;
      return AppendReceived(received, answer.values(), &values);
    };
    if (absl::Status s = StreamArrays<v1::UniqueRequest>(
            "UniqueStream", v1::UniqueRequest(), input.size(), piece_elements,
            {PieceOf(input, &v1::UniqueRequest::mutable_input)}, on_answer);
        !s.ok()) {
      return s;
    }
    return values;
  }

  // Through RunLengthEncodeStream above the streaming threshold
  // (SetStreaming).
  template <typename T>
  absl::StatusOr<RunLengths<T>> RunLengthEncode(Input<T> input) {
    if (Streams(input)) {
      return RunLengthEncodeStream(input.values(), PieceElements(sizeof(T)));
    }
    Payloads payloads;
    v1::RunLengthEncodeRequest request;
    payloads.Set(input, request.mutable_input());
    v1::RunLengthEncodeResponse response;
    wire::ReceivedMessage received;
    if (absl::Status s = CallFramed("RunLengthEncode", &request, payloads, &response, &received);
        !s.ok()) {
      return s;
    }
    RunLengths<T> result;
    if (absl::Status s = AppendReceived(received, response.values(), &result.values); !s.ok()) {
      return s;
    }
    if (absl::Status s = AppendReceived(received, response.lengths(), &result.lengths); !s.ok()) {
      return s;
    }
    return result;
  }

  // RunLengthEncode through RunLengthEncodeStream, `piece_elements` (at
  // least 1) elements a message; the answer is RunLengthEncode's.
  template <typename T>
  absl::StatusOr<RunLengths<T>> RunLengthEncodeStream(absl::Span<const T> input,
                                                      size_t piece_elements) {
    RunLengths<T> result;
    const auto on_answer = [&](const grpc::ByteBuffer& buffer) {
      v1::RunLengthEncodeResponse answer;
      wire::ReceivedMessage received;
      if (absl::Status s = ParseAnswer(buffer, &answer, &received); !s.ok()) return s;
      if (absl::Status s = AppendReceived(received, answer.values(), &result.values); !s.ok()) {
        return s;
      }
      return AppendReceived(received, answer.lengths(), &result.lengths);
    };
    if (absl::Status s = StreamArrays<v1::RunLengthEncodeRequest>(
            "RunLengthEncodeStream", v1::RunLengthEncodeRequest(), input.size(), piece_elements,
            {PieceOf(input, &v1::RunLengthEncodeRequest::mutable_input)}, on_answer);
        !s.ok()) {
      return s;
    }
    return result;
  }

  // Through ReduceByKeyStream above the streaming threshold (SetStreaming;
  // keys and values together).
  template <typename K, typename V>
  absl::StatusOr<KeyedReduction<K, V>> ReduceByKey(Input<K> keys, Input<V> values, Op op) {
    if (keys.size() == values.size() && Streams(keys, values)) {
      return ReduceByKeyStream(keys.values(), values.values(), op,
                               PieceElements(sizeof(K) + sizeof(V)));
    }
    Payloads payloads;
    v1::ReduceByKeyRequest request;
    payloads.Set(keys, request.mutable_keys());
    payloads.Set(values, request.mutable_values());
    request.set_op(static_cast<v1::Op>(op));
    request.set_reproducible(reproducible_);
    v1::ReduceByKeyResponse response;
    wire::ReceivedMessage received;
    if (absl::Status s = CallFramed("ReduceByKey", &request, payloads, &response, &received);
        !s.ok()) {
      return s;
    }
    KeyedReduction<K, V> result;
    if (absl::Status s = AppendReceived(received, response.keys(), &result.keys); !s.ok()) {
      return s;
    }
    if (absl::Status s = AppendReceived(received, response.values(), &result.values); !s.ok()) {
      return s;
    }
    return result;
  }

  // ReduceByKey through ReduceByKeyStream, `piece_elements` (at least 1)
  // keys and values a message (keys and values of equal length); the answer
  // is ReduceByKey's.
  template <typename K, typename V>
  absl::StatusOr<KeyedReduction<K, V>> ReduceByKeyStream(absl::Span<const K> keys,
                                                         absl::Span<const V> values, Op op,
                                                         size_t piece_elements) {
    if (keys.size() != values.size()) {
      return absl::InvalidArgumentError("keys and values must have the same length");
    }
    v1::ReduceByKeyRequest parameters;
    parameters.set_op(static_cast<v1::Op>(op));
    parameters.set_reproducible(reproducible_);
    KeyedReduction<K, V> result;
    const auto on_answer = [&](const grpc::ByteBuffer& buffer) {
      v1::ReduceByKeyResponse answer;
      wire::ReceivedMessage received;
      if (absl::Status s = ParseAnswer(buffer, &answer, &received); !s.ok()) return s;
      if (absl::Status s = AppendReceived(received, answer.keys(), &result.keys); !s.ok()) {
        return s;
      }
      return AppendReceived(received, answer.values(), &result.values);
    };
    if (absl::Status s = StreamArrays<v1::ReduceByKeyRequest>(
            "ReduceByKeyStream", parameters, keys.size(), piece_elements,
            {PieceOf(keys, &v1::ReduceByKeyRequest::mutable_keys),
             PieceOf(values, &v1::ReduceByKeyRequest::mutable_values)},
            on_answer);
        !s.ok()) {
      return s;
    }
    return result;
  }

  template <typename K, typename V>
  absl::StatusOr<std::vector<V>> AggregateByKey(Input<K> keys, Input<V> values, Op op,
                                                uint64_t num_keys) {
    Payloads payloads;
    v1::AggregateByKeyRequest request;
    payloads.Set(keys, request.mutable_keys());
    payloads.Set(values, request.mutable_values());
    request.set_op(static_cast<v1::Op>(op));
    request.set_num_keys(num_keys);
    request.set_reproducible(reproducible_);
    v1::AggregateByKeyResponse response;
    wire::ReceivedMessage received;
    if (absl::Status s = CallFramed("AggregateByKey", &request, payloads, &response, &received);
        !s.ok()) {
      return s;
    }
    std::vector<V> aggregated;
    if (absl::Status s = AppendReceived(received, response.values(), &aggregated); !s.ok()) {
      return s;
    }
    return aggregated;
  }

  // Stable sort (NaN last, -0.0 == +0.0, descending keeps NaN last and
  // ties in input order). `values` may be empty (keys only; V is then any
  // dtype); segment_starts as Scan's (empty: one segment).
  template <typename K, typename V = int32_t>
  absl::StatusOr<Sorted<K, V>> Sort(Input<K> keys, Input<V> values = {},
                                        bool descending = false, bool return_indices = false,
                                        absl::Span<const uint64_t> segment_starts = {}) {
    Payloads payloads;
    v1::SortRequest request;
    payloads.Set(keys, request.mutable_keys());
    if (!values.empty()) payloads.Set(values, request.mutable_values());
    request.set_descending(descending);
    request.set_return_indices(return_indices);
    for (uint64_t start : segment_starts) request.add_segment_offsets(start);
    v1::SortResponse response;
    wire::ReceivedMessage received;
    if (absl::Status s = CallFramed("Sort", &request, payloads, &response, &received); !s.ok()) {
      return s;
    }
    Sorted<K, V> result;
    if (absl::Status s = AppendReceived(received, response.keys(), &result.keys); !s.ok()) {
      return s;
    }
    if (!values.empty()) {
      if (absl::Status s = AppendReceived(received, response.values(), &result.values);
          !s.ok()) {
        return s;
      }
    }
    if (return_indices) {
      if (absl::Status s = AppendReceived(received, response.indices(), &result.indices);
          !s.ok()) {
        return s;
      }
    }
    return result;
  }

 private:
  // The caller's arrays a typed request sends: each Array.data of the request
  // holds a token naming one of them, and Frame sends the bytes the token
  // names as slices over the caller's memory (no copy), which must stay valid
  // until the call is done. An empty array sends no data.
  class Payloads {
   public:
    template <typename T>
    void Set(const Input<T>& input, v1::Array* array) {
      array->set_dtype(static_cast<v1::DType>(DTypeOf<T>()));
      array->clear_data();
      if (input.resident()) {
        *array->mutable_buffer() = input.buffer();
        return;
      }
      const absl::Span<const T> values = input.values();
      if (values.empty()) return;
      const uint64_t index = bytes_.size();
      bytes_.emplace_back(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
      array->set_data(&index, sizeof(index));
    }
    // The bytes `token` names; false for data that is not one of this one's.
    bool Lookup(absl::string_view token, absl::string_view* bytes) const;
    // `request` serialized with the bytes its tokens name as slices.
    grpc::ByteBuffer Frame(google::protobuf::Message* request) const;

   private:
    std::vector<absl::string_view> bytes_;
  };

  // Sends `request`, framed by `payloads`, to the unary method `rpc` of
  // primserve.v1.Primitives (the channel's deadline, retries and service
  // config as for the generated stub), and parses the answer into `response`
  // with its arrays' payloads left in gRPC's slices, held by `received`.
  absl::Status CallFramed(absl::string_view rpc, google::protobuf::Message* request,
                          const Payloads& payloads, google::protobuf::Message* response,
                          wire::ReceivedMessage* received);

  // Whether an input of `bytes` goes as a stream (SetStreaming), and the
  // elements of a piece for elements of `element_bytes` (all arrays').
  // Never with an input in a buffer or outputs into buffers: the *Stream
  // RPCs take inline arrays only.
  template <typename... Ts>
  bool Streams(const Input<Ts>&... inputs) const {
    if ((inputs.resident() || ...) || StoresOutputs()) return false;
    return (inputs.bytes() + ...) > stream_above_bytes_;
  }
  size_t PieceElements(size_t element_bytes) const {
    return std::max<size_t>(1, stream_piece_bytes_ / element_bytes);
  }

  // One array of a streamed request: frames elements [start, start + n) of
  // the caller's array into the request's field.
  template <typename Request>
  using ArrayPieces = std::function<void(size_t start, size_t n, Payloads*, Request*)>;
  template <typename T, typename Request>
  static ArrayPieces<Request> PieceOf(absl::Span<const T> values,
                                      v1::Array* (Request::*field)()) {
    return [values, field](size_t start, size_t n, Payloads* payloads, Request* request) {
      payloads->Set(Input<T>(values.subspan(start, n)), (request->*field)());
    };
  }

  // Streams `n` elements of each of `arrays` through `rpc`, `piece_elements`
  // (at least 1) a message, each framed over the caller's memory (which
  // outlives the call); the first message also carries `parameters`. Each
  // answer goes to `on_answer` as it arrives.
  template <typename Request>
  absl::Status StreamArrays(absl::string_view rpc, const Request& parameters, size_t n,
                            size_t piece_elements,
                            const std::vector<ArrayPieces<Request>>& arrays,
                            const std::function<absl::Status(const grpc::ByteBuffer&)>& on_answer) {
    if (piece_elements == 0) return absl::InvalidArgumentError("piece_elements must be at least 1");
    size_t start = 0;
    bool first = true;
    const auto next = [&](grpc::ByteBuffer* piece) {
      if (!first && start >= n) return false;
      const size_t size = std::min(piece_elements, n - start);
      Payloads payloads;
      Request request;
      if (first) request = parameters;
      for (const ArrayPieces<Request>& array : arrays) array(start, size, &payloads, &request);
      *piece = payloads.Frame(&request);
      first = false;
      start += size;
      return true;
    };
    return StreamFramed(rpc, next, on_answer);
  }

  // The streaming method `rpc` over ByteBuffers: `next` frames the next
  // message (false: none left), written from another thread while the
  // answers are read and handed to `on_answer`.
  absl::Status StreamFramed(absl::string_view rpc,
                            const std::function<bool(grpc::ByteBuffer*)>& next,
                            const std::function<absl::Status(const grpc::ByteBuffer&)>& on_answer);

  // Parses an answer as CallFramed does (INTERNAL where it is not one).
  static absl::Status ParseAnswer(const grpc::ByteBuffer& buffer,
                                  google::protobuf::Message* answer,
                                  wire::ReceivedMessage* received);

  // Takes a SelectResponse's count (a running total in a stream) and appends
  // its arrays.
  template <typename T>
  static absl::Status AppendSelection(wire::ReceivedMessage& received,
                                      const v1::SelectResponse& response, Selection<T>* result) {
    result->count = response.count();
    if (response.has_values()) {
      if (absl::Status s = AppendReceived(received, response.values(), &result->values); !s.ok()) {
        return s;
      }
    }
    if (response.has_indices()) {
      return AppendReceived(received, response.indices(), &result->indices);
    }
    return absl::OkStatus();
  }

  // Appends the elements of `array`, an array of a message `received`
  // parsed, to `out`: its payload slices copied straight into the vector.
  // INTERNAL if the array holds another dtype.
  template <typename T>
  static absl::Status AppendReceived(wire::ReceivedMessage& received, const v1::Array& array,
                                     std::vector<T>* out) {
    if (array.dtype() != static_cast<v1::DType>(DTypeOf<T>())) {
      return absl::InternalError("response array is not of the expected dtype");
    }
    if (array.has_buffer()) return absl::OkStatus();  // stored on the server
    const wire::Payload* payload = nullptr;
    size_t size = array.data().size();
    if (received.tokens() && !array.data().empty()) {
      payload = received.Find(array.data());
      if (payload == nullptr) return absl::InternalError("a response array's data is not a payload");
      size = payload->size();
    }
    if (size % sizeof(T) != 0) {
      return absl::InternalError("response array is not of the expected dtype");
    }
    if (size == 0) return absl::OkStatus();
    const size_t old_size = out->size();
    out->resize(old_size + size / sizeof(T));
    char* to = reinterpret_cast<char*>(out->data() + old_size);
    if (payload == nullptr) {
      std::memcpy(to, array.data().data(), size);
      return absl::OkStatus();
    }
    for (const grpc::Slice& slice : payload->slices()) {
      std::memcpy(to, slice.begin(), slice.size());
      to += slice.size();
    }
    return absl::OkStatus();
  }

  template <typename Request, typename Response>
  absl::Status Stream(
      std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> (v1::Primitives::Stub::*method)(
          grpc::ClientContext*),
      const std::function<bool(Request*)>& next,
      const std::function<absl::Status(const Response&)>& on_answer);

  template <typename T>
  absl::StatusOr<Selection<T>> Select(v1::SelectRequest* request, const Payloads& payloads,
                                      v1::SelectRequest::Output output, bool partition) {
    request->set_output(output);
    request->set_partition(partition);
    v1::SelectResponse response;
    wire::ReceivedMessage received;
    if (absl::Status s = CallFramed("Select", request, payloads, &response, &received); !s.ok()) {
      return s;
    }
    Selection<T> result;
    if (absl::Status s = AppendSelection(received, response, &result); !s.ok()) return s;
    return result;
  }

  bool StoresOutputs() const { return outputs_.ByteSizeLong() != 0; }

  // Where `request` goes: channel() unless it names a buffer and routes are
  // set. The location is empty for channel().
  struct Route {
    std::shared_ptr<grpc::Channel> channel;
    std::string location;
    NamedBuffers buffers;
  };
  absl::StatusOr<Route> RouteOf(const google::protobuf::Message& request);
  // A routed call's status (an instance gone is NOT_FOUND); on success its
  // outputs are remembered at the route's location.
  absl::Status Routed(const Route& route, absl::Status status);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Primitives::Stub> stub_;
  std::shared_ptr<BufferRoutes> routes_;
  v1::OutputBuffers outputs_;
  absl::Duration timeout_;
  size_t stream_above_bytes_ = kStreamAboveBytes;
  size_t stream_piece_bytes_ = kStreamPieceBytes;
  bool reproducible_ = false;
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_CLIENT_H_
