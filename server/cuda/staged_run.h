// The one skeleton every runner follows: plan the inputs, outputs and scratch
// of a batch, then stage the inputs and copy them in, launch, copy the
// outputs back and read them from staging. Device memory and host staging are
// both sized by the Layouts that place their slices, so no slice can lie
// outside its allocation.
//
// A small batch's device memory is the lane's kept batch memory
// (Lane::BatchMemory): no allocation, free or host callback per batch. Inputs
// and outputs that go through staging lie at the same offsets on the device
// as in staging, so the staged inputs go up in one copy and the answers
// copied back to staging come down in one (CopyBack queues, Finish merges);
// only a small batch's stage boundaries are timed, one in
// Lane::kTimingPeriod (Lane::MarkSampledStart).
//
// Memory of CUDA regions (device memory from CUDA IPC handles) takes no room
// in either: an input that lies wholly in one on the lane's device is read
// by the kernels where it lies, and an output placed in one is written there
// by the kernels, with no staging and no copy (Slice::at). An output place
// that cannot be written in place (less room than the largest answer, on
// another device, or overlapping an input read in place) gets room in the
// block, and the answer, once its size is known, one copy on the device into
// the place (Slice::place); never a trip through the host.
//
// A run given answer buffers (Task::answers) copies an inline answer of a
// single request from the device straight into one (Slice::held), from
// where it is sent: no staging and no copy on the host. Where none is free
// it goes through staging as before.
#ifndef PRIMSERVE_SERVER_CUDA_STAGED_RUN_H_
#define PRIMSERVE_SERVER_CUDA_STAGED_RUN_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/cuda/io.h"
#include "server/cuda/lane.h"
#include "server/cuda/staging.h"

namespace primserve::cuda {

class StagedRun final {
 public:
  // A slice of the batch's device memory and, for inputs and outputs, its
  // room in host staging.
  struct Slice {
    size_t device = 0;
    size_t staged = 0;
    // Device memory outside the block that is the slice: an input read in
    // place, or an output place written in place.
    char* at = nullptr;
    // An output place in a CUDA region that CopyBack copies the answer to
    // from the slice's room in the block, if it fits `room` (OutputPlace).
    char* place = nullptr;
    uint64_t room = 0;
    const char* name = nullptr;  // the OutputLocation field, for errors
    // An answer buffer that CopyBack copies the answer into instead of
    // staging (an index into held_), or -1.
    int held = -1;
    // Where `device` counts from: the block's part that mirrors staged
    // inputs, staged outputs, or the rest.
    enum Area { kRest, kStagedInputs, kStagedOutputs };
    Area area = kRest;
  };

  // A batch on `lane`; a wait for device memory ends at `deadline`. With
  // `answers` (not owned; null or empty: none), the batch is one request
  // whose inline answers may go into its answer buffers.
  StagedRun(Lane& lane, absl::Time deadline, const AnswerAllocator* answers = nullptr)
      : lane_(lane), deadline_(deadline), answers_(answers) {}
  // Waits for copies still in flight into answer buffers (a run that failed
  // between CopyBack and Finish) before the buffers go back to their pool.
  ~StagedRun();
  StagedRun(const StagedRun&) = delete;
  StagedRun& operator=(const StagedRun&) = delete;

  // Planning, before Start(). `source` must live until Start() returns.
  Slice Input(const InputSource& source);
  // Room for up to `max_bytes` of answer, on the device and in staging (or
  // in an answer buffer).
  Slice Output(size_t max_bytes);
  // The same for an output the caller may have placed (`place`, the
  // OutputLocation field `name`): a place in a CUDA region is written on the
  // device (see above), a place in host memory gets the answer from staging
  // as an unplaced output does (the service writes it there).
  Slice Output(size_t max_bytes, const OutputPlace& place, const char* name);
  // Device memory only (temporary storage).
  Slice Scratch(size_t bytes);
  // `slice` (an input that a kernel overwrites with the answer, up to
  // `max_bytes` of it) with its answer copied back into an answer buffer
  // instead of its staging, where there is one.
  Slice HoldAnswer(Slice slice, size_t max_bytes);

