// A POSIX shared-memory object this process creates and registers with a
// primserve server that runs with --shared_memory, so that requests name
// ranges of it (Array.shm, output_location) instead of carrying the bytes:
// the server reads inputs there and writes answers there.
//
//   auto region = SharedMemoryRegion::Create(channel, "mine", 2 * n * sizeof(int32_t));
//   absl::Span<int32_t> in = (*region)->Elements<int32_t>(0, n);
//   absl::Span<int32_t> out = (*region)->Elements<int32_t>(n * sizeof(int32_t), n);
//   ... fill `in` ...
//   absl::Status s = (*region)->Scan<int32_t>(in, out, Op::kSum);  // `out` holds the scan
#ifndef PRIMSERVE_CLIENT_SHARED_MEMORY_REGION_H_
#define PRIMSERVE_CLIENT_SHARED_MEMORY_REGION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/primitives.h"
#include "grpcpp/channel.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"

namespace primserve {

class SharedMemoryRegion final {
 public:
  // Creates a fresh shm object of `byte_size` bytes, maps it and registers it
  // on `channel` under `name`. The server's refusal (ALREADY_EXISTS, limits,
  // UNIMPLEMENTED without --shared_memory) comes back as it is, with nothing
  // left behind.
  static absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> Create(
      std::shared_ptr<grpc::Channel> channel, std::string name, uint64_t byte_size);
  // Unregisters (the server keeps the mapping for requests still using it),
  // unmaps and removes the object.
  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const std::string& name() const { return name_; }
  // The shm object's name, as shm_open takes it ("/primserve-client-...").
  const std::string& key() const { return key_; }
  char* data() const { return data_; }
  uint64_t size() const { return size_; }

  // `count` elements of T from byte `offset` of the region; the range must lie
  // inside it and be aligned for T (checked: an empty span otherwise).
  template <typename T>
  absl::Span<T> Elements(uint64_t offset, uint64_t count) const {
    if (offset % alignof(T) != 0 || count > size_ / sizeof(T) ||
        offset > size_ - count * sizeof(T)) {
      return {};
    }
    return absl::Span<T>(reinterpret_cast<T*>(data_ + offset), count);
  }

  // The ref naming `bytes` bytes at `at`, which must lie inside the region.
  absl::StatusOr<v1::SharedMemoryRef> Ref(const void* at, uint64_t bytes) const;
  // An Array whose elements are `elements`, inside the region.
  template <typename T>
  absl::StatusOr<v1::Array> ArrayOf(absl::Span<const T> elements) const {
    absl::StatusOr<v1::SharedMemoryRef> ref = Ref(elements.data(), elements.size() * sizeof(T));
    if (!ref.ok()) return ref.status();
    v1::Array array;
    array.set_dtype(static_cast<v1::DType>(DTypeOf<T>()));
    *array.mutable_shm() = *std::move(ref);
    return array;
  }

  // Scans `input` into `output` (both inside the region, equal lengths; they
  // may be the same span), through the server. The answer is in `output`
  // when this returns OK.
  template <typename T>
  absl::Status Scan(absl::Span<const T> input, absl::Span<T> output, Op op,
                    bool exclusive = false) {
    if (input.size() != output.size()) {
      return absl::InvalidArgumentError("a scan's output needs the input's length");
    }
    v1::ScanRequest request;
    absl::StatusOr<v1::Array> in = ArrayOf(input);
    if (!in.ok()) return in.status();
    *request.mutable_input() = *std::move(in);
    absl::StatusOr<v1::SharedMemoryRef> out = Ref(output.data(), output.size() * sizeof(T));
    if (!out.ok()) return out.status();
    *request.mutable_output_location()->mutable_values() = *std::move(out);
    request.set_op(static_cast<v1::Op>(op));
    request.set_exclusive(exclusive);
    return CallScan(request);
  }

 private:
  SharedMemoryRegion(std::shared_ptr<grpc::Channel> channel, std::string name, std::string key,
                     char* data, uint64_t size);
  absl::Status CallScan(const v1::ScanRequest& request);

  const std::shared_ptr<grpc::Channel> channel_;
  const std::string name_;
  const std::string key_;
  char* const data_;
  const uint64_t size_;
  bool registered_ = true;  // false when the server refused the registration
};

// Unregisters `name` on the server behind `channel`, best effort (a server
// that is gone has nothing to unregister): what a region's destructor does.
void UnregisterRegion(const std::shared_ptr<grpc::Channel>& channel, const std::string& name);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_SHARED_MEMORY_REGION_H_
