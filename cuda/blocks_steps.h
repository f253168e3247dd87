#pragma once

// The blocks scheme on the GPU (gpu_sparse_allreduce_blocks.cc), one thread's share of each
// step, as host/device functions: the kernels of gpu_blocks.cu run them over a grid and
// test/cuda_host runs the very same functions on the CPU for n simulated ranks against the
// closed-form result (the CPU scheme's, ops/sparse_allreduce_blocks.cc).
//
// Geometry: ops/blocks_wire.h's (R = max(1, ceil(256 / rowSize)) rows per block, rank j owns
// blocks [j * ceil(B / n), (j + 1) * ceil(B / n))). On the GPU a block travels in three
// device arrays, one NCCL message each (no headers, nothing to parse): its uint32 id, its row
// mask as W = ceil(R / 32) uint32 words (bit r of word r / 32: row r present) and R rows of
// the dtype (rows past the tensor's end, and absent rows, are zero). Items:
//   entry item   e * rowSize + c   (input entry e, element c)
//   block item   (k * R + r) * rowSize + c   (block k of a list, row r, element c)
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/host_device.h"

namespace zen::cuda::blocks {

struct Geometry {
  int64_t numRows = 0;
  int64_t rowSize = 1;
  int64_t rowsPerBlock = 1;  // R
  int64_t numBlocks = 0;     // B
  int64_t blocksPerOwner = 1;
  int ranks = 1;
  int maskWords = 1;  // W

  ZEN_HOST_DEVICE int64_t firstBlock(int owner) const {
    const int64_t b = owner * blocksPerOwner;
    return b < numBlocks ? b : numBlocks;
  }
  ZEN_HOST_DEVICE int64_t rowsIn(int64_t block) const {
    const int64_t left = numRows - block * rowsPerBlock;
    return left < rowsPerBlock ? left : rowsPerBlock;
  }
  ZEN_HOST_DEVICE int64_t blockElements() const { return rowsPerBlock * rowSize; }
};

// The geometry ops/blocks_wire.h derives (same formulas; test/cuda_host compares them).
inline Geometry makeGeometry(int64_t numRows, int64_t rowSize, int ranks) {
  Geometry g;
  g.numRows = numRows;
  g.rowSize = rowSize;
  g.ranks = ranks;
  g.rowsPerBlock = (256 + rowSize - 1) / rowSize;
  if (g.rowsPerBlock < 1) g.rowsPerBlock = 1;
  g.numBlocks = (numRows + g.rowsPerBlock - 1) / g.rowsPerBlock;
  g.blocksPerOwner = (g.numBlocks + ranks - 1) / ranks;
  if (g.blocksPerOwner < 1) g.blocksPerOwner = 1;
  g.maskWords = static_cast<int>((g.rowsPerBlock + 31) / 32);
  return g;
}

ZEN_HOST_DEVICE int popcount32(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __popc(v);
#else
  return __builtin_popcount(v);
#endif
}

ZEN_HOST_DEVICE void atomicOr32(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  atomicOr(p, v);
#else
  __atomic_fetch_or(p, v, __ATOMIC_RELAXED);
#endif
}

// *p += v for the accumulator types (float, double, int64_t).
template <typename A>
ZEN_HOST_DEVICE void atomicAddAcc(A* p, A v) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(A) == 8 && !std::is_floating_point_v<A>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    atomicAdd(p, v);
  }
#else
  A seen;
  __atomic_load(p, &seen, __ATOMIC_RELAXED);
  A next = seen + v;
  while (!__atomic_compare_exchange(p, &seen, &next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    next = seen + v;
  }
#endif
}

ZEN_HOST_DEVICE bool maskBit(const uint32_t* mask, int64_t row) {
  return ((mask[row / 32] >> (row % 32)) & 1u) != 0;
}

// The one rounding of an owner's sum (ops/sparse_rows.h finishRow, element-wise): divisor 1
// for Sum, n for Average (floats times 1/n in the accumulator type, integers truncated).
template <typename T, typename A>
ZEN_HOST_DEVICE T finishElement(A acc, int divisor) {
  if (divisor == 1) return fromAccumulator<T>(acc);
  if constexpr (std::is_integral_v<A>) {
    return static_cast<T>(acc / divisor);
  } else {
    return fromAccumulator<T>(acc * static_cast<A>(1.0 / divisor));
  }
}

// ---- push side (every rank) ----

// Entry e: flags[its block] = 1 (flags: B + 1 zeros before; an exclusive scan of them gives
// each non-empty block its slot, and slots[B] the count).
ZEN_HOST_DEVICE void markEntry(const Geometry& g,
                               const int64_t* indices,
                               int64_t e,
                               int64_t* flags) {
  flags[indices[e] / g.rowsPerBlock] = 1;
}

