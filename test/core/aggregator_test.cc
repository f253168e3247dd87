// PartitionAggregator's two paths (core/aggregator.h): the dense |I_j|-row array and the
// compact rows of a sparse step. Both must give the bytes of an independent reference sum
// (per position: zero, then every pushed row in rank order and list order, in the
// accumulator type) bit for bit, in every dtype, with non-integer values so that a different
// summation order would show; and kAuto's switch from compact to dense mid-step must too.
#include "core/aggregator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/hash_bitmap.h"
#include "core/index_map.h"
#include "test/core/reference.h"

namespace zen {
namespace {

// One sending rank's Push list for the part: positions (repeats allowed) and rows.
struct List {
  std::vector<uint32_t> positions;
  std::vector<std::byte> values;
};

// Values in [-4, 4) with fractions (and some -0.0): sums depend on their order in every
// floating dtype.
std::vector<List> makeLists(std::mt19937_64& rng,
                            DataType dtype,
                            int64_t rowSize,
                            uint64_t partSize,
                            const std::vector<int64_t>& counts) {
  std::vector<List> lists;
  std::uniform_int_distribution<uint64_t> hot(0, std::min<uint64_t>(partSize, 40) - 1);
  std::uniform_int_distribution<uint64_t> any(0, partSize - 1);
  for (int64_t count : counts) {
    List l;
    for (int64_t i = 0; i < count; ++i) {
      // A third from a few hot positions: repeats across ranks and within a list.
      l.positions.push_back(static_cast<uint32_t>(rng() % 3 == 0 ? hot(rng) : any(rng)));
    }
    l.values.resize(static_cast<size_t>(count * rowSize) * dataTypeSize(dtype));
    for (size_t e = 0; e < static_cast<size_t>(count * rowSize); ++e) {
      const double v = rng() % 17 == 0 ? -0.0 : static_cast<double>(rng() % 8000) / 1000.0 - 4.0;
      reference::storeDouble(l.values.data(), dtype, e, reference::isInteger(dtype) ? 1e3 * v : v);
    }
    lists.push_back(std::move(l));
  }
  return lists;
}

// The reference: per position, AccumulatorT sums in rank then list order, scaled and rounded
// once as encode() documents; positions ascending. Written without the aggregator.
EncodedPart referenceEncoding(DataType dtype,
                              int64_t rowSize,
                              uint64_t partSize,
                              const std::vector<List>& lists,
                              double scale) {
  EncodedPart out;
  out.bitmap.assign(static_cast<size_t>((partSize + 7) / 8), 0);
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = AccumulatorT<T>;
    std::map<uint32_t, std::vector<Acc>> sums;
    for (const List& l : lists) {
      const auto* v = reinterpret_cast<const T*>(l.values.data());
      for (size_t i = 0; i < l.positions.size(); ++i) {
        auto it = sums.try_emplace(l.positions[i], static_cast<size_t>(rowSize), Acc(0)).first;
        for (int64_t e = 0; e < rowSize; ++e) {
          it->second[e] += toAccumulator<Acc>(v[i * static_cast<size_t>(rowSize) + e]);
        }
      }
    }
    out.count = static_cast<int64_t>(sums.size());
    out.values.resize(sums.size() * static_cast<size_t>(rowSize) * sizeof(T));
    T* dst = reinterpret_cast<T*>(out.values.data());
    for (const auto& [pos, row] : sums) {
      out.bitmap[pos / 8] |= static_cast<uint8_t>(1u << (pos % 8));
      for (Acc a : row) {
        if constexpr (std::is_integral_v<T>) {
          *dst++ = static_cast<T>(std::trunc(static_cast<double>(a) / (1.0 / scale)));
        } else {
          *dst++ = fromAccumulator<T>(scale == 1.0 ? a : a * static_cast<Acc>(scale));
        }
      }
    }
  });
  return out;
}

// Aggregates and encodes the lists through `agg` (one step), or returns the add() error.
Result<EncodedPart> aggregate(PartitionAggregator& agg,
                              const IndexMap& map,
                              DataType dtype,
                              int64_t rowSize,
                              const std::vector<List>& lists,
                              double scale) {
  ZEN_RETURN_IF_ERROR(agg.reset(map, 0, dtype, rowSize));
  for (const List& l : lists) {
    ZEN_RETURN_IF_ERROR(
        agg.add(l.positions.data(), l.values.data(), static_cast<int64_t>(l.positions.size())));
  }
  EncodedPart e;
  ZEN_RETURN_IF_ERROR(encode(agg, scale, &e));
  return e;
}

::testing::AssertionResult sameBytes(const EncodedPart& got, const EncodedPart& want) {
  if (got.count != want.count) {
    return ::testing::AssertionFailure() << got.count << " rows, expected " << want.count;
  }
  if (got.bitmap != want.bitmap) return ::testing::AssertionFailure() << "bitmaps differ";
  if (got.values != want.values) return ::testing::AssertionFailure() << "row bytes differ";
  return ::testing::AssertionSuccess();
}

