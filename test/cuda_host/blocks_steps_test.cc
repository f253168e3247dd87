// The blocks scheme's GPU steps (cuda/blocks_steps.h) run on the CPU for n simulated ranks in
// the order gpu_sparse_allreduce_blocks.cc launches them (flags, scan, push, exchange, add in
// rank order, pull, decode), against the closed-form result of the CPU scheme
// (ops/sparse_allreduce_blocks.cc: every rank's rows coalesced and rounded once, summed over
// ranks in the accumulator type, finished once; the union of the rows sent). Random inputs,
// fresh every run (the seed is printed on failure); corrupt lists are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "cuda/blocks_steps.h"
#include "ops/blocks_wire.h"

namespace zen::cuda::blocks {
namespace {

std::vector<int64_t> exclusiveScan(const std::vector<int64_t>& in) {
  std::vector<int64_t> out(in.size(), 0);
  for (size_t i = 1; i < in.size(); ++i) out[i] = out[i - 1] + in[i - 1];
  return out;
}

// One list of blocks as it travels (three arrays).
template <typename T>
struct List {
  std::vector<uint32_t> ids;
  std::vector<uint32_t> masks;
  std::vector<T> rows;
  int64_t count() const { return static_cast<int64_t>(ids.size()); }
};

template <typename T>
void append(List<T>* to, const List<T>& from, int64_t first, int64_t count, const Geometry& g) {
  to->ids.insert(to->ids.end(), from.ids.begin() + first, from.ids.begin() + first + count);
  to->masks.insert(to->masks.end(), from.masks.begin() + first * g.maskWords,
                   from.masks.begin() + (first + count) * g.maskWords);
  to->rows.insert(to->rows.end(), from.rows.begin() + first * g.blockElements(),
                  from.rows.begin() + (first + count) * g.blockElements());
}

template <typename T>
unsigned long long check(const Geometry& g, const List<T>& l, int64_t lo, int64_t hi) {
  unsigned long long bad = ~0ull;
  for (int64_t k = 0; k < l.count(); ++k)
    checkBlock(g, l.ids.data(), l.masks.data(), k, lo, hi, 0, &bad);
  return bad;
}

struct Input {
  std::vector<int64_t> indices;
  std::vector<double> values;  // converted to T
};

template <typename T>
struct Output {
  std::vector<int64_t> indices;
  std::vector<T> values;
  std::vector<T> dense;
  std::vector<uint64_t> loads;
};

// The GPU scheme's data flow on the CPU; every rank decodes the same pull lists.
template <typename T>
Output<T> simulate(const std::vector<Input>& inputs,
                   int64_t numRows,
                   int64_t rowSize,
                   int divisor) {
  using A = AccumulatorT<T>;
  const int n = static_cast<int>(inputs.size());
  const Geometry g = makeGeometry(numRows, rowSize, n);
  const int64_t R = g.rowsPerBlock;
  // Push: every rank's blocks, split per owner.
  std::vector<std::vector<List<T>>> toOwner(n, std::vector<List<T>>(n));
  for (int p = 0; p < n; ++p) {
    const Input& in = inputs[p];
    const auto nnz = static_cast<int64_t>(in.indices.size());
    std::vector<T> values;
    for (double v : in.values) values.push_back(fromAccumulator<T>(static_cast<A>(v)));
    std::vector<int64_t> flags(g.numBlocks + 1, 0);
    for (int64_t e = 0; e < nnz; ++e) markEntry(g, in.indices.data(), e, flags.data());
    const std::vector<int64_t> slots = exclusiveScan(flags);
    const int64_t total = slots[g.numBlocks];
    std::vector<A> acc(static_cast<size_t>(total * g.blockElements()), A{0});
    List<T> mine;
    mine.ids.assign(total, 0xdeadbeef);
    mine.masks.assign(total * g.maskWords, 0);
    mine.rows.resize(acc.size());
    for (int64_t i = 0; i < nnz * rowSize; ++i) {
      pushEntryItem(g, in.indices.data(), values.data(), slots.data(), i, acc.data(),
                    mine.masks.data(), mine.ids.data());
    }
    for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i)
      roundPushItem(acc.data(), i, mine.rows.data());
    for (int q = 0; q < n; ++q) {
      const int64_t first = slots[g.firstBlock(q)];
      append(&toOwner[q][p], mine, first, slots[g.firstBlock(q + 1)] - first, g);
    }
  }
  // Owners: check, add in rank order, pull.
  List<T> pulled;
  Output<T> out;
  for (int j = 0; j < n; ++j) {
    const int64_t first = g.firstBlock(j);
    const int64_t end = g.firstBlock(j + 1);
    const int64_t firstRow = first * R;
    const int64_t ownRows = std::max<int64_t>(0, std::min(end * R, numRows) - firstRow);
    std::vector<A> acc(static_cast<size_t>(ownRows * rowSize), A{0});
    std::vector<uint8_t> seen(static_cast<size_t>(ownRows), 0);
    uint64_t load = 0;
    for (int p = 0; p < n; ++p) {
      const List<T>& l = toOwner[j][p];
      EXPECT_EQ(check(g, l, first, end), ~0ull) << "push list " << p << " -> " << j;
      load += static_cast<uint64_t>(l.count());
      for (int64_t i = 0; i < l.count() * g.blockElements(); ++i) {
        addItem(g, firstRow, l.ids.data(), l.masks.data(), l.rows.data(), i, acc.data(),
                seen.data());
      }
    }
    out.loads.push_back(load);
    const int64_t ownBlocks = end - first;
    std::vector<int64_t> flags(ownBlocks + 1, 0);
    for (int64_t b = 0; b < ownBlocks; ++b)
      ownBlockFlag(g, first, firstRow, seen.data(), b, flags.data());
    const std::vector<int64_t> slots = exclusiveScan(flags);
    const int64_t a = slots[ownBlocks];
    List<T> part;
    part.ids.assign(a, 0xdeadbeef);
    part.masks.assign(a * g.maskWords, 0);
    part.rows.assign(a * g.blockElements(), fromAccumulator<T>(A{77}));  // poison
    for (int64_t i = 0; i < ownBlocks * g.blockElements(); ++i) {
      pullItem(g, first, firstRow, flags.data(), slots.data(), acc.data(), seen.data(), divisor, i,
               part.ids.data(), part.masks.data(), part.rows.data());
    }
    EXPECT_EQ(check(g, part, first, end), ~0ull) << "pull list of " << j;
    append(&pulled, part, 0, part.count(), g);
  }
  // Decode: dense and sparse.
  out.dense.assign(static_cast<size_t>(numRows * rowSize), fromAccumulator<T>(A{0}));
  for (int64_t i = 0; i < pulled.count() * g.blockElements(); ++i) {
    decodeDenseItem(g, pulled.ids.data(), pulled.masks.data(), pulled.rows.data(), i,
                    out.dense.data());
  }
  std::vector<int64_t> counts(pulled.count() + 1, 0);
  for (int64_t k = 0; k < pulled.count(); ++k)
    blockRowCount(g, pulled.masks.data(), k, counts.data());
  const std::vector<int64_t> offsets = exclusiveScan(counts);
  const int64_t rows = offsets.back();
  out.indices.assign(rows, -1);
  out.values.assign(rows * rowSize, fromAccumulator<T>(A{55}));
  for (int64_t i = 0; i < pulled.count() * g.blockElements(); ++i) {
    decodeSparseItem(g, pulled.ids.data(), pulled.masks.data(), pulled.rows.data(), offsets.data(),
                     i, out.indices.data(), out.values.data());
  }
  return out;
}

// The CPU scheme's result in closed form.
template <typename T>
Output<T> expected(const std::vector<Input>& inputs,
                   int64_t numRows,
                   int64_t rowSize,
                   int divisor) {
  using A = AccumulatorT<T>;
  std::map<int64_t, std::vector<A>> sums;  // ascending
  for (const Input& in : inputs) {
    std::map<int64_t, std::vector<A>> mine;  // coalesced in entry order
    for (size_t e = 0; e < in.indices.size(); ++e) {
      auto& row = mine[in.indices[e]];
      row.resize(rowSize, A{0});
      for (int64_t c = 0; c < rowSize; ++c) {
        row[c] += toAccumulator<A>(fromAccumulator<T>(static_cast<A>(in.values[e * rowSize + c])));
      }
    }
    for (auto& [index, row] : mine) {
      auto& total = sums[index];
      total.resize(rowSize, A{0});
      for (int64_t c = 0; c < rowSize; ++c)
        total[c] += toAccumulator<A>(fromAccumulator<T>(row[c]));
    }
  }
  Output<T> out;
  out.dense.assign(static_cast<size_t>(numRows * rowSize), fromAccumulator<T>(A{0}));
  for (auto& [index, row] : sums) {
    out.indices.push_back(index);
    for (int64_t c = 0; c < rowSize; ++c) {
      const T v = finishElement<T>(row[c], divisor);
      out.values.push_back(v);
      out.dense[index * rowSize + c] = v;
    }
  }
  return out;
}

template <typename T>
std::vector<double> asDoubles(const std::vector<T>& v) {
  std::vector<double> out;
  for (const T& x : v) out.push_back(static_cast<double>(toAccumulator<double>(x)));
  return out;
}

template <typename T>
void runTrials(const char* name) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << name << " seed " << seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = std::vector<int>{1, 2, 3, 4, 7}[rng() % 5];
    const int64_t rowSize = std::vector<int64_t>{1, 3, 40, 256, 300}[rng() % 5];
    const int64_t numRows = 1 + static_cast<int64_t>(rng() % 3000);
    const double density = std::vector<double>{0.0, 0.01, 0.1, 0.3}[rng() % 4];
    const bool skewed = rng() % 2 == 0;
    std::vector<Input> inputs(n);
    for (Input& in : inputs) {
      const auto nnz = static_cast<int64_t>(density * static_cast<double>(numRows));
      for (int64_t e = 0; e < nnz; ++e) {
        int64_t index = static_cast<int64_t>(rng() % numRows);
        if (skewed) index = index * index / numRows / 4;  // low rows, repeats
        in.indices.push_back(index);
        for (int64_t c = 0; c < rowSize; ++c)
          in.values.push_back(static_cast<double>(static_cast<int>(rng() % 17) - 8));
      }
    }
    if (rng() % 4 == 0) inputs[rng() % n].indices.push_back(numRows - 1);  // the last row
    for (Input& in : inputs) in.values.resize(in.indices.size() * rowSize, 1.0);
    for (int divisor : {1, n}) {
      SCOPED_TRACE(testing::Message() << "n " << n << " rows " << numRows << " rowSize " << rowSize
                                      << " divisor " << divisor);
      const Output<T> got = simulate<T>(inputs, numRows, rowSize, divisor);
      const Output<T> want = expected<T>(inputs, numRows, rowSize, divisor);
      EXPECT_EQ(got.indices, want.indices);
      EXPECT_EQ(asDoubles(got.values), asDoubles(want.values));
      EXPECT_EQ(asDoubles(got.dense), asDoubles(want.dense));
      // Each owner's load: the blocks it received, as the CPU scheme counts them.
      const ops::BlockGeometry cpu(numRows, rowSize, n, sizeof(T));
      std::vector<uint64_t> loads(n, 0);
      for (const Input& in : inputs) {
        std::vector<int64_t> blocks;
        for (int64_t index : in.indices) blocks.push_back(index / cpu.rowsPerBlock);
        std::sort(blocks.begin(), blocks.end());
        blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
        for (int64_t b : blocks) ++loads[cpu.owner(b)];
      }
      EXPECT_EQ(got.loads, loads);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(BlocksSteps, GeometryIsTheCpuSchemes) {
  for (int64_t rows : {1, 5, 255, 256, 257, 100000}) {
    for (int64_t rowSize : {1, 2, 3, 255, 256, 257, 1000}) {
      for (int n : {1, 2, 3, 7, 16}) {
        const ops::BlockGeometry cpu(rows, rowSize, n, 4);
        const Geometry g = makeGeometry(rows, rowSize, n);
        EXPECT_EQ(g.rowsPerBlock, cpu.rowsPerBlock);
        EXPECT_EQ(g.numBlocks, cpu.numBlocks);
        EXPECT_EQ(g.blocksPerOwner, cpu.blocksPerOwner);
        for (int j = 0; j <= n; ++j) EXPECT_EQ(g.firstBlock(j), cpu.firstBlock(j));
        for (int64_t b = 0; b < g.numBlocks; b += 1 + g.numBlocks / 7)
          EXPECT_EQ(g.rowsIn(b), cpu.rowsIn(b));
        EXPECT_EQ(g.maskWords * 32 >= g.rowsPerBlock, true);
      }
    }
  }
}

TEST(BlocksSteps, MatchTheCpuSchemeFloat32) {
  runTrials<float>("float32");
}
TEST(BlocksSteps, MatchTheCpuSchemeFloat16) {
  runTrials<Half>("float16");
}
TEST(BlocksSteps, MatchTheCpuSchemeInt64) {
  runTrials<int64_t>("int64");
}
TEST(BlocksSteps, MatchTheCpuSchemeFloat64) {
  runTrials<double>("float64");
}

TEST(BlocksSteps, CorruptListsAreRefused) {
  const Geometry g = makeGeometry(300, 4, 2);  // R = 64, blocks 0..4, owner 0: 0..2
  ASSERT_EQ(g.rowsPerBlock, 64);
  ASSERT_EQ(g.maskWords, 2);
  List<float> l;
  l.ids = {0, 2};
  l.masks = {1, 0, 0, 1u << 31};
  EXPECT_EQ(check(g, l, 0, 3), ~0ull);
  l.ids = {0, 3};  // outside the owner's range
  EXPECT_EQ(check(g, l, 0, 3), 1ull);
  l.ids = {2, 2};  // not strictly ascending
  EXPECT_EQ(check(g, l, 0, 3), 1ull);
  l.ids = {0, 2};
  l.masks = {0, 0, 0, 1};  // an empty mask
  EXPECT_EQ(check(g, l, 0, 3), 0ull);
  // The last block (4) holds rows 256..299: 44 rows, so bit 44 is past its end.
  l.ids = {3, 4};
  l.masks = {1, 0, 0, 1u << 11};
  EXPECT_EQ(check(g, l, 3, 5), ~0ull);
  l.masks = {1, 0, 0, 1u << 12};
  EXPECT_EQ(check(g, l, 3, 5), 1ull);
}

}  // namespace
}  // namespace zen::cuda::blocks
