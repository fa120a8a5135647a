// Scans: a batch as one segmented launch; one large unsegmented scan as a
// pipeline of chunks that carries the running prefix on the device; a batch
// of reproducible float SUM/PROD scans staged together, each scanned by its
// own launch, exactly as alone. A scan into a wider accumulator
// (ScanOperation::accumulator) writes its answer beside its input, never over
// it, and is never pipelined (its chunks would not fit their slots in place).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/cleanup/cleanup.h"

#include "kernels/scan.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/io.h"
#include "server/cuda/runners.h"
#include "server/cuda/staged_run.h"

namespace primserve::cuda {
namespace {

// Bytes per pipeline chunk: large enough that a copy runs near full
// bandwidth, small enough that the first and last chunks (which do not
// overlap) are a small part of the whole.
constexpr size_t kPipelineChunkBytes = size_t{32} << 20;
static_assert(kPipelinedScanMinBytes == 2 * kPipelineChunkBytes + 1);

// While chunk k is scanned, chunk k+1 is copied in and chunk k-1 copied out,
// and the host stages the next chunk. Each chunk sits in one of the lane's
// pipeline slots of pinned staging, unless the input or the output place is
// pinned memory (a pinned shared-memory region, a pinned payload or an
// answer buffer): the copies then go straight between it and the device.
absl::StatusOr<Result> RunPipelinedScan(Lane& lane, const ScanOperation& op, absl::Time deadline,
                                        const AnswerAllocator* answers) {
  const DType dtype = op.input.dtype;
  const size_t element = DTypeSize(dtype);
  const uint64_t n = op.input.size();
  const uint64_t chunk = kPipelineChunkBytes / element;
  const uint64_t chunks = (n + chunk - 1) / chunk;
  const size_t chunk_bytes = chunk * element;
  const Lane::Pipeline& pipeline = lane.pipeline();
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::ScanWithCarry(nullptr, &temp_bytes, nullptr, nullptr, chunk,
                                                    dtype, op.op, op.exclusive, nullptr, nullptr,
                                                    lane.stream()));
  Layout device_layout;
  const size_t slots = device_layout.Add(Lane::kPipelineSlots * chunk_bytes);
  const size_t carry = device_layout.Add(element);
  const size_t temp = device_layout.Add(temp_bytes);
  Layout staging_layout;
  const size_t staged_slots = staging_layout.Add(Lane::kPipelineSlots * chunk_bytes);
  // A stream's carry in and out (ScanOperation::carry_in, wants_carry).
  const size_t staged_carry = staging_layout.Add(sizeof(uint64_t));
  absl::StatusOr<char*> staging = lane.Staging(staging_layout.size());
  if (!staging.ok()) return staging.status();
  absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane, device_layout.size(), deadline);
  if (!block.ok()) return block.status();

