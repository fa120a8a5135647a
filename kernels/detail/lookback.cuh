// Decoupled look-back (Merrill & Garland, "Single-pass Parallel Prefix Scan
// with Decoupled Look-back", 2016): the tile-status machinery that lets a
// single kernel pass carry a running prefix from tile to tile.
//
// Each tile (a block's chunk of the input) publishes its status in a slot:
//   X (kInvalid)   nothing yet,
//   A (kAggregate) the reduction of this tile alone,
//   P (kPrefix)    the reduction of everything up to and including this tile.
// A tile publishes A as soon as it knows its own aggregate, then looks back
// over its predecessors, one warp reading a window of 32 * kSlotsPerLane
// slots at a time (tuning.cuh: kLookbackSlotsPerLane),
// combining A values until it meets a P; it then publishes P. How often it
// polls is the policy's (tuning.cuh LookbackPolicy: an optional sleep after
// publishing A and a fixed poll interval in large launches, which the scan
// uses: perf/NOTES.md, issue 13). Tiles take
// their index from an atomic counter in the order blocks start running, so
// every predecessor of a running tile has already started: the look-back
// cannot deadlock whatever order the hardware schedules blocks in. (A
// ScanPolicy may take tile = blockIdx.x instead, as CUB does, which relies
// on blocks starting in blockIdx order; no shipped policy does.)
//
// Status and value share one word where they fit, so a single store
// publishes both and readers need no fence: a 64-bit word when
// sizeof(V) <= 4, an aligned 16-byte word (one st/ld.global.cg.v2.u64, as
// CUB's 16-byte TxnWord) when sizeof(V) == 8, or when V is 16 bytes whose
// last 4 are padding (StatusPayloadBytes<V> == 12: the value's 12 bytes and
// the state in one st/ld.global.cg.v4.u32). Larger V keeps a status array
// plus separate aggregate and inclusive arrays (a reader that saw A must not
// read a value that its tile is overwriting with P), ordered by
// __threadfence() between value and status on both sides.
//
// ---------------------------------------------------------------------------
// Usage (for kernels built on this, e.g. the compaction family):
//
//   using Status = primserve::gpu::detail::TileStatus<V>;  // V: the scan value
//   // Host, temp-storage sizing (part of the caller's two-phase temp):
//   size_t bytes = Status::StorageBytes(num_tiles);    // 16-byte aligned
//   Status status(d_storage, num_tiles);               // d_storage: 16-B aligned
//   // Before EVERY launch that uses it (slots to X, counter to 0):
//   err = InitTileStatusAsync(status, stream);         // one small kernel
//   //   (or fuse: call status.InitSlot(t) for each t in [0, num_tiles) and
//   //   status.ResetCounter() once from your own init kernel)
//   // Device, in the main kernel (pass `status` by value):
//   __shared__ int64_t tile_slot;
//   if (threadIdx.x == 0) tile_slot = status.AcquireTileIndex();
//   __syncthreads();
//   const int64_t tile = tile_slot;        // process THIS tile, not blockIdx
//   ... block-reduce the tile to `aggregate` (known to warp 0) ...
//   V prefix;                              // exclusive prefix of the tile
//   if (tile == 0) { if (threadIdx.x == 0) status.PublishInclusive(0, aggregate); }
//   else if (threadIdx.x < 32) prefix = status.TileExclusivePrefix(tile, aggregate, op);
//   // broadcast `prefix` through shared memory + __syncthreads()
//   // (BlockExclusivePrefix below does these steps for a whole block).
//
// `op` is any associative functor V op(V, V) (need not be commutative: the
// left operand always covers earlier tiles); no identity element is needed.
// V must be trivially copyable with sizeof(V) a multiple of 4 (or <= 4).
// ---------------------------------------------------------------------------
#ifndef PRIMSERVE_KERNELS_DETAIL_LOOKBACK_CUH_
#define PRIMSERVE_KERNELS_DETAIL_LOOKBACK_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/detail/tuning.cuh"
#include "kernels/detail/warp.cuh"

