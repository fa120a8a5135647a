#include "server/cuda/device_pipeline.h"

#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/messages.h"
#include "kernels/aggregate.h"
#include "kernels/gather.h"
#include "kernels/reduce.h"
#include "kernels/runs.h"
#include "kernels/scan.h"
#include "kernels/select.h"
#include "server/cuda/cuda_status.h"
#include "server/cuda/io.h"
#include "server/cuda/runners.h"
#include "server/engine/pipeline_steps.h"

namespace primserve::cuda {
namespace {

using K = StepOutputKind;

// An array on the device: `elements` of them, or, where `count` is set (a
// device uint64 a kernel writes), the first *count of at most `elements`.
struct DeviceArray {
  DType dtype = DType::kInt32;
  char* data = nullptr;
  uint64_t elements = 0;
  const uint64_t* count = nullptr;
};

// A view of an array of known size, for the checks a step alone makes.
ArrayView View(const DeviceArray& array) {
  return ArrayView{array.dtype,
                   absl::string_view(array.data, array.elements * DTypeSize(array.dtype))};
}

bool WantsValues(SelectOutput output) {
  return output == SelectOutput::kValues || output == SelectOutput::kValuesAndIndices;
}
bool WantsIndices(SelectOutput output) {
  return output == SelectOutput::kIndices || output == SelectOutput::kValuesAndIndices;
}

// For each output of a step, the step whose kernel writes its size on the
// device (it, or the step its length follows), or -1 where the size is
// known before the run.
using CountedOutputs = std::array<int, kNumStepOutputKinds>;

// Whether step `k` can run on the device, given the counted outputs of the
// steps before it; fills the counted outputs it makes.
bool StepRunsOnDevice(int k, const Operation& operation, const std::vector<StepBinding>& bindings,
                      const std::vector<CountedOutputs>& counted, int device,
                      CountedOutputs* made) {
  auto bound = [&](absl::string_view field) -> const StepBinding* {
    for (const StepBinding& b : bindings) {
      if (b.field == field) return &b;
    }
    return nullptr;
  };
  auto count_of = [&](absl::string_view field) {
    const StepBinding* b = bound(field);
    return b == nullptr ? -1 : counted[b->step][static_cast<size_t>(b->output)];
  };
  auto is_counted = [&](absl::string_view field) { return count_of(field) >= 0; };
  // An input not bound lies on this device, or in host memory (the
  // request's bytes, a shared-memory region), copied before the kernels.
  auto on_device = [&](absl::string_view field, const ArrayView& view) {
    if (bound(field) != nullptr) return true;
    const int where = DeviceOf(view.bytes.data(), view.bytes.size());
    return where == device || where < 0;
  };
  bool places_ok = true;
  for (int output = 0; output < kNumStepOutputKinds; ++output) {
    const OutputPlace place = PlaceOf(operation, static_cast<K>(output));
    if (place.data != nullptr && DeviceOf(place.data, place.room) != device) places_ok = false;
  }
  if (!places_ok) return false;
  made->fill(-1);
  return std::visit(
      Overloaded{
          [&](const SelectOperation& o) {
            if (o.flags || !o.predicate || o.partition || is_counted("input")) return false;
            (*made)[static_cast<size_t>(K::kValues)] = k;
            (*made)[static_cast<size_t>(K::kIndices)] = k;
            return on_device("input", o.input);
          },
          [&](const UniqueOperation& o) {
            if (is_counted("input")) return false;
            (*made)[static_cast<size_t>(K::kValues)] = k;
            return on_device("input", o.input);
          },
          [&](const RunLengthEncodeOperation& o) {
            if (is_counted("input")) return false;
            (*made)[static_cast<size_t>(K::kValues)] = k;
            (*made)[static_cast<size_t>(K::kLengths)] = k;
            return on_device("input", o.input);
          },
          [&](const ScanOperation& o) {
            if (!o.segment_offsets.empty() || o.accumulator || o.carry_in || o.wants_carry) {
              return false;
            }
            // A reproducible scan's tiles follow from its size, which only a
            // size known on the host fixes as the call alone would.
            if (RunsReproducibly(o) && is_counted("input")) return false;
            (*made)[static_cast<size_t>(K::kValues)] = count_of("input");
            return on_device("input", o.input);
          },
          [&](const ReduceOperation& o) {
            if (!o.segment_offsets.empty() || o.accumulator || RunsReproducibly(o)) return false;
            return on_device("input", o.input);
          },
          [&](const GatherOperation& o) {
            if (is_counted("values")) return false;
            (*made)[static_cast<size_t>(K::kValues)] = count_of("indices");
            return on_device("values", o.values) && on_device("indices", o.indices);
          },
          [&](const AggregateByKeyOperation& o) {
            // Lengths counted on the device pair up only when one count
            // makes both; known lengths are compared when the step is queued.
            if (count_of("keys") != count_of("values")) return false;
            return on_device("keys", o.keys) && on_device("values", o.values);
          },
          [](const auto&) { return false; },
      },
      operation);
}

}  // namespace

bool RunsOnDevice(const PipelineOperation& pipeline, int device) {
  std::vector<CountedOutputs> counted(pipeline.steps.size());
  for (size_t k = 0; k < pipeline.steps.size(); ++k) {
    const PipelineStep& step = pipeline.steps[k];
    if (!StepRunsOnDevice(static_cast<int>(k), step.operation, step.bindings, counted, device,
                          &counted[k])) {
      return false;
    }
  }
  return true;
}

namespace {

// One pipeline's run: the device memory it takes, the outputs each step made,
// and what the host reads back at the end.
class DeviceRun {
 public:
  DeviceRun(Lane& lane, absl::Time deadline, size_t steps)
      : lane_(lane),
        deadline_(deadline),
        outputs_(steps),
        checks_(steps, -1),
        counts_(steps),
        check_of_(steps) {}

