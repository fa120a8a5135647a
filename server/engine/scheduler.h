// The scheduler interface between the transport and the execution backends.
#ifndef PRIMSERVE_SERVER_ENGINE_SCHEDULER_H_
#define PRIMSERVE_SERVER_ENGINE_SCHEDULER_H_

#include <memory>

#include "absl/status/status.h"
#include "server/engine/task.h"

namespace primserve {

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  // Queues *task for execution and never blocks. On OK it takes ownership
  // (sets *task to null) and will call the task's `done` exactly once; on any
  // other status *task is left with the caller, and `done` is not called:
  // RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE when shutting down.
  virtual absl::Status Schedule(std::unique_ptr<Task>* task) = 0;

  // As Schedule, but when the engine is idle and the task small it may run
  // the task on the calling thread, calling `done` before it returns: no
  // hand-off to another thread, so an idle server answers a small request
  // at once. The caller must hold no lock that `done` takes. By default the
  // same as Schedule.
  virtual absl::Status ScheduleOrRun(std::unique_ptr<Task>* task) { return Schedule(task); }
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_SCHEDULER_H_