namespace primserve::gpu::detail {

enum TileState : uint32_t { kInvalid = 0, kAggregate = 1, kPrefix = 2 };

// Whether combining in another association can change the result's bits
// (float SUM and PROD; operators.cuh and the kernels specialize it). Such
// ops get the in-order look-back (WarpLookbackInOrder), so that a launch's
// answer is a function of its input alone, not of the timing of the tiles.
template <typename ScanOp>
struct AssociationMatters : std::false_type {};

// Ops that restart: op(a, b) keeps of a only parts that combine exactly
// (integer counts, flags) when Restarts(b), the rest coming from b alone
// (ReduceByKey's run pairs once b starts a run). The in-order look-back
// then folds from the nearest tile that restarts, not from the nearest P:
// what lies before it only needs combining in some order (see
// WarpLookbackInOrder).
template <typename ScanOp>
struct RestartingOp : std::false_type {};

// Bytes of V that carry its value, from its start: sizeof(V) unless a
// specialization says the rest is padding (12 for a 16-byte V lets the
// state share the value's 16-byte word).
template <typename V>
struct StatusPayloadBytes : std::integral_constant<size_t, sizeof(V)> {};

__host__ __device__ inline constexpr size_t AlignUp16(size_t bytes) {
  return (bytes + 15) / 16 * 16;
}

// Word-wise loads/stores that bypass L1 (.cg): L1 is not coherent across SMs.
template <typename V>
__device__ __forceinline__ V LoadCg(const V* ptr) {
  constexpr int kWords = sizeof(V) / 4;
  uint32_t words[kWords];
  const uint32_t* src = reinterpret_cast<const uint32_t*>(ptr);
#pragma unroll
  for (int i = 0; i < kWords; ++i) words[i] = __ldcg(src + i);
  V value;
  memcpy(&value, words, sizeof(V));
  return value;
}

template <typename V>
__device__ __forceinline__ void StoreCg(V* ptr, const V& value) {
  constexpr int kWords = sizeof(V) / 4;
  uint32_t words[kWords];
  memcpy(words, &value, sizeof(V));
  uint32_t* dst = reinterpret_cast<uint32_t*>(ptr);
#pragma unroll
  for (int i = 0; i < kWords; ++i) __stcg(dst + i, words[i]);
}

template <typename V>
class TileStatus {
 public:
  static constexpr bool kPacked = sizeof(V) <= 4;
  static constexpr bool kWide = sizeof(V) == 8;
  static constexpr bool kWide12 = sizeof(V) == 16 && StatusPayloadBytes<V>::value <= 12;
  static_assert(kPacked || sizeof(V) % 4 == 0,
                "look-back values are <= 4 bytes or 4-byte multiples");

  // Temp-storage bytes for num_tiles tiles (a multiple of 16).
  __host__ __device__ static size_t StorageBytes(int64_t num_tiles) {
    const size_t tiles = static_cast<size_t>(num_tiles);
    if constexpr (kPacked) {
      return kCounterBytes + AlignUp16(tiles * sizeof(uint64_t));
    } else if constexpr (kWide || kWide12) {
      return kCounterBytes + tiles * sizeof(ulonglong2);
    } else {
      return kCounterBytes + AlignUp16(tiles * sizeof(uint32_t)) +
             2 * AlignUp16(tiles * sizeof(V));
    }
  }

  TileStatus() = default;
  __host__ __device__ TileStatus(void* storage, int64_t num_tiles)
      : num_tiles_(num_tiles) {
    char* base = static_cast<char*>(storage);
    counter_ = reinterpret_cast<unsigned long long*>(base);
    base += kCounterBytes;
    const size_t tiles = static_cast<size_t>(num_tiles);
    if constexpr (kPacked) {
      words_ = reinterpret_cast<uint64_t*>(base);
    } else if constexpr (kWide || kWide12) {
      wide_words_ = reinterpret_cast<ulonglong2*>(base);
    } else {
      states_ = reinterpret_cast<uint32_t*>(base);
      base += AlignUp16(tiles * sizeof(uint32_t));
      aggregates_ = reinterpret_cast<V*>(base);
      base += AlignUp16(tiles * sizeof(V));
      inclusives_ = reinterpret_cast<V*>(base);
    }
  }

  __host__ __device__ int64_t num_tiles() const { return num_tiles_; }

  // Initialization, before each launch: every slot to X, the counter to 0.
  __device__ void InitSlot(int64_t tile) const {
    if constexpr (kPacked) {
      words_[tile] = 0;
    } else if constexpr (kWide || kWide12) {
      wide_words_[tile] = make_ulonglong2(0, 0);
    } else {
      states_[tile] = kInvalid;
    }
  }
  __device__ void ResetCounter() const { *counter_ = 0; }

