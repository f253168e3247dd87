#include "core/nonzero.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace zen {
namespace {

TEST(Nonzero, KeepsRowsWithAnyNonzeroElement) {
  // 5 rows x 2: row 1 has -0.0 only (zero), row 3 has one non-zero element.
  std::vector<float> dense = {0, 0, -0.0f, 0, 1, 2, 0, 3, 0, 0};
  DenseView view{dense.data(), DataType::kFloat32, TensorShape{5, 2}, Device::cpu()};
  SparseTensor out;
  ASSERT_TRUE(extractNonzeroRows(view, &out).isOk());
  EXPECT_EQ(out.indices, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out.numRows, 5);
  EXPECT_EQ(out.rowSize, 2);
  const auto* v = reinterpret_cast<const float*>(out.values.data());
  EXPECT_EQ(std::vector<float>(v, v + 4), (std::vector<float>{1, 2, 0, 3}));
}

TEST(Nonzero, HalfPrecisionAndEmpty) {
  std::vector<Half> dense = {toHalf(0), toHalf(0.5f), toHalf(0)};
  DenseView view{dense.data(), DataType::kFloat16, TensorShape{3}, Device::cpu()};
  SparseTensor out;
  ASSERT_TRUE(extractNonzeroRows(view, &out).isOk());
  EXPECT_EQ(out.indices, (std::vector<int64_t>{1}));
  std::vector<Half> zeros(4, toHalf(0));
  view = DenseView{zeros.data(), DataType::kFloat16, TensorShape{4}, Device::cpu()};
  ASSERT_TRUE(extractNonzeroRows(view, &out).isOk());
  EXPECT_TRUE(out.indices.empty());
  EXPECT_TRUE(out.values.empty());  // the earlier call's row is gone
}

// Rows of a size the fixed-size copies do not cover (12 bytes) and of one they do (8 bytes,
// int64), NaN kept, into an output that held a larger result before.
TEST(Nonzero, OddRowSizesNaNAndReuse) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> dense = {0, 0, 0, 0, nan, 0, -0.0f, 0, -0.0f, 7, 8, 9};
  SparseTensor out;
  std::vector<int64_t> ints = {0, 5, 0, -3, 0, 0, 0, 0, 0, 0};
  DenseView view{ints.data(), DataType::kInt64, TensorShape{10}, Device::cpu()};
  ASSERT_TRUE(extractNonzeroRows(view, &out).isOk());
  EXPECT_EQ(out.indices, (std::vector<int64_t>{1, 3}));
  const auto* i = reinterpret_cast<const int64_t*>(out.values.data());
  EXPECT_EQ(std::vector<int64_t>(i, i + 2), (std::vector<int64_t>{5, -3}));
  view = DenseView{dense.data(), DataType::kFloat32, TensorShape{4, 3}, Device::cpu()};
  ASSERT_TRUE(extractNonzeroRows(view, &out).isOk());
  EXPECT_EQ(out.indices, (std::vector<int64_t>{1, 3}));
  ASSERT_EQ(out.values.size(), 2 * 3 * sizeof(float));
  const auto* v = reinterpret_cast<const float*>(out.values.data());
  EXPECT_EQ(v[0], 0);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], 0);
  EXPECT_EQ(std::vector<float>(v + 3, v + 6), (std::vector<float>{7, 8, 9}));
}

}  // namespace
}  // namespace zen
