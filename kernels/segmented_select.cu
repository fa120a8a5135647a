// Segmented Select (kernels/select.h): many requests concatenated, each
// compacted into its own output slot, in one fused look-back pass.
//
// Each element i carries (k_i, h_i): k_i = 1 when kept, h_i = 1 when i is
// the first element of its segment. The segmented-count operator
//     (k_a, h_a) . (k_b, h_b) = (h_b ? k_b : k_a + k_b, h_a | h_b)
// is associative; its exclusive scan at i, restricted to i's segment, is the
// number kept before i in its segment: i's output position within the
// segment's slot. At a segment's last element the inclusive count is the
// segment's count.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/detail/compaction.cuh"
#include "kernels/detail/lookback.cuh"
#include "kernels/detail/range_keep.cuh"
#include "core/primitives.h"
#include "kernels/runs.h"
#include "kernels/select.h"

namespace primserve::gpu {
namespace {

using detail::kCompactBlock;
using detail::kCompactWarps;

using detail::kSegItems;
constexpr int kSegTile = kCompactBlock * kSegItems;

struct SegPair {
  unsigned long long count;
  unsigned int head;
  unsigned int pad;
};

struct SegPairOp {
  __device__ __forceinline__ SegPair operator()(const SegPair& a,
                                                const SegPair& b) const {
    SegPair r;
    r.count = b.head ? b.count : a.count + b.count;
    r.head = a.head | b.head;
    r.pad = 0;
    return r;
  }
};

template <typename T>
struct SegParams {
  const T* in;
  const uint8_t* flags;
  uint64_t n;
  const uint64_t* starts;
  uint64_t num_segments;
  detail::RangeKeep<T> pred;  // branch-free form of the predicate
  T* values_out;
  int64_t* indices_out;
  uint64_t* counts;
  bool vector_ok;
  detail::TileStatus<SegPair> status;
};

template <typename T, bool kFlags>
__global__ void __launch_bounds__(kCompactBlock)
    SegmentedSelectKernel(const SegParams<T> p) {
  __shared__ SegPair s_warp[kCompactWarps];
  __shared__ SegPair s_slot;
  __shared__ int64_t s_tile;
  if (threadIdx.x == 0) s_tile = p.status.AcquireTileIndex();
  __syncthreads();
  const int64_t tile = s_tile;
  const uint64_t first = static_cast<uint64_t>(tile) * kSegTile +
                         threadIdx.x * kSegItems;
  const uint64_t n = p.n;
  const uint64_t S = p.num_segments;

  T x[kSegItems];
  const bool need_values = !kFlags || p.values_out != nullptr;
  if (need_values) detail::LoadBlocked<kSegItems>(p.in, first, n, p.vector_ok, x);
  bool keep[kSegItems], head[kSegItems], tail[kSegItems];
  uint64_t seg_id[kSegItems], seg_start[kSegItems];

  // This thread's first segment: the last s with starts[s] <= first.
  uint64_t seg = 0, cur_start = 0, next_start = ~0ull;
  if (first < n) {
    uint64_t lo = 0, hi = S;
    while (lo < hi) {
      const uint64_t mid = (lo + hi) / 2;
      if (p.starts[mid] <= first) lo = mid + 1; else hi = mid;
    }
    seg = lo > 0 ? lo - 1 : 0;
    cur_start = p.starts[seg];
    next_start = seg + 1 < S ? p.starts[seg + 1] : ~0ull;
  }
#pragma unroll
  for (int e = 0; e < kSegItems; ++e) {
    const uint64_t g = first + e;
    const bool in_range = g < n;
    if (in_range) {
      while (next_start <= g) {  // skips empty segments too
        ++seg;
        cur_start = next_start;
        next_start = seg + 1 < S ? p.starts[seg + 1] : ~0ull;
      }
    }
    seg_id[e] = seg;
    seg_start[e] = cur_start;
    head[e] = in_range && g == cur_start;
    tail[e] = in_range && (g == n - 1 || next_start == g + 1);
    if constexpr (kFlags) {
      keep[e] = in_range && p.flags[g] != 0;
    } else {
      keep[e] = in_range && p.pred(x[e]);
    }
  }

  const SegPairOp op;
  SegPair acc{keep[0] ? 1ull : 0ull, head[0] ? 1u : 0u, 0u};
#pragma unroll
  for (int e = 1; e < kSegItems; ++e) {
    acc = op(acc, SegPair{keep[e] ? 1ull : 0ull, head[e] ? 1u : 0u, 0u});
  }
  SegPair run;
  bool have = detail::BlockScanLookback(acc, op, p.status, tile, s_warp, s_slot, &run);

#pragma unroll
  for (int e = 0; e < kSegItems; ++e) {
    const uint64_t g = first + e;
    if (g < n) {
      const uint64_t before = (have && !head[e]) ? run.count : 0;
      const SegPair item{keep[e] ? 1ull : 0ull, head[e] ? 1u : 0u, 0u};
      run = have ? op(run, item) : item;
      have = true;
      if (keep[e]) {
        const uint64_t dst = seg_start[e] + before;
        if (p.values_out != nullptr) p.values_out[dst] = x[e];
        if (p.indices_out != nullptr) {
          p.indices_out[dst] = static_cast<int64_t>(g - seg_start[e]);
        }
      }
      if (tail[e] && p.counts != nullptr) p.counts[seg_id[e]] = run.count;
    }
  }
}

// counts[s] = 0 for every empty segment (the main kernel writes the others).
__global__ void ZeroEmptySegmentsKernel(const uint64_t* starts, uint64_t S,
                                        uint64_t n, uint64_t* counts) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t s = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
       s < S; s += stride) {
    const uint64_t end = s + 1 < S ? starts[s + 1] : n;
    if (end == starts[s]) counts[s] = 0;
  }
}