  // One thread per block: the next tile index, in block start order.
  __device__ int64_t AcquireTileIndex() const {
    return static_cast<int64_t>(atomicAdd(counter_, 1ull));
  }

  // One thread: publish this tile's own reduction (state A).
  __device__ void PublishAggregate(int64_t tile, const V& aggregate) const {
    Publish(tile, kAggregate, aggregate);
  }

  // One thread: publish the reduction through this tile (state P).
  __device__ void PublishInclusive(int64_t tile, const V& inclusive) const {
    Publish(tile, kPrefix, inclusive);
  }

  // Whole warp, tile > 0: the reduction of tiles [0, tile), in every lane.
  // Each round trip reads a window of 32 * Policy::kSlotsPerLane slots (lane
  // l owns kSlotsPerLane consecutive slots; the last lane the nearest ones)
  // and combines from the window's last P onwards; slots before that P are
  // never waited for.
  template <typename Policy = DefaultLookbackPolicy, typename ScanOp>
  __device__ V WarpLookback(int64_t tile, ScanOp op) const {
    if constexpr (Policy::kFixedOrder && AssociationMatters<ScanOp>::value) {
      return WarpLookbackInOrder<Policy>(tile, op);
    }
    return WarpLookbackTree<Policy>(tile, op);
  }

  // WarpLookback combining each window as a tree (the association depends
  // on where the nearest P was).
  template <typename Policy, typename ScanOp>
  __device__ V WarpLookbackTree(int64_t tile, ScanOp op) const {
    constexpr int kSlots = Policy::kSlotsPerLane;
    constexpr int kWindow = kWarpThreads * kSlots;
    const int lane = LaneId();
    V prefix{};
    bool have_prefix = false;
    for (int64_t window_end = tile;; window_end -= kWindow) {
      const int64_t first = window_end - kWindow + lane * kSlots;
      V value{};
      const bool lane_has_prefix = WaitForWindow<Policy>(first, op, value);
      // Combine lanes from the nearest P (tile 0 always is one) to lane 31.
      const unsigned prefix_lanes = __ballot_sync(kFullMask, lane_has_prefix);
      const int first_lane = prefix_lanes ? 31 - __clz(prefix_lanes) : 0;
      const V window = ShuffleIdx(WarpSuffixReduce(value, op), first_lane);
      prefix = have_prefix ? op(window, prefix) : window;
      have_prefix = true;
      if (prefix_lanes) return prefix;
    }
  }

  // Whole warp, tile > 0, for ops whose result depends on the association
  // (float SUM/PROD): the reduction of tiles [0, tile) as the left fold
  // L(tile - 1), where L(0) = A_0 and L(t) = L(t-1) op A_t. Whatever P the
  // look-back meets, the bits are the same: every tile publishes
  // P_t = prefix op A_t, so by induction P_j = L(j), and folding
  // A_{j+1}, ..., A_{tile-1} onto it one at a time, in tile order, gives
  // L(tile - 1). Windows without a P are kept in shared memory, up to
  // kInOrderWindows; past that the oldest one is polled again until one of
  // its tiles is P (each eventually is: every predecessor has started).
  // For a RestartingOp the fold starts at the nearest tile that is P or
  // restarts (A_r with Restarts(A_r)); when that is an A, the tiles before
  // it (back to a P) are combined as a tree into B, and the prefix is
  // B op fold(A_r, ..., A_{tile-1}): the same bits as L(tile - 1), since
  // op(x, A_r) takes of x only its exactly combining parts, whose sum
  // does not depend on the order.
  template <typename Policy, typename ScanOp>
  __device__ V WarpLookbackInOrder(int64_t tile, ScanOp op) const {
    static_assert(Policy::kSlotsPerLane == 1, "the in-order fold reads one slot per lane");
    __shared__ V kept[kInOrderWindows][kWarpThreads];
    const int lane = LaneId();
    int window = 0;
    int first_lane = 0;
    bool have_before = false;
    V before{};
    for (;;) {
      const int64_t pred = tile - (window + 1) * int64_t{kWarpThreads} + lane;
      V value{};
      const bool lane_has_prefix = WaitForWindow<Policy>(pred, op, value);
      kept[window][lane] = value;
      const unsigned prefix_lanes = __ballot_sync(kFullMask, lane_has_prefix);
      unsigned start_lanes = prefix_lanes;
      if constexpr (RestartingOp<ScanOp>::value) {
        start_lanes |= __ballot_sync(kFullMask, RestartingOp<ScanOp>::Restarts(value));
      }
      if (start_lanes) {
        first_lane = 31 - __clz(start_lanes);
        if constexpr (RestartingOp<ScanOp>::value) {
          if (((prefix_lanes >> first_lane) & 1u) == 0) {
            before = CombineBefore<Policy>(pred - lane, first_lane, prefix_lanes, value, op);
            have_before = true;
          }
        }
        break;
      }
      if (window + 1 < kInOrderWindows) ++window;
    }
    __syncwarp();
    // Every lane folds the same values (broadcast reads): no shuffles.
    V prefix = kept[window][first_lane];
    for (int w = window; w >= 0; --w) {
#pragma unroll
      for (int l = 0; l < kWarpThreads; ++l) {
        if (w < window || l > first_lane) prefix = op(prefix, kept[w][l]);
      }
    }
    return have_before ? op(before, prefix) : prefix;
  }

