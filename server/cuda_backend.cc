#include "server/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpc/support/log.h"
#include "kernels/aggregate.h"
#include "kernels/reduce.h"
#include "reference/reference.h"
#include "kernels/scan.h"
#include "kernels/select.h"
#include "server/fault_kernels.h"

namespace primserve {
namespace {

// Errors after which the CUDA context is unusable until the process restarts.
bool IsSticky(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
      return true;
    default:
      return false;
  }
}

// RESOURCE_EXHAUSTED for out-of-memory, UNAVAILABLE for a sticky error (the
// device is gone for this process), INTERNAL for anything else.
absl::Status CudaStatus(int code, absl::string_view what) {
  if (code == 0) return absl::OkStatus();
  const auto error = static_cast<cudaError_t>(code);
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  if (IsSticky(error)) return absl::UnavailableError(message);
  return absl::InternalError(message);
}

#define PRIMSERVE_RETURN_IF_CUDA_ERROR(expr)                                  \
  do {                                                                        \
    if (absl::Status cuda_status = CudaStatus((expr), #expr); !cuda_status.ok()) \
      return cuda_status;                                                     \
  } while (0)

constexpr size_t kAlignment = 256;

size_t AlignUp(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Slices of one allocation, each aligned for any element type.
class Layout final {
 public:
  size_t Add(size_t bytes) {
    const size_t offset = size_;
    size_ = AlignUp(size_ + bytes);
    return offset;
  }
  size_t size() const { return std::max<size_t>(size_, kAlignment); }

 private:
  size_t size_ = 0;
};

// Requests laid end to end in one buffer, with the segment starts of the
// whole: each request contributes its own segments (or one) shifted by its
// offset, so a segmented kernel computes every request's answer at once.
struct Concatenation {
  std::vector<uint64_t> offsets;        // element offset of each request
  std::vector<uint64_t> first_segment;  // each request's first segment
  std::vector<uint64_t> segment_starts;
  uint64_t total = 0;

  void Append(uint64_t n, absl::Span<const uint64_t> segments) {
    offsets.push_back(total);
    first_segment.push_back(segment_starts.size());
    if (segments.empty()) {
      segment_starts.push_back(total);
    } else {
      for (uint64_t start : segments) segment_starts.push_back(total + start);
    }
    total += n;
  }
  uint64_t segments_of(size_t request) const {
    const uint64_t end =
        request + 1 < first_segment.size() ? first_segment[request + 1] : segment_starts.size();
    return end - first_segment[request];
  }
};

// An empty string with room for `bytes` whose pages the kernel may back with
// 2 MB huge pages (transparent huge pages in madvise mode): a fresh response
// of hundreds of MB then takes hundreds of page faults instead of tens of
// thousands, which cost more than copying it.
std::string OutputBuffer(size_t bytes) {
  std::string out;
  out.reserve(bytes);
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const auto start = reinterpret_cast<uintptr_t>(out.data());
  const uintptr_t begin = (start + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (start + bytes) & ~(kHugePage - 1);
  // Advice only: where it is refused, the pages are ordinary ones.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  return out;
}

std::string CopyOut(const char* from, size_t bytes) {
  std::string out = OutputBuffer(bytes);
  out.append(from, bytes);
  return out;
}

}  // namespace

int VisibleCudaDevices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the error; no device is an answer, not a failure
    return 0;
  }
  return count;
}

struct CudaBackend::Lane {
  int device = 0;
  cudaStream_t stream = nullptr;
  MemoryBudget* budget = nullptr;  // shared by every lane
  CudaFaultInjector* faults = nullptr;  // tests only
  char* pinned = nullptr;
  size_t pinned_bytes = 0;
  // Stage boundaries of the last batch, timed on the stream.
  enum Boundary { kStart, kInputsIn, kKernelDone, kOutputsOut, kNumBoundaries };
  cudaEvent_t marks[kNumBoundaries] = {};
  // Large scans run as a pipeline of chunks: copies in, scans and copies out
  // on three streams, each chunk in one of kPipelineSlots staging slots.
  static constexpr int kPipelineSlots = 3;
  cudaStream_t copy_in = nullptr;
  cudaStream_t copy_out = nullptr;
  cudaEvent_t copied_in[kPipelineSlots] = {};
  cudaEvent_t scanned[kPipelineSlots] = {};
  cudaEvent_t copied_out[kPipelineSlots] = {};

  ~Lane() {
    for (cudaEvent_t* events : {marks, copied_in, scanned, copied_out}) {
      const int count = events == marks ? kNumBoundaries : kPipelineSlots;
      for (int i = 0; i < count; ++i) {
        if (events[i] != nullptr) cudaEventDestroy(events[i]);
      }
    }
    if (pinned != nullptr) cudaFreeHost(pinned);
    for (cudaStream_t s : {stream, copy_in, copy_out}) {
      if (s != nullptr) cudaStreamDestroy(s);
    }
  }

  void Mark(Boundary boundary, cudaStream_t on) { cudaEventRecord(marks[boundary], on); }
  void Mark(Boundary boundary) { Mark(boundary, stream); }

  // Time between two boundaries of the finished batch.
  absl::Duration Between(Boundary from, Boundary to) const {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, marks[from], marks[to]) != cudaSuccess) {
      cudaGetLastError();  // a mark not recorded this batch: no figure
      return absl::ZeroDuration();
    }
    return absl::Milliseconds(ms);
  }

  // Pinned staging of at least `bytes`; grows (doubling) and then stays, so
  // steady traffic allocates no host memory.
  absl::Status EnsurePinned(size_t bytes) {
    if (bytes <= pinned_bytes) return absl::OkStatus();
    const size_t grown = AlignUp(std::max(bytes, pinned_bytes * 2));
    if (pinned != nullptr) PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaFreeHost(pinned));
    pinned = nullptr;
    pinned_bytes = 0;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaHostAlloc(reinterpret_cast<void**>(&pinned), grown, cudaHostAllocDefault));
    pinned_bytes = grown;
    return absl::OkStatus();
  }
};

