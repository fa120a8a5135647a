#include "server/cuda/staged_run.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_format.h"

#include "server/cuda/cuda_status.h"

namespace primserve::cuda {

StagedRun::~StagedRun() {
  if (held_copies_pending_ && cudaStreamSynchronize(lane_.stream()) != cudaSuccess) {
    cudaGetLastError();  // the run's own status said what failed
  }
}

int StagedRun::Hold(size_t bytes) {
  if (answers_ == nullptr || !*answers_ || bytes == 0) return -1;
  std::shared_ptr<char> buffer = (*answers_)(bytes);
  if (buffer == nullptr) return -1;
  held_.push_back(std::move(buffer));
  return static_cast<int>(held_.size()) - 1;
}

StagedRun::Slice StagedRun::HoldAnswer(Slice slice, size_t max_bytes) {
  if (slice.at == nullptr && slice.place == nullptr) slice.held = Hold(max_bytes);
  return slice;
}

StagedRun::Slice StagedRun::Input(const InputSource& source) {
  if (const char* at = source.InPlaceOn(lane_.device()); at != nullptr) {
    read_in_place_.emplace_back(at, source.size());
    in_place_bytes_ += source.size();
    Slice slice;
    slice.at = const_cast<char*>(at);  // read only
    return slice;
  }
  Slice slice;
  slice.area = Slice::kStagedInputs;
  slice.staged = staged_inputs_.Add(source.size());
  slice.device = slice.staged;
  inputs_.emplace_back(&source, slice);
  return slice;
}

StagedRun::Slice StagedRun::StagedOutput(size_t max_bytes) {
  Slice slice;
  slice.area = Slice::kStagedOutputs;
  slice.staged = staged_outputs_.Add(max_bytes);
  slice.device = slice.staged;
  return slice;
}

StagedRun::Slice StagedRun::Output(size_t max_bytes) {
  Slice slice;
  slice.held = Hold(max_bytes);
  if (slice.held < 0) return StagedOutput(max_bytes);
  slice.device = device_layout_.Add(max_bytes);
  return slice;
}

StagedRun::Slice StagedRun::Output(size_t max_bytes, const OutputPlace& place,
                                   const char* name) {
  const int device = place.data != nullptr ? DeviceOf(place.data, place.room) : -1;
  if (place.data == nullptr) return Output(max_bytes);
  // A place in host memory: the service writes the answer there from staging.
  if (device < 0) return StagedOutput(max_bytes);
  bool overlaps = false;
  for (const auto& [at, bytes] : read_in_place_) {
    overlaps |= place.data < at + bytes && at < place.data + place.room;
  }
  Slice slice;
  if (device == lane_.device() && place.room >= max_bytes && !overlaps) {
    slice.at = place.data;
    in_place_bytes_ += max_bytes;
    return slice;
  }
  slice.device = device_layout_.Add(max_bytes);
  slice.place = place.data;
  slice.room = place.room;
  slice.name = name;
  return slice;
}

StagedRun::Slice StagedRun::Scratch(size_t bytes) {
  Slice slice;
  slice.device = device_layout_.Add(bytes);
  return slice;
}

absl::Status StagedRun::Start() {
  absl::StatusOr<char*> staging =
      lane_.Staging(std::max(staged_inputs_.size(), staged_outputs_.size()));
  if (!staging.ok()) return staging.status();
  staging_ = *staging;
  outputs_at_ = staged_inputs_.size();
  rest_at_ = outputs_at_ + staged_outputs_.size();
  const size_t bytes = rest_at_ + device_layout_.size();
  absl::StatusOr<void*> kept = lane_.BatchMemory(bytes, deadline_);
  if (!kept.ok()) return kept.status();
  base_ = static_cast<char*>(*kept);
  if (base_ == nullptr) {
    absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane_, bytes, deadline_);
    if (!block.ok()) return block.status();
    block_.emplace(*std::move(block));
    base_ = block_->at<char>(0);
  }
  // Sized by all it touches: a batch on resident memory is large however
  // little of its own it needs.
  PRIMSERVE_RETURN_IF_ERROR(lane_.MarkSampledStart(bytes + in_place_bytes_));
  // Host bytes go up first, each run of inputs staged side by side in one
  // copy (the whole batch, usually); then inputs in pinned memory straight
  // from where they are. Bytes in CUDA IPC memory are copied on the device
  // last: where host pieces sit beside them, the whole range went up first
  // and the device pieces then overwrite their places (stream order).
  std::vector<const char*> pinned(inputs_.size(), nullptr);
  size_t run_begin = 0, run_end = 0;
  auto copy_run = [&]() -> absl::Status {
    if (run_end > run_begin) {
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(base_ + run_begin, staging_ + run_begin,
                                                     run_end - run_begin,
                                                     cudaMemcpyHostToDevice, lane_.stream()));
    }
    run_begin = run_end = 0;
    return absl::OkStatus();
  };
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const auto& [source, slice] = inputs_[i];
    if (source->size() == 0) continue;
    pinned[i] = source->AllOnDevice() ? nullptr : source->Pinned();
    if (source->AllOnDevice() || pinned[i] != nullptr) {
      PRIMSERVE_RETURN_IF_ERROR(copy_run());
      continue;
    }
    source->StageTo(staging_ + slice.staged);
    if (run_end == run_begin) run_begin = slice.staged;
    run_end = slice.staged + source->size();
  }
  PRIMSERVE_RETURN_IF_ERROR(copy_run());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const auto& [source, slice] = inputs_[i];
    if (source->size() == 0) continue;
    if (pinned[i] != nullptr) {
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(device(slice), pinned[i], source->size(),
                                                     cudaMemcpyHostToDevice, lane_.stream()));
    }
    if (source->AnyOnDevice()) {
      PRIMSERVE_RETURN_IF_CUDA_ERROR(
          static_cast<cudaError_t>(source->CopyDevicePieces(device<char>(slice), lane_.stream())));
    }
  }
  inputs_.clear();
  PRIMSERVE_RETURN_IF_ERROR(lane_.Mark(Lane::kInputsIn));
  if (lane_.faults() != nullptr) {
    PRIMSERVE_RETURN_IF_ERROR(
        CudaStatus(lane_.faults()->BeforeKernels(lane_.stream()), "kernel launch"));
  }
  return absl::OkStatus();
}