  // Whole warp: the combination (as a tree) of the tiles before lane
  // `first_lane` of the window that starts at tile `window_first`, whose
  // lanes hold `value` and are P where `prefix_lanes` says: from the
  // nearest P among them, or, with none, all of them after the tree
  // look-back over tiles [0, window_first).
  template <typename Policy, typename ScanOp>
  __device__ V CombineBefore(int64_t window_first, int first_lane, unsigned prefix_lanes,
                             const V& value, ScanOp op) const {
    const unsigned below = prefix_lanes & ((1u << first_lane) - 1u);
    const int from = below ? 31 - __clz(below) : 0;
    // Lanes [from, first_lane) as a suffix of the window rotated by
    // first_lane: lane i holds lane (i + first_lane) % 32.
    const V rotated = ShuffleIdx(value, (LaneId() + first_lane) % kWarpThreads);
    const V part = ShuffleIdx(WarpSuffixReduce(rotated, op),
                              (from + kWarpThreads - first_lane) % kWarpThreads);
    const bool have_part = first_lane > from;
    if (below) return part;
    // No P in the window before first_lane: window_first > 0 (tile 0 is P).
    const V earlier = WarpLookbackTree<Policy>(window_first, op);
    return have_part ? op(earlier, part) : earlier;
  }

  // Whole warp, tile > 0: publishes A, looks back, publishes P; returns the
  // tile's exclusive prefix in every lane.
  template <typename Policy = DefaultLookbackPolicy, typename ScanOp>
  __device__ V TileExclusivePrefix(int64_t tile, const V& aggregate,
                                   ScanOp op) const {
    if (LaneId() == 0) PublishAggregate<Policy>(tile, aggregate);
    return ExclusivePrefixAfterAggregate<Policy>(tile, aggregate, op);
  }

  // TileExclusivePrefix in two halves, for a kernel with work to do between
  // publishing its tile's aggregate and needing its prefix (the look-back's
  // wait then overlaps that work). One thread, tile > 0:
  template <typename Policy = DefaultLookbackPolicy>
  __device__ void PublishAggregate(int64_t tile, const V& aggregate) const {
    Publish<Policy::kRelaxed>(tile, kAggregate, aggregate);
  }
  // Whole warp, tile > 0, after PublishAggregate: looks back, publishes P;
  // returns the tile's exclusive prefix in every lane.
  template <typename Policy = DefaultLookbackPolicy, typename ScanOp>
  __device__ V ExclusivePrefixAfterAggregate(int64_t tile, const V& aggregate,
                                             ScanOp op) const {
    if constexpr (Policy::kInitialDelayNs > 0) {
      if (num_tiles_ >= Policy::kDelayMinTiles) __nanosleep(Policy::kInitialDelayNs);
    }
    if constexpr (Policy::kNearestFirst) WaitNearest<Policy>(tile - 1);
    const V prefix = WarpLookback<Policy>(tile, op);
    if (LaneId() == 0) Publish<Policy::kRelaxed>(tile, kPrefix, op(prefix, aggregate));
    return prefix;
  }

 private:
  // Windows of A's the in-order look-back keeps before it stops walking back.
  static constexpr int kInOrderWindows = 16;
  // The counter gets a 16-byte slot so that the arrays stay 16-B aligned.
  static constexpr size_t kCounterBytes = 16;

