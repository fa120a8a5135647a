// A child process for tests that run a real binary (primserve, prometheus):
// stdout and stderr go to a log file, and the child is SIGKILLed if the test
// dies first.
#ifndef PRIMSERVE_TESTS_CHILD_PROCESS_H_
#define PRIMSERVE_TESTS_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace primserve {

// The whole file; empty if it cannot be read.
std::string ReadFile(const std::string& path);

class ChildProcess final {
 public:
  // Starts argv[0] (a path) with `argv`; see started().
  ChildProcess(const std::vector<std::string>& argv, std::string log_path);
  // Unless already reaped: SIGTERM, then SIGKILL after 10 s.
  ~ChildProcess();

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ != 0; }
  // 0 when not started or reaped.
  pid_t pid() const { return pid_; }
  // Started and not exited (reaps it if it has).
  bool running();
  std::string log() const { return ReadFile(log_path_); }

  struct Exit {
    bool exited = false;  // else it was SIGKILLed after the limit
    int status = 0;       // waitpid's
    absl::Duration took;  // from the signal
  };
  // SIGTERM, then waits up to `limit` for the exit, timed to the millisecond;
  // SIGKILL after that.
  Exit Terminate(absl::Duration limit);
  // SIGKILL (no drain), then reaps it.
  void Kill();

 private:
  const std::string log_path_;
  pid_t pid_ = 0;  // 0: not started, or reaped
};

}  // namespace primserve

#endif  // PRIMSERVE_TESTS_CHILD_PROCESS_H_
