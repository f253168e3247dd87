// The sparse allreduce payloads: round trips, and rejection of truncated, oversized,
// inconsistent and random payloads (the fuzzers in test/fuzz/ go further).
#include "ops/wire_format.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <random>

namespace zen::ops {
namespace {

using Decode = std::function<Status(const uint8_t*, size_t)>;

const RowFormat kF32x3{DataType::kFloat32, 3};

std::vector<float> rows(int64_t count, int64_t rowSize) {
  std::vector<float> v(static_cast<size_t>(count * rowSize));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return v;
}

Status run(const Decode& decode, const ByteVector& payload) {
  return decode(payload.data(), payload.size());
}

void expectInvalid(const Status& s, const std::string& what) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.toString();
}

// Every proper prefix, and the payload with 1..16 bytes appended, must be rejected.
void expectRejectsWrongLengths(const Decode& decode, const ByteVector& good) {
  ASSERT_TRUE(run(decode, good).isOk()) << run(decode, good).toString();
  for (size_t len = 0; len < good.size(); ++len) {
    const ByteVector prefix(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len));
    expectInvalid(run(decode, prefix), "prefix of " + std::to_string(len) + " bytes");
  }
  for (size_t extra = 1; extra <= 16; ++extra) {
    ByteVector longer = good;
    longer.resize(good.size() + extra, 0);
    expectInvalid(run(decode, longer), std::to_string(extra) + " trailing bytes");
  }
}

// Header fields changed one at a time, count included (smaller, larger, huge).
void expectRejectsBadHeaders(const Decode& decode, const ByteVector& good) {
  auto with = [&](size_t offset, const void* value, size_t bytes) {
    ByteVector v = good;
    std::memcpy(v.data() + offset, value, bytes);
    return v;
  };
  const uint8_t badMagic = 'X', badVersion = 99, badKind = 200, badDtype = 9;
  expectInvalid(run(decode, with(0, &badMagic, 1)), "magic");
  expectInvalid(run(decode, with(1, &badVersion, 1)), "version");
  expectInvalid(run(decode, with(2, &badKind, 1)), "kind");
  expectInvalid(run(decode, with(3, &badDtype, 1)), "dtype code");
  uint64_t count;
  std::memcpy(&count, good.data() + 8, 8);
  for (uint64_t c : {count + 1, count + 1000, uint64_t{1} << 40, uint64_t{1} << 62,
                     std::numeric_limits<uint64_t>::max(), count == 0 ? 0 : count - 1}) {
    if (c == count) continue;
    expectInvalid(run(decode, with(8, &c, 8)), "count " + std::to_string(c));
  }
}

// Random bytes (with a valid header prefix half the time) never crash a decoder and never
// come back as anything but ok or kInvalidArgument.
void expectSurvivesGarbage(const Decode& decode, const ByteVector& good) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    ByteVector v(rng() % 200);
    for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
    if (trial % 2 == 0 && v.size() >= 4) std::memcpy(v.data(), good.data(), 4);
    const Status s = run(decode, v);
    EXPECT_TRUE(s.isOk() || s.code() == StatusCode::kInvalidArgument) << s.toString();
  }
  // Single-bit flips of a good payload.
  for (size_t bit = 0; bit < good.size() * 8; bit += 3) {
    ByteVector v = good;
    v[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    const Status s = run(decode, v);
    EXPECT_TRUE(s.isOk() || s.code() == StatusCode::kInvalidArgument) << s.toString();
  }
}

void expectRobust(const Decode& decode, const ByteVector& good) {
  expectRejectsWrongLengths(decode, good);
  expectRejectsBadHeaders(decode, good);
  expectSurvivesGarbage(decode, good);
}