template <typename T>
detail::RangeKeep<T> ToPredicate(const SelectKeep& keep) {
  Predicate<T> pred;
  pred.kind = keep.kind;
  memcpy(&pred.operand, keep.operand, sizeof(T));
  memcpy(&pred.upper, keep.upper, sizeof(T));
  return detail::RangeKeep<T>::From(pred);
}

template <typename T>
int RunSegmented(void* d_temp, size_t* temp_bytes, const void* d_in, uint64_t n,
                 const uint64_t* starts, uint64_t S, const SelectKeep& keep,
                 void* values_out, int64_t* indices_out, uint64_t* counts,
                 cudaStream_t stream) {
  const int64_t tiles = static_cast<int64_t>((n + kSegTile - 1) / kSegTile);
  const size_t need = detail::CompactionTempBytes<SegPair>(tiles);
  if (d_temp == nullptr) {
    *temp_bytes = need;
    return 0;
  }
  if (*temp_bytes < need) return static_cast<int>(cudaErrorInvalidValue);
  if (counts != nullptr) {
    const uint64_t blocks64 = (S + 255) / 256;
    const unsigned blocks = static_cast<unsigned>(blocks64 < 1024 ? blocks64 : 1024);
    ZeroEmptySegmentsKernel<<<blocks, 256, 0, stream>>>(starts, S, n, counts);
    PRIMSERVE_CUDA_TRY(cudaGetLastError());
  }
  if (n == 0) return 0;
  auto* header = static_cast<unsigned long long*>(d_temp);
  detail::TileStatus<SegPair> status(static_cast<char*>(d_temp) + detail::kHeaderBytes,
                                 tiles);
  if (int e = detail::LaunchCompactionInit(status, header, stream)) return e;
  SegParams<T> p{};
  p.in = static_cast<const T*>(d_in);
  p.flags = keep.d_flags;
  p.n = n;
  p.starts = starts;
  p.num_segments = S;
  if (keep.d_flags == nullptr) p.pred = ToPredicate<T>(keep);
  p.values_out = static_cast<T*>(values_out);
  p.indices_out = indices_out;
  p.counts = counts;
  p.vector_ok = reinterpret_cast<uintptr_t>(d_in) % 16 == 0;
  p.status = status;
  if (keep.d_flags != nullptr) {
    SegmentedSelectKernel<T, true>
        <<<static_cast<unsigned>(tiles), kCompactBlock, 0, stream>>>(p);
  } else {
    SegmentedSelectKernel<T, false>
        <<<static_cast<unsigned>(tiles), kCompactBlock, 0, stream>>>(p);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int SegmentedSelect(void* d_temp_storage, size_t* temp_storage_bytes,
                    const void* d_in, DType dtype, uint64_t n,
                    const uint64_t* d_segment_starts, uint64_t num_segments,
                    const SelectKeep& keep, void* d_values_out,
                    int64_t* d_indices_out, uint64_t* d_counts,
                    CUstream_st* stream) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (temp_storage_bytes == nullptr) return kInvalid;
  if (static_cast<int>(dtype) < 1 || static_cast<int>(dtype) > 6) return kInvalid;
  const bool by_flags = keep.d_flags != nullptr;
  if (!by_flags &&
      (static_cast<int>(keep.kind) < 1 || static_cast<int>(keep.kind) > 8)) {
    return kInvalid;
  }
  if (d_temp_storage != nullptr) {
    if (num_segments == 0 || d_segment_starts == nullptr) return kInvalid;
    if (reinterpret_cast<uintptr_t>(d_temp_storage) % 16 != 0) return kInvalid;
    if (n > 0 && (!by_flags || d_values_out != nullptr) && d_in == nullptr)
      return kInvalid;
    if (d_values_out != nullptr && d_values_out == d_in) return kInvalid;
  }
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  if (by_flags) {
    // Values are only moved: travel as bits.
    if (DTypeSize(dtype) == 4) {
      return RunSegmented<uint32_t>(d_temp_storage, temp_storage_bytes, d_in, n,
                                    d_segment_starts, num_segments, keep,
                                    d_values_out, d_indices_out, d_counts, s);
    }
    return RunSegmented<uint64_t>(d_temp_storage, temp_storage_bytes, d_in, n,
                                  d_segment_starts, num_segments, keep,
                                  d_values_out, d_indices_out, d_counts, s);
  }
  return VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    return RunSegmented<T>(d_temp_storage, temp_storage_bytes, d_in, n,
                           d_segment_starts, num_segments, keep, d_values_out,
                           d_indices_out, d_counts, s);
  });
}

}  // namespace primserve::gpu
