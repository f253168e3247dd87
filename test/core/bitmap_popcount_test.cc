#include "core/bitmap_popcount.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "core/popcount.h"

namespace zen {
namespace {

// The reference: one bit at a time, no word loads and no popcount of any kind.
uint64_t bitByBit(const uint8_t* bitmap, size_t bytes) {
  uint64_t n = 0;
  for (size_t b = 0; b < bytes; ++b) {
    for (int bit = 0; bit < 8; ++bit) n += (bitmap[b] >> bit) & 1u;
  }
  return n;
}

// Calls check(bitmap, bytes) on every length of 0..200 whole words plus 0..7 bytes of a last
// partial word, each random, all zero and all ones, at an aligned and an odd address (the
// wire's bitmaps need not be aligned); then on one set bit at every position of 3 words + 3
// bytes, the partial word's last bit included.
void forEachPattern(const std::function<void(const uint8_t*, size_t)>& check) {
  std::mt19937_64 rng(11);
  constexpr size_t kMaxBytes = 200 * 8 + 7;
  std::vector<uint64_t> storage(kMaxBytes / 8 + 2);
  auto* base = reinterpret_cast<uint8_t*>(storage.data());
  for (size_t offset : {size_t{0}, size_t{3}}) {
    uint8_t* bitmap = base + offset;
    for (size_t bytes = 0; bytes <= kMaxBytes; ++bytes) {
      SCOPED_TRACE(testing::Message() << bytes << " bytes at offset " << offset);
      for (size_t b = 0; b < bytes; ++b) bitmap[b] = static_cast<uint8_t>(rng());
      check(bitmap, bytes);
      for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xff}}) {
        std::fill(bitmap, bitmap + bytes, fill);
        check(bitmap, bytes);
      }
    }
  }
  constexpr size_t kBytes = 3 * 8 + 3;
  for (size_t bit = 0; bit < kBytes * 8; ++bit) {
    SCOPED_TRACE(testing::Message() << "only bit " << bit);
    std::fill(base, base + kBytes, uint8_t{0});
    base[bit / 8] = static_cast<uint8_t>(1u << (bit % 8));
    check(base, kBytes);
  }
}

TEST(BitmapPopcount, SoftwareAndThisCpusChoiceMatchBitByBit) {
  forEachPattern([](const uint8_t* bitmap, size_t bytes) {
    const uint64_t want = bitByBit(bitmap, bytes);
    ASSERT_EQ(bitmapPopcount(bitmap, bytes, /*hardware=*/false), want);
    ASSERT_EQ(bitmapPopcount(bitmap, bytes), want);
  });
}

TEST(BitmapPopcount, HardwareMatchesBitByBit) {
  if (!cpuHasPopcount()) GTEST_SKIP() << "this CPU has no popcnt: the hardware path cannot run";
  forEachPattern([](const uint8_t* bitmap, size_t bytes) {
    ASSERT_EQ(bitmapPopcount(bitmap, bytes, /*hardware=*/true), bitByBit(bitmap, bytes));
  });
}

TEST(BitmapPopcount, AllOnesCountsEveryBitAndNothingIsReadForZeroBytes) {
  const std::vector<uint8_t> ones(200 * 8 + 5, 0xff);
  for (bool hardware : {false, cpuHasPopcount()}) {
    EXPECT_EQ(bitmapPopcount(ones.data(), ones.size(), hardware),
              static_cast<uint64_t>(ones.size()) * 8);
    EXPECT_EQ(bitmapPopcount(nullptr, 0, hardware), 0u);
  }
}

}  // namespace
}  // namespace zen
