// The blocks scheme's parts (ops/blocks_wire.h): geometry, the exact bytes of push and pull
// parts, round trips, and rejection of truncated, oversized, misplaced and random parts
// (test/fuzz/blocks_push_fuzz.cc and blocks_pull_fuzz.cc go further).
#include "ops/blocks_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace zen::ops {
namespace {

// 600 fp32 rows of 1 element over 2 ranks: blocks of 256 rows (32 mask bytes), blocks 0-1 owned
// by rank 0, block 2 (88 rows) by rank 1.
const BlockGeometry kGeometry(600, 1, 2, sizeof(float));
const std::vector<int64_t> kIndices = {3, 255, 400, 599};

std::vector<float> values(size_t rows) {
  std::vector<float> v(rows);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + 0.25f;
  return v;
}

std::vector<ByteVector> push() {
  return encodeBlocksPush(kGeometry, kIndices.data(), values(kIndices.size()).data(),
                          kIndices.size());
}

// Rank 0's pull part: the load, then its two blocks as pushed.
ByteVector pull(uint64_t load = 3) {
  ByteVector out;
  startBlocksPull(load, &out);
  const ByteVector blocks = push()[0];
  out.insert(out.end(), blocks.begin(), blocks.end());
  return out;
}

Status decodePush(const ByteVector& v, int owner = 0, const BlockGeometry& g = kGeometry) {
  return decodeBlocksPush(v.data(), v.size(), g, owner).status();
}
Status decodePull(const ByteVector& v, int owner = 0, const BlockGeometry& g = kGeometry) {
  return decodeBlocksPull(v.data(), v.size(), g, owner).status();
}

void expectInvalid(const Status& s, const std::string& what) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.toString();
}

// The rows of a decoded part as (index, value).
std::vector<std::pair<int64_t, float>> rowsOf(const BlockGeometry& g, const BlocksPartView& v) {
  std::vector<std::pair<int64_t, float>> rows;
  forEachBlock(g, v, [&](int64_t block, const uint8_t* mask, const uint8_t* data) {
    for (int64_t r = 0; r < g.rowsIn(block); ++r) {
      if (!maskBit(mask, r)) continue;
      float x;
      std::memcpy(&x, data + r * 4, 4);
      rows.emplace_back(block * g.rowsPerBlock + r, x);
    }
  });
  return rows;
}

TEST(BlocksWire, Geometry) {
  EXPECT_EQ(kGeometry.rowsPerBlock, 256);
  EXPECT_EQ(kGeometry.numBlocks, 3);
  EXPECT_EQ(kGeometry.blocksPerOwner, 2);
  EXPECT_EQ(kGeometry.maskBytes, 32u);
  EXPECT_EQ(kGeometry.rowsIn(2), 88);
  EXPECT_EQ(kGeometry.blockBytes(0), 4u + 32 + 1024);
  EXPECT_EQ(kGeometry.blockBytes(2), 4u + 32 + 88 * 4);
  const BlockGeometry wide(20, 100, 3, 2);  // 3 rows a block, 7 blocks, 3 per owner
  EXPECT_EQ(wide.rowsPerBlock, 3);
  EXPECT_EQ(wide.numBlocks, 7);
  EXPECT_EQ(wide.maskBytes, 1u);
  EXPECT_EQ(wide.firstBlock(2), 6);
  EXPECT_EQ(wide.firstBlock(3), 7);
  EXPECT_EQ(wide.rowsIn(6), 2);
  const BlockGeometry long_rows(5, 1000, 4, 8);  // one row a block
  EXPECT_EQ(long_rows.rowsPerBlock, 1);
  EXPECT_EQ(long_rows.firstBlock(3), 5);  // rank 3 owns nothing
}

