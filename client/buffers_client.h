// The C++ client of the Buffers service: upload an array once (Put), name
// it in requests (Ref, v1::Array.buffer, output_buffers), download it (Get),
// drop it (Free). Large transfers are striped: Put writes disjoint ranges of
// the array over several channels at once and Get reads them likewise, so
// that several connections carry more of the same link than one.
//
// Given BufferRoutes (a target naming several instances), every call that
// names a buffer goes to the instance holding it: Put creates the buffer on
// the instance the target picks, and its stripes, and every later Write,
// Get and Free, go to that instance's location.
//
//   primserve::BuffersClient buffers({PrimitivesClient::Connect(a), ...});
//   buffers.Put<int32_t>("x", values);            // striped over every channel
//   v1::ScanRequest scan;
//   *scan.mutable_input()->mutable_buffer() = primserve::BufferRef("x");
//   scan.mutable_output_buffers()->set_values("y");
//   client.Call(scan);                             // no array travels
//   absl::StatusOr<std::vector<int32_t>> y = buffers.Get<int32_t>("y");
#ifndef PRIMSERVE_CLIENT_BUFFERS_CLIENT_H_
#define PRIMSERVE_CLIENT_BUFFERS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/buffer_routes.h"
#include "core/primitives.h"
#include "grpcpp/channel.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"

namespace primserve {

class BuffersClient final {
 public:
  // Bytes per Write or Read message.
  static constexpr size_t kPieceBytes = size_t{4} << 20;

  // `channels`: one or more channels to the same server (a channel is one
  // connection: separate channels, e.g. each made with its own
  // grpc.channel_id argument, carry stripes side by side). Each call gets
  // `timeout` as its deadline.
  explicit BuffersClient(std::vector<std::shared_ptr<grpc::Channel>> channels,
                         absl::Duration timeout = absl::Seconds(600));
  // `channels` to the target as given, and the routes (shared with a
  // PrimitivesClient's RouteBuffers) to each buffer's instance, reached
  // over as many channels.
  BuffersClient(std::vector<std::shared_ptr<grpc::Channel>> channels,
                std::shared_ptr<BufferRoutes> routes, absl::Duration timeout = absl::Seconds(600));

  size_t channels() const { return channels_.size(); }

  absl::StatusOr<v1::BufferInfo> Create(const std::string& name, DType dtype, uint64_t length);
  // Creates buffer `name` holding `bytes` (whole elements of `dtype`) and
  // writes it in `stripes` disjoint ranges at once, one Write stream per
  // channel used (at most channels(); 0: all).
  absl::StatusOr<v1::BufferInfo> PutBytes(const std::string& name, DType dtype,
                                          absl::string_view bytes, size_t stripes = 0);
  template <typename T>
  absl::StatusOr<v1::BufferInfo> Put(const std::string& name, absl::Span<const T> values,
                                     size_t stripes = 0) {
    return PutBytes(name, DTypeOf<T>(),
                    absl::string_view(reinterpret_cast<const char*>(values.data()),
                                      values.size() * sizeof(T)),
                    stripes);
  }
  // Writes `bytes` at element `offset` of an existing buffer (one stream).
  absl::Status Write(const std::string& name, uint64_t offset, absl::string_view bytes,
                     size_t channel = 0);

  // The buffer's description (from List); NOT_FOUND if the caller holds none.
  absl::StatusOr<v1::BufferInfo> Info(const std::string& name);
  // The buffer's bytes, read in `stripes` ranges at once (0: every channel).
  // The string (as Get's vector) is zero-filled on one thread before the
  // first piece arrives: for a 268 MB buffer on an H200 host that was about
  // half of a 4-stripe Get. ReadInto does without.
  absl::StatusOr<std::string> GetBytes(const std::string& name, size_t stripes = 0);
  // Reads the whole buffer `info` describes (from Info or List: its name,
  // dtype, length and location) into `out`, which holds info.length()
  // elements' bytes and may be memory nothing has touched yet: each stripe's
  // thread writes its own range, so its pages are first touched by the
  // stripes at once, as they arrive.
  absl::Status ReadInto(const v1::BufferInfo& info, char* out, size_t stripes = 0);
  // The buffer's elements; INVALID_ARGUMENT if it holds another dtype.
  template <typename T>
  absl::StatusOr<std::vector<T>> Get(const std::string& name, size_t stripes = 0) {
    absl::StatusOr<v1::BufferInfo> info = Info(name);
    if (!info.ok()) return info.status();
    if (static_cast<DType>(info->dtype()) != DTypeOf<T>()) {
      return absl::InvalidArgumentError("buffer " + name + " holds " +
                                        DTypeName(static_cast<DType>(info->dtype())) +
                                        " elements, not " + DTypeName(DTypeOf<T>()));
    }
    std::vector<T> values(info->length());
    absl::Status read = ReadInto(*info, reinterpret_cast<char*>(values.data()), stripes);
    if (!read.ok()) return read;
    return values;
  }

  absl::Status Free(const std::string& name);
  // The caller's buffers on the instance the target picks.
  absl::StatusOr<v1::ListBuffersResponse> List();

  // Told the data bytes of each Write message sent and each Read piece
  // received, from the stripes' threads (for a progress display).
  void set_progress(std::function<void(uint64_t)> progress) { progress_ = std::move(progress); }

 private:
  // Elements [begin, end) of `name` into `out` (the bytes of element begin).
  absl::Status ReadRange(const std::string& location, size_t channel, const std::string& name,
                         uint64_t begin, uint64_t end, size_t element_size, char* out);
  absl::Status WriteOn(const std::string& location, size_t channel, const std::string& name,
                       uint64_t offset, absl::string_view bytes);
  size_t StripesOf(size_t asked, uint64_t elements) const;

  // Where buffer `name` is: its location when routing, else "" (the
  // channels as given).
  absl::StatusOr<std::string> Locate(const std::string& name);
  // A stub on channel `i` to `location` ("": the channels as given).
  std::unique_ptr<v1::Buffers::Stub> StubTo(const std::string& location, size_t i);
  // A call's status, with an instance gone reported as NOT_FOUND.
  static absl::Status Routed(const grpc::Status& status, const std::string& name,
                             const std::string& location);

  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::shared_ptr<BufferRoutes> routes_;  // null: one server
  const absl::Duration timeout_;
  std::function<void(uint64_t)> progress_;
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_BUFFERS_CLIENT_H_
