#include "core/hash_partitioner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/sort_partitioner.h"
#include "test/common/sparse_inputs.h"

namespace zen {
namespace {

using testing::coalesce;
using testing::distinctIndices;
using testing::fromPushLists;
using testing::makeSparse;
using testing::Skew;

// Runs Algorithm 1 and checks the output against the coalesced input: every index once, in
// the partition its IndexMap owner names, with its rows summed.
PartitionStats expectLossless(const IndexMap& map,
                              const SparseTensor& in,
                              HashPartitionOptions options,
                              ThreadPool* pool) {
  HashPartitioner partitioner(map, options, pool);
  PushLists lists;
  PartitionStats stats;
  const Status s = partitioner.partition(in.view(), &lists, &stats);
  EXPECT_TRUE(s.isOk()) << s.toString();
  int64_t repeats = 0;
  EXPECT_EQ(fromPushLists(map, lists, &repeats), coalesce(in.view()));
  EXPECT_EQ(repeats, 0);
  EXPECT_EQ(stats.lost, 0);
  EXPECT_EQ(stats.input, in.nnz());
  EXPECT_EQ(stats.unique + stats.duplicates, in.nnz());
  return stats;
}

struct Case {
  const char* name;
  int parts;
  int64_t rows;
  int64_t nnz;
  int rowSize;
  DataType dtype;
  int threads;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class HashPartitionerLossless : public ::testing::TestWithParam<Case> {};

TEST_P(HashPartitionerLossless, UniformDistinct) {
  const Case c = GetParam();
  std::mt19937_64 rng(1);
  ThreadPool pool(c.threads);
  const IndexMap map(c.rows, c.parts, 5);
  auto in = makeSparse(distinctIndices(c.rows, c.nnz, Skew::kUniform, rng), c.rows, c.rowSize,
                       c.dtype, rng);
  expectLossless(map, in, {}, &pool);
}

TEST_P(HashPartitionerLossless, ZipfWithRepeats) {
  const Case c = GetParam();
  std::mt19937_64 rng(2);
  ThreadPool pool(c.threads);
  const IndexMap map(c.rows, c.parts, 6);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < c.nnz; ++i) idx.push_back(testing::zipfDraw(c.rows, 1.2, rng));
  auto in = makeSparse(idx, c.rows, c.rowSize, c.dtype, rng);
  const auto stats = expectLossless(map, in, {}, &pool);
  if (c.nnz > 100) {
    EXPECT_GT(stats.duplicates, 0);
  }
}

TEST_P(HashPartitionerLossless, AllIndicesInOneSmallRange) {
  const Case c = GetParam();
  std::mt19937_64 rng(3);
  ThreadPool pool(c.threads);
  const IndexMap map(c.rows, c.parts, 7);
  const int64_t range = std::max<int64_t>(1, c.rows / 100);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < c.nnz; ++i) idx.push_back(rng() % range);
  expectLossless(map, makeSparse(idx, c.rows, c.rowSize, c.dtype, rng), {}, &pool);
}

TEST_P(HashPartitionerLossless, TinyMemoryOverflowsSerialAndLosesNothing) {
  const Case c = GetParam();
  std::mt19937_64 rng(4);
  ThreadPool pool(c.threads);
  const IndexMap map(c.rows, c.parts, 8);
  HashPartitionOptions options;
  options.hashFunctions = 1;
  options.memoryFactor = 0.25;  // at most a quarter fits the parallel memory
  options.serialFraction = 0.01;
  auto in = makeSparse(distinctIndices(c.rows, c.nnz, Skew::kUniform, rng), c.rows, c.rowSize,
                       c.dtype, rng);
  const auto stats = expectLossless(map, in, options, &pool);
  if (c.nnz >= 4096) {
    EXPECT_GT(stats.overflowed, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases,
    HashPartitionerLossless,
    ::testing::Values(Case{"one_part", 1, 1000, 300, 1, DataType::kFloat32, 1},
                      Case{"f32_4threads", 4, 100000, 20000, 1, DataType::kFloat32, 4},
                      Case{"f16_rows", 3, 5000, 2000, 3, DataType::kFloat16, 2},
                      Case{"bf16_rows", 7, 5000, 1500, 2, DataType::kBFloat16, 3},
                      Case{"f64", 16, 50000, 10000, 1, DataType::kFloat64, 2},
                      Case{"i32", 5, 20000, 6000, 2, DataType::kInt32, 2},
                      Case{"i64_big", 16, 1000000, 200000, 1, DataType::kInt64, 4},
                      Case{"parts_exceed_rows", 16, 10, 10, 1, DataType::kFloat32, 2},
                      // Carried rows of each compile-time size the partitioner moves inline
                      // (2 and 16 bytes; 4 and 8 above), 32 as in DeepFM's embeddings.
                      Case{"f16_one", 5, 30000, 9000, 1, DataType::kFloat16, 2},
                      Case{"f32_rows4", 4, 30000, 9000, 4, DataType::kFloat32, 3},
                      Case{"f32_rows8", 6, 60000, 20000, 8, DataType::kFloat32, 2},
                      // Owners split into several position-range buckets (one part, spread
                      // over the threads; large tables), rows too wide to be carried.
                      Case{"one_part_split", 1, 1000000, 100000, 1, DataType::kFloat32, 2},
                      Case{"wide_rows_split", 3, 2000000, 150000, 12, DataType::kFloat32, 2}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(HashPartitioner, EdgeIndicesEmptyAndFull) {
  ThreadPool pool(2);
  std::mt19937_64 rng(9);
  const int64_t rows = 4099;
  const IndexMap map(rows, 7, 1);
  expectLossless(map, makeSparse({0, rows - 1, 0, rows - 1}, rows, 2, DataType::kFloat32, rng), {},
                 &pool);
  expectLossless(map, makeSparse({}, rows, 2, DataType::kFloat32, rng), {}, &pool);
  expectLossless(map,
                 makeSparse(distinctIndices(rows, rows, Skew::kUniform, rng), rows, 2,
                            DataType::kFloat32, rng),
                 {}, &pool);
}

TEST(HashPartitioner, CollidingKeysSpillButStayLossless) {
  // Indices chosen so their first probe lands on the same slot: the worst case for level 2.
  const int64_t rows = 1 << 20;
  const int parts = 2;
  const int64_t nnz = 512;
  const IndexMap map(rows, parts, 3);
  HashPartitionOptions options;
  const int64_t r1 = static_cast<int64_t>(std::ceil(options.memoryFactor * nnz / parts));
  const HashFamily hashes(options.hashFunctions, options.seed);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < rows && static_cast<int64_t>(idx.size()) < nnz; ++i) {
    const auto pl = map.place(i);
    if (pl.owner == 0 && hashes.probe(0, pl.pos, r1) == 0) idx.push_back(i);
  }
  ASSERT_EQ(static_cast<int64_t>(idx.size()), nnz);
  std::mt19937_64 rng(10);
  ThreadPool pool(2);
  const auto stats =
      expectLossless(map, makeSparse(idx, rows, 1, DataType::kFloat32, rng), options, &pool);
  EXPECT_GT(stats.spilled, 0);
}

TEST(HashPartitioner, ConcurrentDuplicatesAreSummedOnce) {
  // Few distinct indices repeated many times: every slot is fought over by many threads.
  ThreadPool pool(4);
  const IndexMap map(1000, 4, 2);
  std::mt19937_64 rng(11);
  for (int round = 0; round < 20; ++round) {
    std::vector<int64_t> idx;
    for (int i = 0; i < 100000; ++i) idx.push_back(rng() % 64);
    const auto stats =
        expectLossless(map, makeSparse(idx, 1000, 1, DataType::kFloat32, rng), {}, &pool);
    ASSERT_EQ(stats.unique,
              static_cast<int64_t>(
                  coalesce(makeSparse(idx, 1000, 1, DataType::kFloat32, rng).view()).size()));
  }
}

TEST(HashPartitioner, ReusesScratchAcrossInputsOfChangingSize) {
  ThreadPool pool(2);
  const int64_t rows = 200000;
  const IndexMap map(rows, 5, 4);
  HashPartitioner partitioner(map, {}, &pool);
  std::mt19937_64 rng(12);
  // Duplicates and overflow in one call must not leak into the next, smaller one.
  for (int64_t nnz : {50000, 10, 0, 120000, 3000, 0}) {
    auto idx = distinctIndices(rows, nnz, Skew::kZipf, rng);
    idx.insert(idx.end(), idx.begin(), idx.begin() + nnz / 2);
    auto in = makeSparse(idx, rows, 1, DataType::kFloat32, rng);
    PushLists lists;
    ASSERT_TRUE(partitioner.partition(in.view(), &lists).isOk());
    int64_t repeats = 0;
    EXPECT_EQ(fromPushLists(map, lists, &repeats), coalesce(in.view())) << "nnz " << nnz;
  }
}

TEST(HashPartitioner, SameIndexSameOwnerAndPositionOnEveryRank) {
  ThreadPool pool(2);
  const int64_t rows = 100000;
  const IndexMap map(rows, 8, 21);
  std::mt19937_64 rng(13);
  // Two "ranks" with different, partly overlapping index sets of different sizes (so their
  // level-2 memories differ): the shared indices must still meet at the same server slot.
  auto a = distinctIndices(rows, 30000, Skew::kZipf, rng);
  auto b = distinctIndices(rows, 5000, Skew::kUniform, rng);
  b.insert(b.end(), a.begin(), a.begin() + 2000);
  std::map<int64_t, std::pair<int, uint32_t>> where;
  int shared = 0;
  for (const auto& idx : {a, b}) {
    HashPartitioner partitioner(map, {}, &pool);
    PushLists lists;
    auto in = makeSparse(idx, rows, 1, DataType::kFloat32, rng);
    ASSERT_TRUE(partitioner.partition(in.view(), &lists).isOk());
    for (int p = 0; p < lists.numParts(); ++p) {
      for (int64_t i = lists.offsets[p]; i < lists.offsets[p + 1]; ++i) {
        const auto idx = static_cast<int64_t>(map.indexOf(p, lists.positions[i]));
        const auto [it, inserted] = where.emplace(idx, std::make_pair(p, lists.positions[i]));
        if (!inserted) {
          ++shared;
          EXPECT_EQ(it->second, std::make_pair(p, lists.positions[i])) << "index " << idx;
        }
      }
    }
  }
  EXPECT_GE(shared, 2000);
}

TEST(HashPartitioner, OutputDoesNotDependOnTheThreadCount) {
  std::mt19937_64 rng(18);
  const int64_t rows = 3000000;
  const IndexMap map(rows, 3, 19);
  std::vector<int64_t> idx;
  for (int i = 0; i < 200000; ++i) idx.push_back(testing::zipfDraw(rows, 1.1, rng));
  const auto in = makeSparse(idx, rows, 2, DataType::kFloat32, rng);
  PushLists want;
  HashPartitioner(map, {}, nullptr).partition(in.view(), &want);
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    PushLists got;
    ASSERT_TRUE(HashPartitioner(map, {}, &pool).partition(in.view(), &got).isOk());
    EXPECT_EQ(got.offsets, want.offsets);
    EXPECT_EQ(got.positions, want.positions);
    EXPECT_TRUE(got.values == want.values) << threads << " threads";
  }
}

TEST(HashPartitioner, RunsWithoutAPool) {
  const IndexMap map(1000, 3, 1);
  std::mt19937_64 rng(17);
  expectLossless(map, makeSparse({1, 2, 2, 999, 0}, 1000, 2, DataType::kFloat16, rng), {}, nullptr);
}

TEST(HashPartitioner, OutOfRangeIndexIsAClearError) {
  ThreadPool pool(2);
  const IndexMap map(100, 4, 1);
  HashPartitioner partitioner(map, {}, &pool);
  std::mt19937_64 rng(14);
  for (int64_t bad : {int64_t{100}, int64_t{-1}, int64_t{1} << 40}) {
    auto in = makeSparse({5, 7, bad, 9}, 100, 1, DataType::kFloat32, rng);
    PushLists lists;
    const Status s = partitioner.partition(in.view(), &lists);
    ASSERT_FALSE(s.isOk());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(fmt::format("index {} at position 2 is out of range [0, 100)", bad)),
              std::string::npos)
        << s.message();
  }
}

// Theorem 2: data-independent, so the same bound holds for uniform and skewed indices.
class PushBalance : public ::testing::TestWithParam<Skew> {};

TEST_P(PushBalance, ImbalanceBelow1Point1For16PartsAt1Percent) {
  const int parts = 16;
  const int64_t rows = 10'000'000;
  const int64_t nnz = rows / 100;
  std::mt19937_64 rng(15);
  ThreadPool pool(2);
  const IndexMap map(rows, parts, 77);
  HashPartitioner partitioner(map, {}, &pool);
  auto in =
      makeSparse(distinctIndices(rows, nnz, GetParam(), rng), rows, 1, DataType::kFloat32, rng);
  PushLists lists;
  ASSERT_TRUE(partitioner.partition(in.view(), &lists).isOk());
  int64_t most = 0;
  for (int p = 0; p < parts; ++p) most = std::max(most, lists.count(p));
  const double imbalance = static_cast<double>(most) / (static_cast<double>(nnz) / parts);
  EXPECT_LT(imbalance, 1.1);
  EXPECT_EQ(lists.total(), nnz);
  // A contiguous range split of the same indices, for contrast, is far off on Zipf data.
  if (GetParam() == Skew::kZipf) {
    std::vector<int64_t> rangeLoad(parts, 0);
    for (int64_t idx : in.indices) ++rangeLoad[idx / ((rows + parts - 1) / parts)];
    const double rangeImbalance =
        static_cast<double>(*std::max_element(rangeLoad.begin(), rangeLoad.end())) /
        (static_cast<double>(nnz) / parts);
    EXPECT_GT(rangeImbalance, 3.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Skews,
                         PushBalance,
                         ::testing::Values(Skew::kUniform, Skew::kZipf),
                         [](const auto& info) {
                           return info.param == Skew::kUniform ? "uniform" : "zipf";
                         });

TEST(SortPartitioner, MatchesAlgorithm1) {
  std::mt19937_64 rng(16);
  const IndexMap map(50000, 6, 9);
  std::vector<int64_t> idx;
  for (int i = 0; i < 20000; ++i) idx.push_back(testing::zipfDraw(50000, 1.1, rng));
  auto in = makeSparse(idx, 50000, 2, DataType::kBFloat16, rng);
  PushLists lists;
  PartitionStats stats;
  ASSERT_TRUE(sortPartition(map, in.view(), &lists, &stats).isOk());
  int64_t repeats = 0;
  EXPECT_EQ(fromPushLists(map, lists, &repeats), coalesce(in.view()));
  EXPECT_EQ(repeats, 0);
  for (int p = 0; p < lists.numParts(); ++p) {
    EXPECT_TRUE(std::is_sorted(lists.positions.begin() + lists.offsets[p],
                               lists.positions.begin() + lists.offsets[p + 1]));
  }
}

}  // namespace
}  // namespace zen
