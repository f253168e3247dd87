// HC's merged-set messages (ops/hc_wire.h): the exact bytes of both forms, round trips, and
// rejection of truncated, oversized, inconsistent and random messages (test/fuzz/hc_set_fuzz.cc
// goes further).
#include "ops/hc_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace zen::ops {
namespace {

// 13 rows (bitmap padding in the second byte) of 3 fp32 accumulator values.
const HcSetFormat kFormat{13, 3, sizeof(float)};

std::vector<float> rowValues(size_t rows) {
  std::vector<float> v(rows * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f + 1.0f;
  return v;
}

ByteVector sparseSet(const HcSetFormat& f = kFormat) {
  const std::vector<int64_t> indices = {0, 4, 12};
  const std::vector<float> values = rowValues(indices.size());
  ByteVector out;
  encodeHcSparse(f, indices.data(), values.data(), indices.size(), &out);
  return out;
}

// Rows 1, 2 and 12 occupied; the others zero.
ByteVector denseSet() {
  std::vector<float> values(13 * 3, 0.0f);
  for (int r : {1, 2, 12}) {
    for (int e = 0; e < 3; ++e) values[r * 3 + e] = static_cast<float>(r * 10 + e);
  }
  const uint64_t occupancy = (1u << 1) | (1u << 2) | (1u << 12);
  ByteVector out;
  encodeHcDense(kFormat, &occupancy, values.data(), &out);
  return out;
}

Status decode(const ByteVector& v, const HcSetFormat& f = kFormat) {
  return decodeHcSet(v.data(), v.size(), f).status();
}

void expectInvalid(const Status& s, const std::string& what) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.toString();
}

ByteVector withU64(ByteVector v, size_t offset, uint64_t value) {
  std::memcpy(v.data() + offset, &value, 8);
  return v;
}

TEST(HcWire, SparseBytesAndRoundTrip) {
  const ByteVector p = sparseSet();
  ASSERT_EQ(p.size(), kFormat.sparseBytes(3));
  EXPECT_EQ(p.size(), 16u + 3 * (4 + 12));
  EXPECT_EQ(p[0], kHcSparseForm);
  for (int b = 1; b < 8; ++b) EXPECT_EQ(p[b], 0) << b;
  uint64_t count;
  std::memcpy(&count, p.data() + 8, 8);
  EXPECT_EQ(count, 3u);
  uint32_t third;
  std::memcpy(&third, p.data() + 16 + 8, 4);
  EXPECT_EQ(third, 12u);

  const Result<HcSetView> v = decodeHcSet(p.data(), p.size(), kFormat);
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_FALSE(v.value().dense);
  EXPECT_EQ(v.value().count, 3u);
  EXPECT_EQ(v.value().index(0), 0);
  EXPECT_EQ(v.value().index(1), 4);
  EXPECT_EQ(v.value().index(2), 12);
  const std::vector<float> values = rowValues(3);
  EXPECT_EQ(std::memcmp(v.value().values, values.data(), values.size() * 4), 0);
}

TEST(HcWire, DenseBytesAndRoundTrip) {
  const ByteVector p = denseSet();
  ASSERT_EQ(p.size(), kFormat.denseBytes());
  EXPECT_EQ(p.size(), 16u + 2 + 13 * 12);
  EXPECT_EQ(p[0], kHcDenseForm);
  EXPECT_EQ(p[16], 0b110);
  EXPECT_EQ(p[17], 0b10000);
  const Result<HcSetView> v = decodeHcSet(p.data(), p.size(), kFormat);
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_TRUE(v.value().dense);
  EXPECT_EQ(v.value().count, 13u);
  EXPECT_EQ(v.value().bitmap, p.data() + 16);
  float x;
  std::memcpy(&x, v.value().values + (12 * 3 + 2) * 4, 4);
  EXPECT_EQ(x, 122.0f);
}

TEST(HcWire, EmptySetsAndEmptyTensor) {
  ByteVector p;
  encodeHcSparse(kFormat, nullptr, nullptr, 0, &p);
  EXPECT_EQ(p.size(), 16u);
  EXPECT_TRUE(decode(p).isOk());
  const HcSetFormat none{0, 3, 4};
  encodeHcDense(none, nullptr, nullptr, &p);
  EXPECT_EQ(p.size(), 16u);
  const Result<HcSetView> v = decodeHcSet(p.data(), p.size(), none);
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_TRUE(v.value().dense);
  EXPECT_EQ(v.value().count, 0u);
}

// Past 2^32 rows the indices take 8 bytes; the dense size is never allocated to check them.
TEST(HcWire, WideIndices) {
  const HcSetFormat wide{(int64_t{1} << 32) + 5, 1, 8};
  EXPECT_EQ(wide.indexBytes(), 8u);
  const std::vector<int64_t> indices = {3, int64_t{1} << 32, (int64_t{1} << 32) + 4};
  const std::vector<int64_t> values = {1, 2, 3};
  ByteVector p;
  encodeHcSparse(wide, indices.data(), values.data(), 3, &p);
  EXPECT_EQ(p.size(), 16u + 3 * 16);
  const Result<HcSetView> v = decodeHcSet(p.data(), p.size(), wide);
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_EQ(v.value().index(2), (int64_t{1} << 32) + 4);
  const HcSetFormat narrower{int64_t{1} << 32, 1, 8};  // 4-byte indices: sizes disagree
  expectInvalid(decode(p, narrower), "8-byte indices read as 4-byte");
  const HcSetFormat fewer{(int64_t{1} << 32) + 4, 1, 8};
  expectInvalid(decode(p, fewer), "index past the rows");
}

TEST(HcWire, RejectsWrongLengths) {
  for (const ByteVector& good : {sparseSet(), denseSet()}) {
    ASSERT_TRUE(decode(good).isOk());
    for (size_t len = 0; len < good.size(); ++len) {
      const ByteVector prefix(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len));
      expectInvalid(decode(prefix), "prefix of " + std::to_string(len) + " bytes");
    }
    for (size_t extra = 1; extra <= 40; ++extra) {
      ByteVector longer = good;
      longer.resize(good.size() + extra, 0);
      expectInvalid(decode(longer), std::to_string(extra) + " trailing bytes");
    }
  }
}