namespace {

using Lane = CudaBackend::Lane;

// One device allocation for a batch, stream-ordered from the device's pool.
class DeviceBlock final {
 public:
  // Waits for room in the budget, then allocates.
  static absl::StatusOr<DeviceBlock> Allocate(Lane& lane, size_t bytes) {
    if (absl::Status s = lane.budget->Acquire(bytes); !s.ok()) return s;
    void* base = nullptr;
    const cudaError_t allocated =
        lane.faults != nullptr && lane.faults->Fire(CudaFault::kAllocation)
            ? cudaErrorMemoryAllocation
            : cudaMallocAsync(&base, bytes, lane.stream);
    if (absl::Status s = CudaStatus(allocated, "cudaMallocAsync"); !s.ok()) {
      lane.budget->Release(bytes);
      return s;
    }
    return DeviceBlock(lane, static_cast<char*>(base), bytes);
  }
  DeviceBlock(DeviceBlock&& other) noexcept
      : lane_(other.lane_), base_(std::exchange(other.base_, nullptr)), bytes_(other.bytes_) {}
  ~DeviceBlock() {
    if (base_ == nullptr) return;
    cudaFreeAsync(base_, lane_->stream);
    lane_->budget->Release(bytes_);
  }
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

absl::Status CopyIn(Lane& lane, void* device, const void* host, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  PRIMSERVE_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, lane.stream));
  return absl::OkStatus();
}

absl::Status CopyBack(Lane& lane, void* host, const void* device, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  PRIMSERVE_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, lane.stream));
  return absl::OkStatus();
}

// A launch fault a test armed, fired where a batch's kernels begin on the
// lane's stream.
absl::Status InjectedLaunchFault(Lane& lane) {
  if (lane.faults == nullptr) return absl::OkStatus();
  if (lane.faults->Fire(CudaFault::kLaunch)) {
    return CudaStatus(gpu::LaunchImpossibleKernel(lane.stream), "kernel launch");
  }
  if (lane.faults->Fire(CudaFault::kSticky)) {
    return CudaStatus(gpu::RunTrappingKernel(lane.stream), "kernel");
  }
  return absl::OkStatus();
}

// The inputs are on the device and the batch's kernels come next.
absl::Status StartKernels(Lane& lane) {
  lane.Mark(Lane::kInputsIn);
  return InjectedLaunchFault(lane);
}

absl::Status Wait(Lane& lane) {
  PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(lane.stream));
  return absl::OkStatus();
}

// Staging: the concatenated inputs copied into pinned memory at `at`.
void Pack(char* at, absl::Span<const ArrayView> inputs) {
  for (const ArrayView& input : inputs) {
    if (!input.bytes.empty()) std::memcpy(at, input.bytes.data(), input.bytes.size());
    at += input.bytes.size();
  }
}

gpu::SelectKeep KeepOf(const PredicateSpec& predicate) {
  gpu::SelectKeep keep;
  keep.kind = predicate.kind;
  static_assert(sizeof(keep.operand) == sizeof(predicate.operand_bits));
  std::memcpy(keep.operand, &predicate.operand_bits, sizeof(keep.operand));
  std::memcpy(keep.upper, &predicate.upper_bits, sizeof(keep.upper));
  return keep;
}

// flags[i] != 0 as one byte each, the form the select kernels take.
void PackFlags(uint8_t* at, const ArrayView& flags) {
  VisitDType(flags.dtype, [&](auto zero) {
    using F = decltype(zero);
    for (F flag : flags.as<F>()) *at++ = flag != F(0);
  });
}

template <typename Kind>
std::vector<const Kind*> OperationsOf(absl::Span<Task* const> tasks) {
  std::vector<const Kind*> ops;
  ops.reserve(tasks.size());
  for (Task* task : tasks) ops.push_back(&std::get<Kind>(task->operation));
  return ops;
}

using Results = std::vector<absl::StatusOr<Result>>;

// Elements per pipeline chunk: large enough that a copy runs near full
// bandwidth, small enough that the first and last chunks (which do not
// overlap) are a small part of the whole.
constexpr uint64_t kPipelineChunkBytes = uint64_t{32} << 20;

