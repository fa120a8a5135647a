#include "server/engine/idle_sweeper.h"

#include <algorithm>
#include <utility>

namespace primserve {

IdleSweeper::IdleSweeper(absl::Duration idle, absl::AnyInvocable<void()> sweep) {
  if (idle == absl::InfiniteDuration()) return;
  const absl::Duration period = std::clamp(idle / 4, absl::Milliseconds(10), absl::Seconds(1));
  thread_ = std::thread([this, period, sweep = std::move(sweep)]() mutable {
    absl::MutexLock lock(&mu_);
    while (!stopping_) {
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), period);
      if (stopping_) break;
      mu_.Unlock();
      sweep();
      mu_.Lock();
    }
  });
}

IdleSweeper::~IdleSweeper() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace primserve
