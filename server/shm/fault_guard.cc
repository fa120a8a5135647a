#include "server/shm/fault_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace primserve::shm {
namespace {

// One guarded range. The handler reads `begin` and `end` with no lock (it
// may interrupt any code); a slot is filled before `begin` is published and
// `begin` is cleared first when it is emptied.
struct Slot {
  std::atomic<bool> taken{false};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};

Slot slots[FaultGuard::kMaxGuarded];
struct sigaction previous_action;
uintptr_t page_size = 0;

void OnSigbus(int signal, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& slot : slots) {
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= slot.end.load(std::memory_order_acquire)) {
      continue;
    }
    // mmap is a plain system call, safe here; the access is retried on return.
    void* page = reinterpret_cast<void*>(address & ~(page_size - 1));
    if (mmap(page, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
             0) != MAP_FAILED) {
      slot.faulted.store(true, std::memory_order_release);
      return;
    }
    break;
  }
  // Not a guarded range: the previous disposition, as if this were not here.
  if (previous_action.sa_flags & SA_SIGINFO) {
    if (previous_action.sa_sigaction != nullptr) {
      previous_action.sa_sigaction(signal, info, context);
      return;
    }
  } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(signal);
    return;
  }
  // Default: restore it and return, so that the access faults again and
  // the process ends as it would have.
  sigaction(SIGBUS, &previous_action, nullptr);
}

absl::Status InstallOnce() {
  static std::once_flag once;
  static absl::Status* installed = nullptr;
  std::call_once(once, [] {
    page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    installed = new absl::Status(
        sigaction(SIGBUS, &action, &previous_action) == 0
            ? absl::OkStatus()
            : absl::InternalError(absl::StrCat("cannot install the SIGBUS handler that guards "
                                               "shared memory: ",
                                               std::strerror(errno))));
  });
  return *installed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FaultGuard>> FaultGuard::Guard(void* begin, size_t size) {
  if (absl::Status installed = InstallOnce(); !installed.ok()) return installed;
  for (int i = 0; i < kMaxGuarded; ++i) {
    bool free = false;
    if (!slots[i].taken.compare_exchange_strong(free, true)) continue;
    const uintptr_t b = reinterpret_cast<uintptr_t>(begin);
    slots[i].faulted.store(false);
    slots[i].end.store(b + size, std::memory_order_release);
    slots[i].begin.store(b, std::memory_order_release);
    return std::unique_ptr<FaultGuard>(new FaultGuard(i));
  }
  return absl::ResourceExhaustedError(
      absl::StrCat(kMaxGuarded, " shared-memory mappings are in use already"));
}

FaultGuard::~FaultGuard() {
  Slot& slot = slots[slot_];
  slot.begin.store(0, std::memory_order_release);
  slot.end.store(0, std::memory_order_release);
  slot.taken.store(false);
}

bool FaultGuard::faulted() const { return slots[slot_].faulted.load(std::memory_order_acquire); }

}  // namespace primserve::shm