  const char* input = op.input.bytes.data();
  const bool input_pinned = IsPinned(input);
  // Chunk k's answer lands while later chunks are still read: in place only
  // where that cannot overwrite them (the same bytes, or none of them).
  char* const place = op.output_place;
  const size_t total_bytes = n * element;
  const bool output_in_place =
      place != nullptr && IsPinned(place) &&
      (place == input || place + total_bytes <= input || input + total_bytes <= place);
  // An inline answer goes from the device into an answer buffer where one is
  // free, and is sent from there; else through the slots into a string.
  std::shared_ptr<char> held;
  if (!output_in_place && place == nullptr && answers != nullptr && *answers) {
    held = (*answers)(total_bytes);
  }
  char* const direct = output_in_place ? place : held.get();
  HostOutput output(direct != nullptr ? 0 : total_bytes);
  // The block's free is queued on the lane's stream: whatever happens, the
  // copies on the other two streams must be over first (and before the
  // answer buffer, declared above, can go back to its pool). Their errors,
  // if any, come back from the lane's drain.
  absl::Cleanup join_copies = [&pipeline] {
    for (cudaStream_t stream : {pipeline.copy_in, pipeline.copy_out}) {
      if (cudaStreamSynchronize(stream) != cudaSuccess) cudaGetLastError();
    }
  };
  auto bytes_of = [&](uint64_t k) { return std::min<uint64_t>(chunk, n - k * chunk) * element; };
  auto staged_slot = [&](uint64_t k) {
    return *staging + staged_slots + (k % Lane::kPipelineSlots) * chunk_bytes;
  };
  // Waits for chunk k's copy out, then hands it to the answer (chunks finish
  // in order).
  auto finish = [&](uint64_t k) -> absl::Status {
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaEventSynchronize(pipeline.copied_out[k % Lane::kPipelineSlots]));
    if (direct == nullptr) output.Accept(staged_slot(k), bytes_of(k));
    return absl::OkStatus();
  };
  PRIMSERVE_RETURN_IF_ERROR(lane.Mark(Lane::kStart, pipeline.copy_in));
  // Chunks are whole tiles (32 MiB), and the operation starts at a multiple
  // of the tile where it has a carry: the chunks with their carry give the
  // bits of one scan of the whole (kernels/scan.h ScanWithCarry).
  if (op.carry_in) {
    std::memcpy(*staging + staged_carry, &*op.carry_in, element);
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(block->at(carry), *staging + staged_carry,
                                                   element, cudaMemcpyHostToDevice,
                                                   lane.stream()));
  }
  const bool carries_in = op.carry_in.has_value();
  for (uint64_t k = 0; k < chunks; ++k) {
    const int slot = k % Lane::kPipelineSlots;
    if (k >= Lane::kPipelineSlots) PRIMSERVE_RETURN_IF_ERROR(finish(k - Lane::kPipelineSlots));
    char* staged = staged_slot(k);
    char* device = block->at<char>(slots) + slot * chunk_bytes;
    const char* from = input + k * chunk_bytes;
    // The input's one copy out of gRPC's buffers, chunk by chunk, while the
    // chunks before it are on the device.
    if (op.input.pending != nullptr) op.input.pending->Fill(k * chunk_bytes, bytes_of(k));
    if (!input_pinned) {
      std::memcpy(staged, from, bytes_of(k));
      from = staged;
    }
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(device, from, bytes_of(k), cudaMemcpyHostToDevice, pipeline.copy_in));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventRecord(pipeline.copied_in[slot], pipeline.copy_in));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(lane.stream(), pipeline.copied_in[slot], 0));
    if (k == 0 && lane.faults() != nullptr) {
      PRIMSERVE_RETURN_IF_ERROR(
          CudaStatus(lane.faults()->BeforeKernels(lane.stream()), "kernel launch"));
    }
    PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::ScanWithCarry(
        block->at(temp), &temp_bytes, device, device, bytes_of(k) / element, dtype, op.op,
        op.exclusive, k == 0 && !carries_in ? nullptr : block->at(carry), block->at(carry),
        lane.stream()));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventRecord(pipeline.computed[slot], lane.stream()));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaStreamWaitEvent(pipeline.copy_out, pipeline.computed[slot], 0));
    char* to = direct != nullptr ? direct + k * chunk_bytes : staged;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(to, device, bytes_of(k), cudaMemcpyDeviceToHost, pipeline.copy_out));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventRecord(pipeline.copied_out[slot], pipeline.copy_out));
  }
  PRIMSERVE_RETURN_IF_ERROR(lane.Mark(Lane::kInputsIn, pipeline.copy_in));
  PRIMSERVE_RETURN_IF_ERROR(lane.Mark(Lane::kKernelDone, lane.stream()));
  PRIMSERVE_RETURN_IF_ERROR(lane.Mark(Lane::kOutputsOut, pipeline.copy_out));
  for (uint64_t k = chunks > Lane::kPipelineSlots ? chunks - Lane::kPipelineSlots : 0; k < chunks;
       ++k) {
    PRIMSERVE_RETURN_IF_ERROR(finish(k));
  }
  std::optional<uint64_t> carry_out;
  if (op.wants_carry) {
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(*staging + staged_carry, block->at(carry),
                                                   element, cudaMemcpyDeviceToHost,
                                                   lane.stream()));
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(lane.stream()));
    carry_out = 0;
    std::memcpy(&*carry_out, *staging + staged_carry, element);
  }
  if (output_in_place) return ScanResult{HostArray{dtype, {}, total_bytes}, carry_out};
  if (held != nullptr) {
    return ScanResult{HostArray{dtype, {}, 0, std::move(held), total_bytes}, carry_out};
  }
  return ScanResult{HostArray{dtype, std::move(output).Take()}, carry_out};
}