absl::Status StagedRun::Launched(int cuda_error) {
  PRIMSERVE_RETURN_IF_ERROR(CudaStatus(cuda_error, "kernel launch"));
  return lane_.Mark(Lane::kKernelDone);
}

absl::Status StagedRun::CheckRoom(const Slice& slice, size_t bytes) const {
  if (slice.place == nullptr || bytes <= slice.room) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "output_location.%s has room for %d bytes but the answer takes %d; nothing was written",
      slice.name, slice.room, bytes));
}

absl::Status StagedRun::CopyBack(const Slice& slice, size_t bytes) {
  if (bytes == 0 || slice.at != nullptr) return absl::OkStatus();
  if (slice.place != nullptr) {
    PRIMSERVE_RETURN_IF_ERROR(CheckRoom(slice, bytes));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(slice.place, device(slice), bytes, cudaMemcpyDefault, lane_.stream()));
    RegionCopyCounters().output_bytes += bytes;
    return absl::OkStatus();
  }
  const bool staged = slice.held < 0;
  copies_out_.push_back(CopyOut{staged ? staging_ + slice.staged : held_[slice.held].get(),
                                device<const char>(slice), bytes, staged});
  return absl::OkStatus();
}

absl::Status StagedRun::QueueCopiesOut() {
  // Device bytes between two copies into staging are copied with them up to
  // this many: a copy's fixed cost is worth more.
  constexpr size_t kMergeGap = size_t{64} << 10;
  std::stable_sort(copies_out_.begin(), copies_out_.end(),
            [](const CopyOut& a, const CopyOut& b) { return std::less<>()(a.from, b.from); });
  // Whether [to, to + bytes) meets the destination of a copy outside
  // [first, last): the merged copy's gaps must land on no other answer.
  auto meets_another = [&](const char* to, size_t bytes, size_t first, size_t last) {
    for (size_t k = 0; k < copies_out_.size(); ++k) {
      const CopyOut& other = copies_out_[k];
      if ((k < first || k >= last) && other.to < to + bytes && to < other.to + other.bytes) {
        return true;
      }
    }
    return false;
  };
  for (size_t i = 0; i < copies_out_.size();) {
    CopyOut merged = copies_out_[i];
    size_t next = i + 1;
    for (; merged.staged && next < copies_out_.size(); ++next) {
      const CopyOut& c = copies_out_[next];
      const char* const merged_end = merged.from + merged.bytes;
      const size_t bytes =
          std::max<size_t>(merged.bytes, static_cast<size_t>(c.from + c.bytes - merged.from));
      if (!c.staged || c.to - merged.to != c.from - merged.from ||
          (c.from > merged_end && static_cast<size_t>(c.from - merged_end) > kMergeGap) ||
          meets_another(merged.to, bytes, i, next + 1)) {
        break;
      }
      merged.bytes = bytes;
    }
    held_copies_pending_ |= !merged.staged;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(merged.to, merged.from, merged.bytes,
                                                   cudaMemcpyDeviceToHost, lane_.stream()));
    i = next;
  }
  copies_out_.clear();
  return absl::OkStatus();
}

HostArray StagedRun::Answer(const Slice& slice, DType dtype, size_t bytes, size_t offset) const {
  if (slice.at != nullptr || slice.place != nullptr) return HostArray{dtype, {}, bytes};
  if (slice.held >= 0) {
    const std::shared_ptr<char>& buffer = held_[slice.held];
    return HostArray{dtype, {}, 0, std::shared_ptr<char>(buffer, buffer.get() + offset),
                     bytes};
  }
  return ToHostArray(dtype, staged(slice) + offset, bytes);
}

absl::Status StagedRun::Finish() {
  PRIMSERVE_RETURN_IF_ERROR(QueueCopiesOut());
  PRIMSERVE_RETURN_IF_ERROR(lane_.Mark(Lane::kOutputsOut));
  PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(lane_.stream()));
  held_copies_pending_ = false;
  return absl::OkStatus();
}

}  // namespace primserve::cuda
