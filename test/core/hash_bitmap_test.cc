#include "core/hash_bitmap.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/aggregator.h"
#include "core/index_map.h"
#include "core/thread_pool.h"
#include "test/core/reference.h"

namespace zen {
namespace {

using reference::DenseSum;

// What every server would receive: each rank's entries bucketed by owner (no partitioner
// here, so these tests do not depend on Algorithm 1; duplicates are left for the aggregator).
struct Buckets {
  std::vector<std::vector<uint32_t>> positions;  // [rank * n + part]
  std::vector<std::vector<std::byte>> values;    // same layout
};

Buckets bucketByOwner(const IndexMap& map, const std::vector<SparseView>& ranks) {
  const int n = map.numParts();
  Buckets b;
  b.positions.resize(ranks.size() * n);
  b.values.resize(ranks.size() * n);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const SparseView& v = ranks[r];
    for (int64_t k = 0; k < v.nnz; ++k) {
      const auto place = map.place(static_cast<uint64_t>(v.indices[k]));
      const size_t slot = r * n + place.owner;
      b.positions[slot].push_back(static_cast<uint32_t>(place.pos));
      b.values[slot].insert(b.values[slot].end(), v.row(k), v.row(k) + v.rowBytes());
    }
  }
  return b;
}

// Aggregates and encodes every part with ONE aggregator reused across parts (as a server
// reuses it across steps).
Status aggregateAndEncode(const IndexMap& map,
                          const std::vector<SparseView>& ranks,
                          double scale,
                          std::vector<EncodedPart>* parts) {
  const int n = map.numParts();
  const Buckets b = bucketByOwner(map, ranks);
  parts->assign(n, EncodedPart{});
  PartitionAggregator agg;
  for (int j = 0; j < n; ++j) {
    ZEN_RETURN_IF_ERROR(agg.reset(map, j, ranks[0].dtype, ranks[0].rowSize));
    for (size_t r = 0; r < ranks.size(); ++r) {
      const size_t slot = r * n + j;
      ZEN_RETURN_IF_ERROR(agg.add(b.positions[slot].data(), b.values[slot].data(),
                                  static_cast<int64_t>(b.positions[slot].size())));
    }
    ZEN_RETURN_IF_ERROR(encode(agg, scale, &(*parts)[j]));
  }
  return Status::ok();
}

struct Decoded {
  SparseTensor sparse;  // sorted by index
  std::vector<std::byte> dense;
};

Status decodeAll(const IndexMap& map,
                 const std::vector<EncodedPart>& parts,
                 DataType dtype,
                 int64_t rowSize,
                 Decoded* out) {
  const size_t rowBytes = static_cast<size_t>(rowSize) * dataTypeSize(dtype);
  out->dense.assign(map.numRows() * rowBytes, std::byte{0});
  DenseView view;
  view.data = out->dense.data();
  view.dtype = dtype;
  view.shape = TensorShape({static_cast<int64_t>(map.numRows()), rowSize});
  for (uint32_t j = 0; j < parts.size(); ++j) {
    const EncodedPart& e = parts[j];
    ZEN_RETURN_IF_ERROR(decodeToDense(map, j, e.bitmap.data(), e.bitmap.size(), e.values.data(),
                                      e.values.size(), dtype, rowSize, view));
    ZEN_RETURN_IF_ERROR(decodeToSparse(map, j, e.bitmap.data(), e.bitmap.size(), e.values.data(),
                                       e.values.size(), dtype, rowSize, &out->sparse));
  }
  if (out->sparse.indices.empty()) {
    out->sparse.numRows = static_cast<int64_t>(map.numRows());
    out->sparse.rowSize = rowSize;
    out->sparse.dtype = dtype;
  }
  reference::sortByIndex(&out->sparse);
  return Status::ok();
}

size_t totalBitmapBytes(const std::vector<EncodedPart>& parts) {
  size_t bytes = 0;
  for (const auto& p : parts) bytes += p.bitmap.size();
  return bytes;
}

// Encodes, decodes, and checks against the dense reference; returns the parts.
std::vector<EncodedPart> roundTrip(const std::vector<SparseTensor>& tensors,
                                   int n,
                                   uint64_t seed,
                                   bool average = false) {
  const auto ranks = reference::views(tensors);
  const IndexMap map(static_cast<uint64_t>(ranks[0].numRows), n, seed);
  std::vector<EncodedPart> parts;
  Status s = aggregateAndEncode(map, ranks, average ? 1.0 / n : 1.0, &parts);
  EXPECT_TRUE(s.isOk()) << s.toString();
  Decoded d;
  s = decodeAll(map, parts, ranks[0].dtype, ranks[0].rowSize, &d);
  EXPECT_TRUE(s.isOk()) << s.toString();
  const DenseSum ref = reference::denseSum(ranks);
  const int divisor = average ? n : 1;
  const double tol = average ? reference::averageTolerance(ranks[0].dtype) : 0.0;
  EXPECT_TRUE(reference::sparseMatches(d.sparse, ref, divisor, tol));
  EXPECT_TRUE(reference::denseMatches(d.dense.data(), ref, divisor, tol));
  EXPECT_EQ(totalBitmapBytes(parts), (static_cast<size_t>(ranks[0].numRows) + 7) / 8);
  return parts;
}

std::vector<SparseTensor> randomRanks(std::mt19937_64& rng,
                                      int n,
                                      int64_t numRows,
                                      int64_t rowSize,
                                      DataType dtype,
                                      int64_t unique,
                                      int64_t duplicates) {
  std::vector<SparseTensor> ranks;
  for (int r = 0; r < n; ++r) {
    std::vector<int64_t> idx;
    if (!(n > 1 && r == 1)) {  // rank 1 sends nothing
      idx = reference::uniformIndices(rng, numRows, std::min(unique, numRows));
      reference::addDuplicates(rng, &idx, duplicates);
      if (r == 0 && numRows > 0) {  // the edges of the range, index 0 included
        idx.push_back(0);
        idx.push_back(numRows - 1);
      }
    }
    ranks.push_back(reference::makeRank(rng, std::move(idx), numRows, rowSize, dtype));
  }
  return ranks;
}

TEST(HashBitmap, RoundTripEqualsDenseSumBitExact) {
  std::mt19937_64 rng(1);
  for (DataType dtype : reference::kAllTypes) {
    for (int n : {1, 2, 3, 4, 7, 16}) {
      for (int64_t rowSize : {1, 5}) {
        SCOPED_TRACE(testing::Message()
                     << dataTypeName(dtype) << " n=" << n << " rowSize=" << rowSize);
        const auto ranks = randomRanks(rng, n, 1001, rowSize, dtype, 150, 30);
        roundTrip(ranks, n, 100 + n);
      }
    }
  }
}

TEST(HashBitmap, BitmapsTotalCeilGOver8ForEveryDensity) {
  std::mt19937_64 rng(2);
  const int64_t numRows = 100'003;
  for (int n : {1, 7, 16}) {
    for (double density : {0.0, 0.001, 0.1, 1.0}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " density=" << density);
      const auto unique = static_cast<int64_t>(density * numRows);
      std::vector<SparseTensor> ranks;
      ranks.reserve(n);
      for (int r = 0; r < n; ++r) {
        ranks.push_back(reference::makeRank(rng, reference::uniformIndices(rng, numRows, unique),
                                            numRows, 1, DataType::kFloat32));
      }
      const auto parts = roundTrip(ranks, n, 7);
      EXPECT_EQ(totalBitmapBytes(parts), 12'501u);  // ceil(100003 / 8)
      int64_t count = 0;
      for (const auto& p : parts) {
        count += p.count;
        EXPECT_EQ(p.values.size(), static_cast<size_t>(p.count) * 4);
      }
      EXPECT_EQ(count, reference::denseSum(reference::views(ranks)).touchedRows());
      if (density == 1.0) {
        EXPECT_EQ(count, numRows);
      }
      if (density == 0.0) {
        EXPECT_EQ(count, 0);
      }
    }
  }
}

TEST(HashBitmap, SizesNotDivisibleByNAndSmallerThanN) {
  std::mt19937_64 rng(3);
  struct Case {
    int64_t rows;
    int n;
  };
  for (Case c :
       {Case{1001, 7}, Case{3, 16}, Case{1, 1}, Case{9, 16}, Case{8, 3}, Case{0, 4}, Case{17, 2}}) {
    SCOPED_TRACE(testing::Message() << "rows=" << c.rows << " n=" << c.n);
    const IndexMap map(static_cast<uint64_t>(c.rows), c.n, 5);
    size_t expected = 0;
    for (int j = 0; j < c.n; ++j) expected += bitmapBytesFor(map, j);
    EXPECT_EQ(expected, static_cast<size_t>((c.rows + 7) / 8));
    for (DataType dtype : {DataType::kFloat32, DataType::kInt64}) {
      const auto ranks = randomRanks(rng, c.n, c.rows, 2, dtype, c.rows, 3);
      roundTrip(ranks, c.n, 5);
    }
  }
}

TEST(HashBitmap, AverageScalesInTheAccumulator) {
  std::mt19937_64 rng(4);
  for (DataType dtype : reference::kAllTypes) {
    for (int n : {3, 4, 7}) {
      SCOPED_TRACE(testing::Message() << dataTypeName(dtype) << " n=" << n);
      const auto ranks = randomRanks(rng, n, 500, 3, dtype, 200, 50);
      roundTrip(ranks, n, 9, /*average=*/true);
    }
  }
}

TEST(HashBitmap, IntegerAverageTruncatesTowardZero) {
  const IndexMap map(16, 1, 1);
  PartitionAggregator agg;
  ASSERT_TRUE(agg.reset(map, 0, DataType::kInt32, 1).isOk());
  const uint32_t pos[] = {0, 1, 2, 3};
  const int32_t vals[] = {7, -7, 9, -9};
  ASSERT_TRUE(agg.add(pos, vals, 4).isOk());
  EncodedPart e;
  ASSERT_TRUE(encode(agg, 1.0 / 3, &e).isOk());
  ASSERT_EQ(e.count, 4);
  std::vector<int32_t> got(4);
  std::memcpy(got.data(), e.values.data(), 16);
  EXPECT_EQ(got, (std::vector<int32_t>{2, -2, 3, -3}));
}

TEST(PartitionAggregator, UnionSemanticsKeepRowsThatCancel) {
  const IndexMap map(100, 2, 3);
  PartitionAggregator agg;
  ASSERT_TRUE(agg.reset(map, 1, DataType::kFloat32, 1).isOk());
  const uint32_t pos[] = {5};
  const float plus[] = {2.5f}, minus[] = {-2.5f};
  ASSERT_TRUE(agg.add(pos, plus, 1).isOk());
  ASSERT_TRUE(agg.add(pos, minus, 1).isOk());
  EXPECT_EQ(agg.occupied(), 1);
  EncodedPart e;
  ASSERT_TRUE(encode(agg, 1.0, &e).isOk());
  ASSERT_EQ(e.count, 1);
  EXPECT_EQ(e.bitmap[0], 1u << 5);
  float v;
  std::memcpy(&v, e.values.data(), 4);
  EXPECT_EQ(v, 0.0f);
  SparseTensor out;
  ASSERT_TRUE(decodeToSparse(map, 1, e.bitmap.data(), e.bitmap.size(), e.values.data(),
                             e.values.size(), DataType::kFloat32, 1, &out)
                  .isOk());
  ASSERT_EQ(out.nnz(), 1);
  EXPECT_EQ(out.indices[0], static_cast<int64_t>(map.indexOf(1, 5)));
}

TEST(PartitionAggregator, RejectsOutOfRangePositionAndWritesNothing) {
  const IndexMap map(1001, 7, 3);  // part 6 owns 137 positions
  PartitionAggregator agg;
  ASSERT_TRUE(agg.reset(map, 6, DataType::kFloat32, 1).isOk());
  ASSERT_EQ(agg.size(), 137u);
  const uint32_t pos[] = {0, 136, 137, 3};
  const float vals[] = {1, 2, 3, 4};
  const Status s = agg.add(pos, vals, 4);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("corrupt push payload"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("137"), std::string::npos) << s.message();
  EXPECT_EQ(agg.occupied(), 0);
  EXPECT_EQ(agg.accumulators<float>()[0], 0.0f);
  EXPECT_EQ(agg.entriesAdded(), 0);
  // The same entries without the bad one go through.
  const uint32_t good[] = {0, 136};
  EXPECT_TRUE(agg.add(good, vals, 2).isOk());
  EXPECT_EQ(agg.occupied(), 2);
  EXPECT_EQ(agg.reset(map, 7, DataType::kFloat32, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(agg.reset(map, 0, DataType::kFloat32, 0).code(), StatusCode::kInvalidArgument);
}

TEST(PartitionAggregator, ResetClearsTheLastStepOnBothPaths) {
  const IndexMap map(10'000, 2, 3);
  PartitionAggregator agg;
  for (bool denseStep : {false, true}) {
    ASSERT_TRUE(agg.reset(map, 0, DataType::kFloat64, 2).isOk());
    std::vector<uint32_t> pos;
    const uint64_t stride = denseStep ? 1 : 97;  // dense: the full memset path
    for (uint64_t p = 0; p < agg.size(); p += stride) pos.push_back(static_cast<uint32_t>(p));
    std::vector<double> vals(pos.size() * 2, 1.5);
    ASSERT_TRUE(agg.add(pos.data(), vals.data(), static_cast<int64_t>(pos.size())).isOk());
    ASSERT_EQ(agg.occupied(), static_cast<int64_t>(pos.size()));
    ASSERT_TRUE(agg.reset(map, 0, DataType::kFloat64, 2).isOk());
    EXPECT_EQ(agg.occupied(), 0);
    const double* acc = agg.accumulators<double>();
    for (uint64_t k = 0; k < agg.size() * 2; ++k) ASSERT_EQ(acc[k], 0.0) << k;
  }
  // A different layout (other part, dtype, row size) starts clean too.
  ASSERT_TRUE(agg.reset(map, 1, DataType::kInt32, 3).isOk());
  EXPECT_EQ(agg.occupied(), 0);
  for (uint64_t k = 0; k < agg.size() * 3; ++k) ASSERT_EQ(agg.accumulators<int64_t>()[k], 0);
}

// A training loop alternates buckets of other row sizes, dtypes and parts through one
// aggregator: each reset clears only the rows the previous step used, with that step's
// layout, and the next layout must still start from zero everywhere.
TEST(PartitionAggregator, LayoutChangesStartCleanWithoutAFullClear) {
  const IndexMap map(10'000, 2, 3);
  PartitionAggregator agg;
  struct Layout {
    uint32_t part;
    DataType dtype;
    int64_t rowSize;
  };
  const Layout layouts[] = {{0, DataType::kFloat32, 8},
                            {1, DataType::kFloat32, 1},
                            {0, DataType::kFloat64, 3},
                            {1, DataType::kInt32, 8},
                            {0, DataType::kFloat32, 8}};
  std::mt19937_64 rng(11);
  for (const Layout& l : layouts) {
    ASSERT_TRUE(agg.reset(map, l.part, l.dtype, l.rowSize).isOk());
    const size_t accBytes = l.dtype == DataType::kFloat32 ? 4 : 8;
    const auto* bytes = reinterpret_cast<const uint8_t*>(agg.accumulators<uint8_t>());
    for (size_t k = 0; k < agg.size() * l.rowSize * accBytes; ++k) ASSERT_EQ(bytes[k], 0) << k;
    // A sparse step: every 37th position, twice (repeats must not count twice).
    std::vector<uint32_t> pos;
    for (uint64_t p = 5; p < agg.size(); p += 37) pos.push_back(static_cast<uint32_t>(p));
    pos.insert(pos.end(), pos.begin(), pos.end());
    std::vector<uint8_t> vals(pos.size() * l.rowSize * dataTypeSize(l.dtype));
    for (auto& v : vals) v = static_cast<uint8_t>(rng() | 1);  // no zero rows
    ASSERT_TRUE(agg.add(pos.data(), vals.data(), static_cast<int64_t>(pos.size())).isOk());
    EXPECT_EQ(agg.occupied(), static_cast<int64_t>(pos.size() / 2));
  }
}

TEST(PartitionAggregator, ClearZeroesRowsAndBitsAndKeepsTheLayout) {
  const IndexMap map(5'000, 3, 3);
  PartitionAggregator agg;
  ASSERT_TRUE(agg.reset(map, 2, DataType::kFloat32, 2).isOk());
  const uint32_t pos[] = {3, 900, 3, 1200};
  const float vals[] = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(agg.add(pos, vals, 4).isOk());
  EXPECT_EQ(agg.occupied(), 3);
  EncodedPart before;
  ASSERT_TRUE(encode(agg, 1.0, &before).isOk());
  EXPECT_EQ(before.count, 3);
  agg.clear();
  EXPECT_EQ(agg.occupied(), 0);
  for (uint64_t w : agg.occupancy()) ASSERT_EQ(w, 0u);
  for (uint64_t k = 0; k < agg.size() * 2; ++k) ASSERT_EQ(agg.accumulators<float>()[k], 0.0f);
  // Adding again after clear() gives what a fresh reset would.
  ASSERT_TRUE(agg.add(pos, vals, 4).isOk());
  EncodedPart after;
  ASSERT_TRUE(encode(agg, 1.0, &after).isOk());
  EXPECT_EQ(after.bitmap, before.bitmap);
  EXPECT_EQ(after.values, before.values);
}

TEST(PartitionAggregator, SixteenBitFloatsAccumulateInFloat32) {
  const IndexMap map(64, 1, 3);
  PartitionAggregator agg;
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    // 4096 ones: fp16 accumulation would stop at 2048, bf16 at 256.
    ASSERT_TRUE(agg.reset(map, 0, dtype, 1).isOk());
    std::vector<uint32_t> pos(4096, 7);
    std::vector<uint16_t> ones(
        4096, dtype == DataType::kFloat16 ? toHalf(1.0f).bits : toBFloat16(1.0f).bits);
    ASSERT_TRUE(agg.add(pos.data(), ones.data(), 4096).isOk());
    EncodedPart e;
    ASSERT_TRUE(encode(agg, 1.0, &e).isOk());
    ASSERT_EQ(e.count, 1);
    EXPECT_EQ(reference::loadDouble(e.values.data(), dtype, 0), 4096.0) << dataTypeName(dtype);
  }
}

TEST(PartitionAggregator, ParallelAddMatchesSerial) {
  ThreadPool pool(2);
  const IndexMap map(400'000, 2, 3);
  std::mt19937_64 rng(6);
  std::uniform_int_distribution<int64_t> value(-100, 100);
  for (int64_t rowSize : {1, 3}) {
    PartitionAggregator serial, parallel(&pool);
    ASSERT_TRUE(serial.reset(map, 1, DataType::kFloat32, rowSize).isOk());
    ASSERT_TRUE(parallel.reset(map, 1, DataType::kFloat32, rowSize).isOk());
    std::uniform_int_distribution<uint32_t> pick(0, static_cast<uint32_t>(serial.size() - 1));
    std::vector<uint32_t> pos(150'000);
    for (auto& p : pos) p = pick(rng);
    std::vector<float> vals(pos.size() * rowSize);
    for (auto& v : vals) v = static_cast<float>(value(rng));
    for (int round = 0; round < 2; ++round) {
      ASSERT_TRUE(serial.add(pos.data(), vals.data(), static_cast<int64_t>(pos.size())).isOk());
      ASSERT_TRUE(parallel.add(pos.data(), vals.data(), static_cast<int64_t>(pos.size())).isOk());
    }
    EncodedPart a, b;
    ASSERT_TRUE(encode(serial, 1.0, &a).isOk());
    ASSERT_TRUE(encode(parallel, 1.0, &b).isOk());
    EXPECT_GT(a.count, 100'000);
    EXPECT_EQ(a.bitmap, b.bitmap);
    EXPECT_EQ(a.values, b.values);
  }
}

// A valid encoded payload for part `part` of a 1001-row, 7-part map, and helpers to corrupt it.
class MalformedPayload : public testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(8);
    tensors_.push_back(reference::makeRank(rng, reference::uniformIndices(rng, 1001, 400), 1001, 2,
                                           DataType::kFloat32));
    ASSERT_TRUE(aggregateAndEncode(map_, reference::views(tensors_), 1.0, &parts_).isOk());
    ASSERT_EQ(map_.partSize(6) % 8, 1u);  // the last part has 7 padding bits
    ASSERT_GT(parts_[6].count, 0);
    dense_.assign(1001 * 2, -7.0f);
    view_.data = dense_.data();
    view_.dtype = DataType::kFloat32;
    view_.shape = TensorShape({1001, 2});
  }

  // Both decoders reject the payload with kInvalidArgument, mentioning `what`, and leave their
  // outputs untouched.
  void expectRejected(uint32_t part,
                      const std::vector<uint8_t>& bitmap,
                      size_t bitmapBytes,
                      const std::vector<std::byte>& values,
                      size_t valueBytes,
                      const std::string& what) {
    const Status d = decodeToDense(map_, part, bitmap.data(), bitmapBytes, values.data(),
                                   valueBytes, DataType::kFloat32, 2, view_);
    EXPECT_EQ(d.code(), StatusCode::kInvalidArgument) << d.toString();
    EXPECT_NE(d.message().find(what), std::string::npos) << d.message();
    for (float v : dense_) ASSERT_EQ(v, -7.0f);
    SparseTensor out;
    const Status s = decodeToSparse(map_, part, bitmap.data(), bitmapBytes, values.data(),
                                    valueBytes, DataType::kFloat32, 2, &out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
    EXPECT_EQ(out.nnz(), 0);
    EXPECT_TRUE(out.values.empty());
  }

  IndexMap map_{1001, 7, 21};
  std::vector<SparseTensor> tensors_;
  std::vector<EncodedPart> parts_;
  std::vector<float> dense_;
  DenseView view_;
};

TEST_F(MalformedPayload, ValidPayloadDecodes) {
  for (uint32_t j = 0; j < 7; ++j) {
    const auto& e = parts_[j];
    ASSERT_TRUE(decodeToDense(map_, j, e.bitmap.data(), e.bitmap.size(), e.values.data(),
                              e.values.size(), DataType::kFloat32, 2, view_)
                    .isOk());
  }
}

TEST_F(MalformedPayload, TruncatedOrOversizedBitmap) {
  for (uint32_t j : {0u, 6u}) {
    const auto& e = parts_[j];
    expectRejected(j, e.bitmap, e.bitmap.size() - 1, e.values, e.values.size(), "bytes, expected");
    auto longer = e.bitmap;
    longer.push_back(0);
    expectRejected(j, longer, longer.size(), e.values, e.values.size(), "bytes, expected");
    expectRejected(j, e.bitmap, 0, e.values, e.values.size(), "bytes, expected");
  }
}

TEST_F(MalformedPayload, WrongValueLength) {
  for (uint32_t j : {0u, 6u}) {
    const auto& e = parts_[j];
    const size_t row = 8;
    auto more = e.values;
    more.resize(more.size() + row);
    expectRejected(j, e.bitmap, e.bitmap.size(), e.values, e.values.size() - row, "value bytes");
    expectRejected(j, e.bitmap, e.bitmap.size(), e.values, e.values.size() - 1, "value bytes");
    expectRejected(j, e.bitmap, e.bitmap.size(), more, more.size(), "value bytes");
    expectRejected(j, e.bitmap, e.bitmap.size(), more, e.values.size() + 1, "value bytes");
  }
}

TEST_F(MalformedPayload, NonzeroPaddingBits) {
  const auto& e = parts_[6];
  for (int bit = 1; bit < 8; ++bit) {  // bit 0 of the last byte is position 136, the last real
    auto bad = e.bitmap;
    bad.back() |= static_cast<uint8_t>(1u << bit);
    // One more row so that only the padding check can fail.
    auto more = e.values;
    more.resize(more.size() + 8);
    expectRejected(6, bad, bad.size(), more, more.size(), "padding");
  }
}

TEST_F(MalformedPayload, PartOutOfRangeAndMissingBuffers) {
  const auto& e = parts_[0];
  expectRejected(7, e.bitmap, e.bitmap.size(), e.values, e.values.size(), "parts");
  const Status s = decodeToDense(map_, 0, nullptr, e.bitmap.size(), e.values.data(),
                                 e.values.size(), DataType::kFloat32, 2, view_);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  const Status v = decodeToDense(map_, 0, e.bitmap.data(), e.bitmap.size(), nullptr,
                                 e.values.size(), DataType::kFloat32, 2, view_);
  EXPECT_EQ(v.code(), StatusCode::kInvalidArgument);
}

TEST_F(MalformedPayload, OutputsThatDoNotMatchThePayload) {
  const auto& e = parts_[0];
  DenseView wrong = view_;
  wrong.dtype = DataType::kInt32;
  EXPECT_EQ(decodeToDense(map_, 0, e.bitmap.data(), e.bitmap.size(), e.values.data(),
                          e.values.size(), DataType::kFloat32, 2, wrong)
                .code(),
            StatusCode::kInvalidArgument);
  wrong = view_;
  wrong.shape = TensorShape({1000, 2});
  EXPECT_EQ(decodeToDense(map_, 0, e.bitmap.data(), e.bitmap.size(), e.values.data(),
                          e.values.size(), DataType::kFloat32, 2, wrong)
                .code(),
            StatusCode::kInvalidArgument);
  SparseTensor out;
  ASSERT_TRUE(decodeToSparse(map_, 0, e.bitmap.data(), e.bitmap.size(), e.values.data(),
                             e.values.size(), DataType::kFloat32, 2, &out)
                  .isOk());
  const int64_t before = out.nnz();
  EXPECT_EQ(before, e.count);
  // Appending a payload of another dtype to it is refused and changes nothing.
  EXPECT_EQ(
      decodeToSparse(map_, 1, parts_[1].bitmap.data(), parts_[1].bitmap.size(),
                     parts_[1].values.data(), parts_[1].values.size(), DataType::kInt32, 2, &out)
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(out.nnz(), before);
  // The same dtype appends.
  ASSERT_TRUE(decodeToSparse(map_, 1, parts_[1].bitmap.data(), parts_[1].bitmap.size(),
                             parts_[1].values.data(), parts_[1].values.size(), DataType::kFloat32,
                             2, &out)
                  .isOk());
  EXPECT_EQ(out.nnz(), before + parts_[1].count);
  EXPECT_EQ(out.values.size(), static_cast<size_t>(out.nnz()) * 8);
}

TEST(HashBitmap, EncodeRejectsBadScale) {
  const IndexMap map(10, 1, 1);
  PartitionAggregator agg;
  ASSERT_TRUE(agg.reset(map, 0, DataType::kFloat32, 1).isOk());
  EncodedPart e;
  EXPECT_EQ(encode(agg, 0.0, &e).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(encode(agg, std::nan(""), &e).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(encode(agg, 1.0, &e).isOk());
  EXPECT_EQ(e.bitmap.size(), 2u);
  EXPECT_EQ(e.count, 0);
}

}  // namespace
}  // namespace zen