  // Takes staging and device memory, stages every input (one in pinned
  // memory is copied from where it is) and queues its copy to the device;
  // then the kernels may be launched.
  absl::Status Start();

  template <typename T = void>
  T* device(const Slice& slice) const {
    if (slice.at != nullptr) return reinterpret_cast<T*>(slice.at);
    const size_t area = slice.area == Slice::kStagedInputs    ? 0
                        : slice.area == Slice::kStagedOutputs ? outputs_at_
                                                              : rest_at_;
    return reinterpret_cast<T*>(base_ + area + slice.device);
  }
  // Checks a launch's result and marks the end of the kernels.
  absl::Status Launched(int cuda_error);
  // Queues the first `bytes` of `slice` back into its staging (an input's
  // own staging for a kernel that works in place; the copy itself is queued
  // by Finish, merged with its neighbours); for an output in a CUDA region's
  // place, nothing (written in place) or the copy into the place on the
  // device (after CheckRoom).
  absl::Status CopyBack(const Slice& slice, size_t bytes);
  // INVALID_ARGUMENT, naming the field, where `bytes` of answer do not fit
  // the slice's place in a CUDA region. A runner checks every output first,
  // so that nothing is written where one does not fit.
  absl::Status CheckRoom(const Slice& slice, size_t bytes) const;
  // Queues the copies back, then waits for everything queued; then staged()
  // holds what was copied back.
  absl::Status Finish();

  const char* staged(const Slice& slice) const { return staging_ + slice.staged; }
  // The answer of `bytes` at `offset` in an output slice (after Finish): in
  // its place already (HostArray::bytes_in_place), in its answer buffer
  // (HostArray::held), or read from staging.
  HostArray Answer(const Slice& slice, DType dtype, size_t bytes, size_t offset = 0) const;
  template <typename T>
  const T* staged_as(const Slice& slice) const {
    return reinterpret_cast<const T*>(staged(slice));
  }

 private:
  // A copy from the device to the host that CopyBack asked for.
  struct CopyOut {
    char* to;
    const char* from;
    size_t bytes;
    bool staged;  // else into an answer buffer
  };
  // An answer buffer for up to `bytes`, as slice.held, or -1.
  int Hold(size_t bytes);
  // Room for an output that comes back through staging.
  Slice StagedOutput(size_t max_bytes);
  // Queues copies_out_, those into staging merged where they lie side by
  // side on the device as in staging.
  absl::Status QueueCopiesOut();

  Lane& lane_;
  const absl::Time deadline_;
  const AnswerAllocator* const answers_;
  std::vector<std::shared_ptr<char>> held_;
  // Copies into answer buffers queued and not yet waited for.
  bool held_copies_pending_ = false;
  // The block: staged inputs' area, staged outputs' area (each laid out as
  // in staging), then the rest.
  Layout device_layout_;
  // Inputs and outputs share staging: stream order puts every copy out after
  // every copy in.
  Layout staged_inputs_;
  Layout staged_outputs_;
  size_t outputs_at_ = 0;
  size_t rest_at_ = 0;
  std::vector<std::pair<const InputSource*, Slice>> inputs_;
  std::vector<CopyOut> copies_out_;
  // Inputs read in place: an output place overlapping one is not written in
  // place (a kernel would overwrite elements it has still to read).
  std::vector<std::pair<const char*, size_t>> read_in_place_;
  // Bytes read and written in place (device memory outside the block).
  size_t in_place_bytes_ = 0;
  // A batch over the lane's batch memory holds a block of its own.
  std::optional<DeviceBlock> block_;
  char* base_ = nullptr;
  char* staging_ = nullptr;
};

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_STAGED_RUN_H_
