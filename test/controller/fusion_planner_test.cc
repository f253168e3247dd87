// Fusion: threshold, look-ahead, compatibility, sparse index-space offsets.

#include "controller/fusion_planner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace zen::controller {
namespace {

Response dense(const std::string& name, int64_t elements, DataType dtype = DataType::kFloat32) {
  Response r;
  r.type = ResponseType::kAllreduce;
  r.tensorNames = {name};
  r.dtype = dtype;
  r.devices = {Device::cpu(), Device::cpu()};
  r.shapes = {TensorShape({elements})};
  return r;
}

Response sparse(const std::string& name, int64_t rows, int64_t width) {
  Response r;
  r.type = ResponseType::kSparseAllreduce;
  r.tensorNames = {name};
  r.devices = {Device::cpu(), Device::cpu()};
  r.rowSize = width;
  r.shapes = {TensorShape({rows, width})};
  r.rowOffsets = {0};
  r.totalRows = rows;
  return r;
}

std::vector<std::vector<std::string>> buckets(const std::vector<Response>& fused) {
  std::vector<std::vector<std::string>> out;
  for (const auto& r : fused) out.push_back(r.tensorNames);
  return out;
}

TEST(FusionPlanner, ManySmallTensorsMakeFewBuckets) {
  std::vector<Response> in;
  for (int i = 0; i < 1000; ++i) in.push_back(dense("t" + std::to_string(i), 1024));  // 4 KiB
  const auto out = fuseResponses(in, int64_t{1} << 20);  // 1 MiB: 256 tensors per bucket
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].tensorNames.size(), 256u);
  EXPECT_EQ(out[3].tensorNames.size(), 1000u - 3 * 256);
  EXPECT_EQ(out[0].tensorNames.front(), "t0");
  EXPECT_EQ(out[1].tensorNames.front(), "t256");
  for (const auto& r : out) {
    EXPECT_LE(responseBytes(r), int64_t{1} << 20);
    EXPECT_EQ(r.shapes.size(), r.tensorNames.size());
  }
  EXPECT_EQ(fuseResponses(in, int64_t{128} << 20).size(), 1u);
}

TEST(FusionPlanner, LargeTensorGoesAloneAndZeroDisables) {
  const auto out = fuseResponses({dense("a", 10), dense("big", 1000), dense("b", 10)}, 400);
  EXPECT_EQ(buckets(out), (std::vector<std::vector<std::string>>{{"a"}, {"big"}, {"b"}}));
  EXPECT_EQ(fuseResponses({dense("a", 1), dense("b", 1), dense("c", 1)}, 0).size(), 3u);
  // Empty tensors do not fuse when fusion is off either.
  EXPECT_EQ(fuseResponses({dense("a", 0), dense("b", 0)}, 0).size(), 2u);
}

TEST(FusionPlanner, LooksAheadPastInterleavedDtypes) {
  std::vector<Response> in;
  for (int i = 0; i < 6; ++i) {
    in.push_back(
        dense("h" + std::to_string(i), 4, i % 2 ? DataType::kFloat16 : DataType::kFloat32));
  }
  const auto out = fuseResponses(in, 1024);
  EXPECT_EQ(buckets(out),
            (std::vector<std::vector<std::string>>{{"h0", "h2", "h4"}, {"h1", "h3", "h5"}}));
  EXPECT_EQ(out[1].dtype, DataType::kFloat16);
}

TEST(FusionPlanner, LookAheadStopsAtTheThreshold) {
  // The fp16 tensor between the fp32 ones is too big to skip within a 100-byte bucket.
  const auto out =
      fuseResponses({dense("a", 4), dense("h", 50, DataType::kFloat16), dense("b", 4)}, 100);
  EXPECT_EQ(buckets(out), (std::vector<std::vector<std::string>>{{"a"}, {"h"}, {"b"}}));
}

