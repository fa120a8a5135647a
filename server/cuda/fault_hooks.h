// The points where a test can make the engine fail as a real device would.
// Production passes none; the implementation that fails on purpose
// (fault_injector.h, with its trapping kernels) is a test-only library, so
// the server binary links no such code.
#ifndef PRIMSERVE_SERVER_CUDA_FAULT_HOOKS_H_
#define PRIMSERVE_SERVER_CUDA_FAULT_HOOKS_H_

struct CUstream_st;

namespace primserve::cuda {

class FaultHooks {
 public:
  virtual ~FaultHooks() = default;
  // True when the next device allocation should fail as on a full device.
  virtual bool FailAllocation() = 0;
  // Called where a batch's kernels begin on `stream`; a CUDA error code
  // (cudaSuccess = 0 for none) fails the batch as that launch would.
  virtual int BeforeKernels(CUstream_st* stream) = 0;
};

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_FAULT_HOOKS_H_
