#include "server/cuda/footprint.h"

#include <optional>

#include "server/cuda/io.h"

namespace primserve::cuda {
namespace {

// Adds arrays and places to a footprint, keeping the first device met.
class Tally {
 public:
  Tally& Array(const ArrayView& array) {
    footprint_.bytes += array.bytes.size();
    Device(array.bytes.data(), array.bytes.size());
    return *this;
  }
  Tally& Array(const std::optional<ArrayView>& array) {
    return array.has_value() ? Array(*array) : *this;
  }
  Tally& Place(const char* data, uint64_t room) {
    if (data != nullptr) Device(data, room);
    return *this;
  }
  Tally& Places(const OutputPlaces& places) {
    return Place(places.values.data, places.values.room)
        .Place(places.indices.data, places.indices.room)
        .Place(places.lengths.data, places.lengths.room)
        .Place(places.keys.data, places.keys.room);
  }
  Footprint done() const { return footprint_; }

 private:
  void Device(const char* data, uint64_t bytes) {
    if (footprint_.device < 0) footprint_.device = DeviceOf(data, bytes);
  }
  Footprint footprint_;
};

}  // namespace

Footprint FootprintOf(const Operation& operation) {
  return std::visit(
      Overloaded{
          // A scan's output place has room for its answer: as large as its
          // input, or twice that with a wider accumulator.
          [](const ScanOperation& op) {
            return Tally().Array(op.input).Place(op.output_place, OutputBytes(op)).done();
          },
          [](const ReduceOperation& op) { return Tally().Array(op.input).Places(op.places).done(); },
          [](const SelectOperation& op) {
            return Tally().Array(op.input).Array(op.flags).Places(op.places).done();
          },
          [](const UniqueOperation& op) { return Tally().Array(op.input).Places(op.places).done(); },
          [](const RunLengthEncodeOperation& op) {
            return Tally().Array(op.input).Places(op.places).done();
          },
          [](const ReduceByKeyOperation& op) {
            return Tally().Array(op.keys).Array(op.values).Places(op.places).done();
          },
          [](const AggregateByKeyOperation& op) {
            return Tally().Array(op.keys).Array(op.values).Places(op.places).done();
          },
          [](const SortOperation& op) {
            return Tally().Array(op.keys).Array(op.values).Places(op.places).done();
          },
          [](const GatherOperation& op) {
            return Tally().Array(op.values).Array(op.indices).Places(op.places).done();
          },
          // A pipeline runs on one lane: its steps' bytes together, and the
          // first device any step's memory lies on.
          [](const PipelineOperation& op) {
            Footprint total;
            for (const PipelineStep& step : op.steps) {
              const Footprint footprint = FootprintOf(step.operation);
              total.bytes += footprint.bytes;
              if (total.device < 0) total.device = footprint.device;
            }
            return total;
          },
      },
      operation);
}

}  // namespace primserve::cuda
