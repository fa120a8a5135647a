#include "server/engine/answer_sent.h"

#include <utility>

namespace primserve {

void AnswerSent::Then(absl::AnyInvocable<void() &&> f) {
  {
    absl::MutexLock lock(&mu_);
    if (!signalled_) {
      waiting_.push_back(std::move(f));
      return;
    }
  }
  std::move(f)();
}

void AnswerSent::Signal() {
  std::vector<absl::AnyInvocable<void() &&>> waiting;
  {
    absl::MutexLock lock(&mu_);
    if (signalled_) return;
    signalled_ = true;
    waiting.swap(waiting_);
  }
  for (auto& f : waiting) std::move(f)();
}

}  // namespace primserve