TEST(BlocksWire, PushBytesAndRoundTrip) {
  const std::vector<ByteVector> parts = push();
  ASSERT_EQ(parts.size(), 2u);
  ASSERT_EQ(parts[0].size(), 2 * kGeometry.blockBytes(0));
  ASSERT_EQ(parts[1].size(), kGeometry.blockBytes(2));
  uint32_t id;
  std::memcpy(&id, parts[0].data() + kGeometry.blockBytes(0), 4);
  EXPECT_EQ(id, 1u);
  EXPECT_EQ(parts[0][4], 1u << 3);       // row 3 of block 0
  EXPECT_EQ(parts[0][4 + 31], 1u << 7);  // row 255
  EXPECT_EQ(parts[1][4 + 10], 1u << 7);  // row 599 = block 2, row 87
  float x;
  std::memcpy(&x, parts[0].data() + 36 + 255 * 4, 4);
  EXPECT_EQ(x, 1.25f);

  const Result<BlocksPartView> v0 =
      decodeBlocksPush(parts[0].data(), parts[0].size(), kGeometry, 0);
  ASSERT_TRUE(v0.isOk()) << v0.status().toString();
  EXPECT_EQ(v0.value().count, 2);
  const Result<BlocksPartView> v1 =
      decodeBlocksPush(parts[1].data(), parts[1].size(), kGeometry, 1);
  ASSERT_TRUE(v1.isOk()) << v1.status().toString();
  std::vector<std::pair<int64_t, float>> rows = rowsOf(kGeometry, v0.value());
  const std::vector<std::pair<int64_t, float>> more = rowsOf(kGeometry, v1.value());
  rows.insert(rows.end(), more.begin(), more.end());
  const std::vector<std::pair<int64_t, float>> expected = {
      {3, 0.25f}, {255, 1.25f}, {400, 2.25f}, {599, 3.25f}};
  EXPECT_EQ(rows, expected);
  EXPECT_TRUE(decodePush({}).isOk());  // a rank with nothing for this owner
}

TEST(BlocksWire, PullBytesAndRoundTrip) {
  const ByteVector p = pull();
  ASSERT_EQ(p.size(), 8 + 2 * kGeometry.blockBytes(0));
  const Result<BlocksPartView> v = decodeBlocksPull(p.data(), p.size(), kGeometry, 0);
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_EQ(v.value().load, 3u);
  EXPECT_EQ(v.value().count, 2);
  EXPECT_EQ(rowsOf(kGeometry, v.value()).size(), 3u);
  ByteVector empty;
  startBlocksPull(0, &empty);
  EXPECT_EQ(empty.size(), 8u);
  EXPECT_TRUE(decodePull(empty, 1).isOk());
}

// Every cut that is not a block boundary, and 1..40 bytes appended, is rejected.
TEST(BlocksWire, RejectsWrongLengths) {
  const ByteVector good = push()[0];
  const size_t block = kGeometry.blockBytes(0);
  for (size_t len = 0; len < good.size(); ++len) {
    const ByteVector prefix(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len));
    if (len % block == 0) {
      EXPECT_TRUE(decodePush(prefix).isOk()) << len;
    } else {
      expectInvalid(decodePush(prefix), "push prefix of " + std::to_string(len) + " bytes");
    }
  }
  const ByteVector pulled = pull();
  for (size_t len = 0; len < pulled.size(); ++len) {
    const ByteVector prefix(pulled.begin(), pulled.begin() + static_cast<std::ptrdiff_t>(len));
    if (len >= 8 && (len - 8) % block == 0) continue;  // a shorter valid part
    expectInvalid(decodePull(prefix), "pull prefix of " + std::to_string(len) + " bytes");
  }
  for (size_t extra = 1; extra <= 40; ++extra) {
    for (const ByteVector& base : {good, ByteVector{}}) {
      ByteVector longer = base;
      longer.resize(base.size() + extra, 0);
      expectInvalid(decodePush(longer), std::to_string(extra) + " trailing bytes");
    }
    ByteVector longer = pulled;
    longer.resize(pulled.size() + extra, 0);
    expectInvalid(decodePull(longer), std::to_string(extra) + " trailing pull bytes");
  }
}

TEST(BlocksWire, RejectsBadIds) {
  const std::vector<ByteVector> parts = push();
  expectInvalid(decodePush(parts[1], 0), "block 2 sent to owner 0");
  expectInvalid(decodePush(parts[0], 1), "blocks 0-1 sent to owner 1");
  const size_t block = kGeometry.blockBytes(0);
  ByteVector swapped(parts[0].begin() + static_cast<std::ptrdiff_t>(block), parts[0].end());
  swapped.insert(swapped.end(), parts[0].begin(),
                 parts[0].begin() + static_cast<std::ptrdiff_t>(block));
  expectInvalid(decodePush(swapped), "descending ids");
  ByteVector twice(parts[0].begin(), parts[0].begin() + static_cast<std::ptrdiff_t>(block));
  twice.insert(twice.end(), parts[0].begin(),
               parts[0].begin() + static_cast<std::ptrdiff_t>(block));
  expectInvalid(decodePush(twice), "repeated id");
  for (uint32_t id : {3u, 1000u, 0xffffffffu}) {
    ByteVector v = parts[1];
    std::memcpy(v.data(), &id, 4);
    expectInvalid(decodePush(v, 1), "id " + std::to_string(id));
  }
  expectInvalid(decodePush(parts[0], 2), "owner 2 of 2 ranks");
  expectInvalid(decodePush(parts[0], -1), "owner -1");
}

