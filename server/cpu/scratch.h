// Scratch arrays for the CPU backend's large temporaries (the radix sort's
// buffers), on huge pages where the kernel gives them: their writes land at
// random over hundreds of megabytes, and with 4 KiB pages nearly each one
// misses the TLB (a page walk, dearer still in a virtual machine).
#ifndef PRIMSERVE_SERVER_CPU_SCRATCH_H_
#define PRIMSERVE_SERVER_CPU_SCRATCH_H_

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace primserve::cpu {

struct FreeScratch {
  void operator()(void* p) const { std::free(p); }
};

template <typename T>
using Scratch = std::unique_ptr<T[], FreeScratch>;

// Room for n elements of T (uninitialised; T trivial), 2 MiB aligned and
// advised to be backed by huge pages (MADV_HUGEPAGE, which transparent huge
// pages in "madvise" mode wait for). Throws std::bad_alloc when there is no
// memory, as new does.
template <typename T>
Scratch<T> NewScratch(size_t n) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t bytes = (std::max<size_t>(1, n * sizeof(T)) + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, bytes);
  if (p == nullptr) throw std::bad_alloc();
  // Advice only: without huge pages the memory works the same, slower.
  madvise(p, bytes, MADV_HUGEPAGE);
  return Scratch<T>(static_cast<T*>(p));
}

}  // namespace primserve::cpu

#endif  // PRIMSERVE_SERVER_CPU_SCRATCH_H_
