// What every kernel benchmark times with: a check that ends the run at the
// first failed CUDA call (a benchmark has nothing to recover), and the median
// of CUDA-event timings of one call after warm-up. Header-only, plain C++.
#ifndef PRIMSERVE_KERNELS_BENCH_TIMING_H_
#define PRIMSERVE_KERNELS_BENCH_TIMING_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace primserve::bench {

inline void Check(int err, const char* what, int line) {
  if (err != 0) {
    std::fprintf(stderr, "FAILED line %d: %s: %s\n", line, what,
                 cudaGetErrorString(static_cast<cudaError_t>(err)));
    std::exit(1);
  }
}
#define BENCH_CHECK(expr) ::primserve::bench::Check(static_cast<int>(expr), #expr, __LINE__)

// Median microseconds of `reps` calls call(rep, stream), each between two
// CUDA events on `stream`, after three warm-up calls.
inline double MedianUs(const std::function<int(int rep, cudaStream_t)>& call, int reps,
                       cudaStream_t stream) {
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) BENCH_CHECK(call(i, stream));
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    BENCH_CHECK(cudaEventRecord(start, stream));
    BENCH_CHECK(call(i, stream));
    BENCH_CHECK(cudaEventRecord(stop, stream));
    BENCH_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms * 1000);
  }
  BENCH_CHECK(cudaEventDestroy(start));
  BENCH_CHECK(cudaEventDestroy(stop));
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[reps / 2];
}

// The same for calls that take only the stream.
inline double MedianUs(const std::function<int(cudaStream_t)>& call, int reps,
                       cudaStream_t stream) {
  return MedianUs([&](int, cudaStream_t s) { return call(s); }, reps, stream);
}

}  // namespace primserve::bench

#endif  // PRIMSERVE_KERNELS_BENCH_TIMING_H_