  // Queues step k's kernels. A status here is the step's own (before any of
  // its kernels ran); the checks of earlier steps still decide first.
  absl::Status Queue(size_t k, const PipelineStep& step);

  // Waits for the stream, then the first step whose kernels found an index
  // or key out of range, in step order, fails the run; else (failed_step:
  // the step whose queueing failed, with its status) that step's status.
  absl::Status Settle(std::optional<size_t> failed_step, const absl::Status& failed);

  // The results of the returned steps, once Settle succeeded.
  absl::StatusOr<PipelineResult> Answers(const PipelineOperation& pipeline);

  cudaStream_t stream() const { return lane_.stream(); }

 private:
  absl::StatusOr<char*> Take(size_t bytes) {
    if (bytes == 0) bytes = 1;  // an address of its own for an empty array
    absl::StatusOr<DeviceBlock> block = DeviceBlock::Allocate(lane_, bytes, deadline_);
    if (!block.ok()) return block.status();
    char* data = block->at<char>(0);
    blocks_.push_back(*std::move(block));
    return data;
  }
  // A device uint64 (a count: 0 until a kernel writes it) or int64 (a
  // check's first bad position: -1 until one is found), in the run's scalar
  // blocks: read back once, at the end.
  absl::StatusOr<uint64_t*> Scalar(bool check);
  // Where output `kind` of an operation goes: its place (device memory the
  // caller named), else memory of the run's own.
  absl::StatusOr<char*> OutputMemory(const Operation& operation, K kind, size_t bytes);
  // The input `field` of step `step`: an earlier step's output, or the view
  // where it lies on the device, or copied there from the host.
  absl::StatusOr<DeviceArray> Input(const PipelineStep& step, absl::string_view field,
                                    const ArrayView& view);
  void Made(size_t k, K kind, DeviceArray array) {
    outputs_[k][static_cast<size_t>(kind)] = array;
  }