// Entry item i: adds the element into its block's accumulator rows (duplicates summed, in the
// accumulator type) and, for element 0, sets the row's mask bit and the block's id. acc and
// masks are zero before; slots from the scan.
template <typename T, typename A>
ZEN_HOST_DEVICE void pushEntryItem(const Geometry& g,
                                   const int64_t* indices,
                                   const T* values,
                                   const int64_t* slots,
                                   int64_t i,
                                   A* acc,
                                   uint32_t* masks,
                                   uint32_t* ids) {
  const int64_t e = i / g.rowSize;
  const int64_t c = i % g.rowSize;
  const int64_t index = indices[e];
  const int64_t block = index / g.rowsPerBlock;
  const int64_t r = index % g.rowsPerBlock;
  const int64_t k = slots[block];
  atomicAddAcc(acc + (k * g.rowsPerBlock + r) * g.rowSize + c, toAccumulator<A>(values[i]));
  if (c == 0) {
    atomicOr32(masks + k * g.maskWords + r / 32, 1u << (r % 32));
    ids[k] = static_cast<uint32_t>(block);  // every row of the block writes the same id
  }
}

// Block item i: this rank's coalesced rows rounded once to the dtype (as the CPU's
// coalesceRows before its push).
template <typename T, typename A>
ZEN_HOST_DEVICE void roundPushItem(const A* acc, int64_t i, T* rows) {
  rows[i] = fromAccumulator<T>(acc[i]);
}

// ---- checks of a received list (push parts at their owner, pull parts everywhere) ----

