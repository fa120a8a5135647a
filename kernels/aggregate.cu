// AggregateByKey: see kernels/aggregate.h.
#include "kernels/aggregate.h"

#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/detail/atomic_combine.cuh"
#include "kernels/detail/dispatch.cuh"
#include "kernels/detail/lookback.cuh"
#include "kernels/reduce.h"
#include "kernels/detail/device_info.cuh"
#include "kernels/detail/tuning.cuh"
#include "core/primitives.h"

namespace primserve::gpu {
namespace {

using detail::kAggBlock;
using detail::kAggSharedMaxBytes;
using detail::kAggUnroll;
using detail::kWarpAggregateMaxSharedKeys;

// Keys arrive as int32/int64/uint32/uint64; each is widened to a uint64 key
// index, and an out-of-range key (negative or >= num_keys) becomes invalid.
template <typename K>
__device__ __forceinline__ bool KeyIndex(K key, uint64_t num_keys,
                                         uint64_t* index) {
  if constexpr (std::is_signed_v<K>) {
    if (key < 0) return false;
  }
  *index = static_cast<uint64_t>(key);
  return *index < num_keys;
}

template <typename V>
__global__ void AggInitKernel(V* out, uint64_t num_keys, Op op,
                              unsigned long long* bad) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const V id = Identity<V>(op);
  for (uint64_t k = blockIdx.x * static_cast<uint64_t>(blockDim.x) +
                    threadIdx.x;
       k < num_keys; k += stride) {
    out[k] = id;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) *bad = ~0ull;  // -1 as int64
}

// kPath 1: warp-aggregated global atomics; 2: shared-memory privatized
// (num_keys values in dynamic shared memory), warp-aggregated shared atomics,
// then one global atomic per key per block; 3: plain per-element global
// atomics (benchmark baseline). With a device count (nullable), n is the
// most elements and the first min(*count, n) are aggregated; blocks with
// none of them leave (nothing to merge).
template <typename K, typename V, int kPath>
__global__ void __launch_bounds__(kAggBlock)
    AggKernel(const K* __restrict__ keys, const V* __restrict__ values,
              uint64_t n, const uint64_t* __restrict__ count, Op op, uint64_t num_keys, V* out,
              unsigned long long* bad) {
  if (count != nullptr) {
    n = min(*count, n);
    if (static_cast<uint64_t>(blockIdx.x) * kAggBlock * kAggUnroll >= n) return;
  }
  extern __shared__ __align__(16) unsigned char agg_smem[];
  V* bins = reinterpret_cast<V*>(agg_smem);
  if constexpr (kPath == 2) {
    const V id = Identity<V>(op);
    for (uint64_t k = threadIdx.x; k < num_keys; k += kAggBlock) bins[k] = id;
    __syncthreads();
  }
  V* target = kPath == 2 ? bins : out;

  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warp_global =
      (static_cast<uint64_t>(blockIdx.x) * kAggBlock + threadIdx.x) / 32;
  const uint64_t num_warps = static_cast<uint64_t>(gridDim.x) * kAggBlock / 32;
  constexpr uint64_t kWarpChunk = 32 * kAggUnroll;
  unsigned long long first_bad = ~0ull;
  // Shared-memory path: warp aggregation pays when lanes of a warp often
  // share a key (few keys); with many keys, plain shared atomics are faster
  // than finding peers. The global path always aggregates (one atomic per
  // key per warp).
  const bool warp_aggregate = num_keys <= kWarpAggregateMaxSharedKeys;

  for (uint64_t base = warp_global * kWarpChunk; base < n;
       base += num_warps * kWarpChunk) {
    K k[kAggUnroll];
    V v[kAggUnroll];
#pragma unroll
    for (int u = 0; u < kAggUnroll; ++u) {
      const uint64_t i = base + u * 32 + lane;
      if (i < n) {
        k[u] = keys[i];
        v[u] = values[i];
      }
    }
#pragma unroll
    for (int u = 0; u < kAggUnroll; ++u) {
      const uint64_t i = base + u * 32 + lane;
      uint64_t key = 0;
      bool valid = false;
      if (i < n) {
        valid = KeyIndex(k[u], num_keys, &key);
        if (!valid && first_bad == ~0ull) first_bad = i;
      }
      if (kPath == 3 || (kPath == 2 && !warp_aggregate)) {
        if (valid) detail::AtomicCombine(op, target + key, v[u]);
      } else {
        const unsigned mask = __ballot_sync(0xffffffffu, valid);
        if (valid) {
          V x = v[u];
          // 32-bit peer matching when every key index fits (the usual case).
          const bool leader =
              num_keys <= 0xffffffffull
                  ? detail::WarpAggregateByKey(
                        mask, static_cast<unsigned>(key), op, &x)
                  : detail::WarpAggregateByKey(
                        mask, static_cast<unsigned long long>(key), op, &x);
          if (leader) {
            detail::AtomicCombine(op, target + key, x);
          }
        }
      }
    }
  }
  if (first_bad != ~0ull) atomicMin(bad, first_bad);

  if constexpr (kPath == 2) {
    __syncthreads();
    for (uint64_t k = threadIdx.x; k < num_keys; k += kAggBlock) {
      detail::AtomicCombine(op, out + k, bins[k]);
    }
  }
}

template <typename K, typename V>
int LaunchAgg(const void* d_keys, const void* d_values, uint64_t n, const uint64_t* count, Op op,
              uint64_t num_keys, void* d_out, int64_t* d_bad,
              AggregatePath path, cudaStream_t stream) {
  const K* keys = static_cast<const K*>(d_keys);
  const V* values = static_cast<const V*>(d_values);
  V* out = static_cast<V*>(d_out);
  auto* bad = reinterpret_cast<unsigned long long*>(d_bad);

  int sms = 0;
  if (int err = detail::MultiprocessorCount(&sms)) return err;

  {
    uint64_t blocks = (num_keys + kAggBlock - 1) / kAggBlock;
    const uint64_t cap = static_cast<uint64_t>(sms) * 8;
    if (blocks > cap) blocks = cap;
    if (blocks == 0) blocks = 1;
    AggInitKernel<V><<<static_cast<unsigned>(blocks), kAggBlock, 0, stream>>>(
        out, num_keys, op, bad);
    if (cudaError_t e = cudaGetLastError()) return static_cast<int>(e);
  }
  if (n == 0) return 0;

  const size_t shared_bytes = num_keys * sizeof(V);
  if (path == AggregatePath::kAuto) {
    path = shared_bytes <= kAggSharedMaxBytes
               ? AggregatePath::kSharedPrivatized
               : AggregatePath::kGlobalWarpAggregated;
  }
  if (path == AggregatePath::kSharedPrivatized &&
      shared_bytes > kAggSharedMaxBytes) {
    return static_cast<int>(cudaErrorInvalidValue);
  }

  const uint64_t per_block = static_cast<uint64_t>(kAggBlock) * kAggUnroll;
  uint64_t blocks = (n + per_block - 1) / per_block;
  // Grid-stride: enough resident blocks to fill the chip. The privatized
  // path merges num_keys values per block, so it uses fewer, fuller blocks.
  const uint64_t cap = static_cast<uint64_t>(sms) *
                       (path == AggregatePath::kSharedPrivatized ? 4 : 8);
  if (blocks > cap) blocks = cap;
  const unsigned grid = static_cast<unsigned>(blocks);

  switch (path) {
    case AggregatePath::kSharedPrivatized:
      AggKernel<K, V, 2><<<grid, kAggBlock, shared_bytes, stream>>>(
          keys, values, n, count, op, num_keys, out, bad);
      break;
    case AggregatePath::kGlobalPlain:
      AggKernel<K, V, 3><<<grid, kAggBlock, 0, stream>>>(keys, values, n, count,
                                                          op, num_keys, out, bad);
      break;
    default:
      AggKernel<K, V, 1><<<grid, kAggBlock, 0, stream>>>(keys, values, n, count,
                                                          op, num_keys, out, bad);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

// ---------------------------------------------------- the in-order path

// Marks the smallest index whose key is out of range (bad starts at ~0).
// With a device count (nullable; n is then the most keys): checks the first
// min(*count, n) keys only and copies them to `padded`, followed up to n by
// a key whose sorted bits are all ones, so that the sort (its count is the
// host's n) puts every key past the count last, after the keys before it.
template <typename K>
__global__ void AggCheckKeysKernel(const K* keys, uint64_t n, const uint64_t* count,
                                   uint64_t num_keys, unsigned long long* bad,
                                   std::make_unsigned_t<K>* padded) {
  using U = std::make_unsigned_t<K>;
  const uint64_t checked = count != nullptr ? min(*count, n) : n;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    if (i >= checked) {
      padded[i] = static_cast<U>(~U{0});
      continue;
    }
    const K key = keys[i];
    uint64_t index;
    if (!KeyIndex(key, num_keys, &index)) atomicMin(bad, static_cast<unsigned long long>(i));
    if (padded != nullptr) padded[i] = static_cast<U>(key);
  }
}

// starts[k] = the first position of key k in the sorted keys (lower bound),
// among the first min(*count, n) with a device count (nullable).
template <typename U>
__global__ void AggKeyStartsKernel(const U* sorted_keys, uint64_t n, const uint64_t* count,
                                   uint64_t num_keys, uint64_t* starts) {
  const uint64_t k = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  if (k >= num_keys) return;
  uint64_t lo = 0, hi = count != nullptr ? min(*count, n) : n;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (static_cast<uint64_t>(sorted_keys[mid]) < k) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  starts[k] = lo;
}

// A stable radix sort by key (CUB; only the bits that valid keys use), each
// key's first position by binary search, then SegmentedReduce over the
// sorted values with one segment per key: every key's values meet in index
// order, in SegmentedReduce's fixed association. `counted`: with a device
// count (null in a size query; n is then the most elements), the sort takes
// the keys padded past the count (AggCheckKeysKernel), which it leaves last:
// the first count sorted pairs are those of the count's call, and the search
// and the reduce stop at the count.
template <typename K, typename V>
int LaunchAggInOrder(void* temp, size_t* temp_bytes, const void* d_keys, const void* d_values,
                     uint64_t n, bool counted, const uint64_t* count, Op op, uint64_t num_keys,
                     void* d_out, int64_t* d_bad, cudaStream_t stream) {
  using U = std::make_unsigned_t<K>;  // valid keys sort the same as unsigned
  int end_bit = 1;
  while (end_bit < static_cast<int>(sizeof(U) * 8) && (num_keys - 1) >> end_bit != 0) ++end_bit;
  const U* keys = static_cast<const U*>(d_keys);
  const V* values = static_cast<const V*>(d_values);
  size_t sort_bytes = 0, reduce_bytes = 0;
  if (cudaError_t e = cub::DeviceRadixSort::SortPairs(
          nullptr, sort_bytes, keys, static_cast<U*>(nullptr), values, static_cast<V*>(nullptr),
          static_cast<int64_t>(n), 0, end_bit, stream)) {
    return static_cast<int>(e);
  }
  auto reduce = [&](void* reduce_temp, const V* sorted_values, uint64_t* starts) {
    return counted
               ? SegmentedReduceCounted(reduce_temp, &reduce_bytes, sorted_values, n, count,
                                        starts, num_keys, DTypeOf<V>(), op, d_out, nullptr,
                                        stream)
               : SegmentedReduce(reduce_temp, &reduce_bytes, sorted_values, n, starts, num_keys,
                                 DTypeOf<V>(), op, d_out, nullptr, stream);
  };
  if (int e = reduce(nullptr, nullptr, nullptr)) return e;
  const size_t keys_at = 0;
  const size_t values_at = keys_at + detail::AlignUp16(n * sizeof(U));
  const size_t starts_at = values_at + detail::AlignUp16(n * sizeof(V));
  const size_t sort_at = starts_at + detail::AlignUp16(num_keys * sizeof(uint64_t));
  const size_t reduce_at = sort_at + detail::AlignUp16(sort_bytes);
  const size_t padded_at = reduce_at + detail::AlignUp16(reduce_bytes);
  const size_t bytes = padded_at + (counted ? detail::AlignUp16(n * sizeof(U)) : 0);
  if (temp == nullptr) {
    *temp_bytes = bytes;
    return 0;
  }
  if (*temp_bytes < bytes) return static_cast<int>(cudaErrorInvalidValue);
  char* base = static_cast<char*>(temp);
  U* sorted_keys = reinterpret_cast<U*>(base + keys_at);
  V* sorted_values = reinterpret_cast<V*>(base + values_at);
  uint64_t* starts = reinterpret_cast<uint64_t*>(base + starts_at);
  U* padded = counted ? reinterpret_cast<U*>(base + padded_at) : nullptr;
  auto* bad = reinterpret_cast<unsigned long long*>(d_bad);

  int sms = 0;
  if (int err = detail::MultiprocessorCount(&sms)) return err;
  const unsigned init_blocks = static_cast<unsigned>(
      std::max<uint64_t>(1, std::min<uint64_t>((num_keys + kAggBlock - 1) / kAggBlock, sms * 8)));
  AggInitKernel<V><<<init_blocks, kAggBlock, 0, stream>>>(static_cast<V*>(d_out), num_keys, op,
                                                          bad);
  if (cudaError_t e = cudaGetLastError()) return static_cast<int>(e);
  if (n == 0) return 0;
  const unsigned check_blocks = static_cast<unsigned>(
      std::max<uint64_t>(1, std::min<uint64_t>((n + kAggBlock - 1) / kAggBlock, sms * 8)));
  AggCheckKeysKernel<K><<<check_blocks, kAggBlock, 0, stream>>>(static_cast<const K*>(d_keys), n,
                                                                count, num_keys, bad, padded);
  if (cudaError_t e = cudaGetLastError()) return static_cast<int>(e);
  if (num_keys == 0) return 0;  // every key is out of range: only the check
  if (cudaError_t e = cub::DeviceRadixSort::SortPairs(base + sort_at, sort_bytes,
                                                      padded != nullptr ? padded : keys,
                                                      sorted_keys, values, sorted_values,
                                                      static_cast<int64_t>(n), 0, end_bit,
                                                      stream)) {
    return static_cast<int>(e);
  }
  AggKeyStartsKernel<U><<<static_cast<unsigned>((num_keys + kAggBlock - 1) / kAggBlock),
                          kAggBlock, 0, stream>>>(sorted_keys, n, count, num_keys, starts);
  if (cudaError_t e = cudaGetLastError()) return static_cast<int>(e);
  return reduce(base + reduce_at, sorted_values, starts);
}

// The checks both entry points share; 0 when the arguments are usable.
int CheckAggregateArguments(const void* d_keys, DType key_dtype, DType value_dtype, uint64_t n,
                            Op op, uint64_t num_keys, const void* d_values, void* d_out,
                            int64_t* d_bad_position) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (!IsIntegerDType(key_dtype)) return kInvalid;
  if (op != Op::kSum && op != Op::kMin && op != Op::kMax) return kInvalid;
  if (d_bad_position == nullptr) return kInvalid;
  if (num_keys > 0 && d_out == nullptr) return kInvalid;
  if (n > 0 && (d_keys == nullptr || d_values == nullptr)) return kInvalid;
  if (static_cast<int>(value_dtype) < 1 || static_cast<int>(value_dtype) > 6) return kInvalid;
  return 0;
}

// Calls f(K{}, V{}) for the key and value dtypes.
template <typename F>
int VisitKeyAndValue(DType key_dtype, DType value_dtype, F&& f) {
  auto with_key = [&](auto key_tag) {
    return VisitDType(value_dtype, [&](auto value_tag) { return f(key_tag, value_tag); });
  };
  switch (key_dtype) {
    case DType::kInt32: return with_key(int32_t{});
    case DType::kInt64: return with_key(int64_t{});
    case DType::kUint32: return with_key(uint32_t{});
    default: return with_key(uint64_t{});
  }
}

// The entry points, with a device count (`counted`; n is then the most
// elements) or without.
int DispatchAggInOrder(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_keys,
                       DType key_dtype, const void* d_values, DType value_dtype, uint64_t n,
                       bool counted, const uint64_t* count, Op op, uint64_t num_keys, void* d_out,
                       int64_t* d_bad_position, CUstream_st* stream) {
  if (temp_storage_bytes == nullptr || !IsIntegerDType(key_dtype) ||
      static_cast<int>(value_dtype) < 1 || static_cast<int>(value_dtype) > 6) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (d_temp_storage != nullptr) {
    if (int e = CheckAggregateArguments(d_keys, key_dtype, value_dtype, n, op, num_keys, d_values,
                                        d_out, d_bad_position)) {
      return e;
    }
  }
  return VisitKeyAndValue(key_dtype, value_dtype, [&](auto key_tag, auto value_tag) {
    return LaunchAggInOrder<decltype(key_tag), decltype(value_tag)>(
        d_temp_storage, temp_storage_bytes, d_keys, d_values, n, counted, count, op, num_keys,
        d_out, d_bad_position, reinterpret_cast<cudaStream_t>(stream));
  });
}

int DispatchAgg(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_keys,
                DType key_dtype, const void* d_values, DType value_dtype, uint64_t n,
                const uint64_t* count, Op op, uint64_t num_keys, void* d_out,
                int64_t* d_bad_position, AggregatePath path, CUstream_st* stream) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (temp_storage_bytes == nullptr) return kInvalid;
  if (d_temp_storage == nullptr) {
    *temp_storage_bytes = 16;  // nothing needed; never report zero bytes
    return 0;
  }
  if (int e = CheckAggregateArguments(d_keys, key_dtype, value_dtype, n, op, num_keys, d_values,
                                      d_out, d_bad_position)) {
    return e;
  }
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  return VisitKeyAndValue(key_dtype, value_dtype, [&](auto key_tag, auto value_tag) {
    return LaunchAgg<decltype(key_tag), decltype(value_tag)>(d_keys, d_values, n, count, op,
                                                             num_keys, d_out, d_bad_position,
                                                             path, s);
  });
}

}  // namespace