  Lane& lane_;
  const absl::Time deadline_;
  std::vector<DeviceBlock> blocks_;
  std::vector<uint64_t*> scalar_blocks_;  // kScalarsPerBlock each
  size_t scalars_used_ = 0;
  std::vector<std::array<std::optional<DeviceArray>, kNumStepOutputKinds>> outputs_;
  // Per step: the scalar index of its check (-1: none), and of its count.
  std::vector<int> checks_;
  std::vector<std::optional<size_t>> counts_;
  std::vector<uint64_t*> scalar_at_;  // scalar index -> device address
  std::vector<uint64_t> host_scalars_;
  // What each check is about, for its message: the keys or indices read.
  struct CheckOf {
    DeviceArray read;
    uint64_t bound = 0;  // num_keys, or the number of values
    bool keys = false;
  };
  std::vector<std::optional<CheckOf>> check_of_;
};

constexpr size_t kScalarsPerBlock = 64;

absl::StatusOr<uint64_t*> DeviceRun::Scalar(bool check) {
  if (scalars_used_ % kScalarsPerBlock == 0) {
    absl::StatusOr<char*> block = Take(kScalarsPerBlock * sizeof(uint64_t));
    if (!block.ok()) return block.status();
    scalar_blocks_.push_back(reinterpret_cast<uint64_t*>(*block));
  }
  uint64_t* at = scalar_blocks_.back() + scalars_used_ % kScalarsPerBlock;
  // Set, whatever a kernel given no elements writes.
  PRIMSERVE_RETURN_IF_CUDA_ERROR(
      cudaMemsetAsync(at, check ? 0xFF : 0, sizeof(uint64_t), lane_.stream()));
  ++scalars_used_;
  scalar_at_.push_back(at);
  return at;
}

absl::StatusOr<char*> DeviceRun::OutputMemory(const Operation& operation, K kind, size_t bytes) {
  const OutputPlace place = PlaceOf(operation, kind);
  if (place.data != nullptr) {
    if (place.room < bytes) {
      return absl::InternalError(absl::StrCat("the place of the step's ", StepOutputName(kind),
                                              " has room for ", place.room, " bytes, not ", bytes));
    }
    return place.data;
  }
  return Take(bytes);
}

absl::StatusOr<DeviceArray> DeviceRun::Input(const PipelineStep& step, absl::string_view field,
                                             const ArrayView& view) {
  for (const StepBinding& b : step.bindings) {
    if (b.field == field) return *outputs_[b.step][static_cast<size_t>(b.output)];
  }
  if (DeviceOf(view.bytes.data(), view.bytes.size()) == lane_.device()) {
    return DeviceArray{view.dtype, const_cast<char*>(view.bytes.data()), view.size(), nullptr};
  }
  absl::StatusOr<char*> copy = Take(view.bytes.size());
  if (!copy.ok()) return copy.status();
  if (view.pending != nullptr) view.pending->Fill(0, view.bytes.size());
  if (!view.bytes.empty()) {
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(*copy, view.bytes.data(), view.bytes.size(),
                                                   cudaMemcpyHostToDevice, lane_.stream()));
  }
  return DeviceArray{view.dtype, *copy, view.size(), nullptr};
}

absl::Status DeviceRun::Queue(size_t k, const PipelineStep& step) {
  const Operation& operation = step.operation;
  cudaStream_t s = lane_.stream();
  // Temporary storage of `bytes` for one kernel call (two-phase, as CUB).
  auto temp = [&](size_t bytes) -> absl::StatusOr<char*> { return Take(bytes); };
  return std::visit(
      Overloaded{
          [&](const SelectOperation& o) -> absl::Status {
            absl::StatusOr<DeviceArray> in_at = Input(step, "input", o.input);
            if (!in_at.ok()) return in_at.status();
            const DeviceArray& in = *in_at;
            const size_t element = DTypeSize(in.dtype);
            const gpu::SelectKeep keep = KeepOf(*o.predicate);
            char* values = nullptr;
            char* indices = nullptr;
            if (WantsValues(o.output) || step.read_later[static_cast<size_t>(K::kValues)]) {
              absl::StatusOr<char*> m = OutputMemory(operation, K::kValues, in.elements * element);
              if (!m.ok()) return m.status();
              values = *m;
            }
            if (WantsIndices(o.output) || step.read_later[static_cast<size_t>(K::kIndices)]) {
              absl::StatusOr<char*> m =
                  OutputMemory(operation, K::kIndices, in.elements * sizeof(int64_t));
              if (!m.ok()) return m.status();
              indices = *m;
            }
            absl::StatusOr<uint64_t*> count = Scalar(/*check=*/false);
            if (!count.ok()) return count.status();
            counts_[k] = scalar_at_.size() - 1;
            size_t bytes = 0;
            PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::Select(nullptr, &bytes, nullptr, in.dtype,
                                                       in.elements, keep, false, nullptr,
                                                       nullptr, nullptr, s));
            absl::StatusOr<char*> t = temp(bytes);
            if (!t.ok()) return t.status();
            PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::Select(
                *t, &bytes, in.data, in.dtype, in.elements, keep, false, values,
                reinterpret_cast<int64_t*>(indices), *count, s));
            if (values != nullptr) Made(k, K::kValues, {in.dtype, values, in.elements, *count});
            if (indices != nullptr) {
              Made(k, K::kIndices, {DType::kInt64, indices, in.elements, *count});
            }
            return absl::OkStatus();
          },
          [&](const UniqueOperation& o) -> absl::Status {
            absl::StatusOr<DeviceArray> in_at = Input(step, "input", o.input);
            if (!in_at.ok()) return in_at.status();
            const DeviceArray& in = *in_at;
            absl::StatusOr<char*> values =
                OutputMemory(operation, K::kValues, in.elements * DTypeSize(in.dtype));
            if (!values.ok()) return values.status();
            absl::StatusOr<uint64_t*> count = Scalar(/*check=*/false);
            if (!count.ok()) return count.status();
            counts_[k] = scalar_at_.size() - 1;
            size_t bytes = 0;
            PRIMSERVE_RETURN_IF_CUDA_ERROR(
                gpu::Unique(nullptr, &bytes, nullptr, in.dtype, in.elements, nullptr, nullptr, s));
            absl::StatusOr<char*> t = temp(bytes);
            if (!t.ok()) return t.status();
            PRIMSERVE_RETURN_IF_CUDA_ERROR(
                gpu::Unique(*t, &bytes, in.data, in.dtype, in.elements, *values, *count, s));
            Made(k, K::kValues, {in.dtype, *values, in.elements, *count});
            return absl::OkStatus();
          },
          [&](const RunLengthEncodeOperation& o) -> absl::Status {
            absl::StatusOr<DeviceArray> in_at = Input(step, "input", o.input);
            if (!in_at.ok()) return in_at.status();
            const DeviceArray& in = *in_at;
            absl::StatusOr<char*> values =
                OutputMemory(operation, K::kValues, in.elements * DTypeSize(in.dtype));
            if (!values.ok()) return values.status();
            absl::StatusOr<char*> lengths =
                OutputMemory(operation, K::kLengths, in.elements * sizeof(int64_t));
            if (!lengths.ok()) return lengths.status();
            absl::StatusOr<uint64_t*> count = Scalar(/*check=*/false);
            if (!count.ok()) return count.status();
            counts_[k] = scalar_at_.size() - 1;
            size_t bytes = 0;
            PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::RunLengthEncode(
                nullptr, &bytes, nullptr, in.dtype, in.elements, nullptr, nullptr, nullptr, s));
            absl::StatusOr<char*> t = temp(bytes);
            if (!t.ok()) return t.status();
            PRIMSERVE_RETURN_IF_CUDA_ERROR(gpu::RunLengthEncode(
                *t, &bytes, in.data, in.dtype, in.elements, *values,
                reinterpret_cast<int64_t*>(*lengths), *count, s));
            Made(k, K::kValues, {in.dtype, *values, in.elements, *count});
            Made(k, K::kLengths, {DType::kInt64, *lengths, in.elements, *count});
            return absl::OkStatus();
          },
          [&](const ScanOperation& o) -> absl::Status {
            absl::StatusOr<DeviceArray> in_at = Input(step, "input", o.input);
            if (!in_at.ok()) return in_at.status();
            const DeviceArray& in = *in_at;
            absl::StatusOr<char*> out =
                OutputMemory(operation, K::kValues, in.elements * DTypeSize(in.dtype));
            if (!out.ok()) return out.status();
            // The size on the device, else the call a step alone makes.
            auto scan = [&](void* t, size_t* bytes, const void* d_in, void* d_out) {
              return in.count != nullptr
                         ? gpu::ScanCounted(t, bytes, d_in, d_out, in.elements, in.count,
                                            in.dtype, o.op, o.exclusive, s)
                         : gpu::Scan(t, bytes, d_in, d_out, in.elements, in.dtype, o.op,
                                     o.exclusive, s);
            };
            size_t bytes = 0;
            PRIMSERVE_RETURN_IF_CUDA_ERROR(scan(nullptr, &bytes, nullptr, nullptr));
            absl::StatusOr<char*> t = temp(bytes);
            if (!t.ok()) return t.status();
            PRIMSERVE_RETURN_IF_CUDA_ERROR(scan(*t, &bytes, in.data, *out));
            Made(k, K::kValues, {in.dtype, *out, in.elements, in.count});
            return absl::OkStatus();
          },
          [&](const ReduceOperation& o) -> absl::Status {
            absl::StatusOr<DeviceArray> in_at = Input(step, "input", o.input);
            if (!in_at.ok()) return in_at.status();
            const DeviceArray& in = *in_at;
            absl::StatusOr<char*> value =
                OutputMemory(operation, K::kValues, DTypeSize(in.dtype));
            if (!value.ok()) return value.status();
            int64_t* index = nullptr;
            if (o.op == Op::kArgMin || o.op == Op::kArgMax) {
              absl::StatusOr<char*> m = OutputMemory(operation, K::kIndices, sizeof(int64_t));
              if (!m.ok()) return m.status();
              index = reinterpret_cast<int64_t*>(*m);
            }
            auto reduce = [&](void* t, size_t* bytes, const void* d_in, void* d_value,
                              int64_t* d_index) {
              return in.count != nullptr
                         ? gpu::ReduceCounted(t, bytes, d_in, in.elements, in.count, in.dtype,
                                              o.op, d_value, d_index, s)
                         : gpu::Reduce(t, bytes, d_in, in.elements, in.dtype, o.op, d_value,
                                       d_index, s);
            };
            size_t bytes = 0;
            PRIMSERVE_RETURN_IF_CUDA_ERROR(reduce(nullptr, &bytes, nullptr, nullptr, nullptr));
            absl::StatusOr<char*> t = temp(bytes);
            if (!t.ok()) return t.status();
            PRIMSERVE_RETURN_IF_CUDA_ERROR(reduce(*t, &bytes, in.data, *value, index));
            Made(k, K::kValues, {in.dtype, *value, 1, nullptr});
            if (index != nullptr) {
              Made(k, K::kIndices, {DType::kInt64, reinterpret_cast<char*>(index), 1, nullptr});
            }
            return absl::OkStatus();
          },
          [&](const GatherOperation& o) -> absl::Status {
            absl::StatusOr<DeviceArray> values_at = Input(step, "values", o.values);
            if (!values_at.ok()) return values_at.status();
            const DeviceArray& values = *values_at;
            absl::StatusOr<DeviceArray> indices_at = Input(step, "indices", o.indices);
            if (!indices_at.ok()) return indices_at.status();
            const DeviceArray& indices = *indices_at;
            const int element = static_cast<int>(DTypeSize(values.dtype));
            absl::StatusOr<char*> out =
                OutputMemory(operation, K::kValues, indices.elements * element);
            if (!out.ok()) return out.status();
            absl::StatusOr<uint64_t*> bad = Scalar(/*check=*/true);
            if (!bad.ok()) return bad.status();
            checks_[k] = static_cast<int>(scalar_at_.size() - 1);
            check_of_[k] = CheckOf{indices, values.elements, /*keys=*/false};
            const auto* index_data = reinterpret_cast<const int64_t*>(indices.data);
            auto* first_bad = reinterpret_cast<int64_t*>(*bad);
            PRIMSERVE_RETURN_IF_CUDA_ERROR(
                indices.count != nullptr
                    ? gpu::GatherCounted(values.data, element, values.elements, index_data,
                                         indices.elements, indices.count, *out, first_bad, s)
                    : gpu::Gather(values.data, element, values.elements, index_data,
                                  indices.elements, *out, first_bad, s));
            Made(k, K::kValues, {values.dtype, *out, indices.elements, indices.count});
            return absl::OkStatus();
          },
          [&](const AggregateByKeyOperation& o) -> absl::Status {
            absl::StatusOr<DeviceArray> keys_at = Input(step, "keys", o.keys);
            if (!keys_at.ok()) return keys_at.status();
            const DeviceArray& keys = *keys_at;
            absl::StatusOr<DeviceArray> values_at = Input(step, "values", o.values);
            if (!values_at.ok()) return values_at.status();
            const DeviceArray& values = *values_at;
            if (keys.count == nullptr) {
              // Both sizes known: the check (and message) of a step run alone.
              AggregateByKeyOperation sized = o;
              sized.keys = View(keys);
              sized.values = View(values);
              PRIMSERVE_RETURN_IF_ERROR(CheckBoundInputs(sized));
            }
            const size_t value_size = DTypeSize(values.dtype);
            absl::StatusOr<char*> out =
                OutputMemory(operation, K::kValues, o.num_keys * value_size);
            if (!out.ok()) return out.status();
            absl::StatusOr<uint64_t*> bad = Scalar(/*check=*/true);
            if (!bad.ok()) return bad.status();
            checks_[k] = static_cast<int>(scalar_at_.size() - 1);
            check_of_[k] = CheckOf{keys, o.num_keys, /*keys=*/true};
            const bool in_order = o.reproducible && OrderSensitive(o.op, values.dtype);
            auto aggregate = [&](void* t, size_t* bytes, const void* d_keys, const void* d_values,
                                 void* d_out, int64_t* d_bad) {
              if (keys.count == nullptr) {
                return (in_order ? gpu::AggregateByKeyInOrder : gpu::AggregateByKey)(
                    t, bytes, d_keys, keys.dtype, d_values, values.dtype, keys.elements, o.op,
                    o.num_keys, d_out, d_bad, s);
              }
              return (in_order ? gpu::AggregateByKeyInOrderCounted : gpu::AggregateByKeyCounted)(
                  t, bytes, d_keys, keys.dtype, d_values, values.dtype, keys.elements,
                  keys.count, o.op, o.num_keys, d_out, d_bad, s);
            };
            size_t bytes = 0;
            PRIMSERVE_RETURN_IF_CUDA_ERROR(
                aggregate(nullptr, &bytes, nullptr, nullptr, nullptr, nullptr));
            absl::StatusOr<char*> t = temp(bytes);
            if (!t.ok()) return t.status();
            PRIMSERVE_RETURN_IF_CUDA_ERROR(aggregate(*t, &bytes, keys.data, values.data, *out,
                                                     reinterpret_cast<int64_t*>(*bad)));
            Made(k, K::kValues, {values.dtype, *out, o.num_keys, nullptr});
            return absl::OkStatus();
          },
          [](const auto&) -> absl::Status {
            return absl::InternalError("this step does not run on the device");
          },
      },
      operation);
}