// Reproducible float SUM/PROD: every request scanned by the launch it would
// get alone (gpu::Scan, or gpu::SegmentedScan with its own segments, or
// gpu::ScanWithCarry for a stream's piece, or gpu::WidenedScan), each at a
// kAlignment-aligned place in one staged buffer, as alone, on the lane's
// stream one after another; one copy in and one copy out for the batch.
absl::StatusOr<Results> RunReproducibleScans(Lane& lane,
                                             absl::Span<const ScanOperation* const> ops,
                                             absl::Time deadline) {
  const ScanOperation& first = *ops.front();
  const DType dtype = first.input.dtype;
  const size_t element = DTypeSize(dtype);
  // A wider answer has a buffer of its own, each request's at out_place.
  const bool widened = first.accumulator.has_value();
  const DType out_dtype = ValuesDType(first);
  Layout outputs;
  std::vector<size_t> out_place(ops.size());
  HostInput data;
  std::vector<size_t> place(ops.size());  // byte offset of each request
  std::vector<uint64_t> starts;  // each request's own segment starts
  std::vector<size_t> first_start(ops.size());
  std::vector<uint64_t> carries(ops.size(), 0);  // one slot per request
  bool any_carry = false;
  std::vector<size_t> temp_of(ops.size(), 0);
  size_t temp_bytes = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const ScanOperation& op = *ops[i];
    if ((op.carry_in || op.wants_carry) && (!op.segment_offsets.empty() || widened)) {
      return absl::InternalError(
          "a scan with a carry reached the engine with segments or a wider accumulator");
    }
    place[i] = data.AppendAligned(op.input.bytes);
    if (widened) out_place[i] = outputs.Add(op.input.size() * DTypeSize(out_dtype));
    first_start[i] = starts.size();
    starts.insert(starts.end(), op.segment_offsets.begin(), op.segment_offsets.end());
    if (op.carry_in) carries[i] = *op.carry_in;
    any_carry |= op.carry_in || op.wants_carry;
    const uint64_t n = op.input.size();
    PRIMSERVE_RETURN_IF_CUDA_ERROR(
        !op.segment_offsets.empty() || widened
            ? LaunchScanOf(op, nullptr, &temp_of[i], nullptr, nullptr, n, nullptr,
                           op.segment_offsets.size(), lane.stream())
        : op.carry_in || op.wants_carry
            ? gpu::ScanWithCarry(nullptr, &temp_of[i], nullptr, nullptr, n, dtype, op.op,
                                 op.exclusive, nullptr, nullptr, lane.stream())
            : gpu::Scan(nullptr, &temp_of[i], nullptr, nullptr, n, dtype, op.op, op.exclusive,
                        lane.stream()));
    temp_bytes = std::max(temp_bytes, temp_of[i]);
  }
  HostInput starts_input{absl::Span<const uint64_t>(starts)};
  HostInput carries_input{absl::Span<const uint64_t>(carries)};
  StagedRun run(lane, deadline);
  const StagedRun::Slice in_out = run.Input(data);
  // Same dtype: each answer over its input.
  const StagedRun::Slice answers = widened ? run.Output(outputs.size()) : in_out;
  const StagedRun::Slice segment_starts = run.Input(starts_input);
  const StagedRun::Slice carry = any_carry ? run.Input(carries_input) : StagedRun::Slice{};
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  int error = 0;
  for (size_t i = 0; i < ops.size() && error == 0; ++i) {
    const ScanOperation& op = *ops[i];
    const uint64_t n = op.input.size();
    char* at = run.device<char>(in_out) + place[i];
    char* out = widened ? run.device<char>(answers) + out_place[i] : at;
    uint64_t* slot = any_carry ? run.device<uint64_t>(carry) + i : nullptr;
    error = !op.segment_offsets.empty() || widened
                ? LaunchScanOf(op, run.device(temp), &temp_of[i], at, out, n,
                               run.device<uint64_t>(segment_starts) + first_start[i],
                               op.segment_offsets.size(), lane.stream())
            : op.carry_in || op.wants_carry
                ? gpu::ScanWithCarry(run.device(temp), &temp_of[i], at, at, n, dtype, op.op,
                                     op.exclusive, op.carry_in ? slot : nullptr,
                                     op.wants_carry ? slot : nullptr, lane.stream())
                : gpu::Scan(run.device(temp), &temp_of[i], at, at, n, dtype, op.op,
                            op.exclusive, lane.stream());
  }
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(error));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(answers, widened ? outputs.size() : data.size()));
  if (any_carry) {
    PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(carry, carries.size() * sizeof(uint64_t)));
  }
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  const uint64_t* carried = any_carry ? run.staged_as<uint64_t>(carry) : nullptr;
  Results results;
  for (size_t i = 0; i < ops.size(); ++i) {
    ScanResult result{
        widened ? ToHostArray(out_dtype, run.staged(answers) + out_place[i],
                              ops[i]->input.size() * DTypeSize(out_dtype))
                : ToHostArray(dtype, run.staged(in_out) + place[i], ops[i]->input.bytes.size())};
    if (ops[i]->wants_carry) {
      // The slot's first `element` bytes; the rest is what was staged.
      result.carry_out = 0;
      std::memcpy(&*result.carry_out, carried + i, element);
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace

int LaunchScanOf(const ScanOperation& like, void* temp_storage, size_t* temp_bytes,
                 const void* d_in, void* d_out, uint64_t n, const uint64_t* d_segment_starts,
                 uint64_t num_segments, cudaStream_t stream) {
  if (like.accumulator) {
    return gpu::WidenedScan(temp_storage, temp_bytes, d_in, d_out, n, d_segment_starts,
                            num_segments, like.input.dtype, *like.accumulator, like.op,
                            like.exclusive, stream);
  }
  return gpu::SegmentedScan(temp_storage, temp_bytes, d_in, d_out, n, d_segment_starts,
                            num_segments, like.input.dtype, like.op, like.exclusive, stream);
}

void FillPendingInputs(absl::Span<const ScanOperation* const> ops) {
  for (const ScanOperation* op : ops) {
    if (op->input.pending != nullptr) op->input.pending->Fill(0, op->input.bytes.size());
  }
}

absl::StatusOr<Results> RunScans(Lane& lane, absl::Span<const ScanOperation* const> ops,
                                 absl::Time deadline, const AnswerAllocator* answers) {
  const ScanOperation& first = *ops.front();
  if (ops.size() != 1) answers = nullptr;
  // Only where the pipeline's slots fit the lane's pinned staging: beyond
  // it, pageable staging would stall every chunk.
  if (ops.size() == 1 && first.segment_offsets.empty() && !first.accumulator &&
      first.input.bytes.size() >= kPipelinedScanMinBytes &&
      AlignUp(Lane::kPipelineSlots * kPipelineChunkBytes) <= lane.pinned_limit()) {
    return Results{RunPipelinedScan(lane, first, deadline, answers)};
  }
  FillPendingInputs(ops);
  if (RunsReproducibly(first)) return RunReproducibleScans(lane, ops, deadline);
  for (const ScanOperation* op : ops) {
    if (op->carry_in || op->wants_carry) {
      return absl::InternalError("a scan with a carry reached the engine unreproducible");
    }
  }
  const DType out_dtype = ValuesDType(first);
  const size_t out_element = DTypeSize(out_dtype);
  Concatenation all;
  HostInput data;
  for (const ScanOperation* op : ops) {
    all.Append(op->input.size(), op->segment_offsets);
    data.Append(op->input.bytes);
  }
  const bool segmented = ops.size() > 1 || !first.segment_offsets.empty();
  const uint64_t num_segments = segmented ? all.segment_starts.size() : 0;
  size_t temp_bytes = 0;
  PRIMSERVE_RETURN_IF_CUDA_ERROR(LaunchScanOf(first, nullptr, &temp_bytes, nullptr, nullptr,
                                              all.total, nullptr, num_segments, lane.stream()));
  HostInput starts_input(absl::Span<const uint64_t>(all.segment_starts));
  StagedRun run(lane, deadline, answers);
  const StagedRun::Slice input = run.Input(data);
  // In place where the answer has the input's dtype: the scan overwrites its
  // input, halving the device memory. A wider answer gets room of its own.
  const uint64_t answer_bytes = all.total * out_element;
  const StagedRun::Slice out = first.accumulator ? run.Output(answer_bytes)
                                                 : run.HoldAnswer(input, answer_bytes);
  const StagedRun::Slice starts = segmented ? run.Input(starts_input) : StagedRun::Slice{};
  const StagedRun::Slice temp = run.Scratch(temp_bytes);
  PRIMSERVE_RETURN_IF_ERROR(run.Start());
  PRIMSERVE_RETURN_IF_ERROR(run.Launched(
      LaunchScanOf(first, run.device(temp), &temp_bytes, run.device(input), run.device(out),
                   all.total, segmented ? run.device<uint64_t>(starts) : nullptr, num_segments,
                   lane.stream())));
  PRIMSERVE_RETURN_IF_ERROR(run.CopyBack(out, answer_bytes));
  PRIMSERVE_RETURN_IF_ERROR(run.Finish());
  Results results;
  for (size_t i = 0; i < ops.size(); ++i) {
    results.push_back(ScanResult{run.Answer(out, out_dtype, ops[i]->input.size() * out_element,
                                            all.offsets[i] * out_element)});
  }
  return results;
}

}  // namespace primserve::cuda
