// Adasum allreduce end to end on in-process ranks: a fused bucket of several tensors keeps
// per-tensor dot products (checked against the binary tree in double), every rank gets
// identical bits, a joined rank contributes zeros (adasum(a, 0) = a), and what Adasum cannot
// run is refused on every rank: a world that is not a power of two, integer dtypes,
// reducescatter and sparse allreduce (at enqueue), ranks that disagree on the op (by rank 0).
#include <algorithm>
#include <cmath>

#include "test/common/adasum_reference.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr int kRanks = 4;
constexpr int64_t kSizes[] = {5, 1, 64, 0, 33};
constexpr int kTensors = sizeof(kSizes) / sizeof(kSizes[0]);

// Rank r's element i of tensor t: multiples of 1/4, exact in fp32.
float value(int r, int t, int64_t i) {
  return static_cast<float>((r * 5 + t * 3 + i * 7) % 13) / 4.0f - 1.5f;
}

std::string tensorName(int t) {
  return fmt::format("ada.{}", t);
}

// One step on `posters` (the others have joined): every tensor in one group, so they fuse.
void runStep(Job& job, const std::vector<int>& posters) {
  std::vector<std::vector<float>> results(static_cast<size_t>(kRanks));
  job.onEachRank([&](int r, Runtime& rt) {
    if (std::find(posters.begin(), posters.end(), r) == posters.end()) return;
    std::vector<std::vector<float>> data(kTensors);
    std::vector<TensorOp> ops;
    for (int t = 0; t < kTensors; ++t) {
      for (int64_t i = 0; i < kSizes[t]; ++i) data[t].push_back(value(r, t, i));
      ops.push_back(TensorOp::allreduce(tensorName(t), denseView(data[t], {kSizes[t]}),
                                        denseView(data[t], {kSizes[t]}), ReduceOp::kAdasum));
    }
    auto hs = rt.enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk()) << "rank " << r;
    for (int t = 0; t < kTensors; ++t) {
      std::vector<std::vector<double>> inputs(kRanks, std::vector<double>(kSizes[t], 0.0));
      for (int p : posters) {
        for (int64_t i = 0; i < kSizes[t]; ++i) inputs[p][i] = value(p, t, i);
      }
      const std::vector<double> want = adasumTree(inputs);
      for (int64_t i = 0; i < kSizes[t]; ++i) {
        ASSERT_NEAR(data[t][i], want[i], 1e-6 * (1 + std::abs(want[i])))
            << tensorName(t) << " element " << i << " on rank " << r;
      }
      results[r].insert(results[r].end(), data[t].begin(), data[t].end());
    }
  });
  for (int p : posters) EXPECT_EQ(results[p], results[posters.front()]) << "rank " << p;
}

TEST(RuntimeAdasum, FusedBucketMatchesTheTreePerTensor) {
  Job job(kRanks);
  runStep(job, {0, 1, 2, 3});  // negotiated
  runStep(job, {0, 1, 2, 3});  // from the response cache
  for (int r = 0; r < kRanks; ++r) {
    const RuntimeStats s = job.rank(r).stats();
    EXPECT_EQ(s.tensors.at(tensorName(2)).lastBucketSize, size_t(kTensors)) << "rank " << r;
  }
}

TEST(RuntimeAdasum, JoinedRankContributesZeros) {
  Job job(kRanks);
  stepWithJoinedRank(job, 1, [&](const std::vector<int>& posters) { runStep(job, posters); });
}

void expectRefusedAtEnqueue(Runtime& rt, TensorOp op, const std::string& needle, int r) {
  auto h = rt.enqueue(std::move(op));
  ASSERT_FALSE(h.isOk()) << "rank " << r << ": " << needle;
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find(needle), std::string::npos) << h.status().message();
}

TEST(RuntimeAdasum, ThreeRanksRefusedOnEveryRank) {
  Job job(3);
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<float> x(4, 1.0f);
    expectRefusedAtEnqueue(
        rt, TensorOp::allreduce("x", denseView(x, {4}), denseView(x, {4}), ReduceOp::kAdasum),
        "tensor 'x': adasum needs a power-of-two number of ranks, this job has 3", r);
    // The daemon goes on: the same name with Sum.
    auto h =
        rt.enqueue(TensorOp::allreduce("x", denseView(x, {4}), denseView(x, {4}), ReduceOp::kSum));
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    ASSERT_TRUE(waitFor(h.value()).isOk());
    EXPECT_EQ(x, std::vector<float>(4, 3.0f));
  });
}

TEST(RuntimeAdasum, IntegersReducescatterAndSparseRefusedOnEveryRank) {
  Job job(kRanks);
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<int32_t> ints(4, 1);
    DenseView iv;
    iv.data = ints.data();
    iv.dtype = DataType::kInt32;
    iv.shape = TensorShape({4});
    expectRefusedAtEnqueue(rt, TensorOp::allreduce("i", iv, iv, ReduceOp::kAdasum),
                           "tensor 'i': adasum needs a floating-point tensor", r);
    std::vector<float> in(8, 1.0f), out(2);
    expectRefusedAtEnqueue(rt,
                           TensorOp::reducescatter("rs", denseView(in, {4, 2}),
                                                   denseView(out, {1, 2}), ReduceOp::kAdasum),
                           "tensor 'rs': reducescatter does not take adasum", r);
    SparseInput sp = makeSparse(r, 20, 2, 0.5);
    expectRefusedAtEnqueue(rt, TensorOp::sparseAllreduce("emb", sp.view(), ReduceOp::kAdasum),
                           "sparse allreduce reduces with sum or average, not adasum", r);
  });
}

TEST(RuntimeAdasum, MixedOpsFailOnEveryRank) {
  Job job(kRanks);
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<float> x(4, 1.0f);
    const ReduceOp op = r < 2 ? ReduceOp::kAdasum : ReduceOp::kSum;
    auto h = rt.enqueue(TensorOp::allreduce("mixed", denseView(x, {4}), denseView(x, {4}), op));
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    const Status s = waitFor(h.value(), 10 * kSlowdown);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "rank " << r << ": " << s.toString();
    EXPECT_NE(s.message().find("tensor 'mixed': ranks 2-3 sent reduce op sum, ranks 0-1 adasum"),
              std::string::npos)
        << "rank " << r << ": " << s.message();
  });
}

}  // namespace
}  // namespace zen::testing