// One large unsegmented scan as a pipeline: while chunk k is scanned, chunk
// k+1 is copied in and chunk k-1 copied out, and the host stages the next
// chunk; the running prefix stays on the device.
absl::StatusOr<Result> RunPipelinedScan(Lane& lane, const ScanOperation& op) {
  const DType dtype = op.input.dtype;
  const size_t element = DTypeSize(dtype);
  const uint64_t n = op.input.size();
  const uint64_t chunk = kPipelineChunkBytes / element;
  const uint64_t chunks = (n + chunk - 1) / chunk;
  const size_t chunk_bytes = chunk * element;
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::ScanWithCarry(nullptr, &temp_bytes, nullptr, nullptr, chunk,
                                                    dtype, op.op, op.exclusive, nullptr, nullptr,
                                                    lane.stream));
  Layout layout;
  const size_t slots = layout.Add(Lane::kPipelineSlots * chunk_bytes);
  const size_t carry = layout.Add(element);
  const size_t temp = layout.Add(temp_bytes);
  if (absl::Status s = lane.EnsurePinned(Lane::kPipelineSlots * chunk_bytes); !s.ok()) return s;
  absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane, layout.size());
  if (!block.ok()) return block.status();

  // Whatever happens, no copy or scan may outlive this call's buffers.
  absl::Cleanup drain = [&lane] {
    for (cudaStream_t stream : {lane.copy_in, lane.stream, lane.copy_out}) {
      cudaStreamSynchronize(stream);
    }
  };
  std::string output = OutputBuffer(n * element);
  const char* input = op.input.bytes.data();
  auto bytes_of = [&](uint64_t k) { return std::min<uint64_t>(chunk, n - k * chunk) * element; };
  // Waits for chunk k's copy out, then appends it to the answer (chunks
  // finish in order).
  auto finish = [&](uint64_t k) -> absl::Status {
    const int slot = k % Lane::kPipelineSlots;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(lane.copied_out[slot]));
    output.append(lane.pinned + slot * chunk_bytes, bytes_of(k));
    return absl::OkStatus();
  };
  lane.Mark(Lane::kStart, lane.copy_in);
  for (uint64_t k = 0; k < chunks; ++k) {
    const int slot = k % Lane::kPipelineSlots;
    if (k >= Lane::kPipelineSlots) {
      if (absl::Status s = finish(k - Lane::kPipelineSlots); !s.ok()) return s;
    }
    char* staged = lane.pinned + slot * chunk_bytes;
    char* device = block->at<char>(slots) + slot * chunk_bytes;
    std::memcpy(staged, input + k * chunk_bytes, bytes_of(k));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(device, staged, bytes_of(k), cudaMemcpyHostToDevice, lane.copy_in));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventRecord(lane.copied_in[slot], lane.copy_in));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(lane.stream, lane.copied_in[slot], 0));
    if (k == 0) {
      if (absl::Status s = InjectedLaunchFault(lane); !s.ok()) return s;
    }
    PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::ScanWithCarry(
        block->at(temp), &temp_bytes, device, device, bytes_of(k) / element, dtype, op.op,
        op.exclusive, k == 0 ? nullptr : block->at(carry), block->at(carry), lane.stream));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventRecord(lane.scanned[slot], lane.stream));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(lane.copy_out, lane.scanned[slot], 0));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(staged, device, bytes_of(k), cudaMemcpyDeviceToHost, lane.copy_out));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventRecord(lane.copied_out[slot], lane.copy_out));
  }
  lane.Mark(Lane::kInputsIn, lane.copy_in);
  lane.Mark(Lane::kKernelDone, lane.stream);
  lane.Mark(Lane::kOutputsOut, lane.copy_out);
  for (uint64_t k = chunks > Lane::kPipelineSlots ? chunks - Lane::kPipelineSlots : 0; k < chunks;
       ++k) {
    if (absl::Status s = finish(k); !s.ok()) return s;
  }
  return ScanResult{HostArray{dtype, std::move(output)}};
}

absl::StatusOr<Results> RunScans(Lane& lane, absl::Span<const ScanOperation* const> ops) {
  const ScanOperation& first = *ops.front();
  if (ops.size() == 1 && first.segment_offsets.empty() &&
      first.input.bytes.size() > 2 * kPipelineChunkBytes) {
    return Results{RunPipelinedScan(lane, first)};
  }
  const size_t element = DTypeSize(first.input.dtype);
  Concatenation all;
  std::vector<ArrayView> inputs;
  for (const ScanOperation* op : ops) {
    all.Append(op->input.size(), op->segment_offsets);
    inputs.push_back(op->input);
  }
  const bool segmented = ops.size() > 1 || !first.segment_offsets.empty();
  const uint64_t num_segments = all.segment_starts.size();
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(
      segmented ? gpu::SegmentedScan(nullptr, &temp_bytes, nullptr, nullptr, all.total, nullptr,
                                     num_segments, first.input.dtype, first.op, first.exclusive,
                                     lane.stream)
                : gpu::Scan(nullptr, &temp_bytes, nullptr, nullptr, all.total, first.input.dtype,
                            first.op, first.exclusive, lane.stream));
  Layout layout;
  const size_t data = layout.Add(all.total * element);
  const size_t starts = layout.Add(num_segments * sizeof(uint64_t));
  const size_t temp = layout.Add(temp_bytes);
  if (absl::Status s = lane.EnsurePinned(all.total * element); !s.ok()) return s;
  absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane, layout.size());
  if (!block.ok()) return block.status();

  lane.Mark(Lane::kStart);

  Pack(lane.pinned, inputs);
  if (absl::Status s = CopyIn(lane, block->at(data), lane.pinned, all.total * element); !s.ok()) {
    return s;
  }
  if (segmented) {
    // Pageable copy of a small array: the driver stages it before returning.
    if (absl::Status s = CopyIn(lane, block->at(starts), all.segment_starts.data(),
                                num_segments * sizeof(uint64_t));
        !s.ok()) {
      return s;
    }
  }
  // In place: the scan overwrites its input, halving the device memory.
  if (absl::Status s = StartKernels(lane); !s.ok()) return s;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(
      segmented ? gpu::SegmentedScan(block->at(temp), &temp_bytes, block->at(data),
                                     block->at(data), all.total, block->at<uint64_t>(starts),
                                     num_segments, first.input.dtype, first.op, first.exclusive,
                                     lane.stream)
                : gpu::Scan(block->at(temp), &temp_bytes, block->at(data), block->at(data),
                            all.total, first.input.dtype, first.op, first.exclusive, lane.stream));
  lane.Mark(Lane::kKernelDone);
  if (absl::Status s = CopyBack(lane, lane.pinned, block->at(data), all.total * element); !s.ok()) {
    return s;
  }
  lane.Mark(Lane::kOutputsOut);
  if (absl::Status s = Wait(lane); !s.ok()) return s;

  Results results;
  for (size_t i = 0; i < ops.size(); ++i) {
    results.push_back(ScanResult{HostArray{
        first.input.dtype,
        CopyOut(lane.pinned + all.offsets[i] * element, ops[i]->input.bytes.size())}});
  }
  return results;
}

