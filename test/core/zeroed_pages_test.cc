// ZeroedPages (core/zeroed_pages.h): zero on every growth, kept when large enough, and lazily
// resident, so an aggregator whose steps stay compact never pays for its |I_j| accumulators.
#include "core/zeroed_pages.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "core/aggregator.h"
#include "core/index_map.h"

namespace zen {
namespace {

// This process's resident memory (/proc/self/statm), in bytes.
size_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total = 0;
  size_t resident = 0;
  statm >> total >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

bool allZero(const std::byte* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != std::byte{0}) return false;
  }
  return true;
}

TEST(ZeroedPages, GrowsZeroedAndKeepsAMappingLargeEnough) {
  ZeroedPages pages;
  EXPECT_EQ(pages.data(), nullptr);
  pages.growZeroed(0);
  EXPECT_EQ(pages.size(), 0u);
  pages.growZeroed(10'000);
  ASSERT_NE(pages.data(), nullptr);
  ASSERT_GE(pages.size(), 10'000u);
  EXPECT_TRUE(allZero(pages.data(), pages.size()));
  std::memset(pages.data(), 0x5a, 100);
  std::memset(pages.data(), 0, 100);  // the caller's part: zero what it wrote
  const std::byte* first = pages.data();
  pages.growZeroed(5'000);  // smaller: the same mapping
  EXPECT_EQ(pages.data(), first);
  pages.growZeroed(1'000'000);
  ASSERT_GE(pages.size(), 1'000'000u);
  EXPECT_TRUE(allZero(pages.data(), pages.size()));

  ZeroedPages moved(std::move(pages));
  EXPECT_EQ(pages.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_GE(moved.size(), 1'000'000u);
  ZeroedPages assigned;
  assigned = std::move(moved);
  EXPECT_GE(assigned.size(), 1'000'000u);
  EXPECT_TRUE(allZero(assigned.data(), assigned.size()));
}

TEST(ZeroedPages, OnlyTouchedPagesBecomeResident) {
  const size_t before = residentBytes();
  ZeroedPages pages;
  pages.growZeroed(size_t{1} << 30);  // 1 GiB of address space
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t i = 0; i < 100; ++i) pages.data()[i * 1000 * page] = std::byte{1};
  EXPECT_LT(residentBytes(), before + (size_t{64} << 20));
}

// A step that stays compact leaves the part's accumulators unwritten, so a part of 800 MB of
// them costs its bitmap and the compact rows, not 800 MB of resident zeros.
TEST(PartitionAggregator, ACompactStepLeavesItsArrayUntouched) {
  const IndexMap map(50'000'000, 1, 3);  // one part of 50M positions
  const size_t before = residentBytes();
  PartitionAggregator agg;
  ASSERT_TRUE(agg.reset(map, 0, DataType::kFloat32, 4).isOk());
  std::vector<uint32_t> pos;
  for (uint32_t p = 0; p < 1000; ++p) pos.push_back(p * 49'999);
  const std::vector<float> vals(pos.size() * 4, 1.5f);
  ASSERT_TRUE(agg.add(pos.data(), vals.data(), static_cast<int64_t>(pos.size())).isOk());
  ASSERT_TRUE(agg.compact());
  EXPECT_EQ(agg.occupied(), 1000);
  ASSERT_TRUE(agg.reset(map, 0, DataType::kFloat32, 4).isOk());
  EXPECT_LT(residentBytes(), before + (size_t{100} << 20));  // the bitmap is 6 MB
}

}  // namespace
}  // namespace zen
