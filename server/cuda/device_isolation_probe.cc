// Whether a sticky CUDA error on one device leaves the process's other
// devices usable (issue 34; CUDA's documentation of cudaErrorLaunchFailure
// says the process must be restarted). Device 1 runs a trapping kernel while
// a thread that only ever used device 0 keeps running kernels there; then
// the thread that met the trap, and a fresh thread, each try device 0.
// Prints what each saw. Runs on a machine with two GPUs.
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "server/cuda/fault_kernels.h"

namespace {

// A short kernel and its wait on a new stream of the current device.
cudaError_t SpinOnce() {
  cudaStream_t stream;
  if (cudaError_t e = cudaStreamCreate(&stream); e != cudaSuccess) return e;
  cudaError_t e = static_cast<cudaError_t>(primserve::gpu::LaunchSpin(stream, 100000));
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  return e;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2) {
    std::printf("needs two CUDA devices; %d visible\n", devices);
    return 2;
  }
  std::atomic<bool> trapped{false}, stop{false};
  std::atomic<int> ok_before{0}, ok_after{0}, failed_after{0};
  cudaError_t first_failure = cudaSuccess;
  std::thread device0_only([&] {
    cudaSetDevice(0);
    while (!stop) {
      const bool after = trapped;
      const cudaError_t e = SpinOnce();
      if (e == cudaSuccess) {
        (after ? ok_after : ok_before)++;
      } else if (after) {
        if (failed_after++ == 0) first_failure = e;
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  cudaSetDevice(1);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  const int trap = primserve::gpu::RunTrappingKernel(stream);
  trapped = true;
  std::printf("device 1 trap: %s\n", cudaGetErrorName(static_cast<cudaError_t>(trap)));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  stop = true;
  device0_only.join();
  std::printf("thread on device 0 only: %d kernels ok before the trap, %d ok after, %d failed "
              "after (first: %s)\n",
              ok_before.load(), ok_after.load(), failed_after.load(),
              cudaGetErrorName(first_failure));
  cudaSetDevice(0);
  std::printf("the trapping thread, back on device 0: %s\n", cudaGetErrorName(SpinOnce()));
  cudaError_t fresh = cudaSuccess;
  std::thread([&] {
    cudaSetDevice(0);
    fresh = SpinOnce();
  }).join();
  std::printf("a fresh thread on device 0: %s\n", cudaGetErrorName(fresh));
  cudaSetDevice(1);
  std::printf("device 1 after the trap: %s\n", cudaGetErrorName(SpinOnce()));
  return 0;
}
