// A lane: one batch at a time on one device, with its streams, timing events
// and pinned staging, the device memory it keeps for small batches and the
// device memory a larger batch holds (DeviceBlock). The pool hands lanes out
// and takes them back only once nothing of the last batch is still in
// flight.
#ifndef PRIMSERVE_SERVER_CUDA_LANE_H_
#define PRIMSERVE_SERVER_CUDA_LANE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/cuda/device_arena.h"
#include "server/cuda/fault_hooks.h"
#include "server/engine/memory_budget.h"

namespace primserve::cuda {

class Lane final {
 public:
  // Stage boundaries of the last batch, timed on the stream.
  enum Boundary { kStart, kInputsIn, kKernelDone, kOutputsOut, kNumBoundaries };
  // A small batch is timed once in this many (timing events cost microseconds
  // of host time per batch); one whose device memory is at least
  // kAlwaysTimedBytes always is (beside its copies they cost nothing).
  static constexpr uint64_t kTimingPeriod = 64;
  static constexpr size_t kAlwaysTimedBytes = size_t{4} << 20;
  // Large inputs run as a pipeline of chunks: copies in, kernels and copies
  // out on three streams, each chunk in one of kPipelineSlots staging slots.
  static constexpr int kPipelineSlots = 3;
  struct Pipeline {
    cudaStream_t copy_in = nullptr;
    cudaStream_t copy_out = nullptr;
    cudaEvent_t copied_in[kPipelineSlots] = {};
    cudaEvent_t computed[kPipelineSlots] = {};
    cudaEvent_t copied_out[kPipelineSlots] = {};
  };

  // A lane on `device` whose pinned staging grows to at most `pinned_limit`
  // bytes. `budget` and `faults` (null: none) are not owned.
  static absl::StatusOr<std::unique_ptr<Lane>> Create(int device, size_t pinned_limit,
                                                      MemoryBudget* budget, FaultHooks* faults);
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  const Pipeline& pipeline() const { return pipeline_; }
  MemoryBudget& budget() const { return *budget_; }
  FaultHooks* faults() const { return faults_; }

  // Records `boundary` on `on` (the lane's stream by default). kStart begins
  // a batch that is timed; later boundaries are recorded only in a timed
  // batch.
  absl::Status Mark(Boundary boundary, cudaStream_t on);
  absl::Status Mark(Boundary boundary) { return Mark(boundary, stream_); }
  // kStart on the lane's stream for a batch holding `bytes` of device
  // memory, timed only as kTimingPeriod and kAlwaysTimedBytes say.
  absl::Status MarkSampledStart(size_t bytes);
  // Whether the last batch was timed: only then do its marks say anything.
  bool timed() const { return timed_; }
  // Time between two boundaries of the finished batch; zero where a mark
  // was not recorded.
  absl::Duration Between(Boundary from, Boundary to) const;

  // Host memory to stage `bytes` through. Up to the limit it is the lane's
  // pinned buffer, which grows and then stays, so steady traffic allocates
  // no host memory. Beyond the limit it is ordinary memory for this batch
  // alone (copies from it run at pageable speed), given back by Drain().
  absl::StatusOr<char*> Staging(size_t bytes);
  size_t pinned_bytes() const { return pinned_bytes_; }
  size_t pinned_limit() const { return pinned_limit_; }
  // How much the pinned staging grew since the last call (it never shrinks):
  // for a gauge of what all lanes keep.
  size_t TakePinnedGrowth() {
    const size_t growth = pinned_bytes_ - pinned_reported_;
    pinned_reported_ = pinned_bytes_;
    return growth;
  }

  // Device memory for a kernel's temporary storage that the lane keeps from
  // one batch to the next (counted in the budget while kept), so a run that
  // needs nothing else on the device allocates nothing: `bytes` up to
  // kTempStorageLimit, else null (the caller takes a DeviceBlock). Growing
  // waits for the stream, frees the old and waits for the budget until
  // `deadline`. Valid until the next call; only for work on stream().
  static constexpr size_t kTempStorageLimit = size_t{32} << 20;
  absl::StatusOr<void*> TempStorage(size_t bytes, absl::Time deadline);
  size_t temp_storage_bytes() const { return temp_.bytes(); }

