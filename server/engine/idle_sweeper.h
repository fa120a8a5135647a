// A thread that calls a sweep of idle entries (a registry's DropIdle) every
// so often until it is destroyed: what frees resident buffers and
// shared-memory regions whose idle time ran out when no request comes to
// find them.
#ifndef PRIMSERVE_SERVER_ENGINE_IDLE_SWEEPER_H_
#define PRIMSERVE_SERVER_ENGINE_IDLE_SWEEPER_H_

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace primserve {

class IdleSweeper final {
 public:
  // sweep() every quarter of `idle` (between 10 ms and 1 s); no thread when
  // `idle` is infinite. Declare it after everything sweep() uses, so that it
  // stops first.
  IdleSweeper(absl::Duration idle, absl::AnyInvocable<void()> sweep);
  // Stops the thread, waiting for a sweep under way.
  ~IdleSweeper();
  IdleSweeper(const IdleSweeper&) = delete;
  IdleSweeper& operator=(const IdleSweeper&) = delete;

 private:
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_IDLE_SWEEPER_H_
