#include "core/elias_fano.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

namespace zen {
namespace {

struct Code {
  EliasFanoShape shape;
  std::vector<uint8_t> low;
  std::vector<uint8_t> high;
};

Code encodeAll(const std::vector<uint64_t>& values, uint64_t universe) {
  Code c;
  c.shape = eliasFanoShape(universe, values.size());
  c.low.assign(c.shape.lowBytes, 0);
  c.high.assign(c.shape.highBytes, 0);
  EliasFanoWriter writer(c.shape, c.low.data(), c.high.data());
  for (const uint64_t v : values) writer.push(v);
  writer.finish();
  return c;
}

std::vector<uint64_t> decodeAll(const Code& c, size_t count) {
  EliasFanoReader reader(c.shape, c.low.data(), c.high.data());
  std::vector<uint64_t> out(count);
  for (uint64_t& v : out) v = reader.next();
  return out;
}

// count distinct values below universe, ascending.
std::vector<uint64_t> ascending(size_t count, uint64_t universe, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::set<uint64_t> picked;
  while (picked.size() < count) picked.insert(rng() % universe);
  return {picked.begin(), picked.end()};
}

TEST(EliasFano, ShapeFollowsTheDefinition) {
  EXPECT_EQ(eliasFanoShape(1000, 0).highBits, 0u);
  EXPECT_EQ(eliasFanoShape(1000, 0).lowBytes, 0u);
  const EliasFanoShape s = eliasFanoShape(1000, 10);  // u / m = 100: L = 6
  EXPECT_EQ(s.lowBits, 6);
  EXPECT_EQ(s.highBits, 10u + (999u >> 6));
  EXPECT_EQ(s.lowBytes, 8u);  // 60 bits
  EXPECT_EQ(s.highBytes, (s.highBits + 7) / 8);
  EXPECT_EQ(eliasFanoShape(1000, 1000).lowBits, 0);  // every value: the bitvector alone
  EXPECT_EQ(eliasFanoShape(1000, 600).lowBits, 0);
  EXPECT_EQ(eliasFanoShape(uint64_t{1} << 32, 1).lowBits, 32);
}

// Round trips from empty to full, single values at both ends, every low-bit width 0..32, and
// sizes within m (L + 3) bits plus rounding (the bitvector has m + u / 2^L < 3 m bits).
TEST(EliasFano, RoundTripsEveryShape) {
  std::vector<std::pair<std::vector<uint64_t>, uint64_t>> cases = {
      {{}, 10}, {{0}, 1}, {{0}, 1000}, {{999}, 1000}, {{0, 1, 2, 3}, 4}, {{5, 6, 7}, 8}};
  for (int bits = 0; bits <= 32; ++bits) {
    const uint64_t universe = uint64_t{1} << 32;
    const size_t count = static_cast<size_t>(std::min<uint64_t>(universe >> bits, 3000));
    cases.emplace_back(ascending(count, universe, 40 + bits), universe);
  }
  for (const double density : {0.001, 0.01, 0.04, 0.3, 0.7}) {
    const uint64_t universe = 123457;
    cases.emplace_back(ascending(static_cast<size_t>(density * universe), universe, 7), universe);
  }
  for (const auto& [values, universe] : cases) {
    const Code c = encodeAll(values, universe);
    EXPECT_EQ(decodeAll(c, values.size()), values) << values.size() << " of " << universe;
    EXPECT_TRUE(
        decodeEliasFano(c.shape, c.low.data(), c.high.data(), universe, values.size()).isOk());
    const double m = static_cast<double>(values.size());
    const double bits = 8.0 * static_cast<double>(c.shape.lowBytes + c.shape.highBytes);
    EXPECT_LE(bits, m * (c.shape.lowBits + 3) + 16) << values.size() << " of " << universe;
  }
}

// A code's size against the log2 C(u, m) bits any code of such a set needs: within 0.6 bits
// per value (plus rounding) at the sparse parts zen's Pull sends (denser ones go as bitmaps).
TEST(EliasFano, StaysNearTheInformationBound) {
  const uint64_t universe = 4194304;  // a part of 2^24 rows over 4 ranks
  for (const double density : {0.005, 0.01, 0.04}) {
    const auto m = static_cast<uint64_t>(density * static_cast<double>(universe));
    const EliasFanoShape s = eliasFanoShape(universe, m);
    const double bits = 8.0 * static_cast<double>(s.lowBytes + s.highBytes);
    const double bound =
        (std::lgamma(universe + 1.0) - std::lgamma(m + 1.0) - std::lgamma(universe - m + 1.0)) /
        std::log(2.0);
    EXPECT_LE(bits / static_cast<double>(m), bound / static_cast<double>(m) + 0.6) << density;
  }
}

TEST(EliasFano, CheckRefusesCorruptCodes) {
  const uint64_t universe = 5100;  // L = 5: 259 bitvector bits, 500 low bits
  const std::vector<uint64_t> values = ascending(100, universe, 3);
  const Code good = encodeAll(values, universe);
  ASSERT_TRUE(decodeEliasFano(good.shape, good.low.data(), good.high.data(), universe, 100).isOk());
  const auto refused = [&](const Code& c, uint64_t count, const char* what) {
    const Status s = decodeEliasFano(c.shape, c.low.data(), c.high.data(), universe, count);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what;
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  refused(good, 99, "100 values in its bitvector, 99 expected");
  Code extra = good;
  extra.high[0] ^= 0xff;  // more or fewer set bits
  if (decodeEliasFano(extra.shape, extra.low.data(), extra.high.data(), universe, 100).isOk()) {
    ADD_FAILURE() << "a flipped bitvector byte passed";
  }
  Code past = good;  // a set bit past the bitvector, one fewer inside it
  ASSERT_NE(past.shape.highBits % 8, 0u);
  past.high.back() |= static_cast<uint8_t>(0x80);
  uint8_t& first = past.high[0];
  first = static_cast<uint8_t>(first & (first - 1));
  refused(past, 100, "past its");
  Code lowPast = good;  // L = 5: 500 low bits, the last byte's top 4 are padding
  ASSERT_EQ(lowPast.shape.lowBits, 5);
  lowPast.low.back() |= static_cast<uint8_t>(0x80);
  refused(lowPast, 100, "low bits set past its 100 fields");
  // Same high part, low bits equal: two values alike.
  const Code twins = encodeAll({10, 11}, 20000);  // L = 13: both high 0
  Code same = twins;
  same.low.assign(same.low.size(), 0);
  {
    EliasFanoWriter w(same.shape, same.low.data(), same.high.data());
    same.high.assign(same.high.size(), 0);
    w.push(10);
    w.push(10);
    w.finish();
  }
  const Status s = decodeEliasFano(same.shape, same.low.data(), same.high.data(), 20000, 2);
  EXPECT_NE(s.message().find("not strictly ascending at 1"), std::string::npos) << s.message();
  // A value at or above the universe: the last high part one too far.
  const Code top = encodeAll({4999}, 5000);
  const Status over = decodeEliasFano(top.shape, top.low.data(), top.high.data(), 4000, 1);
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zen
