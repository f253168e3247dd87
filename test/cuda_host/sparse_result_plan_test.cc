// A sparse bucket's result split on the device (cuda/sparse_result.h), its host side and
// per-entry steps on the CPU: the row ranges, key bits, the split from the bounds, the
// memory layout, and the kernels' steps (cuda/sparse_result_steps.h) with the cub sort
// replaced by a sort by unsigned key, checked against a direct per-tensor reference (each
// tensor's rows filtered, sorted and made local, as ops::SparseBucket::split gives them).
// The kernels themselves run against the CPU executor on a GPU in test/gpu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/sparse_result_plan.h"
#include "cuda/sparse_result_steps.h"

namespace zen::cuda {
namespace {

Response bucket(const std::vector<int64_t>& rows) {
  Response r;
  r.type = ResponseType::kSparseAllreduce;
  int64_t at = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    r.tensorNames.push_back("t" + std::to_string(i));
    r.shapes.push_back(TensorShape({rows[i], 3}));
    r.rowOffsets.push_back(at);
    at += rows[i];
  }
  r.totalRows = at;
  r.rowSize = 3;
  return r;
}

TEST(SparseResultCuts, TheTensorsRowRangesBackToBack) {
  auto cuts = sparseResultCuts(bucket({4, 0, 3, 1}));
  ASSERT_TRUE(cuts.isOk()) << cuts.status().toString();
  EXPECT_EQ(cuts.value(), (std::vector<int64_t>{0, 4, 4, 7, 8}));
  cuts = sparseResultCuts(bucket({}));
  ASSERT_TRUE(cuts.isOk());
  EXPECT_EQ(cuts.value(), (std::vector<int64_t>{0}));
}

TEST(SparseResultCuts, RefusesALayoutThatIsNotBackToBack) {
  Response r = bucket({4, 3});
  r.rowOffsets[1] = 5;
  Status s = sparseResultCuts(r).status();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("tensor 1 starts at row 5, expected 4"), std::string::npos)
      << s.message();
  r = bucket({4, 3});
  r.totalRows = 8;
  s = sparseResultCuts(r).status();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("7 rows, totalRows 8"), std::string::npos) << s.message();
  r = bucket({4, 3});
  r.rowOffsets.pop_back();
  EXPECT_EQ(sparseResultCuts(r).status().code(), StatusCode::kInternal);
}

TEST(SparseResultKeyBits, EnoughForEveryRowAndAtLeastOne) {
  EXPECT_EQ(sparseResultKeyBits(0), 1);
  EXPECT_EQ(sparseResultKeyBits(1), 1);
  EXPECT_EQ(sparseResultKeyBits(2), 1);
  EXPECT_EQ(sparseResultKeyBits(3), 2);
  EXPECT_EQ(sparseResultKeyBits(1024), 10);
  EXPECT_EQ(sparseResultKeyBits(1025), 11);
  EXPECT_EQ(sparseResultKeyBits(int64_t{1} << 40), 40);
}

TEST(SplitSparseResult, EachTensorsSliceFromTheBounds) {
  auto split = splitSparseResult({0, 2, 2, 5, 6}, 6, 0);
  ASSERT_TRUE(split.isOk()) << split.status().toString();
  EXPECT_EQ(split.value().begin, (std::vector<int64_t>{0, 2, 2, 5}));
  EXPECT_EQ(split.value().count, (std::vector<int64_t>{2, 0, 3, 1}));
  split = splitSparseResult({0, 0}, 0, 0);
  ASSERT_TRUE(split.isOk());
  EXPECT_EQ(split.value().count, (std::vector<int64_t>{0}));
}

TEST(SplitSparseResult, RefusesBoundsThatDoNotSplitTheResult) {
  EXPECT_EQ(splitSparseResult({}, 0, 0).status().code(), StatusCode::kInternal);
  EXPECT_EQ(splitSparseResult({1, 6}, 6, 0).status().code(), StatusCode::kInternal);
  const Status s = splitSparseResult({0, 2, 5}, 6, 0).status();  // a row past the last cut
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("a row outside the bucket"), std::string::npos) << s.message();
  EXPECT_EQ(splitSparseResult({0, 4, 2, 6}, 6, 0).status().code(), StatusCode::kInternal);
}