absl::StatusOr<Results> RunReduces(Lane& lane, absl::Span<const ReduceOperation* const> ops) {
  const ReduceOperation& first = *ops.front();
  const DType dtype = first.input.dtype;
  const size_t element = DTypeSize(dtype);
  const bool arg = first.op == Op::kArgMin || first.op == Op::kArgMax;
  Concatenation all;
  std::vector<ArrayView> inputs;
  for (const ReduceOperation* op : ops) {
    all.Append(op->input.size(), op->segment_offsets);
    inputs.push_back(op->input);
  }
  const uint64_t num_segments = all.segment_starts.size();
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::SegmentedReduce(nullptr, &temp_bytes, nullptr, all.total,
                                                      nullptr, num_segments, dtype, first.op,
                                                      nullptr, nullptr, lane.stream));
  Layout layout;
  const size_t data = layout.Add(all.total * element);
  const size_t starts = layout.Add(num_segments * sizeof(uint64_t));
  const size_t values = layout.Add(num_segments * element);
  const size_t indices = layout.Add(num_segments * sizeof(int64_t));
  const size_t temp = layout.Add(temp_bytes);
  const size_t out_bytes = num_segments * (element + sizeof(int64_t));
  if (absl::Status s = lane.EnsurePinned(std::max(all.total * element, out_bytes)); !s.ok()) {
    return s;
  }
  absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane, layout.size());
  if (!block.ok()) return block.status();

  lane.Mark(Lane::kStart);

  Pack(lane.pinned, inputs);
  if (absl::Status s = CopyIn(lane, block->at(data), lane.pinned, all.total * element); !s.ok()) {
    return s;
  }
  if (absl::Status s = CopyIn(lane, block->at(starts), all.segment_starts.data(),
                              num_segments * sizeof(uint64_t));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = StartKernels(lane); !s.ok()) return s;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::SegmentedReduce(
      block->at(temp), &temp_bytes, block->at(data), all.total, block->at<uint64_t>(starts),
      num_segments, dtype, first.op, block->at(values),
      arg ? block->at<int64_t>(indices) : nullptr, lane.stream));
  lane.Mark(Lane::kKernelDone);
  // Stream order lets the outputs reuse the staging the inputs came from.
  char* values_out = lane.pinned;
  auto* indices_out = reinterpret_cast<int64_t*>(lane.pinned + AlignUp(num_segments * element));
  if (absl::Status s = CopyBack(lane, values_out, block->at(values), num_segments * element);
      !s.ok()) {
    return s;
  }
  if (arg) {
    if (absl::Status s = CopyBack(lane, indices_out, block->at(indices),
                                  num_segments * sizeof(int64_t));
        !s.ok()) {
      return s;
    }
  }
  lane.Mark(Lane::kOutputsOut);
  if (absl::Status s = Wait(lane); !s.ok()) return s;

  Results results;
  for (size_t i = 0; i < ops.size(); ++i) {
    const uint64_t first_segment = all.first_segment[i];
    const uint64_t count = all.segments_of(i);
    ReduceResult result{
        HostArray{dtype, CopyOut(values_out + first_segment * element, count * element)},
        std::nullopt};
    if (arg) {
      // The kernel indexes the whole batch; each caller wants its own indices.
      std::vector<int64_t> own(indices_out + first_segment, indices_out + first_segment + count);
      for (int64_t& index : own) {
        if (index >= 0) index -= static_cast<int64_t>(all.offsets[i]);
      }
      result.indices = HostArray::Of<int64_t>(DType::kInt64, own);
    }
    results.push_back(std::move(result));
  }
  return results;
}

bool WantsValues(SelectOutput output) {
  return output == SelectOutput::kValues || output == SelectOutput::kValuesAndIndices;
}
bool WantsIndices(SelectOutput output) {
  return output == SelectOutput::kIndices || output == SelectOutput::kValuesAndIndices;
}

// A select's answer from staging: `count` kept, and the first `returned`
// values and indices at `values` and `indices`, as far as the request asked
// for them.
SelectResult SelectAnswer(const SelectOperation& op, uint64_t count, uint64_t returned,
                          const char* values, const char* indices) {
  SelectResult result;
  result.count = count;
  if (WantsValues(op.output)) {
    result.values = HostArray{op.input.dtype, CopyOut(values, returned * DTypeSize(op.input.dtype))};
  }
  if (WantsIndices(op.output)) {
    result.indices = HostArray{DType::kInt64, CopyOut(indices, returned * sizeof(int64_t))};
  }
  return result;
}

