// Where a batch's bytes come from and where its answers go. Today both are
// host memory: the request's bytes as parsed, and answers built in host
// buffers. Other places (a shared-memory region, device memory from a CUDA
// IPC handle, the chunks of a stream) are further implementations of these
// two interfaces; the runners see only the interfaces.
#ifndef PRIMSERVE_SERVER_CUDA_IO_H_
#define PRIMSERVE_SERVER_CUDA_IO_H_

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/task.h"

namespace primserve::cuda {

// Bytes bound for the device.
class InputSource {
 public:
  virtual ~InputSource() = default;
  virtual size_t size() const = 0;
  // Writes the size() bytes into host staging at `to`.
  virtual void StageTo(char* to) const = 0;
  // The size() bytes where the device can copy them from directly (pinned
  // host memory), or null: they must be staged.
  virtual const char* Pinned() const { return nullptr; }
};

// Pieces of host memory laid end to end (a batch's inputs, one per request).
class HostInput final : public InputSource {
 public:
  HostInput() = default;
  explicit HostInput(absl::string_view bytes) { Append(bytes); }
  template <typename T>
  explicit HostInput(absl::Span<const T> values)
      : HostInput(absl::string_view(reinterpret_cast<const char*>(values.data()),
                                    values.size() * sizeof(T))) {}

  void Append(absl::string_view piece) {
    pieces_.push_back(piece);
    size_ += piece.size();
  }
  size_t size() const override { return size_; }
  void StageTo(char* to) const override;
  // One large piece in pinned memory (a pinned shared-memory region).
  const char* Pinned() const override;

 private:
  std::vector<absl::string_view> pieces_;
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
