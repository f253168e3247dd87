// A sparse bucket (ops/cpu_sparse_bucket.h): tensors fused into one index space, and a
// coalesced result split back into each tensor's output, against a per-tensor reference.
// Dense outputs are poisoned first (every element must be written) and a large one is
// written in pieces on a pool; row sizes cover the fixed-size copies and others.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "ops/cpu_sparse_bucket.h"

namespace zen::ops::testing {
namespace {

// One tensor of the bucket: its rows, whether it wants a dense output, whether this rank
// posted it.
struct Part {
  int64_t rows;
  bool denseOutput;
  bool present;
};

class SparseBucketTest : public ::testing::TestWithParam<int64_t> {
 protected:
  int64_t rowSize() const { return GetParam(); }
  size_t rowBytes() const { return static_cast<size_t>(rowSize()) * sizeof(float); }

  // A response over parts, their row offsets back to back.
  Response responseOf(const std::vector<Part>& parts) const {
    Response r;
    r.dtype = DataType::kFloat32;
    r.rowSize = rowSize();
    for (size_t i = 0; i < parts.size(); ++i) {
      r.tensorNames.push_back("t" + std::to_string(i));
      r.shapes.push_back(TensorShape{parts[i].rows, rowSize()});
      r.rowOffsets.push_back(r.totalRows);
      r.totalRows += parts[i].rows;
    }
    return r;
  }

  // About one bucket row in `every`, ascending, each value its index and column.
  SparseTensor resultOf(const Response& r, int every, uint64_t seed) const {
    SparseTensor t;
    t.numRows = r.totalRows;
    t.rowSize = rowSize();
    std::mt19937_64 rng(seed);
    for (int64_t i = 0; i < r.totalRows; ++i) {
      if (static_cast<int>(rng() % static_cast<uint64_t>(every)) == 0) t.indices.push_back(i);
    }
    t.values.resize(t.indices.size() * rowBytes());
    auto* v = reinterpret_cast<float*>(t.values.data());
    for (size_t k = 0; k < t.indices.size(); ++k) {
      for (int64_t c = 0; c < rowSize(); ++c) {
        v[k * static_cast<size_t>(rowSize()) + static_cast<size_t>(c)] =
            static_cast<float>(t.indices[k] % 1000) + 0.5f * static_cast<float>(c + 1);
      }
    }
    return t;
  }

  // Tensor i's rows of the result, dense.
  std::vector<float> expectedDense(const Response& r, size_t i, const SparseTensor& result) const {
    std::vector<float> dense(static_cast<size_t>(r.shapes[i].numElements()), 0.0f);
    for (size_t k = 0; k < result.indices.size(); ++k) {
      const int64_t local = result.indices[k] - r.rowOffsets[i];
      if (local < 0 || local >= r.shapes[i].numRows()) continue;
      std::memcpy(dense.data() + static_cast<size_t>(local * rowSize()),
                  result.values.data() + k * rowBytes(), rowBytes());
    }
    return dense;
  }

  // Splits result into entries made for parts, on pool (or none), and checks every present
  // part's output.
  void splitAndCheck(const std::vector<Part>& parts, const SparseTensor& result, ThreadPool* pool) {
    const Response r = responseOf(parts);
    std::vector<std::vector<float>> dense(parts.size());
    std::vector<std::unique_ptr<TensorEntry>> owned;
    std::vector<TensorEntry*> entries;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!parts[i].present) {
        entries.push_back(nullptr);
        continue;
      }
      owned.push_back(std::make_unique<TensorEntry>());
      TensorEntry& e = *owned.back();
      if (parts[i].denseOutput) {
        dense[i].assign(static_cast<size_t>(r.shapes[i].numElements()),
                        std::numeric_limits<float>::quiet_NaN());
        e.output = DenseView{dense[i].data(), DataType::kFloat32, r.shapes[i], Device::cpu()};
      } else {
        e.handle = std::make_shared<HandleState>(Callback());
      }
      entries.push_back(&e);
    }
    SparseBucket::split(r, entries, result, pool);
    for (size_t i = 0; i < parts.size(); ++i) {
      if (entries[i] == nullptr) continue;
      const std::vector<float> want = expectedDense(r, i, result);
      if (parts[i].denseOutput) {
        // memcmp: a NaN left anywhere fails, and -0.0f would not pass for 0.0f.
        ASSERT_EQ(dense[i].size(), want.size());
        EXPECT_EQ(std::memcmp(dense[i].data(), want.data(), want.size() * sizeof(float)), 0)
            << "tensor " << i;
        continue;
      }
      const SparseTensor& out = entries[i]->handle->result().sparse;
      EXPECT_EQ(out.numRows, parts[i].rows);
      EXPECT_EQ(out.rowSize, rowSize());
      std::vector<float> got(want.size(), 0.0f);
      for (size_t k = 0; k < out.indices.size(); ++k) {
        ASSERT_GE(out.indices[k], 0);
        ASSERT_LT(out.indices[k], parts[i].rows);
        if (k > 0) {
          ASSERT_LT(out.indices[k - 1], out.indices[k]);
        }
        std::memcpy(got.data() + static_cast<size_t>(out.indices[k] * rowSize()),
                    out.values.data() + k * rowBytes(), rowBytes());
      }
      EXPECT_EQ(got, want) << "tensor " << i;
    }
  }

