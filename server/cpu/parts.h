// Splitting a CPU backend loop over threads (cpu_kernels.cc, cpu_select.cc,
// cpu_sort.cc, cpu_runs.cc).
#ifndef PRIMSERVE_SERVER_CPU_PARTS_H_
#define PRIMSERVE_SERVER_CPU_PARTS_H_

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "server/cpu/cpu_kernels.h"

namespace primserve::cpu {

// How many parts ForEachPart cuts [0, n) into: at most parallelism.threads,
// none smaller than parallelism.min_items (one when n is 0).
inline int PartCount(uint64_t n, const Parallelism& parallelism) {
  const uint64_t by_size = std::max<uint64_t>(1, n / std::max<uint64_t>(1, parallelism.min_items));
  const uint64_t wanted = std::min<uint64_t>(std::max(1, parallelism.threads), by_size);
  const uint64_t step = std::max<uint64_t>(1, (n + wanted - 1) / wanted);
  return static_cast<int>(std::max<uint64_t>(1, (n + step - 1) / step));
}

// Runs f(t) for t in [0, count), each on its own thread, t = 0 on the
// calling one.
template <typename F>
void OnThreads(int count, F&& f) {
  std::vector<std::thread> threads;
  threads.reserve(count > 1 ? count - 1 : 0);
  for (int t = 1; t < count; ++t) threads.emplace_back([&f, t] { f(t); });
  f(0);
  for (std::thread& thread : threads) thread.join();
}

// Runs f(part, begin, end) over [0, n) cut into PartCount(n, parallelism)
// equal non-empty parts (one empty part when n is 0), part 0 on the calling
// thread; returns the number of parts.
template <typename F>
int ForEachPart(uint64_t n, const Parallelism& parallelism, F&& f) {
  const int parts = PartCount(n, parallelism);
  const uint64_t step = std::max<uint64_t>(1, (n + parts - 1) / parts);
  OnThreads(parts, [&](int p) {
    f(p, std::min(n, p * step), std::min(n, (p + 1) * step));
  });
  return parts;
}

// Where OnThreads' threads wait for each other between the rounds of a loop
// they share (the threaded scan's).
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}

  // Returns once all `count` threads have called it this round.
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t round = round_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++round_;
      all_arrived_.notify_all();
      return;
    }
    all_arrived_.wait(lock, [&] { return round_ != round; });
  }

 private:
  const int count_;
  std::mutex mutex_;
  std::condition_variable all_arrived_;
  int arrived_ = 0;
  uint64_t round_ = 0;
};

}  // namespace primserve::cpu

#endif  // PRIMSERVE_SERVER_CPU_PARTS_H_