// Block k of a list of `count` that must hold ids in [lo, hi), strictly ascending, each mask
// non-empty with no bit at or past the block's rows. A bad block records base + k (the
// smallest wins) in *bad, all ones before.
ZEN_HOST_DEVICE void checkBlock(const Geometry& g,
                                const uint32_t* ids,
                                const uint32_t* masks,
                                int64_t k,
                                int64_t lo,
                                int64_t hi,
                                unsigned long long base,
                                unsigned long long* bad) {
  const int64_t id = ids[k];
  bool ok = id >= lo && id < hi && (k == 0 || static_cast<int64_t>(ids[k - 1]) < id);
  if (ok) {
    const int64_t rows = g.rowsIn(id);
    uint32_t any = 0;
    for (int w = 0; w < g.maskWords; ++w) {
      const uint32_t word = masks[k * g.maskWords + w];
      any |= word;
      const int64_t first = int64_t{w} * 32;  // rows first .. first + 31
      const int64_t valid = rows - first;
      const uint32_t allowed = valid >= 32 ? 0xffffffffu : (valid <= 0 ? 0u : ((1u << valid) - 1u));
      if ((word & ~allowed) != 0) ok = false;
    }
    if (any == 0) ok = false;
  }
  if (!ok) {
#if defined(__CUDA_ARCH__)
    atomicMin(bad, base + static_cast<unsigned long long>(k));
#else
    unsigned long long seen = __atomic_load_n(bad, __ATOMIC_RELAXED);
    const unsigned long long v = base + static_cast<unsigned long long>(k);
    while (v < seen &&
           !__atomic_compare_exchange_n(bad, &seen, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
#endif
  }
}

// ---- owner side (rank j: blocks [first, end), rows [firstRow, ...)) ----

// Block item i of one peer's checked push list: adds a present row's element to the owner's
// accumulators and marks the row seen. No atomics: a list holds each block once, and the
// peers' lists are added one launch after the other in rank order (the CPU's order).
template <typename T, typename A>
ZEN_HOST_DEVICE void addItem(const Geometry& g,
                             int64_t firstRow,
                             const uint32_t* ids,
                             const uint32_t* masks,
                             const T* rows,
                             int64_t i,
                             A* acc,
                             uint8_t* seen) {
  const int64_t perBlock = g.blockElements();
  const int64_t k = i / perBlock;
  const int64_t r = (i % perBlock) / g.rowSize;
  const int64_t c = i % g.rowSize;
  if (!maskBit(masks + k * g.maskWords, r)) return;
  const int64_t row = static_cast<int64_t>(ids[k]) * g.rowsPerBlock + r - firstRow;
  acc[row * g.rowSize + c] += toAccumulator<A>(rows[i]);
  if (c == 0) seen[row] = 1;
}

// Own block j (block first + j): flags[j] = 1 when some rank sent one of its rows (flags:
// ownBlocks + 1 zeros before; scanned into the pull slots).
ZEN_HOST_DEVICE void ownBlockFlag(const Geometry& g,
                                  int64_t first,
                                  int64_t firstRow,
                                  const uint8_t* seen,
                                  int64_t j,
                                  int64_t* flags) {
  const int64_t block = first + j;
  const int64_t base = block * g.rowsPerBlock - firstRow;
  const int64_t rows = g.rowsIn(block);
  for (int64_t r = 0; r < rows; ++r) {
    if (seen[base + r] != 0) {
      flags[j] = 1;
      return;
    }
  }
}

// Block item i over the owner's blocks (j = i / (R * rowSize)): a flagged block's element,
// finished (divided and rounded once), into pull slot slots[j]; row 0's element 0 writes the
// id; element 0 of a seen row sets its mask bit. Absent rows travel as their zero sums, rows
// past the tensor's end as zero. masks zero before.
template <typename T, typename A>
ZEN_HOST_DEVICE void pullItem(const Geometry& g,
                              int64_t first,
                              int64_t firstRow,
                              const int64_t* flags,
                              const int64_t* slots,
                              const A* acc,
                              const uint8_t* seen,
                              int divisor,
                              int64_t i,
                              uint32_t* ids,
                              uint32_t* masks,
                              T* rows) {
  const int64_t perBlock = g.blockElements();
  const int64_t j = i / perBlock;
  if (flags[j] == 0) return;
  const int64_t r = (i % perBlock) / g.rowSize;
  const int64_t c = i % g.rowSize;
  const int64_t k = slots[j];
  const int64_t block = first + j;
  T* out = rows + (k * g.rowsPerBlock + r) * g.rowSize + c;
  if (r >= g.rowsIn(block)) {
    *out = fromAccumulator<T>(A{0});
    return;
  }
  const int64_t row = block * g.rowsPerBlock + r - firstRow;
  *out = finishElement<T>(acc[row * g.rowSize + c], divisor);
  if (c == 0) {
    if (r == 0) ids[k] = static_cast<uint32_t>(block);
    if (seen[row] != 0) atomicOr32(masks + k * g.maskWords + r / 32, 1u << (r % 32));
  }
}

// ---- decode (every rank, every owner's checked pull list, concatenated in rank order) ----

// Block item i: a present row's element into the dense output (zeroed before).
template <typename T>
ZEN_HOST_DEVICE void decodeDenseItem(const Geometry& g,
                                     const uint32_t* ids,
                                     const uint32_t* masks,
                                     const T* rows,
                                     int64_t i,
                                     T* out) {
  const int64_t perBlock = g.blockElements();
  const int64_t k = i / perBlock;
  const int64_t r = (i % perBlock) / g.rowSize;
  const int64_t c = i % g.rowSize;
  if (!maskBit(masks + k * g.maskWords, r)) return;
  out[(static_cast<int64_t>(ids[k]) * g.rowsPerBlock + r) * g.rowSize + c] = rows[i];
}

// Block k: counts[k] = its present rows (an exclusive scan of counts[0 .. count] gives each
// block's first output row and the total).
ZEN_HOST_DEVICE void blockRowCount(const Geometry& g,
                                   const uint32_t* masks,
                                   int64_t k,
                                   int64_t* counts) {
  int64_t n = 0;
  for (int w = 0; w < g.maskWords; ++w) n += popcount32(masks[k * g.maskWords + w]);
  counts[k] = n;
}

// Block item i: a present row's element to output row offsets[k] + (present rows before r in
// its block); element 0 writes the index. Blocks ascend, so the output is sorted by index.
template <typename T>
ZEN_HOST_DEVICE void decodeSparseItem(const Geometry& g,
                                      const uint32_t* ids,
                                      const uint32_t* masks,
                                      const T* rows,
                                      const int64_t* offsets,
                                      int64_t i,
                                      int64_t* outIndices,
                                      T* outValues) {
  const int64_t perBlock = g.blockElements();
  const int64_t k = i / perBlock;
  const int64_t r = (i % perBlock) / g.rowSize;
  const int64_t c = i % g.rowSize;
  const uint32_t* mask = masks + k * g.maskWords;
  if (!maskBit(mask, r)) return;
  int64_t before = 0;
  for (int64_t w = 0; w < r / 32; ++w) before += popcount32(mask[w]);
  const uint32_t low = static_cast<uint32_t>(r % 32);
  before += popcount32(mask[r / 32] & ((1u << low) - 1u));
  const int64_t at = offsets[k] + before;
  outValues[at * g.rowSize + c] = rows[i];
  if (c == 0) outIndices[at] = static_cast<int64_t>(ids[k]) * g.rowsPerBlock + r;
}

}  // namespace zen::cuda::blocks
