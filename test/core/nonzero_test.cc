#include "core/nonzero.h"

#include <gtest/gtest.h>

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
}

}  // namespace
}  // namespace zen