absl::Status DeviceRun::Settle(std::optional<size_t> failed_step, const absl::Status& failed) {
  host_scalars_.assign(scalar_at_.size(), 0);
  // The scalars lie in blocks of kScalarsPerBlock, filled in order.
  for (size_t b = 0; b < scalar_blocks_.size(); ++b) {
    const size_t first = b * kScalarsPerBlock;
    const size_t n = std::min(kScalarsPerBlock, scalar_at_.size() - first);
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(host_scalars_.data() + first,
                                                   scalar_blocks_[b], n * sizeof(uint64_t),
                                                   cudaMemcpyDeviceToHost, lane_.stream()));
  }
  // The pipeline's one wait.
  PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(lane_.stream()));
  const size_t steps = failed_step ? *failed_step : checks_.size();
  for (size_t k = 0; k < steps; ++k) {
    if (checks_[k] < 0) continue;
    const auto position = static_cast<int64_t>(host_scalars_[checks_[k]]);
    if (position < 0) continue;
    const CheckOf& check = *check_of_[k];
    // The bad key or index itself, read on the device where it lies.
    if (!check.keys) {
      int64_t index = 0;
      PRIMSERVE_RETURN_IF_CUDA_ERROR(
          cudaMemcpy(&index, reinterpret_cast<const int64_t*>(check.read.data) + position,
                     sizeof(index), cudaMemcpyDeviceToHost));
      return InStep(k, absl::InvalidArgumentError(IndexOutOfRangeMessage(
                           static_cast<uint64_t>(position), index, check.bound)));
    }
    return InStep(k, VisitDType(check.read.dtype, [&](auto zero) -> absl::Status {
                    using Key = decltype(zero);
                    Key key{};
                    PRIMSERVE_RETURN_IF_CUDA_ERROR(
                        cudaMemcpy(&key, reinterpret_cast<const Key*>(check.read.data) + position,
                                   sizeof(key), cudaMemcpyDeviceToHost));
                    return absl::InvalidArgumentError(KeyOutOfRangeMessage(
                        static_cast<uint64_t>(position), key, check.bound));
                  }));
  }
  if (failed_step) return InStep(*failed_step, failed);
  return absl::OkStatus();
}