TEST(WireFormat, CountsRoundTripAndLimits) {
  const std::vector<uint64_t> counts = {0, 5, 1u << 20, 7};
  ByteVector p;
  encodeCounts(counts.data(), counts.size(), &p);
  EXPECT_EQ(p.size(), kWireHeaderBytes + 32);
  std::vector<uint64_t> out;
  ASSERT_TRUE(decodeCounts(p.data(), p.size(), 4, 1u << 20, &out).isOk());
  EXPECT_EQ(out, counts);
  expectInvalid(decodeCounts(p.data(), p.size(), 4, (1u << 20) - 1, &out), "count past max");
  expectInvalid(decodeCounts(p.data(), p.size(), 3, 1u << 20, &out), "wrong rank count");
  expectInvalid(decodeCounts(p.data(), p.size(), 5, 1u << 20, &out), "wrong rank count");
  expectRobust(
      [](const uint8_t* d, size_t s) {
        std::vector<uint64_t> o;
        return decodeCounts(d, s, 4, 1u << 20, &o);
      },
      p);
}

TEST(WireFormat, CooIndicesRoundTrip) {
  const std::vector<int64_t> idx = {9, 0, 9, 41};
  const std::vector<float> v = rows(4, 3);
  ByteVector p;
  encodeCooIndices(kF32x3, idx.data(), v.data(), 4, &p);
  EXPECT_EQ(p.size(), cooIndicesBytes(4, 12));
  Result<CooIndicesView> view = decodeCooIndices(p.data(), p.size(), kF32x3, 42, 4);
  ASSERT_TRUE(view.isOk()) << view.status().toString();
  EXPECT_EQ(view.value().count, 4);
  EXPECT_EQ(std::vector<int64_t>(view.value().indices, view.value().indices + 4), idx);
  EXPECT_EQ(std::memcmp(view.value().values, v.data(), 48), 0);
  // Empty payloads are valid.
  encodeCooIndices(kF32x3, nullptr, nullptr, 0, &p);
  EXPECT_TRUE(decodeCooIndices(p.data(), p.size(), kF32x3, 42, 0).isOk());
}

TEST(WireFormat, CooIndicesRejectsBadInput) {
  const std::vector<int64_t> idx = {9, 0, 41};
  const std::vector<float> v = rows(3, 3);
  ByteVector p;
  encodeCooIndices(kF32x3, idx.data(), v.data(), 3, &p);
  expectInvalid(decodeCooIndices(p.data(), p.size(), kF32x3, 41, 3).status(), "index range");
  expectInvalid(decodeCooIndices(p.data(), p.size(), kF32x3, 42, 2).status(), "max count");
  expectInvalid(
      decodeCooIndices(p.data(), p.size(), RowFormat{DataType::kFloat32, 2}, 42, 3).status(),
      "row size");
  expectInvalid(
      decodeCooIndices(p.data(), p.size(), RowFormat{DataType::kInt32, 3}, 42, 3).status(),
      "dtype");
  const int64_t negative = -1;
  ByteVector bad = p;
  std::memcpy(bad.data() + kWireHeaderBytes, &negative, 8);
  expectInvalid(decodeCooIndices(bad.data(), bad.size(), kF32x3, 42, 3).status(), "negative");
  // Misaligned buffers are refused rather than read through misaligned pointers.
  std::vector<uint8_t> shifted(p.size() + 1);
  std::memcpy(shifted.data() + 1, p.data(), p.size());
  expectInvalid(decodeCooIndices(shifted.data() + 1, p.size(), kF32x3, 42, 3).status(),
                "alignment");
  expectRobust(
      [](const uint8_t* d, size_t s) { return decodeCooIndices(d, s, kF32x3, 42, 3).status(); }, p);
}

