#include "server/cuda/lane.h"

#include <algorithm>
#include <utility>

#include "server/cuda/cuda_status.h"
#include "server/cuda/staging.h"

namespace primserve::cuda {

absl::StatusOr<std::unique_ptr<Lane>> Lane::Create(int device, size_t pinned_limit,
                                                   MemoryBudget* budget, FaultHooks* faults) {
  std::unique_ptr<Lane> lane(new Lane(device, pinned_limit, budget, faults));
  PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaSetDevice(device));
  Pipeline& p = lane->pipeline_;
  for (cudaStream_t* stream : {&lane->stream_, &p.copy_in, &p.copy_out}) {
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
  }
  for (int slot = 0; slot < kPipelineSlots; ++slot) {
    for (cudaEvent_t* event : {&p.copied_in[slot], &p.computed[slot], &p.copied_out[slot]}) {
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
    }
  }
  for (cudaEvent_t& mark : lane->marks_) PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventCreate(&mark));
  return lane;
}

Lane::~Lane() {
  cudaSetDevice(device_);
  // Nothing may still use what is destroyed below; an error here has no
  // one left to tell.
  Drain().IgnoreError();
  for (cudaEvent_t* events : {marks_, pipeline_.copied_in, pipeline_.computed,
                              pipeline_.copied_out}) {
    const int count = events == marks_ ? kNumBoundaries : kPipelineSlots;
    for (int i = 0; i < count; ++i) {
      if (events[i] != nullptr) cudaEventDestroy(events[i]);
    }
  }
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
  for (cudaStream_t s : {stream_, pipeline_.copy_in, pipeline_.copy_out}) {
    if (s != nullptr) cudaStreamDestroy(s);
  }
}

absl::Status Lane::Mark(Boundary boundary, cudaStream_t on) {
  if (boundary == kStart) timed_ = true;
  if (!timed_) return absl::OkStatus();
  PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventRecord(marks_[boundary], on));
  return absl::OkStatus();
}

absl::Status Lane::MarkSampledStart(size_t bytes) {
  if (bytes >= kAlwaysTimedBytes || sampled_starts_++ % kTimingPeriod == 0) {
    return Mark(kStart, stream_);
  }
  timed_ = false;
  return absl::OkStatus();
}

absl::Duration Lane::Between(Boundary from, Boundary to) const {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, marks_[from], marks_[to]) != cudaSuccess) {
    cudaGetLastError();  // a mark not recorded this batch: no figure
    return absl::ZeroDuration();
  }
  return absl::Milliseconds(ms);
}

absl::StatusOr<char*> Lane::Staging(size_t bytes) {
  if (bytes > pinned_limit_) {
    beyond_limit_.reset(new char[bytes]);
    return beyond_limit_.get();
  }
  if (bytes <= pinned_bytes_) return pinned_;
  const size_t grown = std::min(pinned_limit_, AlignUp(std::max(bytes, pinned_bytes_ * 2)));
  if (pinned_ != nullptr) PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaFreeHost(pinned_));
  pinned_ = nullptr;
  pinned_bytes_ = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(
      cudaHostAlloc(reinterpret_cast<void**>(&pinned_), grown, cudaHostAllocDefault));
  pinned_bytes_ = grown;
  return pinned_;
}

absl::StatusOr<void*> Lane::TempStorage(size_t bytes, absl::Time deadline) {
  return temp_.Get(bytes, stream_, deadline, faults_);
}

absl::StatusOr<void*> Lane::BatchMemory(size_t bytes, absl::Time deadline) {
  if (bytes > kBatchMemoryLimit) return nullptr;
  if (faults_ != nullptr && faults_->FailAllocation()) {
    return CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc");
  }
  return batch_.Get(bytes, stream_, deadline, nullptr);
}