TEST(SparseResultLayout, RowsAlignedAfterTheIndices) {
  EXPECT_EQ(layoutSparseResult(0, 12).bytes, 0u);
  SparseResultLayout l = layoutSparseResult(3, 6);
  EXPECT_EQ(l.valuesOffset, 32u);
  EXPECT_EQ(l.bytes, 32u + 18u);
  l = layoutSparseResult(2, 4);
  EXPECT_EQ(l.valuesOffset, 16u);
  EXPECT_EQ(l.bytes, 24u);
}

TEST(SparseResultSteps, LocalRowSkipsEmptyTensors) {
  const std::vector<int64_t> cuts = {0, 4, 4, 7, 8};
  const auto m = static_cast<int64_t>(cuts.size());
  EXPECT_EQ(sparse_result::localRow(cuts.data(), m, 0), 0);
  EXPECT_EQ(sparse_result::localRow(cuts.data(), m, 3), 3);
  EXPECT_EQ(sparse_result::localRow(cuts.data(), m, 4), 0);  // tensor 2's, not empty tensor 1's
  EXPECT_EQ(sparse_result::localRow(cuts.data(), m, 6), 2);
  EXPECT_EQ(sparse_result::localRow(cuts.data(), m, 7), 0);
  EXPECT_EQ(sparse_result::localRow(cuts.data(), m, -1), -1);
}

TEST(SparseResultSteps, ANegativeRowSortsLastAndFailsTheSplit) {
  // The radix sort's order: unsigned, so -1 comes after every valid row.
  const std::vector<int64_t> sorted = {1, 5, -1};
  const std::vector<int64_t> cuts = {0, 4, 8};
  std::vector<int64_t> bounds;
  for (int64_t c : cuts) bounds.push_back(sparse_result::rowsBelow(sorted.data(), 3, c));
  EXPECT_EQ(bounds, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(splitSparseResult(bounds, 3, 0).status().code(), StatusCode::kInternal);
}

TEST(SparseResultSteps, ARowPastTheKeyBitsIsCountedOutside) {
  // totalRows 8 sorts 3 key bits: row 9 (0b1001) sorts as 1, before row 5, and the bounds of
  // [9, 5] look like a valid split (tensor 1 would get rows 9 and 5, 9 scattered past its end).
  const std::vector<int64_t> cuts = {0, 4, 8};
  ASSERT_EQ(sparseResultKeyBits(cuts.back()), 3);
  const std::vector<int64_t> sortedByKeyBits = {9, 5};
  std::vector<int64_t> bounds;
  for (int64_t c : cuts) bounds.push_back(sparse_result::rowsBelow(sortedByKeyBits.data(), 2, c));
  EXPECT_EQ(bounds, (std::vector<int64_t>{0, 0, 2}));
  EXPECT_TRUE(splitSparseResult(bounds, 2, 0).isOk());  // why the bounds alone are not enough
  EXPECT_TRUE(sparse_result::outsideBucket(9, cuts.back()));
  EXPECT_TRUE(sparse_result::outsideBucket(8, cuts.back()));
  EXPECT_TRUE(sparse_result::outsideBucket(-1, cuts.back()));
  EXPECT_FALSE(sparse_result::outsideBucket(7, cuts.back()));
  EXPECT_FALSE(sparse_result::outsideBucket(0, cuts.back()));
  const Status s = splitSparseResult(bounds, 2, 1).status();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("1 of them outside the bucket"), std::string::npos) << s.message();
}