TEST(FusionPlanner, OnlyCompatibleResponsesShareABucket) {
  Response avg = dense("avg", 4);
  avg.reduceOp = ReduceOp::kAverage;
  Response gpu = dense("gpu", 4);
  gpu.devices = {Device::cuda(0), Device::cuda(0)};
  Response bcast = dense("bcast", 4);
  bcast.type = ResponseType::kBroadcast;
  Response err;
  err.type = ResponseType::kError;
  err.tensorNames = {"err"};
  const auto out = fuseResponses({dense("a", 4), avg, gpu, bcast, err, dense("b", 4),
                                  sparse("s1", 10, 8), sparse("s2", 10, 4), sparse("s3", 10, 8)},
                                 1 << 20);
  EXPECT_EQ(buckets(out),
            (std::vector<std::vector<std::string>>{
                {"a", "b"}, {"avg"}, {"gpu"}, {"bcast"}, {"err"}, {"s1", "s3"}, {"s2"}}));
}

TEST(FusionPlanner, EachReduceOpFusesOnlyWithItself) {
  std::vector<Response> in;
  for (int i = 0; i < 3; ++i) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct}) {
      Response r = dense(fmt::format("{}{}", reduceOpName(op), i), 4);
      r.reduceOp = op;
      in.push_back(r);
    }
  }
  const auto out = fuseResponses(in, 1 << 20);
  EXPECT_EQ(buckets(out),
            (std::vector<std::vector<std::string>>{{"min0", "min1", "min2"},
                                                   {"sum0", "sum1", "sum2"},
                                                   {"max0", "max1", "max2"},
                                                   {"product0", "product1", "product2"}}));
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].reduceOp, ReduceOp::kMin);
  EXPECT_EQ(out[1].reduceOp, ReduceOp::kSum);
  EXPECT_EQ(out[2].reduceOp, ReduceOp::kMax);
  EXPECT_EQ(out[3].reduceOp, ReduceOp::kProduct);
}

TEST(FusionPlanner, SparseBucketConcatenatesIndexSpaces) {
  const auto out =
      fuseResponses({sparse("e1", 1000, 16), sparse("e2", 50, 16), sparse("e3", 7, 16)}, 1 << 30);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rowOffsets, (std::vector<int64_t>{0, 1000, 1050}));
  EXPECT_EQ(out[0].totalRows, 1057);
  EXPECT_EQ(out[0].rowSize, 16);
  // The threshold counts dense bytes, whatever the nnz will be.
  const auto split = fuseResponses({sparse("e1", 1000, 16), sparse("e2", 1000, 16)}, 64000);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[1].rowOffsets, std::vector<int64_t>{0});
  EXPECT_EQ(split[1].totalRows, 1000);
}

TEST(FusionPlanner, AllgatherBucketsKeepPerRankRows) {
  Response a = dense("a", 6), b = dense("b", 4);
  a.type = b.type = ResponseType::kAllgather;
  a.shapes = {TensorShape({3, 2})};
  a.gatherRows = {1, 2};
  b.shapes = {TensorShape({2, 2})};
  b.gatherRows = {2, 0};
  const auto out = fuseResponses({a, b}, 1 << 20);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].gatherRows, (std::vector<int64_t>{1, 2, 2, 0}));
}

TEST(FusionPlanner, ReducescattersFuseByOpAndAlltoallsNever) {
  std::vector<Response> in;
  for (int i = 0; i < 2; ++i) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      Response r = dense(fmt::format("{}{}", reduceOpName(op), i), 6);
      r.type = ResponseType::kReducescatter;
      r.shapes = {TensorShape({3, 2})};
      r.reduceOp = op;
      in.push_back(r);
    }
    Response a = dense(fmt::format("a2a{}", i), 4);
    a.type = ResponseType::kAlltoall;
    a.splits = {1, 1, 1, 1};
    in.push_back(a);
  }
  const auto out = fuseResponses(in, 1 << 20);
  EXPECT_EQ(buckets(out), (std::vector<std::vector<std::string>>{
                              {"sum0", "sum1"}, {"average0", "average1"}, {"a2a0"}, {"a2a1"}}));
  EXPECT_EQ(out[1].reduceOp, ReduceOp::kAverage);
  EXPECT_EQ(out[2].splits, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_TRUE(isFusible(ResponseType::kReducescatter));
  EXPECT_FALSE(isFusible(ResponseType::kAlltoall));
}

}  // namespace
}  // namespace zen::controller
