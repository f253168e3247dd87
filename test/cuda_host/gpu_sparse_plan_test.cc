// The GPU sparse allreduce's host-side logic (cuda/gpu_sparse_plan.h): the call-summary
// verdict every rank reaches, scheme resolution and receive-buffer layout.
#include "cuda/gpu_sparse_plan.h"

#include <gtest/gtest.h>

namespace zen::cuda {
namespace {

GpuCallSummary summary(uint64_t nnz) {
  GpuCallSummary s;
  s.numRows = 100;
  s.rowSize = 4;
  s.dtype = static_cast<uint64_t>(DataType::kFloat32);
  s.op = static_cast<uint64_t>(ReduceOp::kSum);
  s.scheme = static_cast<uint64_t>(Scheme::kZen);
  s.seed = 42;
  s.nnz = nnz;
  return s;
}

TEST(GpuCallSummaries, AgreeingRanksSumTheirNnz) {
  uint64_t total = 0;
  ASSERT_TRUE(checkGpuCallSummaries({summary(3), summary(0), summary(5)}, &total).isOk());
  EXPECT_EQ(total, 8u);
}

TEST(GpuCallSummaries, NamesTheRankAndFieldThatDiffers) {
  std::vector<GpuCallSummary> all = {summary(1), summary(1), summary(1)};
  all[2].dtype = static_cast<uint64_t>(DataType::kFloat16);
  uint64_t total = 0;
  Status s = checkGpuCallSummaries(all, &total);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rank 2 passed dtype float16, rank 0 float32"), std::string::npos)
      << s.message();

  all[2] = summary(1);
  all[1].numRows = 99;
  s = checkGpuCallSummaries(all, &total);
  EXPECT_NE(s.message().find("rank 1 passed numRows 99, rank 0 100"), std::string::npos)
      << s.message();

  all[1] = summary(1);
  all[1].seed = 7;
  EXPECT_NE(checkGpuCallSummaries(all, &total).message().find("seed"), std::string::npos);
  all[1] = summary(1);
  all[1].op = static_cast<uint64_t>(ReduceOp::kAverage);
  EXPECT_NE(checkGpuCallSummaries(all, &total).message().find("op"), std::string::npos);
  all[1] = summary(1);
  all[1].scheme = static_cast<uint64_t>(Scheme::kDense);
  EXPECT_NE(checkGpuCallSummaries(all, &total).message().find("scheme"), std::string::npos);
  all[1] = summary(1);
  all[1].rowSize = 3;
  EXPECT_NE(checkGpuCallSummaries(all, &total).message().find("rowSize"), std::string::npos);
}

TEST(GpuCallSummaries, ABadIndexWinsOverADisagreement) {
  std::vector<GpuCallSummary> all = {summary(1), summary(1)};
  all[0].seed = 1;
  all[1].badEntry = 4;
  all[1].badIndex = -3;
  uint64_t total = 0;
  const Status s = checkGpuCallSummaries(all, &total);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rank 1 passed index -3 at entry 4, outside [0, 100)"),
            std::string::npos)
      << s.message();
}

TEST(GpuCallSummaries, UnknownEnumValuesArePrintedAsNumbers) {
  std::vector<GpuCallSummary> all = {summary(1), summary(1)};
  all[1].dtype = 200;
  uint64_t total = 0;
  EXPECT_NE(checkGpuCallSummaries(all, &total).message().find("dtype 200"), std::string::npos);
}

TEST(ResolveGpuScheme, AutoIsZenAndUnportedSchemesSaySo) {
  EXPECT_EQ(resolveGpuScheme(Scheme::kAuto).value(), Scheme::kZen);
  EXPECT_EQ(resolveGpuScheme(Scheme::kZen).value(), Scheme::kZen);
  EXPECT_EQ(resolveGpuScheme(Scheme::kAgSparse).value(), Scheme::kAgSparse);
  EXPECT_EQ(resolveGpuScheme(Scheme::kDense).value(), Scheme::kDense);
  EXPECT_EQ(resolveGpuScheme(Scheme::kHc).value(), Scheme::kHc);
  EXPECT_EQ(resolveGpuScheme(Scheme::kBlocks).value(), Scheme::kBlocks);
  EXPECT_EQ(resolveGpuScheme(static_cast<Scheme>(99)).status().code(), StatusCode::kUnimplemented);
}

TEST(SegmentOffsets, PrefixSumsTimesUnit) {
  EXPECT_EQ(segmentOffsets({3, 0, 2}, 4), (std::vector<size_t>{0, 12, 12, 20}));
  EXPECT_EQ(segmentOffsets({}, 4), (std::vector<size_t>{0}));
}

TEST(Imbalance, MaxOverMean) {
  EXPECT_DOUBLE_EQ(imbalanceOf({}), 1.0);
  EXPECT_DOUBLE_EQ(imbalanceOf({0, 0}), 1.0);
  EXPECT_DOUBLE_EQ(imbalanceOf({2, 2}), 1.0);
  EXPECT_DOUBLE_EQ(imbalanceOf({3, 1}), 1.5);
}

}  // namespace
}  // namespace zen::cuda
