// Splitting a CPU backend loop over threads (cpu_kernels.cc, cpu_sort.cc).
#ifndef PRIMSERVE_SERVER_CPU_PARTS_H_
#define PRIMSERVE_SERVER_CPU_PARTS_H_

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "server/cpu/cpu_kernels.h"

namespace primserve::cpu {

// Runs f(part, begin, end) over [0, n) cut into equal non-empty parts (one
// empty part when n is 0), part 0 on the calling thread; returns the number
// of parts.
template <typename F>
int ForEachPart(uint64_t n, const Parallelism& parallelism, F&& f) {
  const uint64_t by_size = std::max<uint64_t>(1, n / std::max<uint64_t>(1, parallelism.min_items));
  const uint64_t wanted = std::min<uint64_t>(std::max(1, parallelism.threads), by_size);
  const uint64_t step = std::max<uint64_t>(1, (n + wanted - 1) / wanted);
  const int parts = static_cast<int>(std::max<uint64_t>(1, (n + step - 1) / step));
  std::vector<std::thread> threads;
  threads.reserve(parts - 1);
  for (int p = 1; p < parts; ++p) {
    threads.emplace_back([&f, p, step, n] { f(p, p * step, std::min(n, (p + 1) * step)); });
  }
  f(0, uint64_t{0}, std::min(n, step));
  for (std::thread& t : threads) t.join();
  return parts;
}

}  // namespace primserve::cpu

#endif  // PRIMSERVE_SERVER_CPU_PARTS_H_
