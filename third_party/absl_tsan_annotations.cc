// ThreadSanitizer only sees code compiled with -fsanitize=thread, and
// Debian's Abseil is not: absl::Mutex, CondVar and Notification synchronize
// inside libabsl_synchronization.so where TSan cannot see it, so every access
// they order (all of the batcher's state, say) would look like a data race.
//
// Linked into --config=tsan builds only (third_party/BUILD.bazel), this file
// interposes their synchronizing entry points: each wrapper calls the real
// function (found with dlsym(RTLD_NEXT)) and tells TSan the happens-before
// edge it makes, as a release on the object before giving it up and an
// acquire after taking it. Calls from the shared libraries (gRPC, Abseil
// itself) go through the PLT and land here too.
//
// Not covered: Notification::HasBeenNotified() is inline and reads the flag
// without a lock, so a thread that only polls it gets no edge from Notify().
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

#define PRIMSERVE_STRINGIFY(x) PRIMSERVE_STRINGIFY_INNER(x)
#define PRIMSERVE_STRINGIFY_INNER(x) #x

// The real function whose mangled name is "_ZN" (or "_ZNK" for a const
// member) + "4absl" + the inline namespace + `rest`.
template <typename Fn>
Fn Real(bool is_const, const char* rest) {
  const char* inline_namespace = PRIMSERVE_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = std::string(is_const ? "_ZNK4absl" : "_ZN4absl") +
                           std::to_string(std::strlen(inline_namespace)) + inline_namespace +
                           rest;
  void* real = dlsym(RTLD_NEXT, name.c_str());
  if (real == nullptr) {
    std::fprintf(stderr, "absl_tsan_annotations: %s not found\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(real);
}

#define PRIMSERVE_REAL(type, is_const, rest) \
  static const auto real = Real<type>(is_const, rest)

// The real functions evaluate conditions with the lock held, taken and given
// up again inside them where the wrappers below cannot annotate it (a waiter
// re-evaluates its condition at each wake-up). The wrappers pass this
// instead, which brackets each evaluation with the edges of the lock.
struct LockedCondition {
  const absl::Condition* condition;
  absl::Mutex* mu;
};

bool EvalLocked(LockedCondition* locked) {
  __tsan_acquire(locked->mu);
  const bool met = locked->condition->Eval();
  __tsan_release(locked->mu);
  return met;
}

absl::Condition Annotated(LockedCondition* locked) { return absl::Condition(&EvalLocked, locked); }

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  PRIMSERVE_REAL(void (*)(Mutex*), false, "5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  PRIMSERVE_REAL(void (*)(Mutex*), false, "5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  PRIMSERVE_REAL(bool (*)(Mutex*), false, "5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  PRIMSERVE_REAL(bool (*)(Mutex*), false, "5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  PRIMSERVE_REAL(void (*)(Mutex*), false, "5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  PRIMSERVE_REAL(void (*)(Mutex*), false, "5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  PRIMSERVE_REAL(void (*)(Mutex*, const Condition&), false, "5Mutex8LockWhenERKNS0_9ConditionE");
  LockedCondition locked{&cond, this};
  real(this, Annotated(&locked));
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  PRIMSERVE_REAL(void (*)(Mutex*, const Condition&), false,
                 "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  LockedCondition locked{&cond, this};
  real(this, Annotated(&locked));
  __tsan_acquire(this);
}

// The timed LockWhen variants hold the lock on return whatever they return.
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  PRIMSERVE_REAL(bool (*)(Mutex*, const Condition&, Duration), false,
                 "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  LockedCondition locked{&cond, this};
  const bool met = real(this, Annotated(&locked), timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  PRIMSERVE_REAL(bool (*)(Mutex*, const Condition&, Time), false,
                 "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  LockedCondition locked{&cond, this};
  const bool met = real(this, Annotated(&locked), deadline);
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  PRIMSERVE_REAL(bool (*)(Mutex*, const Condition&, Duration), false,
                 "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  LockedCondition locked{&cond, this};
  const bool met = real(this, Annotated(&locked), timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  PRIMSERVE_REAL(bool (*)(Mutex*, const Condition&, Time), false,
                 "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  LockedCondition locked{&cond, this};
  const bool met = real(this, Annotated(&locked), deadline);
  __tsan_acquire(this);
  return met;
}

// Await releases the lock while it waits and takes it back before returning.
void Mutex::Await(const Condition& cond) {
  PRIMSERVE_REAL(void (*)(Mutex*, const Condition&), false, "5Mutex5AwaitERKNS0_9ConditionE");
  LockedCondition locked{&cond, this};
  __tsan_release(this);
  real(this, Annotated(&locked));
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  PRIMSERVE_REAL(bool (*)(Mutex*, const Condition&, Duration), false,
                 "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  LockedCondition locked{&cond, this};
  __tsan_release(this);
  const bool met = real(this, Annotated(&locked), timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  PRIMSERVE_REAL(bool (*)(Mutex*, const Condition&, Time), false,
                 "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  LockedCondition locked{&cond, this};
  __tsan_release(this);
  const bool met = real(this, Annotated(&locked), deadline);
  __tsan_acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  PRIMSERVE_REAL(void (*)(CondVar*, Mutex*), false, "7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  PRIMSERVE_REAL(bool (*)(CondVar*, Mutex*, Duration), false,
                 "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  PRIMSERVE_REAL(bool (*)(CondVar*, Mutex*, Time), false,
                 "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

// A waiter that finds the notification already given returns without taking
// the internal lock, so Notify and the waits carry an edge of their own.
void Notification::Notify() {
  PRIMSERVE_REAL(void (*)(Notification*), false, "12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  PRIMSERVE_REAL(void (*)(const Notification*), true, "12Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  PRIMSERVE_REAL(bool (*)(const Notification*, Duration), true,
                 "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  PRIMSERVE_REAL(bool (*)(const Notification*, Time), true,
                 "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl

// The annotated Condition a waiter hands to the real functions is built on
// the waiter's stack and read by whichever thread later unlocks and
// re-evaluates it, through absl's waiter queue inside the uninstrumented
// library: TSan cannot see that edge (seen flakily in batcher_test).
extern "C" const char* __tsan_default_suppressions() {
  return "race:CastAndCallFunction<*LockedCondition>\n";
}
