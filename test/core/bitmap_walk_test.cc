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

TEST(BitmapWalk, WithRowBytesPassesTheSizeEitherWay) {
  for (size_t rowBytes : {1, 2, 3, 4, 8, 12, 16, 24, 32, 64}) {
    size_t seen = 0;
    withRowBytes(rowBytes, [&](auto bytes) { seen = static_cast<size_t>(bytes); });
    EXPECT_EQ(seen, rowBytes);
  }
}

}  // namespace
}  // namespace zen