absl::Status Lane::Drain() {
  absl::Status first;
  for (cudaStream_t s : {stream_, pipeline_.copy_in, pipeline_.copy_out}) {
    if (s != nullptr) first.Update(CudaStatus(cudaStreamSynchronize(s), "cudaStreamSynchronize"));
  }
  // Reported here; not to be taken for the next launch's error.
  if (!first.ok()) cudaGetLastError();
  beyond_limit_.reset();
  return first;
}

LanePool::LanePool(std::vector<std::unique_ptr<Lane>> lanes) : lanes_(std::move(lanes)) {
  {
    absl::MutexLock lock(&mu_);
    for (const auto& lane : lanes_) free_.push_back(lane.get());
  }
  tidier_ = std::thread([this] { Tidy(); });
}

LanePool::~LanePool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  tidier_.join();
}

void LanePool::ReleaseLater(Lane* lane, absl::AnyInvocable<void(absl::Status)> drained) {
  absl::MutexLock lock(&mu_);
  returned_.push_back({lane, std::move(drained)});
}

void LanePool::Tidy() {
  for (;;) {
    Returned next;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !returned_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&ready));
      if (returned_.empty()) return;  // stopping, and every lane is back
      next = std::move(returned_.front());
      returned_.pop_front();
    }
    // The lane is freed only after `drained`, which may read its marks.
    next.drained(next.lane->Drain());
    absl::MutexLock lock(&mu_);
    free_.push_back(next.lane);
  }
}

Lane* LanePool::Acquire() {
  absl::MutexLock lock(&mu_);
  auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !free_.empty(); };
  mu_.Await(absl::Condition(&available));
  Lane* lane = free_.back();
  free_.pop_back();
  return lane;
}

absl::Status LanePool::Release(Lane* lane) {
  // A batch that returned early may have left copies in flight into the
  // lane's staging; the next batch must not stage there until they land.
  absl::Status drained = lane->Drain();
  absl::MutexLock lock(&mu_);
  free_.push_back(lane);
  return drained;
}

namespace {

// What a block gives back to the budget once its free has run.
struct BudgetRelease {
  MemoryBudget* budget;
  int device;
  size_t bytes;
};

void CUDART_CB ReleaseBudget(void* data) {
  std::unique_ptr<BudgetRelease> release(static_cast<BudgetRelease*>(data));
  release->budget->Release(release->device, release->bytes);
}

}  // namespace

absl::StatusOr<DeviceBlock> DeviceBlock::Allocate(Lane& lane, size_t bytes, absl::Time deadline) {
  if (absl::Status s = lane.budget().Acquire(lane.device(), bytes, deadline); !s.ok()) return s;
  void* base = nullptr;
  const cudaError_t allocated = lane.faults() != nullptr && lane.faults()->FailAllocation()
                                    ? cudaErrorMemoryAllocation
                                    : cudaMallocAsync(&base, bytes, lane.stream());
  if (absl::Status s = CudaStatus(allocated, "cudaMallocAsync"); !s.ok()) {
    lane.budget().Release(lane.device(), bytes);
    return s;
  }
  return DeviceBlock(lane, static_cast<char*>(base), bytes);
}

DeviceBlock::DeviceBlock(DeviceBlock&& other) noexcept
    : lane_(other.lane_), base_(std::exchange(other.base_, nullptr)), bytes_(other.bytes_) {}

DeviceBlock::~DeviceBlock() {
  if (base_ == nullptr) return;
  auto release = std::make_unique<BudgetRelease>(
      BudgetRelease{&lane_->budget(), lane_->device(), bytes_});
  // The budget counts the bytes until the free has run on the stream, so a
  // waiting batch never allocates beside memory not yet given back.
  if (cudaFreeAsync(base_, lane_->stream()) == cudaSuccess &&
      cudaLaunchHostFunc(lane_->stream(), ReleaseBudget, release.get()) == cudaSuccess) {
    release.release();  // ReleaseBudget owns it now
    return;
  }
  // The stream cannot run the release (the context is lost): count the bytes
  // as free now, and clear the error so it is not taken for a later launch's.
  cudaGetLastError();
  ReleaseBudget(release.release());
}

}  // namespace primserve::cuda
