// Device memory this process allocates (cudaMalloc) and registers with a
// primserve server on the same host and GPU that runs with --backend=cuda
// and --shared_memory (SharedMemory.RegisterCuda, with the allocation's
// cudaIpcMemHandle_t): requests then name ranges of it (Array.shm,
// output_location) and the server's kernels read and write it in place, no
// bytes through gRPC or the host. The server must be another process (CUDA
// IPC does not open a handle in the process that exported it).
//
//   auto region = CudaMemoryRegion::Create(channel, "mine", n * sizeof(int32_t));
//   ... fill (*region)->device_data() (cudaMemcpy, a kernel) ...
//   v1::ScanRequest request;
//   *request.mutable_input() = (*region)->ArrayOf(DType::kInt32, 0, n * 4).value();
//   *request.mutable_output_location()->mutable_values() = (*region)->Ref(0, n * 4).value();
//   // in place: after the call, device_data() holds the scan
//
// Needs libcudart: link //client:cuda_memory_region only from GPU targets.
#ifndef PRIMSERVE_CLIENT_CUDA_MEMORY_REGION_H_
#define PRIMSERVE_CLIENT_CUDA_MEMORY_REGION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/primitives.h"
#include "grpcpp/channel.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"

namespace primserve {

class CudaMemoryRegion final {
 public:
  // cudaMallocs `byte_size` bytes on `device`, exports the allocation and
  // registers it on `channel` under `name`. A CUDA error is
  // FAILED_PRECONDITION with its message; the server's refusal comes back as
  // it is (FAILED_PRECONDITION from a CPU server); nothing is left behind.
  static absl::StatusOr<std::unique_ptr<CudaMemoryRegion>> Create(
      std::shared_ptr<grpc::Channel> channel, std::string name, uint64_t byte_size,
      int device = 0);
  // Unregisters (the server closes the handle once requests using it are
  // done), then frees the memory.
  ~CudaMemoryRegion();
  CudaMemoryRegion(const CudaMemoryRegion&) = delete;
  CudaMemoryRegion& operator=(const CudaMemoryRegion&) = delete;

  const std::string& name() const { return name_; }
  // Device memory: not to be touched from the host.
  void* device_data() const { return data_; }
  uint64_t size() const { return size_; }
  int device() const { return device_; }

  // The ref naming [offset, offset + bytes) of the region; INVALID_ARGUMENT
  // past its end.
  absl::StatusOr<v1::SharedMemoryRef> Ref(uint64_t offset, uint64_t bytes) const;
  // An Array of `dtype` elements in [offset, offset + bytes).
  absl::StatusOr<v1::Array> ArrayOf(DType dtype, uint64_t offset, uint64_t bytes) const;

  // Copies between the host and [offset, offset + bytes) of the region.
  absl::Status Write(uint64_t offset, const void* from, uint64_t bytes);
  absl::Status Read(uint64_t offset, void* to, uint64_t bytes) const;

 private:
  CudaMemoryRegion(std::shared_ptr<grpc::Channel> channel, std::string name, void* data,
                   uint64_t size, int device);

  const std::shared_ptr<grpc::Channel> channel_;
  const std::string name_;
  void* const data_;
  const uint64_t size_;
  const int device_;
  bool registered_ = false;
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_CUDA_MEMORY_REGION_H_