// Select or partition of one request.
absl::StatusOr<Result> RunSelect(Lane& lane, const SelectOperation& op) {
  const DType dtype = op.input.dtype;
  const size_t element = DTypeSize(dtype);
  const uint64_t n = op.input.size();
  const bool values_wanted = WantsValues(op.output);
  const bool indices_wanted = WantsIndices(op.output);
  size_t temp_bytes = 0;
  gpu::SelectKeep keep = op.predicate ? KeepOf(*op.predicate) : gpu::SelectKeep{};
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::Select(nullptr, &temp_bytes, nullptr, dtype, n, keep,
                                             op.partition, nullptr, nullptr, nullptr,
                                             lane.stream));
  Layout layout;
  const size_t data = layout.Add(n * element);
  const size_t flags = layout.Add(op.flags ? n : 0);
  const size_t values = layout.Add(values_wanted ? n * element : 0);
  const size_t indices = layout.Add(indices_wanted ? n * sizeof(int64_t) : 0);
  const size_t count = layout.Add(sizeof(uint64_t));
  const size_t temp = layout.Add(temp_bytes);
  const size_t staged_in = AlignUp(n * element) + (op.flags ? n : 0);
  const size_t staged_out = AlignUp(n * element) + n * sizeof(int64_t) + kAlignment;
  if (absl::Status s = lane.EnsurePinned(std::max(staged_in, staged_out)); !s.ok()) return s;
  absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane, layout.size());
  if (!block.ok()) return block.status();

  lane.Mark(Lane::kStart);

  Pack(lane.pinned, {op.input});
  if (absl::Status s = CopyIn(lane, block->at(data), lane.pinned, n * element); !s.ok()) return s;
  if (op.flags) {
    auto* staged_flags = reinterpret_cast<uint8_t*>(lane.pinned + AlignUp(n * element));
    PackFlags(staged_flags, *op.flags);
    if (absl::Status s = CopyIn(lane, block->at(flags), staged_flags, n); !s.ok()) return s;
    keep = gpu::MakeFlagsKeep(block->at<uint8_t>(flags));
  }
  if (absl::Status s = StartKernels(lane); !s.ok()) return s;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::Select(
      block->at(temp), &temp_bytes, block->at(data), dtype, n, keep, op.partition,
      values_wanted ? block->at(values) : nullptr,
      indices_wanted ? block->at<int64_t>(indices) : nullptr, block->at<uint64_t>(count),
      lane.stream));
  lane.Mark(Lane::kKernelDone);
  uint64_t kept = 0;
  if (absl::Status s = CopyBack(lane, &kept, block->at(count), sizeof(kept)); !s.ok()) return s;
  lane.Mark(Lane::kOutputsOut);
  if (absl::Status s = Wait(lane); !s.ok()) return s;

  const uint64_t returned = op.partition ? n : kept;
  char* values_out = lane.pinned;
  auto* indices_out = reinterpret_cast<int64_t*>(lane.pinned + AlignUp(n * element));
  if (values_wanted) {
    if (absl::Status s = CopyBack(lane, values_out, block->at(values), returned * element);
        !s.ok()) {
      return s;
    }
  }
  if (indices_wanted) {
    if (absl::Status s = CopyBack(lane, indices_out, block->at(indices),
                                  returned * sizeof(int64_t));
        !s.ok()) {
      return s;
    }
  }
  lane.Mark(Lane::kOutputsOut);
  if (absl::Status s = Wait(lane); !s.ok()) return s;
  return SelectAnswer(op, kept, returned, values_out, reinterpret_cast<char*>(indices_out));
}

// Many selects (no partition) in one segmented launch: each request is a
// segment and is compacted into its own slot.
absl::StatusOr<Results> RunSelects(Lane& lane, absl::Span<const SelectOperation* const> ops) {
  const SelectOperation& first = *ops.front();
  if (ops.size() == 1 || first.partition) {
    Results results;
    for (const SelectOperation* op : ops) results.push_back(RunSelect(lane, *op));
    return results;
  }
  const DType dtype = first.input.dtype;
  const size_t element = DTypeSize(dtype);
  const bool values_wanted = WantsValues(first.output);
  const bool indices_wanted = WantsIndices(first.output);
  Concatenation all;
  std::vector<ArrayView> inputs;
  for (const SelectOperation* op : ops) {
    all.Append(op->input.size(), {});
    inputs.push_back(op->input);
  }
  const uint64_t n = all.total;
  const uint64_t num_segments = all.segment_starts.size();
  gpu::SelectKeep keep = first.predicate ? KeepOf(*first.predicate) : gpu::SelectKeep{};
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::SegmentedSelect(nullptr, &temp_bytes, nullptr, dtype, n,
                                                      nullptr, num_segments, keep, nullptr,
                                                      nullptr, nullptr, lane.stream));
  Layout layout;
  const size_t data = layout.Add(n * element);
  const size_t flags = layout.Add(first.flags ? n : 0);
  const size_t starts = layout.Add(num_segments * sizeof(uint64_t));
  const size_t values = layout.Add(values_wanted ? n * element : 0);
  const size_t indices = layout.Add(indices_wanted ? n * sizeof(int64_t) : 0);
  const size_t counts = layout.Add(num_segments * sizeof(uint64_t));
  const size_t temp = layout.Add(temp_bytes);
  // Staging holds the inputs (and flags), then the outputs and counts.
  const size_t out_values = 0;
  const size_t out_indices = AlignUp(n * element);
  const size_t out_counts = out_indices + AlignUp(n * sizeof(int64_t));
  const size_t staged = std::max(out_counts + num_segments * sizeof(uint64_t),
                                 AlignUp(n * element) + n);
  if (absl::Status s = lane.EnsurePinned(staged); !s.ok()) return s;
  absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane, layout.size());
  if (!block.ok()) return block.status();

  lane.Mark(Lane::kStart);

  Pack(lane.pinned, inputs);
  if (absl::Status s = CopyIn(lane, block->at(data), lane.pinned, n * element); !s.ok()) return s;
  if (first.flags) {
    auto* staged_flags = reinterpret_cast<uint8_t*>(lane.pinned + AlignUp(n * element));
    for (size_t i = 0; i < ops.size(); ++i) PackFlags(staged_flags + all.offsets[i], *ops[i]->flags);
    if (absl::Status s = CopyIn(lane, block->at(flags), staged_flags, n); !s.ok()) return s;
    keep = gpu::MakeFlagsKeep(block->at<uint8_t>(flags));
  }
  if (absl::Status s = CopyIn(lane, block->at(starts), all.segment_starts.data(),
                              num_segments * sizeof(uint64_t));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = StartKernels(lane); !s.ok()) return s;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::SegmentedSelect(
      block->at(temp), &temp_bytes, block->at(data), dtype, n, block->at<uint64_t>(starts),
      num_segments, keep, values_wanted ? block->at(values) : nullptr,
      indices_wanted ? block->at<int64_t>(indices) : nullptr, block->at<uint64_t>(counts),
      lane.stream));
  lane.Mark(Lane::kKernelDone);
  // A batch is small by construction: one whole copy beats a copy per request.
  if (values_wanted) {
    if (absl::Status s = CopyBack(lane, lane.pinned + out_values, block->at(values), n * element);
        !s.ok()) {
      return s;
    }
  }
  if (indices_wanted) {
    if (absl::Status s = CopyBack(lane, lane.pinned + out_indices, block->at(indices),
                                  n * sizeof(int64_t));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = CopyBack(lane, lane.pinned + out_counts, block->at(counts),
                                num_segments * sizeof(uint64_t));
      !s.ok()) {
    return s;
  }
  lane.Mark(Lane::kOutputsOut);
  if (absl::Status s = Wait(lane); !s.ok()) return s;

  const auto* kept = reinterpret_cast<const uint64_t*>(lane.pinned + out_counts);
  Results results;
  for (size_t i = 0; i < ops.size(); ++i) {
    const uint64_t offset = all.offsets[i];
    results.push_back(SelectAnswer(*ops[i], kept[i], kept[i],
                                   lane.pinned + out_values + offset * element,
                                   lane.pinned + out_indices + offset * sizeof(int64_t)));
  }
  return results;
}