absl::StatusOr<PipelineResult> DeviceRun::Answers(const PipelineOperation& pipeline) {
  // Host scalar of a count, by its device address.
  auto elements_of = [&](const DeviceArray& array) -> uint64_t {
    if (array.count == nullptr) return array.elements;
    for (size_t i = 0; i < scalar_at_.size(); ++i) {
      if (scalar_at_[i] == array.count) return std::min(host_scalars_[i], array.elements);
    }
    return array.elements;
  };
  auto answer = [&](const Operation& operation, K kind, size_t k) -> HostArray {
    const DeviceArray& array = *outputs_[k][static_cast<size_t>(kind)];
    const uint64_t bytes = elements_of(array) * DTypeSize(array.dtype);
    HostArray out;
    out.dtype = array.dtype;
    if (PlaceOf(operation, kind).data != nullptr) {
      out.bytes_in_place = bytes;
      return out;
    }
    out.bytes.resize(bytes);
    return out;
  };
  PipelineResult result;
  for (size_t k = 0; k < pipeline.steps.size(); ++k) {
    const PipelineStep& step = pipeline.steps[k];
    if (!step.returned) continue;
    const Operation& op = step.operation;
    Result r = std::visit(
        Overloaded{
            [&](const SelectOperation& o) -> Result {
              SelectResult s;
              s.count = host_scalars_[*counts_[k]];
              if (WantsValues(o.output)) s.values = answer(op, K::kValues, k);
              if (WantsIndices(o.output)) s.indices = answer(op, K::kIndices, k);
              return s;
            },
            [&](const UniqueOperation&) -> Result {
              return UniqueResult{answer(op, K::kValues, k)};
            },
            [&](const RunLengthEncodeOperation&) -> Result {
              return RunLengthEncodeResult{answer(op, K::kValues, k), answer(op, K::kLengths, k)};
            },
            [&](const ScanOperation&) -> Result {
              ScanResult scan;
              scan.output = answer(op, K::kValues, k);
              return scan;
            },
            [&](const ReduceOperation& o) -> Result {
              ReduceResult reduce;
              reduce.values = answer(op, K::kValues, k);
              if (o.op == Op::kArgMin || o.op == Op::kArgMax) {
                reduce.indices = answer(op, K::kIndices, k);
              }
              return reduce;
            },
            [&](const GatherOperation&) -> Result { return GatherResult{answer(op, K::kValues, k)}; },
            [&](const AggregateByKeyOperation&) -> Result {
              return AggregateByKeyResult{answer(op, K::kValues, k)};
            },
            [](const auto&) -> Result { return PipelineResult{}; },
        },
        op);
    result.steps.push_back(StepResult{static_cast<uint32_t>(k), std::move(r)});
  }
  // The answers' bytes, from where the kernels wrote them.
  for (StepResult& step : result.steps) {
    for (int kind = 0; kind < kNumStepOutputKinds; ++kind) {
      HostArray* array = OutputOf(step.result, static_cast<K>(kind));
      if (array == nullptr || array->bytes.empty()) continue;
      if (!outputs_[step.step][kind]) {
        return absl::InternalError(absl::StrCat("step ", step.step, " made no ",
                                                StepOutputName(static_cast<K>(kind))));
      }
      const DeviceArray& from = *outputs_[step.step][kind];
      PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(array->bytes.data(), from.data,
                                                     array->bytes.size(),
                                                     cudaMemcpyDeviceToHost, lane_.stream()));
    }
  }
  PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(lane_.stream()));
  return result;
}

}  // namespace

