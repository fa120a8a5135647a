// A transfer's progress on stderr while stderr is a terminal, as tqdm shows
// it: "put: 96.5 of 256.0 MB" redrawn in place, at most every 100 ms, erased
// when done. In a pipe or a file it writes nothing, so scripts and logs see
// only the answer. Add may be called from any thread.
#ifndef PRIMSERVE_CLIENT_TERMINAL_PROGRESS_H_
#define PRIMSERVE_CLIENT_TERMINAL_PROGRESS_H_

#include <cstdint>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace primserve {

class TerminalProgress final {
 public:
  // `what` names the transfer; `total_bytes` is what Add will add up to.
  TerminalProgress(std::string what, uint64_t total_bytes);
  ~TerminalProgress();  // erases the line
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;

  // `bytes` more have moved.
  void Add(uint64_t bytes);

 private:
  const std::string what_;
  const uint64_t total_bytes_;
  const bool shown_;
  absl::Mutex mu_;
  uint64_t done_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time drawn_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool drew_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_TERMINAL_PROGRESS_H_