  // Rows of a tensor of about `bytes`.
  int64_t rowsOf(size_t bytes) const { return static_cast<int64_t>(bytes / rowBytes()) + 7; }
};

TEST_P(SparseBucketTest, SplitFillsEveryKindOfOutput) {
  // Small tensors of each kind, one absent, one with no rows in the result (the last).
  const std::vector<Part> parts = {{300, false, true}, {17, true, true},  {1000, true, false},
                                   {1, false, true},   {450, true, true}, {5, true, true}};
  Response r = responseOf(parts);
  SparseTensor result = resultOf(r, 3, 11);
  while (!result.indices.empty() && result.indices.back() >= r.rowOffsets.back()) {
    result.indices.pop_back();
  }
  result.values.resize(result.indices.size() * rowBytes());
  splitAndCheck(parts, result, nullptr);
  ThreadPool pool(3);
  splitAndCheck(parts, result, &pool);
}

TEST_P(SparseBucketTest, ALargeDenseOutputIsWrittenInPiecesOnThePool) {
  // 5 MiB and more: pieces of 1 MiB, as many as the pool's threads; a sparse and a small
  // dense tensor around it.
  const std::vector<Part> parts = {
      {100, false, true}, {rowsOf(size_t{5} << 20), true, true}, {333, true, true}};
  const Response r = responseOf(parts);
  for (int every : {2, 25, 1000}) {
    const SparseTensor result = resultOf(r, every, 17 + static_cast<uint64_t>(every));
    for (int threads : {1, 2, 3, 8}) {
      SCOPED_TRACE("one row in " + std::to_string(every) + ", " + std::to_string(threads) +
                   " threads");
      ThreadPool pool(threads);
      splitAndCheck(parts, result, &pool);
    }
  }
}

TEST_P(SparseBucketTest, FuseShiftsIndicesAndMarksOutOfRangeOnes) {
  const std::vector<Part> parts = {{10, false, true}, {20, true, false}, {30, false, true}};
  const Response r = responseOf(parts);
  const std::vector<int64_t> a = {9, 0, 9}, c = {29, 30, -1, 4};
  std::vector<float> av(a.size() * static_cast<size_t>(rowSize()), 1.0f);
  std::vector<float> cv(c.size() * static_cast<size_t>(rowSize()), 2.0f);
  TensorEntry ea, ec;
  ea.sparseInput = SparseView{a.data(), av.data(), 3, 10, rowSize(), DataType::kFloat32, {}};
  ec.sparseInput = SparseView{c.data(), cv.data(), 4, 30, rowSize(), DataType::kFloat32, {}};
  SparseBucket bucket;
  std::string bad;
  const SparseView fused = bucket.fuse(r, {&ea, nullptr, &ec}, &bad);
  ASSERT_EQ(fused.nnz, 7);
  EXPECT_EQ(fused.numRows, 60);
  EXPECT_EQ(std::vector<int64_t>(fused.indices, fused.indices + 7),
            (std::vector<int64_t>{9, 0, 9, 59, -1, -1, 34}));
  EXPECT_EQ(bad, "tensor 't2': index 30 at position 1 is outside its 30 rows");
  const auto* v = static_cast<const float*>(fused.values);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[7 * rowSize() - 1], 2.0f);
  EXPECT_EQ(v[3 * rowSize()], 2.0f);
}

INSTANTIATE_TEST_SUITE_P(RowSizes,
                         SparseBucketTest,
                         ::testing::Values(1, 3, 8, 64),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return std::to_string(info.param) + "floats";
                         });

}  // namespace
}  // namespace zen::ops::testing
