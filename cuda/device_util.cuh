#pragma once

// Device-side building blocks shared by the kernels of this folder (included by .cu files
// only): grid-stride ranges, warp scans, bit tiles (count + scan + compaction of set bits)
// and row copies in the widest aligned unit.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/gpu_plan.h"

namespace zen::cuda {

__device__ __forceinline__ int64_t globalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t gridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}
__device__ __forceinline__ int laneId() {
  return static_cast<int>(threadIdx.x & 31);
}

// Inclusive prefix sum over the 32 lanes of a full warp.
__device__ __forceinline__ int warpInclusiveSum(int v) {
  const int lane = laneId();
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += y;
  }
  return v;
}

// Word w (bits 32w .. 32w + 31, LSB first) of a bitmap of `bytes` bytes; bytes past the end
// read as zero, and an unaligned or short tail is read byte by byte. NVIDIA GPUs are
// little-endian, so byte b of the bitmap is bits 8b .. 8b + 7 of the words.
__device__ __forceinline__ uint32_t loadBitmapWord(const uint8_t* bitmap,
                                                   int64_t bytes,
                                                   int64_t w) {
  const int64_t first = w * 4;
  if (first + 4 <= bytes && (reinterpret_cast<uintptr_t>(bitmap) & 3u) == 0) {
    return reinterpret_cast<const uint32_t*>(bitmap)[w];
  }
  uint32_t v = 0;
  for (int b = 0; b < 4; ++b) {
    if (first + b < bytes) v |= static_cast<uint32_t>(bitmap[first + b]) << (8 * b);
  }
  return v;
}

// Bit tiles. Block b of a tile kernel owns words [b * kTileWords, (b + 1) * kTileWords);
// thread t holds word b * kTileWords + t. Counting writes the tile's popcount; after an
// exclusive scan of the counts (tile_offsets[b] = set bits before tile b), compaction calls
// emit(k, bit) for every set bit, k being its rank among all set bits (bit order).
template <typename Source>
__global__ void __launch_bounds__(kBlockThreads)
    tileCountKernel(Source source, int64_t numWords, int64_t* tileCounts) {
  __shared__ int warpCounts[kBlockThreads / 32];
  const int64_t w = static_cast<int64_t>(blockIdx.x) * kTileWords + threadIdx.x;
  int count = w < numWords ? __popc(source(w)) : 0;
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) count += __shfl_xor_sync(0xffffffffu, count, d);
  if (laneId() == 0) warpCounts[threadIdx.x / 32] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t total = 0;
    for (int i = 0; i < kBlockThreads / 32; ++i) total += warpCounts[i];
    tileCounts[blockIdx.x] = total;
  }
}

// The compaction step of a tile kernel; every thread of the block must call it. Each warp
// walks its 32 words one at a time: lane l handles bit l, so a word's set bits are written
// by consecutive lanes to consecutive k (coalesced).
template <typename Source, typename Emit>
__device__ __forceinline__ void tileCompact(Source source,
                                            int64_t numWords,
                                            const int64_t* tileOffsets,
                                            Emit emit) {
  __shared__ int warpTotals[kBlockThreads / 32];
  const int lane = laneId();
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int64_t firstWord = static_cast<int64_t>(blockIdx.x) * kTileWords + warp * 32;
  const uint32_t word = firstWord + lane < numWords ? source(firstWord + lane) : 0u;
  const int count = __popc(word);
  const int inclusive = warpInclusiveSum(count);
  if (lane == 31) warpTotals[warp] = inclusive;
  __syncthreads();
  int warpBase = 0;
  for (int i = 0; i < warp; ++i) warpBase += warpTotals[i];
  const long long base =
      static_cast<long long>(tileOffsets[blockIdx.x]) + warpBase + (inclusive - count);
  const uint32_t below = (1u << lane) - 1u;  // lanes under this one
  for (int j = 0; j < 32; ++j) {
    const uint32_t wj = __shfl_sync(0xffffffffu, word, j);
    const long long bj = __shfl_sync(0xffffffffu, base, j);
    if (wj == 0) continue;  // uniform across the warp
    if ((wj >> lane) & 1u) {
      emit(static_cast<int64_t>(bj + __popc(wj & below)), (firstWord + j) * 32 + lane);
    }
  }
}

// Row-index functors for copyRowsKernel.
struct IdentityRow {
  __device__ int64_t operator()(int64_t k) const { return k; }
};
template <typename T>
struct ListRow {
  const T* list;
  __device__ int64_t operator()(int64_t k) const { return static_cast<int64_t>(list[k]); }
};

// dst row dstRow(k) = src row srcRow(k) for k < rows, rows of unitsPerRow Units, one thread
// per unit (consecutive threads copy consecutive units of a row: coalesced). Does nothing
// when *abort is non-zero (a validation kernel before it on the stream found a bad input).
template <typename Unit, typename SrcRow, typename DstRow>
__global__ void copyRowsKernel(const Unit* src,
                               Unit* dst,
                               int64_t rows,
                               int64_t unitsPerRow,
                               SrcRow srcRow,
                               DstRow dstRow,
                               const unsigned long long* abort) {
  if (abort != nullptr && *abort != 0) return;
  const int64_t total = rows * unitsPerRow;
  for (int64_t t = globalThread(); t < total; t += gridThreads()) {
    const int64_t k = t / unitsPerRow;
    const int64_t u = t - k * unitsPerRow;
    dst[dstRow(k) * unitsPerRow + u] = src[srcRow(k) * unitsPerRow + u];
  }
}

// Calls fn(Unit{}) with the unsigned type of `bytes` bytes (16: uint4).
template <typename Fn>
decltype(auto) dispatchUnit(int bytes, Fn&& fn) {
  switch (bytes) {
    case 16:
      return fn(uint4{});
    case 8:
      return fn(static_cast<unsigned long long>(0));
    case 4:
      return fn(static_cast<uint32_t>(0));
    case 2:
      return fn(static_cast<uint16_t>(0));
    default:
      return fn(static_cast<uint8_t>(0));
  }
}

// Launches copyRowsKernel for rows of rowBytes bytes in the widest unit the addresses allow.
template <typename SrcRow, typename DstRow>
Status copyRows(const void* src,
                void* dst,
                int64_t rows,
                size_t rowBytes,
                SrcRow srcRow,
                DstRow dstRow,
                const unsigned long long* abort,
                int smCount,
                cudaStream_t stream) {
  if (rows <= 0 || rowBytes == 0) return Status::ok();
  const int unit =
      copyUnitBytes(rowBytes, reinterpret_cast<uintptr_t>(src), reinterpret_cast<uintptr_t>(dst));
  const int64_t unitsPerRow = static_cast<int64_t>(rowBytes) / unit;
  return dispatchUnit(unit, [&](auto tag) -> Status {
    using Unit = decltype(tag);
    const int blocks = gridBlocks(rows * unitsPerRow, kBlockThreads, smCount);
    copyRowsKernel<Unit><<<blocks, kBlockThreads, 0, stream>>>(static_cast<const Unit*>(src),
                                                               static_cast<Unit*>(dst), rows,
                                                               unitsPerRow, srcRow, dstRow, abort);
    ZEN_CHECK_LAUNCH("copyRowsKernel");
    return Status::ok();
  });
}

}  // namespace zen::cuda