// Unique and RunLengthEncode of one request.
absl::StatusOr<Result> RunRuns(Lane& lane, const ArrayView& input, bool with_lengths) {
  const DType dtype = input.dtype;
  const size_t element = DTypeSize(dtype);
  const uint64_t n = input.size();
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(
      with_lengths ? gpu::RunLengthEncode(nullptr, &temp_bytes, nullptr, dtype, n, nullptr,
                                          nullptr, nullptr, lane.stream)
                   : gpu::Unique(nullptr, &temp_bytes, nullptr, dtype, n, nullptr, nullptr,
                                 lane.stream));
  Layout layout;
  const size_t data = layout.Add(n * element);
  const size_t values = layout.Add(n * element);
  const size_t lengths = layout.Add(with_lengths ? n * sizeof(int64_t) : 0);
  const size_t count = layout.Add(sizeof(uint64_t));
  const size_t temp = layout.Add(temp_bytes);
  if (absl::Status s = lane.EnsurePinned(AlignUp(n * element) + n * sizeof(int64_t)); !s.ok()) {
    return s;
  }
  absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane, layout.size());
  if (!block.ok()) return block.status();
  lane.Mark(Lane::kStart);
  Pack(lane.pinned, {input});
  if (absl::Status s = CopyIn(lane, block->at(data), lane.pinned, n * element); !s.ok()) return s;
  if (absl::Status s = StartKernels(lane); !s.ok()) return s;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(
      with_lengths
          ? gpu::RunLengthEncode(block->at(temp), &temp_bytes, block->at(data), dtype, n,
                                 block->at(values), block->at<int64_t>(lengths),
                                 block->at<uint64_t>(count), lane.stream)
          : gpu::Unique(block->at(temp), &temp_bytes, block->at(data), dtype, n,
                        block->at(values), block->at<uint64_t>(count), lane.stream));
  lane.Mark(Lane::kKernelDone);
  uint64_t runs = 0;
  if (absl::Status s = CopyBack(lane, &runs, block->at(count), sizeof(runs)); !s.ok()) return s;
  lane.Mark(Lane::kOutputsOut);
  if (absl::Status s = Wait(lane); !s.ok()) return s;
  char* values_out = lane.pinned;
  char* lengths_out = lane.pinned + AlignUp(n * element);
  if (absl::Status s = CopyBack(lane, values_out, block->at(values), runs * element); !s.ok()) {
    return s;
  }
  if (with_lengths) {
    if (absl::Status s =
            CopyBack(lane, lengths_out, block->at(lengths), runs * sizeof(int64_t));
        !s.ok()) {
      return s;
    }
  }
  lane.Mark(Lane::kOutputsOut);
  if (absl::Status s = Wait(lane); !s.ok()) return s;
  HostArray unique{dtype, CopyOut(values_out, runs * element)};
  if (!with_lengths) return UniqueResult{std::move(unique)};
  return RunLengthEncodeResult{std::move(unique),
                               HostArray{DType::kInt64, CopyOut(lengths_out, runs * sizeof(int64_t))}};
}

absl::StatusOr<Result> RunReduceByKey(Lane& lane, const ReduceByKeyOperation& op) {
  const uint64_t n = op.keys.size();
  const size_t key_size = DTypeSize(op.keys.dtype);
  const size_t value_size = DTypeSize(op.values.dtype);
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::ReduceByKey(nullptr, &temp_bytes, nullptr, op.keys.dtype,
                                                  nullptr, op.values.dtype, n, op.op, nullptr,
                                                  nullptr, nullptr, lane.stream));
  Layout layout;
  const size_t keys = layout.Add(n * key_size);
  const size_t values = layout.Add(n * value_size);
  const size_t keys_out = layout.Add(n * key_size);
  const size_t values_out = layout.Add(n * value_size);
  const size_t count = layout.Add(sizeof(uint64_t));
  const size_t temp = layout.Add(temp_bytes);
  const size_t staged_values = AlignUp(n * key_size);
  if (absl::Status s = lane.EnsurePinned(staged_values + n * value_size); !s.ok()) return s;
  absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane, layout.size());
  if (!block.ok()) return block.status();
  lane.Mark(Lane::kStart);
  Pack(lane.pinned, {op.keys});
  Pack(lane.pinned + staged_values, {op.values});
  if (absl::Status s = CopyIn(lane, block->at(keys), lane.pinned, n * key_size); !s.ok()) return s;
  if (absl::Status s =
          CopyIn(lane, block->at(values), lane.pinned + staged_values, n * value_size);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = StartKernels(lane); !s.ok()) return s;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::ReduceByKey(
      block->at(temp), &temp_bytes, block->at(keys), op.keys.dtype, block->at(values),
      op.values.dtype, n, op.op, block->at(keys_out), block->at(values_out),
      block->at<uint64_t>(count), lane.stream));
  lane.Mark(Lane::kKernelDone);
  uint64_t runs = 0;
  if (absl::Status s = CopyBack(lane, &runs, block->at(count), sizeof(runs)); !s.ok()) return s;
  lane.Mark(Lane::kOutputsOut);
  if (absl::Status s = Wait(lane); !s.ok()) return s;
  if (absl::Status s = CopyBack(lane, lane.pinned, block->at(keys_out), runs * key_size); !s.ok()) {
    return s;
  }
  if (absl::Status s = CopyBack(lane, lane.pinned + staged_values, block->at(values_out),
                                runs * value_size);
      !s.ok()) {
    return s;
  }
  lane.Mark(Lane::kOutputsOut);
  if (absl::Status s = Wait(lane); !s.ok()) return s;
  return ReduceByKeyResult{
      HostArray{op.keys.dtype, CopyOut(lane.pinned, runs * key_size)},
      HostArray{op.values.dtype, CopyOut(lane.pinned + staged_values, runs * value_size)}};
}

