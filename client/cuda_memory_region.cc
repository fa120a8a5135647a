#include "client/cuda_memory_region.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/shared_memory_region.h"
#include "grpcpp/client_context.h"

namespace primserve {
namespace {

absl::Status CudaError(cudaError_t error, const char* what) {
  cudaGetLastError();
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaMemoryRegion>> CudaMemoryRegion::Create(
    std::shared_ptr<grpc::Channel> channel, std::string name, uint64_t byte_size, int device) {
  if (byte_size == 0) return absl::InvalidArgumentError("byte_size is 0");
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return CudaError(e, "cudaSetDevice");
  void* data = nullptr;
  if (cudaError_t e = cudaMalloc(&data, byte_size); e != cudaSuccess) {
    return CudaError(e, "cudaMalloc");
  }
  std::unique_ptr<CudaMemoryRegion> region(
      new CudaMemoryRegion(std::move(channel), std::move(name), data, byte_size, device));
  cudaIpcMemHandle_t handle;
  if (cudaError_t e = cudaIpcGetMemHandle(&handle, data); e != cudaSuccess) {
    return CudaError(e, "cudaIpcGetMemHandle");
  }
  v1::RegisterCudaRequest request;
  request.set_name(region->name_);
  request.set_raw_handle(std::string(reinterpret_cast<const char*>(&handle), sizeof(handle)));
  request.set_device_id(device);
  request.set_byte_size(byte_size);
  v1::RegisterResponse response;
  grpc::ClientContext context;
  const grpc::Status status =
      v1::SharedMemory::NewStub(region->channel_)->RegisterCuda(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  region->registered_ = true;
  return region;
}

CudaMemoryRegion::CudaMemoryRegion(std::shared_ptr<grpc::Channel> channel, std::string name,
                                   void* data, uint64_t size, int device)
    : channel_(std::move(channel)),
      name_(std::move(name)),
      data_(data),
      size_(size),
      device_(device) {}

CudaMemoryRegion::~CudaMemoryRegion() {
  if (registered_) UnregisterRegion(channel_, name_);
  if (cudaFree(data_) != cudaSuccess) cudaGetLastError();
}

absl::StatusOr<v1::SharedMemoryRef> CudaMemoryRegion::Ref(uint64_t offset, uint64_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) {
    return absl::InvalidArgumentError(absl::StrCat("[", offset, ", ", offset, " + ", bytes,
                                                   ") is past the end of region '", name_, "' (",
                                                   size_, " bytes)"));
  }
  v1::SharedMemoryRef ref;
  ref.set_region(name_);
  ref.set_offset(offset);
  ref.set_byte_size(bytes);
  return ref;
}

absl::StatusOr<v1::Array> CudaMemoryRegion::ArrayOf(DType dtype, uint64_t offset,
                                                    uint64_t bytes) const {
  absl::StatusOr<v1::SharedMemoryRef> ref = Ref(offset, bytes);
  if (!ref.ok()) return ref.status();
  v1::Array array;
  array.set_dtype(static_cast<v1::DType>(dtype));
  *array.mutable_shm() = *std::move(ref);
  return array;
}

absl::Status CudaMemoryRegion::Write(uint64_t offset, const void* from, uint64_t bytes) {
  if (absl::Status inside = Ref(offset, bytes).status(); !inside.ok()) return inside;
  if (cudaError_t e = cudaMemcpy(static_cast<char*>(data_) + offset, from, bytes,
                                 cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    return CudaError(e, "cudaMemcpy");
  }
  return absl::OkStatus();
}

absl::Status CudaMemoryRegion::Read(uint64_t offset, void* to, uint64_t bytes) const {
  if (absl::Status inside = Ref(offset, bytes).status(); !inside.ok()) return inside;
  if (cudaError_t e = cudaMemcpy(to, static_cast<const char*>(data_) + offset, bytes,
                                 cudaMemcpyDeviceToHost);
      e != cudaSuccess) {
    return CudaError(e, "cudaMemcpy");
  }
  return absl::OkStatus();
}

}  // namespace primserve
