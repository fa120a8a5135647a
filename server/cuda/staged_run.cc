#include "server/cuda/staged_run.h"

#include <algorithm>

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
    Slice slice;
    slice.at = const_cast<char*>(at);  // read only
    return slice;
  }
  const Slice slice{device_layout_.Add(source.size()), staged_inputs_.Add(source.size())};
  inputs_.emplace_back(&source, slice);
  return slice;
}

StagedRun::Slice StagedRun::Output(size_t max_bytes) {
  Slice slice;
  slice.device = device_layout_.Add(max_bytes);
  slice.held = Hold(max_bytes);
  if (slice.held < 0) slice.staged = staged_outputs_.Add(max_bytes);
  return slice;
}

StagedRun::Slice StagedRun::Output(size_t max_bytes, const OutputPlace& place,
                                   const char* name) {
  const int device = place.data != nullptr ? DeviceOf(place.data, place.room) : -1;
  if (place.data == nullptr) return Output(max_bytes);
  // A place in host memory: the service writes the answer there from staging.
  if (device < 0) return Slice{device_layout_.Add(max_bytes), staged_outputs_.Add(max_bytes)};
  bool overlaps = false;
  for (const auto& [at, bytes] : read_in_place_) {
    overlaps |= place.data < at + bytes && at < place.data + place.room;
  }
  Slice slice;
  if (device == lane_.device() && place.room >= max_bytes && !overlaps) {
    slice.at = place.data;
    return slice;
  }
  slice.device = device_layout_.Add(max_bytes);
  slice.place = place.data;
  slice.room = place.room;
  slice.name = name;
  return slice;
}

StagedRun::Slice StagedRun::Scratch(size_t bytes) { return Slice{device_layout_.Add(bytes), 0}; }

absl::Status StagedRun::Start() {
  absl::StatusOr<char*> staging =
      lane_.Staging(std::max(staged_inputs_.size(), staged_outputs_.size()));
  if (!staging.ok()) return staging.status();
  staging_ = *staging;
  absl::StatusOr<DeviceBlock> block =
      DeviceBlock::Allocate(lane_, device_layout_.size(), deadline_);
  if (!block.ok()) return block.status();
  block_.emplace(*std::move(block));
  PRIMSERVE_RETURN_IF_ERROR(lane_.Mark(Lane::kStart));
  for (const auto& [source, slice] : inputs_) {
    if (source->size() == 0) continue;
    // Bytes in CUDA IPC memory are copied on the device; where host pieces
    // sit beside them, the whole range goes up first and the device pieces
    // then overwrite their places (stream order).
    if (!source->AllOnDevice()) {
      const char* from = source->Pinned();
      if (from == nullptr) {
        source->StageTo(staging_ + slice.staged);
        from = staging_ + slice.staged;
      }
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(device(slice), from, source->size(),
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
  char* to = staging_ + slice.staged;
  if (slice.held >= 0) {
    to = held_[slice.held].get();
    held_copies_pending_ = true;
  }
  PRIMSERVE_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(to, device(slice), bytes, cudaMemcpyDeviceToHost, lane_.stream()));
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
  PRIMSERVE_RETURN_IF_ERROR(lane_.Mark(Lane::kOutputsOut));
  PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(lane_.stream()));
  held_copies_pending_ = false;
  return absl::OkStatus();
}

}  // namespace primserve::cuda