TEST(WireFormat, CooPositionsRoundTripPaddingAndOrder) {
  for (int64_t count : {0, 1, 2, 5}) {
    std::vector<uint32_t> pos(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) pos[i] = static_cast<uint32_t>(3 * i + 1);
    const std::vector<float> v = rows(count, 3);
    ByteVector p;
    p.assign(300, 0xee);  // reused memory: the padding must still come out zero
    encodeCooPositions(kF32x3, pos.data(), v.data(), count, &p);
    Result<CooPositionsView> view = decodeCooPositions(p.data(), p.size(), kF32x3, 16, 16, true);
    ASSERT_TRUE(view.isOk()) << view.status().toString();
    EXPECT_EQ(view.value().count, count);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(view.value().values) % 8, 0u);
    if (count > 0) {
      EXPECT_EQ(std::memcmp(view.value().positions, pos.data(), count * 4), 0);
      EXPECT_EQ(std::memcmp(view.value().values, v.data(), count * 12), 0);
    }
  }
  const std::vector<uint32_t> pos = {4, 2, 7};
  const std::vector<float> v = rows(3, 3);
  ByteVector p;
  encodeCooPositions(kF32x3, pos.data(), v.data(), 3, &p);
  EXPECT_TRUE(decodeCooPositions(p.data(), p.size(), kF32x3, 8, 3, false).isOk());
  expectInvalid(decodeCooPositions(p.data(), p.size(), kF32x3, 8, 3, true).status(), "order");
  expectInvalid(decodeCooPositions(p.data(), p.size(), kF32x3, 7, 3, false).status(), "bound");
  expectInvalid(decodeCooPositions(p.data(), p.size(), kF32x3, 8, 2, false).status(), "max");
  ByteVector badPad = p;
  badPad[kWireHeaderBytes + 12] = 1;  // the 4 padding bytes after 3 positions
  expectInvalid(decodeCooPositions(badPad.data(), badPad.size(), kF32x3, 8, 3, false).status(),
                "padding");
  expectRobust([](const uint8_t* d,
                  size_t s) { return decodeCooPositions(d, s, kF32x3, 8, 3, false).status(); },
               p);
}

TEST(WireFormat, BitmapPartRoundTripAndChecks) {
  const RowFormat f{DataType::kFloat16, 1};
  const uint64_t bits = 21;
  const uint8_t bitmap[3] = {0x05, 0x80, 0x10};  // positions 0, 2, 15, 20
  const uint16_t values[4] = {1, 2, 3, 4};
  ByteVector p;
  encodeBitmapPart(f, bitmap, bits, values, 4, &p);
  EXPECT_EQ(p.size(), bitmapPartBytes(bits, 4, 2));
  Result<BitmapPartView> view = decodeBitmapPart(p.data(), p.size(), f, bits);
  ASSERT_TRUE(view.isOk()) << view.status().toString();
  EXPECT_EQ(view.value().count, 4);
  EXPECT_EQ(view.value().bitmapBytes, 3u);
  EXPECT_EQ(std::memcmp(view.value().bitmap, bitmap, 3), 0);
  EXPECT_EQ(std::memcmp(view.value().values, values, 8), 0);
  expectInvalid(decodeBitmapPart(p.data(), p.size(), f, 20).status(), "bits");

  const uint8_t padded[3] = {0x05, 0x80, 0x30};  // bit 21 lies past the 21 positions
  ByteVector bad;
  encodeBitmapPart(f, padded, bits, values, 4, &bad);
  expectInvalid(decodeBitmapPart(bad.data(), bad.size(), f, bits).status(), "padding bit");
  const uint8_t fiveBits[3] = {0x07, 0x80, 0x10};
  encodeBitmapPart(f, fiveBits, bits, values, 4, &bad);
  expectInvalid(decodeBitmapPart(bad.data(), bad.size(), f, bits).status(), "popcount");
  expectRobust([&](const uint8_t* d, size_t s) { return decodeBitmapPart(d, s, f, bits).status(); },
               p);
}

// An Elias-Fano part of `positions` (ascending, below universe) and `values`.
ByteVector eliasFanoPart(const RowFormat& f,
                         uint64_t universe,
                         const std::vector<uint64_t>& positions,
                         const void* values) {
  ByteVector p;
  EliasFanoPartSlots slots =
      startEliasFanoPart(f, universe, static_cast<int64_t>(positions.size()), &p);
  for (const uint64_t pos : positions) slots.positions.push(pos);
  slots.positions.finish();
  if (!positions.empty()) std::memcpy(slots.values, values, positions.size() * f.rowBytes());
  return p;
}

