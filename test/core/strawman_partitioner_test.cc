#include "core/strawman_partitioner.h"

#include <gtest/gtest.h>

#include <random>

#include "test/common/sparse_inputs.h"

namespace zen {
namespace {

TEST(Strawman, ClosedFormLossMatchesThePaper) {
  EXPECT_NEAR(strawmanExpectedLoss(0.4), 0.176, 0.001);
  EXPECT_NEAR(strawmanExpectedLoss(0.1), 0.048, 0.001);
}

class StrawmanLoss : public ::testing::TestWithParam<double> {};

// Appendix A: one hash, collisions overwrite. Measured loss within one point of L(load).
TEST_P(StrawmanLoss, WithinOnePointOfTheClosedForm) {
  const double load = GetParam();
  const int parts = 16;
  const int64_t rows = 10'000'000;
  const int64_t nnz = 200'000;
  std::mt19937_64 rng(31);
  const IndexMap map(rows, parts, 4);
  auto in = testing::makeSparse(testing::distinctIndices(rows, nnz, testing::Skew::kUniform, rng),
                                rows, 1, DataType::kFloat32, rng);
  const auto slotsPerPart = static_cast<int64_t>(nnz / load / parts);
  PushLists lists;
  PartitionStats stats;
  ASSERT_TRUE(strawmanPartition(map, in.view(), slotsPerPart, 8, &lists, &stats).isOk());
  const double lost = static_cast<double>(stats.lost) / static_cast<double>(nnz);
  EXPECT_NEAR(lost, strawmanExpectedLoss(load), 0.01);
  EXPECT_EQ(stats.lost + lists.total(), nnz);
}

INSTANTIATE_TEST_SUITE_P(Loads, StrawmanLoss, ::testing::Values(0.4, 0.1));

}  // namespace
}  // namespace zen
