// The sort's first pass: one read of the keys counts every digit of every
// pass (per portion, tuning_sort.cuh kPortionMaxItems, so that 32-bit
// counters never overflow), and a small kernel turns the counts into each
// (pass, digit)'s first output position.
#ifndef PRIMSERVE_KERNELS_DETAIL_RADIX_HISTOGRAM_CUH_
#define PRIMSERVE_KERNELS_DETAIL_RADIX_HISTOGRAM_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/detail/radix_key.cuh"
#include "kernels/detail/tuning_sort.cuh"
#include "kernels/detail/warp.cuh"

namespace primserve::gpu::detail {

// Grid (blocks per portion, portions). Each block counts a grid-strided share
// of its portion in shared memory, then adds its counts to
// d_counts[portion][pass][digit] (zeroed before the launch).
template <typename U>
__global__ void __launch_bounds__(kHistogramThreads)
    RadixHistogramKernel(const U* __restrict__ keys, uint64_t n, uint64_t portion_items,
                         RadixCodec<U> codec, uint32_t* __restrict__ d_counts) {
  constexpr int kPasses = RadixCodec<U>::kPasses;
  __shared__ uint32_t counts[kPasses][kRadixDigits];
  for (int i = threadIdx.x; i < kPasses * kRadixDigits; i += kHistogramThreads) {
    (&counts[0][0])[i] = 0;
  }
  __syncthreads();
  const uint64_t begin = static_cast<uint64_t>(blockIdx.y) * portion_items;
  const uint64_t end = begin + portion_items < n ? begin + portion_items : n;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * kHistogramThreads;
  constexpr int kUnroll = 4;
  uint64_t i = begin + static_cast<uint64_t>(blockIdx.x) * kHistogramThreads + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < end; i += kUnroll * stride) {
    U bits[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) bits[u] = keys[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const U ordered = codec.Ordered(bits[u]);
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        atomicAdd(&counts[p][(ordered >> (p * kRadixBits)) & (kRadixDigits - 1)], 1u);
      }
    }
  }
  for (; i < end; i += stride) {
    const U ordered = codec.Ordered(keys[i]);
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      atomicAdd(&counts[p][(ordered >> (p * kRadixBits)) & (kRadixDigits - 1)], 1u);
    }
  }
  __syncthreads();
  uint32_t* out = d_counts + static_cast<uint64_t>(blockIdx.y) * kPasses * kRadixDigits;
  for (int k = threadIdx.x; k < kPasses * kRadixDigits; k += kHistogramThreads) {
    const uint32_t c = (&counts[0][0])[k];
    if (c) atomicAdd(out + k, c);
  }
}

// One block of kRadixDigits threads per pass (grid = passes): d_offsets[
// pass * offsets_stride + digit] = the keys of smaller digits (all
// portions): where the first key of that digit goes in this pass.
template <int kPasses>
__global__ void __launch_bounds__(kRadixDigits)
    RadixOffsetsKernel(const uint32_t* __restrict__ d_counts, int num_portions,
                       uint64_t* __restrict__ d_offsets, int offsets_stride) {
  __shared__ uint64_t warp_totals[kRadixDigits / kWarpThreads];
  const int pass = blockIdx.x;
  const int digit = threadIdx.x;
  uint64_t total = 0;
  for (int q = 0; q < num_portions; ++q) {
    total += d_counts[(static_cast<uint64_t>(q) * kPasses + pass) * kRadixDigits + digit];
  }
  uint64_t inclusive = total;
  const int lane = LaneId();
#pragma unroll
  for (int delta = 1; delta < kWarpThreads; delta *= 2) {
    const uint64_t up = __shfl_up_sync(kFullMask, inclusive, delta);
    if (lane >= delta) inclusive += up;
  }
  if (lane == kWarpThreads - 1) warp_totals[WarpId()] = inclusive;
  __syncthreads();
  uint64_t before = inclusive - total;
  for (int w = 0; w < WarpId(); ++w) before += warp_totals[w];
  d_offsets[static_cast<uint64_t>(pass) * offsets_stride + digit] = before;
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_RADIX_HISTOGRAM_CUH_