TEST(BlocksWire, RejectsBadMasks) {
  ByteVector v = push()[0];
  std::memset(v.data() + 4, 0, 32);
  expectInvalid(decodePush(v), "empty mask");
  ByteVector last = push()[1];  // block 2: rows 0-87, mask bytes 11-31 and bits past 87 padding
  last[4 + 11] = 1;
  expectInvalid(decodePush(last, 1), "mask bit 88");
  last = push()[1];
  last[4 + 31] = 0x80;
  expectInvalid(decodePush(last, 1), "mask bit 255");
  last = push()[1];
  last[4 + 10] |= 0x7f;  // rows 80-86: fine
  EXPECT_TRUE(decodePush(last, 1).isOk());

  const BlockGeometry wide(20, 100, 3, 2);  // 3 rows a block: mask bits 3-7 are padding
  const int64_t rows[] = {0, 2};
  const std::vector<uint16_t> data(200, 7);
  ByteVector p = encodeBlocksPush(wide, rows, data.data(), 2)[0];
  ASSERT_TRUE(decodePush(p, 0, wide).isOk());
  p[4] |= 1 << 3;
  expectInvalid(decodePush(p, 0, wide), "mask bit 3 of 3 rows");
}

TEST(BlocksWire, RejectsBadLoads) {
  expectInvalid(decodePull(pull(1)), "load 1 for 2 blocks");
  EXPECT_TRUE(decodePull(pull(2)).isOk());
  EXPECT_TRUE(decodePull(pull(4)).isOk());  // 2 ranks x 2 blocks
  expectInvalid(decodePull(pull(5)), "load 5 of at most 4");
  expectInvalid(decodePull(pull(~uint64_t{0})), "load 2^64 - 1");
  expectInvalid(decodePull(ByteVector{1, 0, 0}), "no load");
}

TEST(BlocksWire, RejectsBadGeometry) {
  const ByteVector p = push()[0];
  expectInvalid(decodePush(p, 0, BlockGeometry(600, 1, 2, 0)), "0-byte elements");
  expectInvalid(decodePush(p, 0, BlockGeometry(int64_t{1} << 42, 1, 2, 4)), "2^34 blocks");
  expectInvalid(decodeBlocksPush(nullptr, 4, kGeometry, 0).status(), "null buffer");
}

// Random bytes and single-bit flips: ok or kInvalidArgument, nothing else; what passes walks
// inside the buffer (ASan builds check).
TEST(BlocksWire, SurvivesGarbage) {
  std::mt19937_64 rng(13);
  const BlockGeometry small(10, 30, 2, 1);  // 9-row blocks of 276 bytes, then one of 36
  const int64_t rows[] = {1, 8, 9};
  const std::vector<uint8_t> data(90, 1);
  const std::vector<ByteVector> parts = encodeBlocksPush(small, rows, data.data(), 3);
  for (int trial = 0; trial < 4000; ++trial) {
    const int owner = trial % 2;
    ByteVector v(rng() % 400);
    for (uint8_t& b : v) b = static_cast<uint8_t>(rng() % 4 == 0 ? rng() : 0);
    if (trial % 4 < 2 && v.size() >= 4) std::memcpy(v.data(), parts[owner].data(), 4);
    for (bool isPull : {false, true}) {
      const Result<BlocksPartView> r = isPull ? decodeBlocksPull(v.data(), v.size(), small, owner)
                                              : decodeBlocksPush(v.data(), v.size(), small, owner);
      ASSERT_TRUE(r.isOk() || r.status().code() == StatusCode::kInvalidArgument)
          << r.status().toString();
      if (r.isOk()) rowsOf(small, r.value());
    }
  }
  for (int owner = 0; owner < 2; ++owner) {
    const ByteVector& good = parts[owner];
    ASSERT_TRUE(decodePush(good, owner, small).isOk());
    for (size_t bit = 0; bit < good.size() * 8; ++bit) {
      ByteVector v = good;
      v[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      const Status s = decodePush(v, owner, small);
      EXPECT_TRUE(s.isOk() || s.code() == StatusCode::kInvalidArgument) << s.toString();
    }
  }
}

}  // namespace
}  // namespace zen::ops
