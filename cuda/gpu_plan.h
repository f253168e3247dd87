#pragma once

// Host-side planning for the GPU kernels: buffer growth, launch shapes, Algorithm 1's memory
// sizing and its overflow fallback. Plain C++ without CUDA headers, so test/cuda_host checks
// it on every machine, GPU or not.
#include <cstddef>
#include <cstdint>

#include "core/hash_partitioner.h"

namespace zen::cuda {

// Threads per block of every kernel here.
inline constexpr int kBlockThreads = 256;
// A bit tile: one 32-bit word per thread of a block, 8192 bits. Bitmaps (nonzero flags, the
// aggregator's occupancy, a received hash bitmap) are counted and compacted tile by tile.
inline constexpr int64_t kTileWords = kBlockThreads;
inline constexpr int64_t kTileBits = kTileWords * 32;
// Resident blocks per multiprocessor assumed for grid-stride kernels (2048 threads).
inline constexpr int kBlocksPerSm = 8;
// Grid cap when the multiprocessor count is unknown.
inline constexpr int kMaxGridBlocks = 1 << 16;

// Algorithm 1 on the GPU: a slot word keeps the claiming entry in its low 31 bits (bit 31
// flags a duplicated slot), so one call takes fewer than 2^31 entries; slot ids are 32-bit.
inline constexpr int64_t kMaxPartitionEntries = (int64_t{1} << 31) - 1;
inline constexpr int64_t kMaxSlots = (int64_t{1} << 32) - 1;

// Capacity for a buffer of `current` bytes that must hold `needed`: unchanged when it fits,
// else needed + 25% rounded up to 4 KiB, so a slowly growing nnz does not reallocate (and
// synchronize the device in cudaFree) on every call.
size_t growCapacity(size_t current, size_t needed);

// Blocks for a grid-stride kernel over `work` items of `threads` each: enough to cover the
// work, at most kBlocksPerSm per multiprocessor (kMaxGridBlocks if smCount <= 0), at least 1.
int gridBlocks(int64_t work, int threads, int smCount);

int64_t wordsForBits(int64_t bits);  // ceil(bits / 32)
int64_t tilesForBits(int64_t bits);  // ceil(bits / kTileBits): blocks of a tile kernel

// Lanes that test one dense row for a non-zero: 1 (a thread per row, a warp covers 32 rows
// coalesced) for rows up to 32 bytes, else 32 (a warp reads one row coalesced).
int nonzeroLanesPerRow(int64_t rowSize, size_t elementBytes);

// Widest unit (16, 8, 4 or 2 bytes; 1 as a last resort) that divides the row size and both
// base addresses: rows are copied in these units.
int copyUnitBytes(size_t rowBytes, uintptr_t srcAddress, uintptr_t dstAddress);

// Bits needed to write v (0 for 0): radix sorts only look at the key bits in use.
int bitWidth(uint64_t v);

// Algorithm 1's memory for one call (ALGORITHMS.md §3), the CPU partitioner's sizing:
// r1 = ceil(memoryFactor * nnz / n) parallel slots per partition (at least 8),
// r2 = ceil(serialFraction * r1) serial entries per partition (at least 64).
// r1 is lowered when n * r1 would not fit 32-bit slot ids (more spill, nothing lost).
struct HashPartitionPlan {
  int64_t r1 = 0;
  int64_t r2 = 0;
  int64_t slots = 0;        // n * r1
  int64_t serialSlots = 0;  // n * r2
  int ownerBits = 0;        // bitWidth(n - 1): the spill sort's key is owner << 32 | position
};
HashPartitionPlan planHashPartition(int64_t nnz, int numParts, const HashPartitionOptions& options);

// The overflow fallback: after a claim pass in which some partition needed maxNeed > r2
// serial entries, the r2 to redo the pass with: at least twice r2 and 1.25 x maxNeed, at
// most nnz. A redo can spill differently (claims race), so it may overflow again, but r2
// doubles each time and with r2 >= nnz no partition can overflow: the loop ends, and no
// entry is ever written past the serial memory or lost.
int64_t nextSerialCapacity(int64_t r2, int64_t maxNeed, int64_t nnz);

// Device bytes Algorithm 1 uses for nnz entries under `plan` (without the output lists).
size_t hashPartitionScratchBytes(const HashPartitionPlan& plan, int64_t nnz, int numParts);

}  // namespace zen::cuda