absl::StatusOr<Result> RunOnDevice(Lane& lane, const PipelineOperation& pipeline,
                                   absl::Time deadline, Metrics* metrics) {
  const size_t count = pipeline.steps.size();
  if (metrics != nullptr) metrics->PipelineRan(count);
  DeviceRun run(lane, deadline, count);
  // Events around each step's kernels: their times once the stream is done.
  std::vector<cudaEvent_t> events;
  auto destroy_events = [&events] {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  };
  auto record = [&]() -> absl::Status {
    if (metrics == nullptr) return absl::OkStatus();
    cudaEvent_t event = nullptr;
    PRIMSERVE_RETURN_IF_CUDA_ERROR(cudaEventCreate(&event));
    events.push_back(event);
    return CudaStatus(cudaEventRecord(event, lane.stream()), "cudaEventRecord");
  };
  std::optional<size_t> failed_step;
  absl::Status failed;
  absl::Status recorded = record();
  for (size_t k = 0; k < count && recorded.ok(); ++k) {
    if (absl::Status queued = run.Queue(k, pipeline.steps[k]); !queued.ok()) {
      failed_step = k;
      failed = queued;
      break;
    }
    recorded = record();
  }
  absl::Status settled = recorded.ok() ? run.Settle(failed_step, failed) : recorded;
  if (!settled.ok()) {
    // Nothing may still write memory this run gives back.
    cudaStreamSynchronize(lane.stream());
    destroy_events();
    return settled;
  }
  if (metrics != nullptr) {
    for (size_t k = 0; k + 1 < events.size(); ++k) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, events[k], events[k + 1]) == cudaSuccess) {
        metrics->ObservePipelineStep(RpcOf(pipeline.steps[k].operation),
                                     absl::Microseconds(static_cast<int64_t>(ms * 1000)));
      }
    }
  }
  destroy_events();
  absl::StatusOr<PipelineResult> answers = run.Answers(pipeline);
  if (!answers.ok()) return answers.status();
  return Result(*std::move(answers));
}

}  // namespace primserve::cuda