absl::StatusOr<Result> RunAggregateByKey(Lane& lane, const AggregateByKeyOperation& op) {
  const uint64_t n = op.keys.size();
  const size_t key_size = DTypeSize(op.keys.dtype);
  const size_t value_size = DTypeSize(op.values.dtype);
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::AggregateByKey(
      nullptr, &temp_bytes, nullptr, op.keys.dtype, nullptr, op.values.dtype, n, op.op,
      op.num_keys, nullptr, nullptr, lane.stream));
  Layout layout;
  const size_t keys = layout.Add(n * key_size);
  const size_t values = layout.Add(n * value_size);
  const size_t out = layout.Add(op.num_keys * value_size);
  const size_t bad = layout.Add(sizeof(int64_t));
  const size_t temp = layout.Add(temp_bytes);
  const size_t staged_values = AlignUp(n * key_size);
  if (absl::Status s = lane.EnsurePinned(
          std::max(staged_values + n * value_size, op.num_keys * value_size));
      !s.ok()) {
    return s;
  }
  absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane, layout.size());
  if (!block.ok()) return block.status();
  lane.Mark(Lane::kStart);
  Pack(lane.pinned, {op.keys});
  Pack(lane.pinned + staged_values, {op.values});
  if (absl::Status s = CopyIn(lane, block->at(keys), lane.pinned, n * key_size); !s.ok()) return s;
  if (absl::Status s =
          CopyIn(lane, block->at(values), lane.pinned + staged_values, n * value_size);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = StartKernels(lane); !s.ok()) return s;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::AggregateByKey(
      block->at(temp), &temp_bytes, block->at(keys), op.keys.dtype, block->at(values),
      op.values.dtype, n, op.op, op.num_keys, block->at(out), block->at<int64_t>(bad),
      lane.stream));
  lane.Mark(Lane::kKernelDone);
  int64_t bad_position = -1;
  if (absl::Status s = CopyBack(lane, &bad_position, block->at(bad), sizeof(bad_position));
      !s.ok()) {
    return s;
  }
  lane.Mark(Lane::kOutputsOut);
  if (absl::Status s = Wait(lane); !s.ok()) return s;
  if (bad_position >= 0) {
    return VisitDType(op.keys.dtype, [&](auto zero) {
      using K = decltype(zero);
      return reference::KeyOutOfRange<K>(static_cast<uint64_t>(bad_position),
                                         op.keys.as<K>()[bad_position], op.num_keys);
    });
  }
  if (absl::Status s = CopyBack(lane, lane.pinned, block->at(out), op.num_keys * value_size);
      !s.ok()) {
    return s;
  }
  lane.Mark(Lane::kOutputsOut);
  if (absl::Status s = Wait(lane); !s.ok()) return s;
  return AggregateByKeyResult{
      HostArray{op.values.dtype, CopyOut(lane.pinned, op.num_keys * value_size)}};
}

// Runs each task alone, one after another on the lane.
template <typename Kind, typename RunOne>
Results RunEach(absl::Span<Task* const> tasks, RunOne run_one) {
  Results results;
  for (Task* task : tasks) results.push_back(run_one(std::get<Kind>(task->operation)));
  return results;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const CudaBackendOptions& options) {
  std::vector<int> devices = options.devices;
  const int visible = VisibleCudaDevices();
  if (devices.empty()) {
    for (int d = 0; d < visible; ++d) devices.push_back(d);
  }
  if (devices.empty()) return absl::FailedPreconditionError("no CUDA device is visible");
  uint64_t smallest_memory = UINT64_MAX;
  std::vector<std::string> names;
  std::vector<std::unique_ptr<Lane>> lanes;
  for (int device : devices) {
    if (device < 0 || device >= visible) {
      return absl::InvalidArgumentError(
          absl::StrCat("CUDA device ", device, " is not visible (", visible, " visible)"));
    }
    cudaDeviceProp properties;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&properties, device));
    names.push_back(properties.name);
    smallest_memory = std::min<uint64_t>(smallest_memory, properties.totalGlobalMem);
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaSetDevice(device));
    // Keep freed blocks in the pool, so steady traffic never calls cudaMalloc.
    cudaMemPool_t pool;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t keep_everything = UINT64_MAX;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    for (int s = 0; s < std::max(1, options.streams_per_device); ++s) {
      auto lane = std::make_unique<Lane>();
      lane->device = device;
      for (cudaStream_t* stream : {&lane->stream, &lane->copy_in, &lane->copy_out}) {
        PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
      }
      for (int slot = 0; slot < Lane::kPipelineSlots; ++slot) {
        for (cudaEvent_t* event :
             {&lane->copied_in[slot], &lane->scanned[slot], &lane->copied_out[slot]}) {
          PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
        }
      }
      for (cudaEvent_t& mark : lane->marks) PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventCreate(&mark));
      lanes.push_back(std::move(lane));
    }
  }
  const uint64_t budget = options.memory_budget_bytes != 0 ? options.memory_budget_bytes
                                                           : smallest_memory / 100 * 85;
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(lanes),
                                                     std::make_unique<MemoryBudget>(budget),
                                                     absl::StrJoin(names, ", "), options.metrics,
                                                     options.faults));
}

