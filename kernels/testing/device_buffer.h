// Device memory for the GPU tests: a buffer that frees itself and can be
// poisoned before a run, copies to and from host vectors, and CUDA_ASSERT for
// a CUDA call that must succeed (the error's name in the failure).
#ifndef PRIMSERVE_KERNELS_TESTING_DEVICE_BUFFER_H_
#define PRIMSERVE_KERNELS_TESTING_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#define CUDA_ASSERT(expr)                                                              \
  do {                                                                                 \
    const int cuda_assert_err = static_cast<int>(expr);                                \
    ASSERT_EQ(cuda_assert_err, 0) << #expr << ": "                                     \
                                  << cudaGetErrorString(                               \
                                         static_cast<cudaError_t>(cuda_assert_err));   \
  } while (0)

namespace primserve::gpu::testing {

// Device memory that frees itself; poisoned (0xAB bytes) on request.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(std::max<size_t>(bytes, 16)) {
    if (cudaMalloc(&ptr_, bytes_) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  bool ok() const { return ptr_ != nullptr; }
  int Poison() const { return cudaMemset(ptr_, 0xAB, bytes_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

template <typename T>
std::vector<T> ToHost(const void* d, size_t count) {
  std::vector<T> h(count);
  if (count) {
    EXPECT_EQ(cudaMemcpy(h.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return h;
}

template <typename T>
int ToDevice(void* d, const std::vector<T>& h) {
  return h.empty() ? 0 : cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
}

}  // namespace primserve::gpu::testing

#endif  // PRIMSERVE_KERNELS_TESTING_DEVICE_BUFFER_H_
