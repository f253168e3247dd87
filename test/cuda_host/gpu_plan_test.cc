// The GPU layer's host-side planning (cuda/gpu_plan.h): buffer growth, launch shapes and
// Algorithm 1's sizing and overflow fallback, checked without a GPU.
#include "cuda/gpu_plan.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace zen::cuda {
namespace {

TEST(GpuPlan, GrowCapacityKeepsWhatFitsAndAddsHeadroom) {
  EXPECT_EQ(growCapacity(4096, 100), 4096u);
  EXPECT_EQ(growCapacity(4096, 4096), 4096u);
  const size_t grown = growCapacity(4096, 10000);
  EXPECT_GE(grown, 12500u);  // needed + 25%
  EXPECT_EQ(grown % 4096, 0u);
  EXPECT_GE(growCapacity(0, 1), 1u);
}

TEST(GpuPlan, GridBlocksCoverTheWorkWithinTheCap) {
  EXPECT_EQ(gridBlocks(0, 256, 132), 1);
  EXPECT_EQ(gridBlocks(1, 256, 132), 1);
  EXPECT_EQ(gridBlocks(257, 256, 132), 2);
  EXPECT_EQ(gridBlocks(int64_t{1} << 40, 256, 132), 132 * kBlocksPerSm);
  EXPECT_EQ(gridBlocks(int64_t{1} << 40, 256, 0), kMaxGridBlocks);
  EXPECT_EQ(gridBlocks(1000, 256, -1), 4);
}

TEST(GpuPlan, WordsAndTiles) {
  EXPECT_EQ(wordsForBits(0), 0);
  EXPECT_EQ(wordsForBits(1), 1);
  EXPECT_EQ(wordsForBits(32), 1);
  EXPECT_EQ(wordsForBits(33), 2);
  EXPECT_EQ(tilesForBits(0), 0);
  EXPECT_EQ(tilesForBits(1), 1);
  EXPECT_EQ(tilesForBits(kTileBits), 1);
  EXPECT_EQ(tilesForBits(kTileBits + 1), 2);
  EXPECT_EQ(kTileBits, 8192);  // the tile kernels assume one word per thread of 256
}

TEST(GpuPlan, NonzeroLanesPerRow) {
  EXPECT_EQ(nonzeroLanesPerRow(1, 4), 1);
  EXPECT_EQ(nonzeroLanesPerRow(8, 4), 1);
  EXPECT_EQ(nonzeroLanesPerRow(9, 4), 32);
  EXPECT_EQ(nonzeroLanesPerRow(16, 2), 1);
  EXPECT_EQ(nonzeroLanesPerRow(17, 2), 32);
  EXPECT_EQ(nonzeroLanesPerRow(1000, 8), 32);
}

TEST(GpuPlan, CopyUnitIsTheWidestAlignedDivisor) {
  EXPECT_EQ(copyUnitBytes(64, 0, 0), 16);
  EXPECT_EQ(copyUnitBytes(64, 8, 0), 8);
  EXPECT_EQ(copyUnitBytes(12, 0, 0), 4);
  EXPECT_EQ(copyUnitBytes(8, 0, 256), 8);
  EXPECT_EQ(copyUnitBytes(6, 0, 0), 2);
  EXPECT_EQ(copyUnitBytes(4, 2, 0), 2);
  EXPECT_EQ(copyUnitBytes(3, 0, 0), 1);
}

TEST(GpuPlan, BitWidth) {
  EXPECT_EQ(bitWidth(0), 0);
  EXPECT_EQ(bitWidth(1), 1);
  EXPECT_EQ(bitWidth(2), 2);
  EXPECT_EQ(bitWidth(255), 8);
  EXPECT_EQ(bitWidth(256), 9);
  EXPECT_EQ(bitWidth(~uint64_t{0}), 64);
}

TEST(GpuPlan, HashPartitionSizingMatchesTheCpuPartitioner) {
  HashPartitionOptions options;  // factor 1.5, serial fraction 0.1
  const HashPartitionPlan p = planHashPartition(1'000'000, 16, options);
  EXPECT_EQ(p.r1, 93'750);  // ceil(1.5 * 1e6 / 16)
  EXPECT_EQ(p.r2, 9'375);   // ceil(0.1 * r1)
  EXPECT_EQ(p.slots, 16 * p.r1);
  EXPECT_EQ(p.serialSlots, 16 * p.r2);
  EXPECT_EQ(p.ownerBits, 4);
  const HashPartitionPlan empty = planHashPartition(0, 4, options);
  EXPECT_EQ(empty.r1, 8);
  EXPECT_EQ(empty.r2, 64);
  EXPECT_EQ(planHashPartition(10, 1, options).ownerBits, 0);
  EXPECT_EQ(planHashPartition(10, 7, options).ownerBits, 3);
}

TEST(GpuPlan, HashPartitionSlotIdsStayThirtyTwoBit) {
  HashPartitionOptions options;
  options.memoryFactor = 4.0;
  const HashPartitionPlan p = planHashPartition(kMaxPartitionEntries, 3, options);
  EXPECT_LE(p.slots, kMaxSlots);
  EXPECT_EQ(p.r1, kMaxSlots / 3);
  EXPECT_GE(p.r2, 64);
}

TEST(GpuPlan, SerialFallbackGrowsAndTerminates) {
  EXPECT_GE(nextSerialCapacity(64, 100, 1'000'000), 128);    // at least doubles
  EXPECT_GE(nextSerialCapacity(64, 1000, 1'000'000), 1250);  // 1.25 x the need
  EXPECT_EQ(nextSerialCapacity(64, 1000, 500), 500);         // never past nnz
  // Even if every redo overflows again, r2 reaches nnz (where no partition can overflow)
  // within a few dozen passes: the partitioner's loop always ends.
  int64_t r2 = 64;
  int passes = 0;
  const int64_t nnz = (int64_t{1} << 31) - 1;
  while (r2 < nnz) {
    const int64_t next = nextSerialCapacity(r2, r2 + 1, nnz);
    ASSERT_GT(next, r2);
    r2 = next;
    ++passes;
  }
  EXPECT_LE(passes, 40);
}

TEST(GpuPlan, ScratchBytesAreAFewWordsPerEntry) {
  HashPartitionOptions options;
  const int64_t nnz = 1'000'000;
  const HashPartitionPlan p = planHashPartition(nnz, 16, options);
  const size_t bytes = hashPartitionScratchBytes(p, nnz, 16);
  EXPECT_GT(bytes, static_cast<size_t>(nnz) * 12);
  EXPECT_LT(bytes, static_cast<size_t>(nnz) * 64);
}

}  // namespace
}  // namespace zen::cuda