TEST(WireFormat, EliasFanoPartRoundTripAndChecks) {
  const RowFormat f{DataType::kFloat16, 1};
  const uint64_t universe = 1000;  // 12 positions: L = 6, 72 low bits, 27 bitvector bits
  const std::vector<uint64_t> positions = {0, 3, 64, 65, 130, 400, 401, 402, 700, 900, 998, 999};
  const uint16_t values[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const ByteVector p = eliasFanoPart(f, universe, positions, values);
  std::vector<uint32_t> scratch;  // the decoded positions
  EXPECT_EQ(p.size(), eliasFanoPartBytes(universe, 12, 2));
  EXPECT_EQ(p.size(), 16u + 8 + 16 + 8 + 24);
  Result<EliasFanoPartView> view = decodeEliasFanoPart(p.data(), p.size(), f, universe, &scratch);
  ASSERT_TRUE(view.isOk()) << view.status().toString();
  EXPECT_EQ(view.value().count, 12);
  EliasFanoReader reader(view.value().shape, view.value().low, view.value().high);
  for (size_t k = 0; k < positions.size(); ++k) {
    EXPECT_EQ(reader.next(), positions[k]);
    EXPECT_EQ(view.value().positions[k], positions[k]);
  }
  EXPECT_EQ(std::memcmp(view.value().values, values, 24), 0);
  expectInvalid(decodeEliasFanoPart(p.data(), p.size(), f, 999, &scratch).status(), "universe");
  // An empty part: the header, the universe and no arrays.
  const ByteVector empty = eliasFanoPart(f, universe, {}, nullptr);
  EXPECT_EQ(empty.size(), 24u);
  EXPECT_TRUE(decodeEliasFanoPart(empty.data(), empty.size(), f, universe, &scratch).isOk());

  const auto refused = [&](ByteVector bad, const std::string& what) {
    const Status s = decodeEliasFanoPart(bad.data(), bad.size(), f, universe, &scratch).status();
    expectInvalid(s, what);
    EXPECT_NE(s.message().find(what), std::string::npos) << s.toString();
  };
  const std::vector<uint64_t> twice = {0, 3, 64, 64, 130, 400, 401, 402, 700, 900, 998, 999};
  refused(eliasFanoPart(f, universe, twice, values), "not strictly ascending at 3");
  ByteVector padding = p;
  padding[16 + 8 + 9] = 1;  // the low array's 9 bytes, padded to 16
  refused(padding, "non-zero padding");
  ByteVector highPast = p;  // a value's bit moved past the 27-bit bitvector (to bit 31)
  uint8_t& first = highPast[16 + 8 + 16];
  first = static_cast<uint8_t>(first & (first - 1));
  highPast[16 + 8 + 16 + 3] |= 0x80;
  refused(highPast, "past its 27-bit bitvector");
  // Universes past 2^32 are refused (positions are 32-bit), even when the caller expects one.
  const uint64_t huge = (uint64_t{1} << 32) + 1;
  ByteVector far = p;
  std::memcpy(far.data() + 16, &huge, 8);
  expectInvalid(decodeEliasFanoPart(far.data(), far.size(), f, huge, &scratch).status(),
                "huge universe");
  expectRobust([&](const uint8_t* d,
                   size_t s) { return decodeEliasFanoPart(d, s, f, universe, &scratch).status(); },
               p);
}

TEST(WireFormat, DenseRangeRoundTripAndLimit) {
  const std::vector<float> v = rows(4, 3);
  ByteVector p;
  encodeDenseRange(kF32x3, 6, v.data(), 4, &p);
  Result<DenseRangeView> view = decodeDenseRange(p.data(), p.size(), kF32x3, 10);
  ASSERT_TRUE(view.isOk()) << view.status().toString();
  EXPECT_EQ(view.value().begin, 6u);
  EXPECT_EQ(view.value().count, 4);
  EXPECT_EQ(std::memcmp(view.value().values, v.data(), 48), 0);
  expectInvalid(decodeDenseRange(p.data(), p.size(), kF32x3, 9).status(), "past limit");
  ByteVector bad = p;
  const uint64_t huge = std::numeric_limits<uint64_t>::max() - 1;
  std::memcpy(bad.data() + kWireHeaderBytes, &huge, 8);
  expectInvalid(decodeDenseRange(bad.data(), bad.size(), kF32x3, 10).status(), "begin overflow");
  expectRobust(
      [](const uint8_t* d, size_t s) { return decodeDenseRange(d, s, kF32x3, 10).status(); }, p);
}

TEST(WireFormat, BlocksRoundTripAndChecks) {
  const RowFormat f{DataType::kBFloat16, kDefaultBlockElements};
  const std::vector<uint32_t> ids = {0, 3, 9};
  std::vector<uint16_t> values(3 * kDefaultBlockElements);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint16_t>(i);
  ByteVector p;
  encodeBlocks(f, ids.data(), values.data(), 3, &p);
  EXPECT_EQ(p.size(), blocksBytes(3, 512));
  Result<BlocksView> view = decodeBlocks(p.data(), p.size(), f, 10);
  ASSERT_TRUE(view.isOk()) << view.status().toString();
  EXPECT_EQ(view.value().count, 3);
  EXPECT_EQ(std::memcmp(view.value().ids, ids.data(), 12), 0);
  EXPECT_EQ(std::memcmp(view.value().values, values.data(), values.size() * 2), 0);
  expectInvalid(decodeBlocks(p.data(), p.size(), f, 9).status(), "id range");
  expectInvalid(decodeBlocks(p.data(), p.size(), f, 2).status(), "more blocks than exist");
  const std::vector<uint32_t> unsorted = {3, 3, 9};
  ByteVector bad;
  encodeBlocks(f, unsorted.data(), values.data(), 3, &bad);
  expectInvalid(decodeBlocks(bad.data(), bad.size(), f, 10).status(), "repeated id");
  expectInvalid(decodeBlocks(p.data(), p.size(), RowFormat{DataType::kBFloat16, 128}, 10).status(),
                "block length");
  expectRobust([&](const uint8_t* d, size_t s) { return decodeBlocks(d, s, f, 10).status(); }, p);
}

TEST(WireFormat, CallInfoRoundTripAndChecks) {
  CallInfo info;
  info.rank = 3;
  info.op = ReduceOp::kAverage;
  info.scheme = Scheme::kZen;
  info.denseOutput = true;
  info.dtype = DataType::kBFloat16;
  info.rowSize = 5;
  info.numRows = 1000;
  info.nnz = 17;
  info.seed = 0xabcdef;
  ByteVector p;
  encodeCallInfo(info, &p);
  EXPECT_EQ(p.size(), 56u);
  Result<CallInfo> back = decodeCallInfo(p.data(), p.size(), 3);
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back.value().op, ReduceOp::kAverage);
  EXPECT_EQ(back.value().scheme, Scheme::kZen);
  EXPECT_TRUE(back.value().denseOutput);
  EXPECT_FALSE(back.value().failed);
  EXPECT_EQ(back.value().dtype, DataType::kBFloat16);
  EXPECT_EQ(back.value().rowSize, 5);
  EXPECT_EQ(back.value().numRows, 1000);
  EXPECT_EQ(back.value().nnz, 17);
  EXPECT_EQ(back.value().seed, 0xabcdefu);
  expectInvalid(decodeCallInfo(p.data(), p.size(), 2).status(), "rank");

  // A failed call carries its message (cut) and may carry a nonsensical shape.
  info.failed = true;
  info.rowSize = 0;
  info.message = std::string(5000, 'x');
  encodeCallInfo(info, &p);
  EXPECT_EQ(p.size(), 56u + kMaxCallMessageBytes);
  back = decodeCallInfo(p.data(), p.size(), 3);
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back.value().message.size(), kMaxCallMessageBytes);
  // The same shape without the failure flag is refused.
  p[kWireHeaderBytes + 6] = 2;
  expectInvalid(decodeCallInfo(p.data(), p.size(), 3).status(), "healthy zero row size");
  p[kWireHeaderBytes + 6] = 0x40;
  expectInvalid(decodeCallInfo(p.data(), p.size(), 3).status(), "unknown flag");

  info.failed = false;
  info.rowSize = 5;
  info.message = "abc";
  encodeCallInfo(info, &p);
  ByteVector badOp = p;
  badOp[kWireHeaderBytes + 4] = 7;
  expectInvalid(decodeCallInfo(badOp.data(), badOp.size(), 3).status(), "op");
  ByteVector badScheme = p;
  badScheme[kWireHeaderBytes + 5] = 42;
  expectInvalid(decodeCallInfo(badScheme.data(), badScheme.size(), 3).status(), "scheme");
  expectRobust([](const uint8_t* d, size_t s) { return decodeCallInfo(d, s, 3).status(); }, p);
}