  template <bool kRelaxed = false>
  __device__ void Publish(int64_t tile, TileState state, const V& value) const {
    if constexpr (kPacked) {
      uint32_t bits = 0;
      memcpy(&bits, &value, sizeof(V));
      const uint64_t word = (static_cast<uint64_t>(state) << 32) | bits;
      if constexpr (kRelaxed) {
        asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(words_ + tile), "l"(word)
                     : "memory");
      } else {
        *reinterpret_cast<volatile uint64_t*>(words_ + tile) = word;
      }
    } else if constexpr (kWide) {
      unsigned long long bits;
      memcpy(&bits, &value, sizeof(V));
      asm volatile("st.global.cg.v2.u64 [%0], {%1, %2};" ::"l"(wide_words_ + tile), "l"(bits),
                   "l"(static_cast<unsigned long long>(state))
                   : "memory");
    } else if constexpr (kWide12) {
      uint32_t words[4];
      memcpy(words, &value, 12);
      asm volatile("st.global.cg.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(wide_words_ + tile),
                   "r"(words[0]), "r"(words[1]), "r"(words[2]), "r"(static_cast<uint32_t>(state))
                   : "memory");
    } else {
      StoreCg((state == kPrefix ? inclusives_ : aggregates_) + tile, value);
      __threadfence();  // the value is visible before the state says so
      *reinterpret_cast<volatile uint32_t*>(states_ + tile) = state;
    }
  }

  // Reads slots [first, first + kSlotsPerLane) of this lane (slots before
  // tile 0 read as P and are never combined: tile 0 is P and comes later),
  // spinning with back-off until no slot that matters is X: every slot of
  // the window (Policy::kWaitAll), or those after the window's last P.
  // Returns whether this lane holds a P; `value` gets the combination of
  // this lane's slots from its last P (or its first slot) on.
  // Whole warp: lane 0 polls slot `pred` alone until it is no longer X.
  template <typename Policy>
  __device__ void WaitNearest(int64_t pred) const {
    if (LaneId() == 0) {
      const bool fixed = Policy::kPollNs > 0 && num_tiles_ >= Policy::kDelayMinTiles;
      unsigned sleep_ns = fixed ? Policy::kPollNs : Policy::kFirstSleepNs;
      for (;;) {
        uint32_t state;
        V value;
        LoadSlot<Policy::kRelaxed>(pred, state, value);
        if (state != kInvalid) break;
        __nanosleep(sleep_ns);
        if (!fixed) {
          sleep_ns = sleep_ns * 2 < Policy::kMaxSleepNs ? sleep_ns * 2 : Policy::kMaxSleepNs;
        }
      }
    }
    __syncwarp();
  }

