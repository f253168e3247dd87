#include "core/traffic_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace zen {
namespace {

// n = 8, |G| = 10^6, d = 1%, gamma_8 = 5, fp32 rows, 4-byte indices.
TrafficInputs example() {
  TrafficInputs in;
  in.n = 8;
  in.numRows = 1'000'000;
  in.rankNnz = 10'000;
  in.aggregatedNnz = 50'000;
  in.rowBytes = 4;
  in.indexBytes = 4;
  return in;
}

TEST(TrafficModel, DenseRingAllreduce) {
  const TrafficEstimate t = denseAllreduceTraffic(4, 1000, 4);
  EXPECT_DOUBLE_EQ(t.push, 3000);
  EXPECT_DOUBLE_EQ(t.pull, 3000);
  EXPECT_DOUBLE_EQ(t.total(), 2.0 * 3 / 4 * 4000);
  EXPECT_DOUBLE_EQ(denseAllreduceTraffic(1, 1000, 4).total(), 0);
}

TEST(TrafficModel, BpCooIsThePapersFormula) {
  const TrafficInputs in = example();
  const TrafficEstimate t = bpCooTraffic(in);
  EXPECT_DOUBLE_EQ(t.push, 7.0 / 8 * 10'000 * 8);
  EXPECT_DOUBLE_EQ(t.pull, 7.0 / 8 * 50'000 * 8);
  // T_BP * b = 2 (n - 1) / n * (gamma + 1) * d * M, M = |G| * 4 bytes.
  const double d = 0.01, gamma = 5, m = 4e6;
  EXPECT_DOUBLE_EQ(t.total(), 2.0 * 7 / 8 * (gamma + 1) * d * m);
}

TEST(TrafficModel, BpHashBitmapPullIsDensityIndependentBitmapsPlusRows) {
  TrafficInputs in = example();
  TrafficEstimate t = bpHashBitmapTraffic(in);
  EXPECT_DOUBLE_EQ(t.push, 7.0 / 8 * 10'000 * 8);
  EXPECT_DOUBLE_EQ(t.pull, 7.0 / 8 * (125'000 + 50'000 * 4));
  // With nothing aggregated only the bitmaps travel.
  in.rankNnz = in.aggregatedNnz = 0;
  t = bpHashBitmapTraffic(in);
  EXPECT_DOUBLE_EQ(t.push, 0);
  EXPECT_DOUBLE_EQ(t.pull, 7.0 / 8 * 125'000);
  // The bitmap beats COO pull exactly above aggregated density 1/32.
  EXPECT_DOUBLE_EQ(bitmapBreakEvenDensity(4), 1.0 / 32);
  in.aggregatedNnz = in.numRows / 32.0;
  EXPECT_DOUBLE_EQ(bpHashBitmapTraffic(in).pull, bpCooTraffic(in).pull);
  in.aggregatedNnz *= 1.1;
  EXPECT_LT(bpHashBitmapTraffic(in).pull, bpCooTraffic(in).pull);
  in.aggregatedNnz /= 1.21;
  EXPECT_GT(bpHashBitmapTraffic(in).pull, bpCooTraffic(in).pull);
}

// Zen's Pull part is the smallest encoding: Elias-Fano at the example's 5 % aggregated
// density (u = 125,000 positions, a = 6,250 rows: L = 4, a (L + 1) + u / 16 bits), never more
// than the bitmap or COO, the bitmap at half density, the rows alone when full.
TEST(TrafficModel, BpZenPullPicksTheSmallestPart) {
  TrafficInputs in = example();
  const TrafficEstimate t = bpZenTraffic(in);
  EXPECT_DOUBLE_EQ(t.push, bpHashBitmapTraffic(in).push);
  EXPECT_DOUBLE_EQ(t.pull, 7.0 * (6'250 * 4 + (6'250 * 5 + 125'000 / 16.0) / 8));
  for (const double density : {1e-5, 1e-3, 0.01, 0.05, 0.2, 0.5, 0.9}) {
    in.aggregatedNnz = density * static_cast<double>(in.numRows);
    const double zen = bpZenTraffic(in).pull;
    EXPECT_LE(zen, bpHashBitmapTraffic(in).pull) << density;
    EXPECT_LE(zen, bpCooTraffic(in).pull) << density;
  }
  in.aggregatedNnz = 0.5 * static_cast<double>(in.numRows);
  EXPECT_DOUBLE_EQ(bpZenTraffic(in).pull, bpHashBitmapTraffic(in).pull);
  in.aggregatedNnz = static_cast<double>(in.numRows);
  EXPECT_DOUBLE_EQ(bpZenTraffic(in).pull, 7.0 / 8 * 1'000'000 * 4);
}

TEST(TrafficModel, AgSparseGrowsLinearlyInN) {
  TrafficInputs in = example();
  in.indexBytes = 8;
  EXPECT_DOUBLE_EQ(agSparseTraffic(in).total(), 7.0 * 10'000 * 12);
  in.n = 16;
  EXPECT_DOUBLE_EQ(agSparseTraffic(in).total(), 15.0 * 10'000 * 12);
}

TEST(TrafficModel, HcSumsTheMergedSizesWithADenseSwitch) {
  const std::vector<double> merged = {10'000, 18'000, 32'000};  // gamma_1, gamma_2, gamma_4
  EXPECT_DOUBLE_EQ(hcTraffic(merged, 1'000'000, 4, 4).total(), 60'000.0 * 8);
  // |G| = 25000 rows (100000 dense bytes): steps 2 and 3 (144000 and 256000 COO bytes) switch
  // to dense.
  EXPECT_DOUBLE_EQ(hcTraffic(merged, 25'000, 4, 4).total(), 80'000 + 100'000 + 100'000);
  // Theorem 1's comparison: HC beats BP iff sum gamma_{2^(i-1)} < (n - 1) / n * (gamma_n + 1).
  TrafficInputs in = example();
  in.aggregatedNnz = 50'000;  // gamma_8 = 5
  const double bp = bpCooTraffic(in).total();
  const double hc = hcTraffic(merged, in.numRows, 4, 4).total();
  const double sumGamma = 1.0 + 1.8 + 3.2;
  EXPECT_EQ(hc < bp, sumGamma < 7.0 / 8 * (5 + 1));
  // No overlap at all (gamma_k = k): sum 1 + 2 + 4 = 7 < 7/8 * 9, HC wins (the paper's only
  // such case is NMT at batch size 1); with overlap (above) BP wins.
  const std::vector<double> disjoint = {10'000, 20'000, 40'000};
  in.aggregatedNnz = 80'000;
  EXPECT_DOUBLE_EQ(hcTraffic(disjoint, in.numRows, 4, 4).total(), 560'000);
  EXPECT_DOUBLE_EQ(bpCooTraffic(in).total(), 630'000);
  EXPECT_GT(hc, bp);
}

}  // namespace
}  // namespace zen
