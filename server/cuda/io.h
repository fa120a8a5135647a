// Where a batch's bytes come from and where its answers go: the request's
// bytes as parsed, a (pinned) shared-memory region, or device memory from a
// CUDA IPC handle (read where it lies by the kernels of a request that runs
// alone on that device: StagedRun::Input, device_scan.h; else copied device
// to device into the batch's block). Answers are built in host buffers, or
// written by the kernels straight into an output place in a CUDA region
// (StagedRun::Output). The runners see only these interfaces.
#ifndef PRIMSERVE_SERVER_CUDA_IO_H_
#define PRIMSERVE_SERVER_CUDA_IO_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/cuda/staging.h"
#include "server/engine/task.h"

namespace primserve::cuda {

// Device memory opened from CUDA IPC handles (CUDA shared-memory regions).
// An operation's ArrayView or output place may point into one: such bytes
// are never touched on the host, only copied or used on the device. The
// backend records a range when it opens a handle and forgets it when it
// closes it.
void AddDeviceRange(const char* data, size_t bytes, int device);
void RemoveDeviceRange(const char* data);
// The device holding [data, data + bytes) when it lies inside one recorded
// range, else -1 (host memory). One atomic load while none is recorded.
int DeviceOf(const char* data, size_t bytes);

// Bytes of CUDA regions copied instead of used in place, since the process
// started (tests check the in-place paths with them): inputs copied device
// to device into a batch's block, and answers copied into their places in a
// CUDA region (device to device, or from the host by the service).
struct RegionCopies {
  std::atomic<uint64_t> input_bytes{0};
  std::atomic<uint64_t> output_bytes{0};
};
RegionCopies& RegionCopyCounters();

// Whether an operation reads or writes CUDA-region memory: an input (or
// Select's flags) in a recorded device range, or an output place in one.
// Such a request runs alone, never fused into a batch, so that its kernels
// read and write that memory where it lies (a fused launch would need every
// request's bytes in one block).
bool TouchesDevice(const ReduceOperation& op);
bool TouchesDevice(const SelectOperation& op);

// Bytes bound for the device.
class InputSource {
 public:
  virtual ~InputSource() = default;
  virtual size_t size() const = 0;
  // Writes the size() bytes into host staging at `to` (those of pieces on
  // the device excepted: CopyDevicePieces brings them).
  virtual void StageTo(char* to) const = 0;
  // The size() bytes where the device can copy them from directly (pinned
  // host memory), or null: they must be staged.
  virtual const char* Pinned() const { return nullptr; }
  // Whether some or all of the bytes are already on a device (CUDA IPC
  // memory): those need no staging, only a device-to-device copy.
  virtual bool AnyOnDevice() const { return false; }
  virtual bool AllOnDevice() const { return false; }
  // Queues on `stream` the device-to-device copies of the pieces on a device
  // to their places in [to, to + size()).
  virtual int CopyDevicePieces(char* to, cudaStream_t stream) const { return 0; }
  // The size() bytes where kernels on `device` can read them in place (one
  // piece of a CUDA region on that device), or null.
  virtual const char* InPlaceOn(int device) const { return nullptr; }
};

// Pieces of host memory, or of device memory from a CUDA region, laid end
// to end (a batch's inputs, one per request). Pieces are sorted by where
// they are as they are appended (DeviceOf).
class HostInput final : public InputSource {
 public:
  HostInput() = default;
  explicit HostInput(absl::string_view bytes) { Append(bytes); }
  template <typename T>
  explicit HostInput(absl::Span<const T> values)
      : HostInput(absl::string_view(reinterpret_cast<const char*>(values.data()),
                                    values.size() * sizeof(T))) {}

  void Append(absl::string_view piece) {
    const int device = DeviceOf(piece.data(), piece.size());
    const bool on_device = device >= 0;
    pieces_.push_back(Piece{piece, on_device, device});
    device_pieces_ += on_device;
    size_ += piece.size();
  }
  // Appends `piece` at the next kAlignment multiple (zeros in between) and
  // returns its byte offset: requests staged together, each placed as alone.
  size_t AppendAligned(absl::string_view piece) {
    static constexpr char kZeros[kAlignment] = {};
    if (const size_t padded = AlignUp(size_); padded != size_) {
      Append(absl::string_view(kZeros, padded - size_));
    }
    const size_t offset = size_;
    Append(piece);
    return offset;
  }
  size_t size() const override { return size_; }
  void StageTo(char* to) const override;
  // One large piece in pinned memory (a pinned shared-memory region).
  const char* Pinned() const override;
  bool AnyOnDevice() const override { return device_pieces_ != 0; }
  bool AllOnDevice() const override { return device_pieces_ == pieces_.size(); }
  int CopyDevicePieces(char* to, cudaStream_t stream) const override;
  const char* InPlaceOn(int device) const override {
    return pieces_.size() == 1 && pieces_[0].device == device ? pieces_[0].bytes.data() : nullptr;
  }

 private:
  struct Piece {
    absl::string_view bytes;
    bool on_device = false;
    int device = -1;
  };
  std::vector<Piece> pieces_;
  size_t device_pieces_ = 0;
  size_t size_ = 0;
};

// `size` bytes that `write` computes from host data while staging (e.g.
// flags of any dtype turned into one byte each).
class ComputedHostInput final : public InputSource {
 public:
  ComputedHostInput(size_t size, std::function<void(char*)> write)
      : size_(size), write_(std::move(write)) {}
  size_t size() const override { return size_; }
  void StageTo(char* to) const override { write_(to); }

 private:
  size_t size_;
  std::function<void(char*)> write_;
};

// Takes an answer's bytes as they come off the device, in order, in one or
// more pieces.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  // `staged` is valid for the call only.
  virtual void Accept(const char* staged, size_t bytes) = 0;
};

// An answer in a host buffer whose pages the kernel may back with 2 MB huge
// pages (transparent huge pages in madvise mode): a fresh answer of hundreds
// of MB then takes hundreds of page faults instead of tens of thousands,
// which cost more than copying it.
class HostOutput final : public OutputSink {
 public:
  explicit HostOutput(size_t expected_bytes);
  void Accept(const char* staged, size_t bytes) override { bytes_.append(staged, bytes); }
  std::string Take() && { return std::move(bytes_); }

 private:
  std::string bytes_;
};

// Whether the device copies to and from host memory at `data` directly: it
// is page-locked (cudaHostAlloc) or pinned by cudaHostRegister.
bool IsPinned(const void* data);

// `bytes` of staging as a host array of `dtype`.
HostArray ToHostArray(DType dtype, const char* staged, size_t bytes);

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_IO_H_
