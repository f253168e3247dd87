// Host-side planning for the GPU kernels (see gpu_plan.h). No CUDA here: test/cuda_host
// compiles this file on machines without nvcc.
#include "cuda/gpu_plan.h"

#include <algorithm>
#include <cmath>

namespace zen::cuda {

size_t growCapacity(size_t current, size_t needed) {
  if (needed <= current) return current;
  constexpr size_t kAlign = 4096;
  const size_t padded = needed + needed / 4;
  return (padded + kAlign - 1) / kAlign * kAlign;
}

int gridBlocks(int64_t work, int threads, int smCount) {
  if (work <= 0 || threads <= 0) return 1;
  const int64_t cover = (work + threads - 1) / threads;
  const int64_t cap =
      smCount > 0 ? static_cast<int64_t>(smCount) * kBlocksPerSm : int64_t{kMaxGridBlocks};
  return static_cast<int>(std::max<int64_t>(1, std::min(cover, cap)));
}

int64_t wordsForBits(int64_t bits) {
  return bits <= 0 ? 0 : (bits + 31) / 32;
}

int64_t tilesForBits(int64_t bits) {
  return bits <= 0 ? 0 : (bits + kTileBits - 1) / kTileBits;
}

int nonzeroLanesPerRow(int64_t rowSize, size_t elementBytes) {
  return static_cast<size_t>(rowSize) * elementBytes <= 32 ? 1 : 32;
}

int copyUnitBytes(size_t rowBytes, uintptr_t srcAddress, uintptr_t dstAddress) {
  for (int unit : {16, 8, 4, 2}) {
    const auto u = static_cast<uintptr_t>(unit);
    if (rowBytes % u == 0 && srcAddress % u == 0 && dstAddress % u == 0) return unit;
  }
  return 1;
}

int bitWidth(uint64_t v) {
  int bits = 0;
  while (v != 0) {
    ++bits;
    v >>= 1;
  }
  return bits;
}

HashPartitionPlan planHashPartition(int64_t nnz,
                                    int numParts,
                                    const HashPartitionOptions& options) {
  HashPartitionPlan p;
  const int64_t n = std::max(1, numParts);
  const double perPart = static_cast<double>(std::max<int64_t>(0, nnz)) / static_cast<double>(n);
  p.r1 = std::max<int64_t>(8, static_cast<int64_t>(std::ceil(options.memoryFactor * perPart)));
  p.r1 = std::min<int64_t>(p.r1, kMaxSlots / n);
  p.r2 = std::max<int64_t>(64, static_cast<int64_t>(std::ceil(options.serialFraction * p.r1)));
  p.slots = n * p.r1;
  p.serialSlots = n * p.r2;
  p.ownerBits = bitWidth(static_cast<uint64_t>(n - 1));
  return p;
}

int64_t nextSerialCapacity(int64_t r2, int64_t maxNeed, int64_t nnz) {
  const int64_t grown = std::max({2 * r2, maxNeed + maxNeed / 4, int64_t{64}});
  return std::max<int64_t>(r2, std::min(grown, std::max<int64_t>(nnz, 1)));
}

size_t hashPartitionScratchBytes(const HashPartitionPlan& plan, int64_t nnz, int numParts) {
  const auto entries = static_cast<size_t>(std::max<int64_t>(0, nnz));
  const auto serial = static_cast<size_t>(plan.serialSlots);
  size_t bytes = static_cast<size_t>(plan.slots) * 8;  // slot words
  bytes += serial * 8;                                 // serial memory (position, entry)
  bytes += entries * (8 + 8 + 4);                      // group members x2, occupied slot ids
  bytes += serial * (8 + 8 + 4 + 4 + 8 + 8);           // spill sort keys/values x2, heads, ranks
  bytes += static_cast<size_t>(numParts + 1) * 8 * 5;  // counters and per-partition layout
  return bytes;
}

}  // namespace zen::cuda
