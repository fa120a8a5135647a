// The moment a task's answer has left the server: the transport signals it
// (gRPC reported the write done, or the call ended without it), and whoever
// kept memory counted for the answer (admission) lets it go then, not when the
// answer was merely handed to gRPC, which holds it until the client reads.
#ifndef PRIMSERVE_SERVER_ENGINE_ANSWER_SENT_H_
#define PRIMSERVE_SERVER_ENGINE_ANSWER_SENT_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace primserve {

class AnswerSent {
 public:
  AnswerSent() = default;
  AnswerSent(const AnswerSent&) = delete;
  AnswerSent& operator=(const AnswerSent&) = delete;
  // An answer nobody signalled is gone with its last holder: never leaves a
  // charge behind.
  ~AnswerSent() { Signal(); }

  // Runs `f` once the answer is sent (on the signalling thread), or now if
  // it already was.
  void Then(absl::AnyInvocable<void() &&> f);
  // The answer was sent, or will never be (the call ended): runs what waits,
  // once; later calls do nothing.
  void Signal();

 private:
  absl::Mutex mu_;
  bool signalled_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<absl::AnyInvocable<void() &&>> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_ANSWER_SENT_H_
