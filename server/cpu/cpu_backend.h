// The CPU backend: the backend of machines without a GPU. Scans, reduces and
// sorts run on its own loops (cpu_kernels.h, cpu_sort.h, split over threads
// for large arrays); everything else on reference/reference.h, the oracle the
// GPU backend is tested against.
#ifndef PRIMSERVE_SERVER_CPU_CPU_BACKEND_H_
#define PRIMSERVE_SERVER_CPU_CPU_BACKEND_H_

#include "absl/status/statusor.h"
#include "server/engine/backend.h"
#include "server/cpu/cpu_kernels.h"
#include "server/engine/metrics.h"

namespace primserve {

// How one operation runs: over how many threads (cpu_kernels.h), and where
// its large answers may go (Task::answers; null: into strings).
struct CpuContext {
  cpu::Parallelism parallelism;
  const AnswerAllocator* answers = nullptr;
  // Where a pipeline's step times go (null: nowhere).
  Metrics* metrics = nullptr;
};

// Runs one validated operation: scans, reduces, selects, unique,
// run-length encode, sorts and gathers with the CPU backend's own loops
// (cpu_kernels.h, cpu_select.h, cpu_sort.h, cpu_gather.h), the rest
// (ARGMIN/ARGMAX, the keyed reductions, reproducible float sums) with the
// reference implementation.
absl::StatusOr<Result> RunOnCpu(const Operation& operation, const CpuContext& context = {});

class CpuBackend final : public ExecutionBackend {
 public:
  // Records each task's run time as stage "compute" into `metrics` unless it
  // is null. A large scan, reduce, select, unique, run-length encode, gather
  // or sort is split over up to `threads` threads (0: one per core).
  explicit CpuBackend(Metrics* metrics = nullptr, int threads = 0);

  std::string name() const override { return "cpu"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override;
  // The CUDA backend's tile sizes (gpu::ScanTileItems(dtype, false)), so
  // that a reproducible ScanStream is cut at the same places on both.
  uint64_t ReproducibleScanGranule(DType dtype) const override;
  bool WidensAccumulators() const override { return true; }

 private:
  Metrics* const metrics_;
  const cpu::Parallelism parallelism_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_CPU_CPU_BACKEND_H_