CudaBackend::CudaBackend(std::vector<std::unique_ptr<Lane>> lanes,
                         std::unique_ptr<MemoryBudget> budget, std::string device_names,
                         Metrics* metrics, CudaFaultInjector* faults)
    : lanes_(std::move(lanes)),
      budget_(std::move(budget)),
      device_names_(std::move(device_names)),
      metrics_(metrics) {
  for (const auto& lane : lanes_) {
    lane->budget = budget_.get();
    lane->faults = faults;
    free_lanes_.push_back(lane.get());
  }
}

CudaBackend::~CudaBackend() {
  for (const auto& lane : lanes_) {
    cudaSetDevice(lane->device);
    cudaStreamSynchronize(lane->stream);
  }
}

absl::Status CudaBackend::Health() const {
  absl::MutexLock lock(&health_mu_);
  return health_;
}

void CudaBackend::NoteFailure(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnavailable) return;
  absl::MutexLock lock(&health_mu_);
  if (health_.ok()) {
    health_ = status;
    gpr_log(GPR_ERROR, "CUDA backend is no longer serving: %s", status.ToString().c_str());
  }
}

CudaBackend::Lane* CudaBackend::AcquireLane() {
  absl::MutexLock lock(&mu_);
  auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !free_lanes_.empty(); };
  mu_.Await(absl::Condition(&available));
  Lane* lane = free_lanes_.back();
  free_lanes_.pop_back();
  return lane;
}

void CudaBackend::ReleaseLane(Lane* lane) {
  absl::MutexLock lock(&mu_);
  free_lanes_.push_back(lane);
}

std::vector<absl::StatusOr<Result>> CudaBackend::Run(Lane& lane,
                                                     absl::Span<Task* const> tasks) {
  if (absl::Status health = Health(); !health.ok()) {
    return Results(tasks.size(), health);
  }
  if (absl::Status s = CudaStatus(cudaSetDevice(lane.device), "cudaSetDevice"); !s.ok()) {
    return Results(tasks.size(), s);
  }
  auto batched = [&](auto run) -> Results {
    absl::StatusOr<Results> results = run();
    if (!results.ok()) return Results(tasks.size(), results.status());
    return *std::move(results);
  };
  switch (RpcOf(tasks.front()->operation)) {
    case Rpc::kScan:
      return batched([&] { return RunScans(lane, OperationsOf<ScanOperation>(tasks)); });
    case Rpc::kReduce:
      return batched([&] { return RunReduces(lane, OperationsOf<ReduceOperation>(tasks)); });
    case Rpc::kSelect:
      return batched([&] { return RunSelects(lane, OperationsOf<SelectOperation>(tasks)); });
    case Rpc::kUnique:
      return RunEach<UniqueOperation>(
          tasks, [&](const UniqueOperation& o) { return RunRuns(lane, o.input, false); });
    case Rpc::kRunLengthEncode:
      return RunEach<RunLengthEncodeOperation>(
          tasks, [&](const RunLengthEncodeOperation& o) { return RunRuns(lane, o.input, true); });
    case Rpc::kReduceByKey:
      return RunEach<ReduceByKeyOperation>(
          tasks, [&](const ReduceByKeyOperation& o) { return RunReduceByKey(lane, o); });
    case Rpc::kAggregateByKey:
      return RunEach<AggregateByKeyOperation>(
          tasks, [&](const AggregateByKeyOperation& o) { return RunAggregateByKey(lane, o); });
  }
  return Results(tasks.size(), absl::InternalError("unknown RPC"));
}

void CudaBackend::Record(const Lane& lane, absl::Span<Task* const> tasks) {
  const Rpc rpc = RpcOf(tasks.front()->operation);
  const absl::Duration h2d = lane.Between(Lane::kStart, Lane::kInputsIn);
  const absl::Duration kernel = lane.Between(Lane::kInputsIn, Lane::kKernelDone);
  const absl::Duration d2h = lane.Between(Lane::kKernelDone, Lane::kOutputsOut);
  for (size_t i = 0; i < tasks.size(); ++i) {
    metrics_->ObserveStage(rpc, Stage::kH2D, h2d);
    metrics_->ObserveStage(rpc, Stage::kKernel, kernel);
    metrics_->ObserveStage(rpc, Stage::kD2H, d2h);
  }
  cudaMemPool_t pool;
  GpuMemory memory;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaDeviceGetDefaultMemPool(&pool, lane.device) == cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &memory.pool_in_use) ==
          cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &memory.pool_reserved) ==
          cudaSuccess &&
      cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    memory.device_free = free_bytes;
    memory.device_total = total_bytes;
    memory.budget = budget_->total();
    metrics_->SetGpuMemory(lane.device, memory);
  } else {
    cudaGetLastError();  // a gauge left stale is better than a failed request
  }
}

void CudaBackend::Execute(std::vector<std::unique_ptr<Task>> batch) {
  std::vector<Task*> tasks;
  for (const auto& task : batch) tasks.push_back(task.get());
  Lane* lane = AcquireLane();
  Results results = Run(*lane, tasks);
  if (metrics_ != nullptr) Record(*lane, tasks);
  ReleaseLane(lane);
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!results[i].ok()) NoteFailure(results[i].status());
    batch[i]->done(std::move(results[i]));
  }
}

}  // namespace primserve
