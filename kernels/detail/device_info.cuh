// Per-device properties the launchers need, read once per device and cached
// (cudaDeviceGetAttribute is cheap, but not free on every call).
#ifndef PRIMSERVE_KERNELS_DETAIL_DEVICE_INFO_CUH_
#define PRIMSERVE_KERNELS_DETAIL_DEVICE_INFO_CUH_

#include <cuda_runtime.h>

#include <atomic>

namespace primserve::gpu::detail {

// Multiprocessor count of the current device; returns a cudaError_t as int.
inline int MultiprocessorCount(int* count) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices];  // 0 = not read yet
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device)) return static_cast<int>(e);
  if (device >= 0 && device < kMaxDevices) {
    const int cached = cache[device].load(std::memory_order_relaxed);
    if (cached > 0) {
      *count = cached;
      return 0;
    }
  }
  int sms = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(
          &sms, cudaDevAttrMultiProcessorCount, device)) {
    return static_cast<int>(e);
  }
  if (device >= 0 && device < kMaxDevices) {
    cache[device].store(sms, std::memory_order_relaxed);
  }
  *count = sms;
  return 0;
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_DEVICE_INFO_CUH_
