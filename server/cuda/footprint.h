// Where an operation's memory lies and how much it reads, for choosing the
// device that runs it (cuda_backend.cc, device_picker.h).
#ifndef PRIMSERVE_SERVER_CUDA_FOOTPRINT_H_
#define PRIMSERVE_SERVER_CUDA_FOOTPRINT_H_

#include <cstdint>

#include "server/engine/task.h"

namespace primserve::cuda {

struct Footprint {
  // The CUDA device holding one of the operation's inputs or output places
  // (a resident buffer or CUDA IPC memory: io.h DeviceOf), the first found
  // in argument order; -1 when all are host memory. The operation runs
  // there, reading and writing that memory in place.
  int device = -1;
  // Bytes of its input arrays: the work it puts on a device.
  uint64_t bytes = 0;
};

Footprint FootprintOf(const Operation& operation);

}  // namespace primserve::cuda

#endif  // PRIMSERVE_SERVER_CUDA_FOOTPRINT_H_