TEST(HcWire, RejectsBadCounts) {
  const ByteVector sparse = sparseSet();
  for (uint64_t c : {uint64_t{0}, uint64_t{2}, uint64_t{4}, uint64_t{13}, uint64_t{14},
                     uint64_t{1} << 40, uint64_t{1} << 62, std::numeric_limits<uint64_t>::max()}) {
    expectInvalid(decode(withU64(sparse, 8, c)), "sparse count " + std::to_string(c));
  }
  const ByteVector dense = denseSet();
  for (uint64_t c :
       {uint64_t{0}, uint64_t{12}, uint64_t{14}, std::numeric_limits<uint64_t>::max()}) {
    expectInvalid(decode(withU64(dense, 8, c)), "dense count " + std::to_string(c));
  }
  // More rows than the tensor has, with the bytes to match.
  std::vector<int64_t> indices(14);
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  const std::vector<float> values = rowValues(14);
  ByteVector p;
  encodeHcSparse(kFormat, indices.data(), values.data(), 14, &p);
  expectInvalid(decode(p), "14 rows of 13");
}

TEST(HcWire, RejectsBadHeaders) {
  for (const ByteVector& good : {sparseSet(), denseSet()}) {
    ByteVector v = good;
    v[0] = 2;
    expectInvalid(decode(v), "form 2");
    v[0] = 0xff;
    expectInvalid(decode(v), "form 255");
    for (size_t b = 1; b < 8; ++b) {
      v = good;
      v[b] = 1;
      expectInvalid(decode(v), "reserved byte " + std::to_string(b));
    }
  }
  // A sparse set relabelled dense and the other way round.
  ByteVector v = sparseSet();
  v[0] = kHcDenseForm;
  expectInvalid(decode(v), "sparse bytes as dense");
  v = denseSet();
  v[0] = kHcSparseForm;
  expectInvalid(decode(v), "dense bytes as sparse");
}

TEST(HcWire, RejectsBadIndices) {
  auto withIndex = [](size_t k, uint32_t index) {
    ByteVector v = sparseSet();
    std::memcpy(v.data() + 16 + 4 * k, &index, 4);
    return v;
  };
  expectInvalid(decode(withIndex(2, 13)), "index = numRows");
  expectInvalid(decode(withIndex(2, 0xffffffffu)), "index 2^32 - 1");
  expectInvalid(decode(withIndex(1, 0)), "repeated index");
  expectInvalid(decode(withIndex(1, 12)), "repeated last index");
  expectInvalid(decode(withIndex(0, 5)), "descending indices");
  EXPECT_TRUE(decode(withIndex(1, 11)).isOk());
}

TEST(HcWire, RejectsBadBitmapAndUnoccupiedRows) {
  ByteVector v = denseSet();
  v[17] |= 0x20;  // row 13: padding
  expectInvalid(decode(v), "padding bit 13");
  v = denseSet();
  v[17] |= 0x80;
  expectInvalid(decode(v), "padding bit 15");
  v = denseSet();
  v[16 + 2 + 5 * 12 + 7] = 1;  // row 5 is not occupied
  expectInvalid(decode(v), "values in an unoccupied row");
  v = denseSet();
  v[16] |= 1 << 5;  // now it is: any values are fine
  v[16 + 2 + 5 * 12 + 7] = 1;
  EXPECT_TRUE(decode(v).isOk());
}

TEST(HcWire, RejectsBadFormats) {
  const ByteVector p = sparseSet();
  expectInvalid(decode(p, HcSetFormat{13, 0, 4}), "row size 0");
  expectInvalid(decode(p, HcSetFormat{13, 3, 0}), "value size 0");
  expectInvalid(decode(p, HcSetFormat{-1, 3, 4}), "negative rows");
  expectInvalid(decode(p, HcSetFormat{int64_t{1} << 62, int64_t{1} << 20, 8}), "overflow");
  expectInvalid(decode(p, HcSetFormat{13, 3, 8}), "other value size");
  expectInvalid(decodeHcSet(nullptr, 16, kFormat).status(), "null buffer");
}

// Random bytes and single-bit flips: ok or kInvalidArgument, nothing else.
TEST(HcWire, SurvivesGarbage) {
  std::mt19937_64 rng(11);
  const ByteVector sparse = sparseSet();
  const ByteVector dense = denseSet();
  for (int trial = 0; trial < 4000; ++trial) {
    const ByteVector& good = trial % 2 == 0 ? sparse : dense;
    ByteVector v(rng() % (good.size() + 32));
    for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
    if (trial % 4 < 2 && v.size() >= 16) std::memcpy(v.data(), good.data(), 16);
    const Status s = decode(v);
    EXPECT_TRUE(s.isOk() || s.code() == StatusCode::kInvalidArgument) << s.toString();
  }
  for (const ByteVector& good : {sparse, dense}) {
    for (size_t bit = 0; bit < good.size() * 8; ++bit) {
      ByteVector v = good;
      v[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      const Status s = decode(v);
      EXPECT_TRUE(s.isOk() || s.code() == StatusCode::kInvalidArgument) << s.toString();
    }
  }
}

}  // namespace
}  // namespace zen::ops
