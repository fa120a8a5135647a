#include "tests/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/time/clock.h"

namespace primserve {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, std::string log_path)
    : log_path_(std::move(log_path)) {
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls.
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) return;
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log);
  pid_ = pid > 0 ? pid : 0;
}

ChildProcess::~ChildProcess() {
  if (pid_ != 0) Terminate(absl::Seconds(10));
}

bool ChildProcess::running() {
  if (pid_ == 0) return false;
  if (waitpid(pid_, nullptr, WNOHANG) == 0) return true;
  pid_ = 0;
  return false;
}

ChildProcess::Exit ChildProcess::Terminate(absl::Duration limit) {
  Exit exit;
  if (pid_ == 0) return exit;
  const absl::Time signalled = absl::Now();
  kill(pid_, SIGTERM);
  while (true) {
    if (waitpid(pid_, &exit.status, WNOHANG) == pid_) {
      exit.exited = true;
      break;
    }
    if (absl::Now() - signalled > limit) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &exit.status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  exit.took = absl::Now() - signalled;
  pid_ = 0;
  return exit;
}

void ChildProcess::Kill() {
  if (pid_ == 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

}  // namespace primserve
