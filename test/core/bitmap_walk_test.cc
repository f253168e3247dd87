#include "core/bitmap_walk.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <vector>

namespace zen {
namespace {

// copyRowsTo takes fixed-size copies for some row sizes and a run-time memcpy for the rest:
// every size, both kinds and their neighbours, must match a byte-by-byte copy.
TEST(BitmapWalk, CopyRowsToMatchesByteCopyForEveryRowSize) {
  std::mt19937_64 rng(7);
  for (size_t rowBytes = 1; rowBytes <= 40; ++rowBytes) {
    SCOPED_TRACE(testing::Message() << "row bytes " << rowBytes);
    const size_t numRows = 50;
    const std::vector<uint64_t> idx = {49, 0, 17, 3, 48, 25};
    std::vector<std::byte> rows(idx.size() * rowBytes);
    for (std::byte& b : rows) b = static_cast<std::byte>(rng());
    std::vector<std::byte> got(numRows * rowBytes, std::byte{0x5a});
    std::vector<std::byte> want = got;
    copyRowsTo(got.data(), idx.data(), rows.data(), idx.size(), rowBytes);
    for (size_t i = 0; i < idx.size(); ++i) {
      for (size_t b = 0; b < rowBytes; ++b) want[idx[i] * rowBytes + b] = rows[i * rowBytes + b];
    }
    EXPECT_EQ(got, want);
  }
}

// forEachSetBitIndex must give map.indexOf(part, p) for every set bit p, in bit order, in
// batches numbered consecutively: bitmaps whose sizes end inside a word and inside a byte,
// empty, full, and across more than one batch.
TEST(BitmapWalk, SetBitIndicesMatchIndexOfInBitOrder) {
  std::mt19937_64 rng(11);
  const IndexMap map(100'003, 3, 42);
  for (uint32_t part = 0; part < 3; ++part) {
    const uint64_t size = map.partSize(static_cast<int>(part));
    for (double density : {0.0, 0.01, 0.5, 1.0}) {
      SCOPED_TRACE(testing::Message() << "part " << part << ", density " << density);
      std::vector<uint8_t> bitmap((size + 7) / 8, 0);
      std::vector<uint64_t> want;
      std::bernoulli_distribution set(density);
      for (uint64_t p = 0; p < size; ++p) {
        if (!set(rng)) continue;
        bitmap[p / 8] |= static_cast<uint8_t>(1u << (p % 8));
        want.push_back(map.indexOf(part, p));
      }
      std::vector<uint64_t> got;
      forEachSetBitIndex(map, part, bitmap.data(), bitmap.size(),
                         [&](const uint64_t* idx, size_t n, int64_t first) {
                           ASSERT_EQ(first, static_cast<int64_t>(got.size()));
                           ASSERT_GE(n, 1u);
                           got.insert(got.end(), idx, idx + n);
                         });
      EXPECT_EQ(got, want);
    }
  }
  // A bitmap whose last word is partial: bytes past the last full 8 walked too.
  const std::vector<uint8_t> tail = {0, 0, 0, 0, 0, 0, 0, 0, 0x81, 0x02, 0x80};
  std::vector<uint64_t> got;
  forEachSetBit(tail.data(), tail.size(), [&](uint64_t p) { got.push_back(p); });
  EXPECT_EQ(got, (std::vector<uint64_t>{64, 71, 73, 87}));
}

TEST(BitmapWalk, WithRowBytesPassesTheSizeEitherWay) {
  for (size_t rowBytes : {1, 2, 3, 4, 8, 12, 16, 24, 32, 64}) {
    size_t seen = 0;
    withRowBytes(rowBytes, [&](auto bytes) { seen = static_cast<size_t>(bytes); });
    EXPECT_EQ(seen, rowBytes);
  }
}

}  // namespace
}  // namespace zen