  template <typename Policy, typename ScanOp>
  __device__ bool WaitForWindow(int64_t first, ScanOp op, V& value) const {
    constexpr int kSlots = Policy::kSlotsPerLane;
    const bool fixed_poll = Policy::kPollNs > 0 && num_tiles_ >= Policy::kDelayMinTiles;
    unsigned sleep_ns = fixed_poll ? Policy::kPollNs : Policy::kFirstSleepNs;
    for (;;) {
      uint32_t states[kSlots];
      V values[kSlots];  // the value, where it shares the state's word
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const int64_t pred = first + s;
        states[s] = kPrefix;
        values[s] = V{};
        if (pred >= 0) LoadSlot<Policy::kRelaxed>(pred, states[s], values[s]);
      }
      // This lane's last P slot (-1: none) and whether an X follows it.
      int last_prefix = -1;
      bool invalid_after = false;
      bool any_invalid = false;
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        if (states[s] == kPrefix) {
          last_prefix = s;
          invalid_after = false;
        } else if (states[s] == kInvalid) {
          invalid_after = true;
          any_invalid = true;
        }
      }
      const unsigned prefix_lanes = __ballot_sync(kFullMask, last_prefix >= 0);
      const unsigned invalid_lanes = __ballot_sync(kFullMask, invalid_after);
      // Lanes at or after the nearest lane holding a P must have no X after
      // their last P (lanes without a P: no X at all).
      const int first_lane = prefix_lanes ? 31 - __clz(prefix_lanes) : 0;
      const bool ready = Policy::kWaitAll ? __all_sync(kFullMask, !any_invalid)
                                          : (invalid_lanes >> first_lane) == 0;
      if (ready) {
        if constexpr (!kPacked && !kWide && !kWide12) {
          __threadfence();  // read the values only after seeing the states
        }
        const int from = last_prefix < 0 ? 0 : last_prefix;
        bool have = false;
#pragma unroll
        for (int s = kSlots - 1; s >= 0; --s) {
          if (s >= from) {
            V slot_value{};
            if constexpr (kPacked || kWide || kWide12) {
              slot_value = values[s];
            } else {
              const int64_t pred = first + s;
              if (pred >= 0 && states[s] != kInvalid) {
                slot_value = LoadCg((states[s] == kPrefix ? inclusives_ : aggregates_) + pred);
              }
            }
            value = have ? op(slot_value, value) : slot_value;
            have = true;
          }
        }
        return last_prefix >= 0;
      }
      __nanosleep(sleep_ns);
      if (!fixed_poll) {
        sleep_ns = sleep_ns * 2 < Policy::kMaxSleepNs ? sleep_ns * 2 : Policy::kMaxSleepNs;
      }
    }
  }

  // One slot's state and, where they share its word, its value.
  template <bool kRelaxed = false>
  __device__ void LoadSlot(int64_t tile, uint32_t& state, V& value) const {
    if constexpr (kPacked) {
      uint64_t word;
      if constexpr (kRelaxed) {
        asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(word) : "l"(words_ + tile)
                     : "memory");
      } else {
        word = *reinterpret_cast<volatile uint64_t*>(words_ + tile);
      }
      state = static_cast<uint32_t>(word >> 32);
      const uint32_t bits = static_cast<uint32_t>(word);
      memcpy(&value, &bits, sizeof(V));
    } else if constexpr (kWide) {
      unsigned long long value_bits, state_bits;
      asm volatile("ld.global.cg.v2.u64 {%0, %1}, [%2];"
                   : "=l"(value_bits), "=l"(state_bits)
                   : "l"(wide_words_ + tile)
                   : "memory");
      state = static_cast<uint32_t>(state_bits);
      memcpy(&value, &value_bits, sizeof(V));
    } else if constexpr (kWide12) {
      uint32_t words[4];
      asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(words[0]), "=r"(words[1]), "=r"(words[2]), "=r"(words[3])
                   : "l"(wide_words_ + tile)
                   : "memory");
      state = words[3];
      memcpy(&value, words, 12);
    } else {
      state = *reinterpret_cast<volatile uint32_t*>(states_ + tile);
    }
  }

  int64_t num_tiles_ = 0;
  unsigned long long* counter_ = nullptr;
  uint64_t* words_ = nullptr;     // packed: state << 32 | value bits
  ulonglong2* wide_words_ = nullptr;  // wide: {value bits, state}; wide12: {12 value bytes, state}
  uint32_t* states_ = nullptr;    // separate: state
  V* aggregates_ = nullptr;       // separate: A values
  V* inclusives_ = nullptr;       // separate: P values
};

template <typename V>
__global__ void InitTileStatusKernel(TileStatus<V> status) {
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tile == 0) status.ResetCounter();
  if (tile < status.num_tiles()) status.InitSlot(tile);
}

// Resets every slot to X and the tile counter to 0 (one launch).
template <typename V>
cudaError_t InitTileStatusAsync(const TileStatus<V>& status, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t blocks = (status.num_tiles() + kThreads - 1) / kThreads;
  InitTileStatusKernel<V><<<static_cast<unsigned>(blocks > 0 ? blocks : 1), kThreads, 0,
                            stream>>>(status);
  return cudaGetLastError();
}

// Whole block, after warp 0 knows the tile's aggregate: returns the tile's
// exclusive prefix in every thread; for tile 0 (empty prefix) the return
// value is unspecified. `slot` is a __shared__ V; ends with __syncthreads().
template <typename Policy = DefaultLookbackPolicy, typename V, typename ScanOp>
__device__ __forceinline__ V BlockExclusivePrefix(const TileStatus<V>& status,
                                                 int64_t tile, const V& aggregate,
                                                 ScanOp op, V& slot) {
  if (tile == 0) {
    if (threadIdx.x == 0) status.PublishInclusive(0, aggregate);
  } else if (threadIdx.x < kWarpThreads) {
    const V prefix = status.template TileExclusivePrefix<Policy>(tile, aggregate, op);
    if (threadIdx.x == 0) slot = prefix;
  }
  __syncthreads();
  return slot;
}

}  // namespace primserve::gpu::detail

#endif  // PRIMSERVE_KERNELS_DETAIL_LOOKBACK_CUH_
