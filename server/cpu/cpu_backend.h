// The CPU reference backend: runs each operation with reference/reference.h.
// It is the oracle the GPU backend is tested against, and the backend of
// machines without a GPU.
#ifndef PRIMSERVE_SERVER_CPU_CPU_BACKEND_H_
#define PRIMSERVE_SERVER_CPU_CPU_BACKEND_H_

#include "absl/status/statusor.h"
#include "server/engine/backend.h"
#include "server/engine/metrics.h"

namespace primserve {

// Runs one validated operation on the CPU reference implementation.
absl::StatusOr<Result> RunOnCpu(const Operation& operation);

class CpuBackend final : public ExecutionBackend {
 public:
  // Records each task's run time as stage "compute" into `metrics` unless it
  // is null.
  explicit CpuBackend(Metrics* metrics = nullptr) : metrics_(metrics) {}

  std::string name() const override { return "cpu"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override;
  // The CUDA backend's tile sizes (gpu::ScanTileItems(dtype, false)), so
  // that a reproducible ScanStream is cut at the same places on both.
  uint64_t ReproducibleScanGranule(DType dtype) const override;

 private:
  Metrics* const metrics_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_CPU_CPU_BACKEND_H_