// The device pipeline on the CPU for random buckets (empty tensors, empty results, one
// tensor) against the reference, for a sparse result and a dense output of every tensor.
TEST(SparseResultSteps, SortedSplitEqualsEachTensorsOwnRows) {
  std::mt19937_64 rng(20260401);
  constexpr size_t kRowBytes = 6;
  for (int trial = 0; trial < 200; ++trial) {
    const int tensors = 1 + static_cast<int>(rng() % 6);
    std::vector<int64_t> rows;
    for (int i = 0; i < tensors; ++i) rows.push_back(rng() % 4 == 0 ? 0 : 1 + rng() % 40);
    const Response r = bucket(rows);
    auto cutsOr = sparseResultCuts(r);
    ASSERT_TRUE(cutsOr.isOk());
    const std::vector<int64_t>& cuts = cutsOr.value();
    // The coalesced result: distinct bucket rows in any order, each row's bytes its own.
    std::vector<int64_t> indices;
    for (int64_t v = 0; v < r.totalRows; ++v) {
      if (rng() % 3 == 0) indices.push_back(v);
    }
    std::shuffle(indices.begin(), indices.end(), rng);
    const auto nnz = static_cast<int64_t>(indices.size());
    std::vector<unsigned char> values(indices.size() * kRowBytes);
    for (auto& b : values) b = static_cast<unsigned char>(rng());

    // Steps 1-3: the permutation sorted by unsigned row, the rows gathered.
    std::vector<int64_t> perm(indices.size());
    std::iota(perm.begin(), perm.end(), int64_t{0});
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
      return static_cast<uint64_t>(indices[a]) < static_cast<uint64_t>(indices[b]);
    });
    std::vector<int64_t> sorted(indices.size());
    std::vector<unsigned char> sortedValues(values.size());
    for (size_t k = 0; k < perm.size(); ++k) {
      sorted[k] = indices[perm[k]];
      std::memcpy(&sortedValues[k * kRowBytes], &values[perm[k] * kRowBytes], kRowBytes);
    }
    // Step 4: the bounds (what the host reads), then the split.
    std::vector<int64_t> bounds;
    for (int64_t c : cuts) bounds.push_back(sparse_result::rowsBelow(sorted.data(), nnz, c));
    const auto outside = std::count_if(indices.begin(), indices.end(), [&](int64_t v) {
      return sparse_result::outsideBucket(v, r.totalRows);
    });
    EXPECT_EQ(outside, 0);
    auto split = splitSparseResult(bounds, nnz, outside);
    ASSERT_TRUE(split.isOk()) << split.status().toString();
    // Step 5: local rows, in place; skipped for one tensor (its rows are local already).
    if (cuts.size() > 2) {
      for (int64_t& v : sorted) v = sparse_result::localRow(cuts.data(), cuts.size(), v);
    }

    for (int i = 0; i < tensors; ++i) {
      std::vector<int64_t> want;
      for (int64_t v : indices) {
        if (v >= cuts[i] && v < cuts[i + 1]) want.push_back(v);
      }
      std::sort(want.begin(), want.end());
      const int64_t begin = split.value().begin[i];
      ASSERT_EQ(split.value().count[i], static_cast<int64_t>(want.size())) << "tensor " << i;
      std::vector<unsigned char> dense(static_cast<size_t>(rows[i]) * kRowBytes, 0);
      std::vector<unsigned char> wantDense(dense.size(), 0);
      for (size_t k = 0; k < want.size(); ++k) {
        const int64_t local = sorted[begin + k];
        ASSERT_EQ(local, want[k] - cuts[i]) << "tensor " << i << " entry " << k;
        const size_t from = static_cast<size_t>(std::find(indices.begin(), indices.end(), want[k]) -
                                                indices.begin());
        EXPECT_EQ(std::memcmp(&sortedValues[(begin + k) * kRowBytes], &values[from * kRowBytes],
                              kRowBytes),
                  0)
            << "tensor " << i << " row " << want[k];
        // A dense output: the slice's rows scattered at their local rows.
        std::memcpy(&dense[local * kRowBytes], &sortedValues[(begin + k) * kRowBytes], kRowBytes);
        std::memcpy(&wantDense[(want[k] - cuts[i]) * kRowBytes], &values[from * kRowBytes],
                    kRowBytes);
      }
      EXPECT_EQ(dense, wantDense) << "tensor " << i;
    }
  }
}

}  // namespace
}  // namespace zen::cuda
