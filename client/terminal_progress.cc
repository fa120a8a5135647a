#include "client/terminal_progress.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "absl/strings/str_format.h"

namespace primserve {

TerminalProgress::TerminalProgress(std::string what, uint64_t total_bytes)
    : what_(std::move(what)), total_bytes_(total_bytes), shown_(isatty(STDERR_FILENO) == 1) {}

TerminalProgress::~TerminalProgress() {
  absl::MutexLock lock(&mu_);
  if (drew_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
}

void TerminalProgress::Add(uint64_t bytes) {
  if (!shown_) return;
  absl::MutexLock lock(&mu_);
  done_bytes_ += bytes;
  const absl::Time now = absl::Now();
  // Redrawing every piece would cost more than the piece on a fast link.
  if (now - drawn_ < absl::Milliseconds(100) && done_bytes_ < total_bytes_) return;
  drawn_ = now;
  drew_ = true;
  absl::FPrintF(stderr, "\r\033[K%s: %.1f of %.1f MB", what_, done_bytes_ / 1e6, total_bytes_ / 1e6);
  std::fflush(stderr);
}

}  // namespace primserve