// A call summary leading a payload (the schemes' first exchange): the payload starts at the
// next multiple of 8, intact; the summary and its padding are checked before it is located.
TEST(WireFormat, SummarizedPayloadRoundTripAndChecks) {
  CallInfo info;
  info.rank = 2;
  info.rowSize = 3;
  info.numRows = 50;
  info.nnz = 4;
  info.failed = true;
  info.message = "abc";  // 59 bytes of summary: 5 of padding
  ByteVector m;
  const size_t at = startSummarized(info, &m);
  EXPECT_EQ(at, 64u);
  EXPECT_EQ(m.size(), 64u);
  const std::vector<uint32_t> positions = {1, 4, 9, 30};
  const std::vector<float> values = rows(4, 3);
  encodeCooPositions(kF32x3, positions.data(), values.data(), 4, &m, at);
  EXPECT_EQ(m.size(), at + cooPositionsBytes(4, kF32x3.rowBytes()));

  Result<SummarizedView> v = decodeSummarized(m.data(), m.size(), 2);
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_EQ(v.value().info.message, "abc");
  EXPECT_TRUE(v.value().info.failed);
  EXPECT_EQ(v.value().info.nnz, 4);
  EXPECT_EQ(v.value().payload, m.data() + at);
  EXPECT_EQ(v.value().payloadBytes, m.size() - at);
  const Result<CooPositionsView> coo =
      decodeCooPositions(v.value().payload, v.value().payloadBytes, kF32x3, 50, 4, true);
  ASSERT_TRUE(coo.isOk()) << coo.status().toString();
  EXPECT_EQ(coo.value().positions[3], 30u);
  EXPECT_EQ(std::memcmp(coo.value().values, values.data(), values.size() * 4), 0);

  // The summary alone; a healthy one is 56 bytes and needs no padding.
  info.failed = false;
  info.message.clear();
  ByteVector alone;
  EXPECT_EQ(startSummarized(info, &alone), 56u);
  v = decodeSummarized(alone.data(), alone.size(), 2);
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_EQ(v.value().payloadBytes, 0u);

  expectInvalid(decodeSummarized(m.data(), m.size(), 1).status(), "wrong rank");
  expectInvalid(decodeSummarized(m.data(), 61, 2).status(), "cut in the padding");
  ByteVector dirty = m;
  dirty[60] = 1;
  expectInvalid(decodeSummarized(dirty.data(), dirty.size(), 2).status(), "non-zero padding");
  ByteVector notSummary;
  encodeCooIndices(kF32x3, nullptr, nullptr, 0, &notSummary);
  expectInvalid(decodeSummarized(notSummary.data(), notSummary.size(), 2).status(), "kind");

  // An encoder writing at an offset keeps what is before it.
  ByteVector lead(8, 0xab);
  const std::vector<int64_t> indices = {7, 3};
  encodeCooIndices(kF32x3, indices.data(), values.data(), 2, &lead, 8);
  EXPECT_EQ(lead[0], 0xab);
  EXPECT_EQ(lead[7], 0xab);
  EXPECT_TRUE(decodeCooIndices(lead.data() + 8, lead.size() - 8, kF32x3, 50, 2).isOk());
}

TEST(WireFormat, PeekKind) {
  ByteVector p;
  encodeDenseRange(kF32x3, 0, nullptr, 0, &p);
  Result<PayloadKind> kind = peekPayloadKind(p.data(), p.size());
  ASSERT_TRUE(kind.isOk());
  EXPECT_EQ(kind.value(), PayloadKind::kDenseRange);
  expectInvalid(peekPayloadKind(p.data(), 15).status(), "short");
  p[2] = 0;
  expectInvalid(peekPayloadKind(p.data(), p.size()).status(), "kind 0");
  // A payload of one kind is not accepted by another kind's decoder.
  encodeDenseRange(kF32x3, 0, nullptr, 0, &p);
  expectInvalid(decodeCooIndices(p.data(), p.size(), kF32x3, 10, 10).status(), "kind mismatch");
}

}  // namespace
}  // namespace zen::ops