  // Device memory for a whole batch (StagedRun's block), kept the same way:
  // `bytes` up to kBatchMemoryLimit, else null (the caller takes a
  // DeviceBlock). Each call is a device allocation for FaultHooks, as the
  // batch's DeviceBlock would be. Valid until the next call.
  static constexpr size_t kBatchMemoryLimit = size_t{16} << 20;
  absl::StatusOr<void*> BatchMemory(size_t bytes, absl::Time deadline);
  size_t batch_memory_bytes() const { return batch_.bytes(); }

  // Waits until every copy and kernel queued on the lane's streams has
  // finished (and with them the stream-ordered frees), then gives back
  // staging beyond the limit. The first error of the waits, if any.
  absl::Status Drain();

 private:
  // Small batches start the batch memory at this size, so that it grows
  // (a device-wide wait in cudaFree) a few times at most.
  static constexpr size_t kBatchMemoryFloor = size_t{1} << 20;

  Lane(int device, size_t pinned_limit, MemoryBudget* budget, FaultHooks* faults)
      : device_(device),
        pinned_limit_(pinned_limit),
        budget_(budget),
        faults_(faults),
        temp_(device, 0, kTempStorageLimit, budget),
        batch_(device, kBatchMemoryFloor, kBatchMemoryLimit, budget) {}

  const int device_;
  const size_t pinned_limit_;
  MemoryBudget* const budget_;
  FaultHooks* const faults_;
  cudaStream_t stream_ = nullptr;
  Pipeline pipeline_;
  cudaEvent_t marks_[kNumBoundaries] = {};
  bool timed_ = false;
  uint64_t sampled_starts_ = 0;
  char* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  size_t pinned_reported_ = 0;
  std::unique_ptr<char[]> beyond_limit_;
  // Freed after the destructor's drain.
  DeviceArena temp_;
  DeviceArena batch_;
};

// Lanes handed out one batch at a time.
class LanePool final {
 public:
  explicit LanePool(std::vector<std::unique_ptr<Lane>> lanes);
  // Waits for the lanes given back with ReleaseLater.
  ~LanePool();

  // Waits for a free lane.
  Lane* Acquire();
  // Drains `lane` (nothing of its batch stays in flight), then frees it for
  // the next batch; returns the drain's error, if any.
  absl::Status Release(Lane* lane);
  // Release on the pool's own thread, calling `drained` with the drain's
  // status before the lane is free again (it may read the lane's marks): a
  // batch whose answers are out is not held up by its drain (which waits for
  // its stream-ordered frees) nor by `drained`. (A caller answering on a
  // gRPC thread has its answer sent only once it returns.)
  void ReleaseLater(Lane* lane, absl::AnyInvocable<void(absl::Status)> drained);

  const std::vector<std::unique_ptr<Lane>>& lanes() const { return lanes_; }

 private:
  struct Returned {
    Lane* lane;
    absl::AnyInvocable<void(absl::Status)> drained;
  };
  void Tidy();

  const std::vector<std::unique_ptr<Lane>> lanes_;
  absl::Mutex mu_;
  std::vector<Lane*> free_ ABSL_GUARDED_BY(mu_);
  std::deque<Returned> returned_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread tidier_;
};

// One device allocation for a batch, stream-ordered on its lane's stream,
// counted against the device's budget until the free has run on the stream.
class DeviceBlock final {
 public:
  // Waits (until `deadline`) for room in the budget, then allocates.
  static absl::StatusOr<DeviceBlock> Allocate(Lane& lane, size_t bytes, absl::Time deadline);
  DeviceBlock(DeviceBlock&& other) noexcept;
  DeviceBlock& operator=(DeviceBlock&&) = delete;
  ~DeviceBlock();

  template <typename T = void>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(base_ + offset);
  }

 private:
  DeviceBlock(Lane& lane, char* base, size_t bytes) : lane_(&lane), base_(base), bytes_(bytes) {}
  Lane* lane_;
  char* base_;
  size_t bytes_;
};

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_LANE_H_