int AggregateByKeyInOrder(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_keys,
                          DType key_dtype, const void* d_values, DType value_dtype, uint64_t n,
                          Op op, uint64_t num_keys, void* d_out, int64_t* d_bad_position,
                          CUstream_st* stream) {
  return DispatchAggInOrder(d_temp_storage, temp_storage_bytes, d_keys, key_dtype, d_values,
                            value_dtype, n, false, nullptr, op, num_keys, d_out, d_bad_position,
                            stream);
}

int AggregateByKeyInOrderCounted(void* d_temp_storage, size_t* temp_storage_bytes,
                                 const void* d_keys, DType key_dtype, const void* d_values,
                                 DType value_dtype, uint64_t max_n, const uint64_t* d_count,
                                 Op op, uint64_t num_keys, void* d_out, int64_t* d_bad_position,
                                 CUstream_st* stream) {
  if (d_temp_storage != nullptr && d_count == nullptr) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  return DispatchAggInOrder(d_temp_storage, temp_storage_bytes, d_keys, key_dtype, d_values,
                            value_dtype, max_n, true, d_count, op, num_keys, d_out,
                            d_bad_position, stream);
}

int AggregateByKeyWithPath(void* d_temp_storage, size_t* temp_storage_bytes,
                           const void* d_keys, DType key_dtype,
                           const void* d_values, DType value_dtype,
                           uint64_t n, Op op, uint64_t num_keys, void* d_out,
                           int64_t* d_bad_position, AggregatePath path,
                           CUstream_st* stream) {
  return DispatchAgg(d_temp_storage, temp_storage_bytes, d_keys, key_dtype, d_values,
                     value_dtype, n, nullptr, op, num_keys, d_out, d_bad_position, path, stream);
}

int AggregateByKey(void* d_temp_storage, size_t* temp_storage_bytes,
                   const void* d_keys, DType key_dtype, const void* d_values,
                   DType value_dtype, uint64_t n, Op op, uint64_t num_keys,
                   void* d_out, int64_t* d_bad_position, CUstream_st* stream) {
  return AggregateByKeyWithPath(d_temp_storage, temp_storage_bytes, d_keys,
                                key_dtype, d_values, value_dtype, n, op,
                                num_keys, d_out, d_bad_position,
                                AggregatePath::kAuto, stream);
}

int AggregateByKeyCounted(void* d_temp_storage, size_t* temp_storage_bytes, const void* d_keys,
                          DType key_dtype, const void* d_values, DType value_dtype,
                          uint64_t max_n, const uint64_t* d_count, Op op, uint64_t num_keys,
                          void* d_out, int64_t* d_bad_position, CUstream_st* stream) {
  if (d_temp_storage != nullptr && d_count == nullptr) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  return DispatchAgg(d_temp_storage, temp_storage_bytes, d_keys, key_dtype, d_values,
                     value_dtype, max_n, d_count, op, num_keys, d_out, d_bad_position,
                     AggregatePath::kAuto, stream);
}

}  // namespace primserve::gpu