constexpr DataType kDtypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                DataType::kFloat64, DataType::kInt32,   DataType::kInt64};
constexpr AggregationPath kPaths[] = {AggregationPath::kAuto, AggregationPath::kDense,
                                      AggregationPath::kCompact};

// Every dtype, row size, scale and list shape (empty lists included) through all three paths,
// one aggregator per path reused across all of them, against the reference.
TEST(AggregatorPaths, EveryPathMatchesTheReferenceBitForBit) {
  const IndexMap map(40'000, 4, 9);  // part 0: about 10,000 positions
  const uint64_t partSize = map.partSize(0);
  std::vector<PartitionAggregator> aggs;
  for (AggregationPath path : kPaths) aggs.emplace_back(nullptr, path);
  std::mt19937_64 rng(21);
  const std::vector<std::vector<int64_t>> shapes = {
      {0, 0, 0, 0}, {1, 0, 0, 0}, {30, 0, 45, 12}, {200, 150, 0, 220}, {3000, 2500, 2800, 3100}};
  for (DataType dtype : kDtypes) {
    for (int64_t rowSize : {1, 2, 3, 4, 8}) {
      for (const auto& counts : shapes) {
        for (double scale : {1.0, 0.25}) {
          const std::vector<List> lists = makeLists(rng, dtype, rowSize, partSize, counts);
          const EncodedPart want = referenceEncoding(dtype, rowSize, partSize, lists, scale);
          for (size_t p = 0; p < aggs.size(); ++p) {
            SCOPED_TRACE(::testing::Message() << dataTypeName(dtype) << " x" << rowSize << ", "
                                              << counts[0] << "+" << counts[2] << "... entries, "
                                              << "scale " << scale << ", path " << p);
            const Result<EncodedPart> got = aggregate(aggs[p], map, dtype, rowSize, lists, scale);
            ASSERT_TRUE(got.isOk()) << got.status().toString();
            EXPECT_TRUE(sameBytes(got.value(), want));
          }
        }
      }
    }
  }
}

// kAuto starts compact and moves to the dense array when an add() would pass |I_j| / 16
// distinct positions; the rows summed so far move with it, and the result is the same.
TEST(AggregatorPaths, AutoSwitchesToDenseMidStepWithTheSameResult) {
  const IndexMap map(40'000, 4, 9);
  const uint64_t partSize = map.partSize(0);
  const auto limit = static_cast<int64_t>(partSize) / PartitionAggregator::kCompactFactor;
  std::mt19937_64 rng(5);
  for (DataType dtype : kDtypes) {
    const std::vector<List> lists =
        makeLists(rng, dtype, 3, partSize, {limit / 3, limit / 3, limit, 50});
    PartitionAggregator agg;
    ASSERT_TRUE(agg.reset(map, 0, dtype, 3).isOk());
    const auto add = [&](const List& l) {
      return agg.add(l.positions.data(), l.values.data(), static_cast<int64_t>(l.positions.size()));
    };
    ASSERT_TRUE(add(lists[0]).isOk());
    ASSERT_TRUE(add(lists[1]).isOk());
    EXPECT_TRUE(agg.compact()) << dataTypeName(dtype);
    ASSERT_TRUE(add(lists[2]).isOk());
    EXPECT_FALSE(agg.compact()) << dataTypeName(dtype);
    ASSERT_TRUE(add(lists[3]).isOk());
    EncodedPart got;
    ASSERT_TRUE(encode(agg, 1.0, &got).isOk());
    EXPECT_TRUE(sameBytes(got, referenceEncoding(dtype, 3, partSize, lists, 1.0)))
        << dataTypeName(dtype);
    // The next step starts compact again, and clean.
    agg.clear();
    ASSERT_TRUE(agg.reset(map, 0, dtype, 3).isOk());
    EXPECT_TRUE(agg.compact());
    ASSERT_TRUE(add(lists[3]).isOk());
    ASSERT_TRUE(encode(agg, 1.0, &got).isOk());
    EXPECT_TRUE(sameBytes(got, referenceEncoding(dtype, 3, partSize, {lists[3]}, 1.0)));
  }
}

// Told the step's entries at reset(), kAuto picks its path once: dense from the start when
// they could pass |I_j| / 16 positions, compact otherwise (and then stays compact); the same
// bytes either way, across steps of both kinds through one aggregator.
TEST(AggregatorPaths, AutoToldTheEntriesPicksItsPathAtTheStart) {
  const IndexMap map(40'000, 4, 9);
  const uint64_t partSize = map.partSize(0);
  const auto limit = static_cast<int64_t>(partSize) / PartitionAggregator::kCompactFactor;
  std::mt19937_64 rng(17);
  PartitionAggregator agg;
  for (DataType dtype : kDtypes) {
    for (const std::vector<int64_t>& counts :
         {std::vector<int64_t>{limit / 3, limit / 3, limit, 50}, {limit / 4, 0, limit / 4, 1}}) {
      const std::vector<List> lists = makeLists(rng, dtype, 3, partSize, counts);
      int64_t entries = 0;
      for (int64_t c : counts) entries += c;
      const bool compact = entries <= limit;
      agg.clear();
      ASSERT_TRUE(agg.reset(map, 0, dtype, 3, entries).isOk());
      for (const List& l : lists) {
        EXPECT_EQ(agg.compact(), compact) << dataTypeName(dtype) << ", " << entries;
        ASSERT_TRUE(
            agg.add(l.positions.data(), l.values.data(), static_cast<int64_t>(l.positions.size()))
                .isOk());
      }
      EXPECT_EQ(agg.compact(), compact) << dataTypeName(dtype) << ", " << entries;
      EncodedPart got;
      ASSERT_TRUE(encode(agg, 1.0, &got).isOk());
      EXPECT_TRUE(sameBytes(got, referenceEncoding(dtype, 3, partSize, lists, 1.0)))
          << dataTypeName(dtype) << ", " << entries;
    }
  }
}

// A corrupt position is refused before anything is written, on every path, and the step
// goes on as if that add had not happened.
TEST(AggregatorPaths, CorruptPositionIsRejectedAndWritesNothing) {
  const IndexMap map(40'000, 4, 9);
  const uint64_t partSize = map.partSize(0);
  std::mt19937_64 rng(8);
  const std::vector<List> good = makeLists(rng, DataType::kFloat32, 2, partSize, {40, 60});
  List bad = makeLists(rng, DataType::kFloat32, 2, partSize, {30})[0];
  bad.positions[17] = static_cast<uint32_t>(partSize);
  for (AggregationPath path : kPaths) {
    PartitionAggregator agg(nullptr, path);
    ASSERT_TRUE(agg.reset(map, 0, DataType::kFloat32, 2).isOk());
    ASSERT_TRUE(agg.add(good[0].positions.data(), good[0].values.data(), 40).isOk());
    const int64_t before = agg.occupied();
    const Status s = agg.add(bad.positions.data(), bad.values.data(), 30);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
    EXPECT_NE(s.message().find("entry 17 of 30"), std::string::npos) << s.message();
    EXPECT_EQ(agg.occupied(), before);
    EXPECT_EQ(agg.entriesAdded(), 40);
    ASSERT_TRUE(agg.add(good[1].positions.data(), good[1].values.data(), 60).isOk());
    EncodedPart got;
    ASSERT_TRUE(encode(agg, 1.0, &got).isOk());
    EXPECT_TRUE(sameBytes(got, referenceEncoding(DataType::kFloat32, 2, partSize, good, 1.0)));
  }
}

// One aggregator through steps that alternate path, part, dtype and row size (clear() after
// some, not others): every step starts from zero.
TEST(AggregatorPaths, StepsAlternatingPathsAndLayoutsStartClean) {
  const IndexMap map(40'000, 4, 9);
  struct Step {
    uint32_t part;
    DataType dtype;
    int64_t rowSize;
    int64_t perList;  // entries per list of 4: few (compact) or many (dense)
    bool clearAfter;
  };
  const Step steps[] = {
      {0, DataType::kFloat32, 8, 20, true},  {0, DataType::kFloat32, 8, 2000, true},
      {1, DataType::kFloat16, 1, 30, false}, {2, DataType::kFloat64, 3, 900, false},
      {2, DataType::kInt32, 8, 10, false},   {3, DataType::kBFloat16, 2, 3000, true},
      {0, DataType::kFloat32, 8, 20, false}};
  PartitionAggregator agg;
  std::mt19937_64 rng(13);
  for (const Step& st : steps) {
    const uint64_t partSize = map.partSize(static_cast<int>(st.part));
    const std::vector<List> lists =
        makeLists(rng, st.dtype, st.rowSize, partSize, {st.perList, st.perList, st.perList, 0});
    ASSERT_TRUE(agg.reset(map, st.part, st.dtype, st.rowSize).isOk());
    for (const List& l : lists) {
      ASSERT_TRUE(
          agg.add(l.positions.data(), l.values.data(), static_cast<int64_t>(l.positions.size()))
              .isOk());
    }
    EXPECT_EQ(agg.compact(), st.perList * 3 * PartitionAggregator::kCompactFactor <=
                                 static_cast<int64_t>(partSize));
    EncodedPart got;
    ASSERT_TRUE(encode(agg, 1.0, &got).isOk());
    EXPECT_TRUE(sameBytes(got, referenceEncoding(st.dtype, st.rowSize, partSize, lists, 1.0)))
        << dataTypeName(st.dtype) << " part " << st.part;
    if (st.clearAfter) agg.clear();
  }
}

}  // namespace
}  // namespace zen
