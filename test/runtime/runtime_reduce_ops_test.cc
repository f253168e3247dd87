// Dense allreduce with min, max and product end to end on in-process ranks: each op's tensors
// fuse among themselves and never with another op's (the fusion key and the response cache
// hold the op), a joined rank contributes the op's identity, and sparse allreduce refuses
// min/max/product at enqueue on every rank.
#include <algorithm>

#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr int kRanks = 4;
constexpr int kPerOp = 6;
constexpr ReduceOp kOps[] = {ReduceOp::kMin, ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct};

// Rank r's element i of tensor t: small integers (exact in fp32, products included).
float value(int r, int t, int i) {
  return static_cast<float>(((r * 3 + t + i) % 5) - 2);
}

float reference(ReduceOp op, const std::vector<int>& ranks, int t, int i) {
  float acc = op == ReduceOp::kProduct ? 1.0f : 0.0f;
  bool first = true;
  for (int r : ranks) {
    const float v = value(r, t, i);
    switch (op) {
      case ReduceOp::kMin:
        acc = first ? v : std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = first ? v : std::max(acc, v);
        break;
      case ReduceOp::kProduct:
        acc *= v;
        break;
      default:
        acc += v;
    }
    first = false;
  }
  return acc;
}

std::string tensorName(ReduceOp op, int t) {
  return fmt::format("{}.{}", reduceOpName(op), t);
}

// One step on `posters`: every op's kPerOp tensors in one group, ops interleaved so that a
// planner keyed without the op would fuse them together.
void runStep(Job& job, const std::vector<int>& posters) {
  job.onEachRank([&](int r, Runtime& rt) {
    if (std::find(posters.begin(), posters.end(), r) == posters.end()) return;
    std::vector<std::vector<float>> data;
    std::vector<TensorOp> ops;
    std::vector<std::pair<ReduceOp, int>> which;
    for (int t = 0; t < kPerOp; ++t) {
      for (ReduceOp op : kOps) {
        std::vector<float> d(8);
        for (int i = 0; i < 8; ++i) d[i] = value(r, t, i);
        data.push_back(std::move(d));
        which.emplace_back(op, t);
      }
    }
    for (size_t k = 0; k < data.size(); ++k) {
      ops.push_back(TensorOp::allreduce(tensorName(which[k].first, which[k].second),
                                        denseView(data[k], {2, 4}), denseView(data[k], {2, 4}),
                                        which[k].first));
    }
    auto hs = rt.enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk()) << "rank " << r;
    for (size_t k = 0; k < data.size(); ++k) {
      for (int i = 0; i < 8; ++i) {
        // A joined rank contributes the op's identity: the result is over the posters only.
        ASSERT_EQ(data[k][i], reference(which[k].first, posters, which[k].second, i))
            << tensorName(which[k].first, which[k].second) << " element " << i << " on rank " << r;
      }
    }
  });
}

TEST(RuntimeReduceOps, EachOpFusesOnlyWithItself) {
  Job job(kRanks);
  const std::vector<int> all = {0, 1, 2, 3};
  runStep(job, all);  // negotiated
  std::vector<RuntimeStats> before;
  for (int r = 0; r < kRanks; ++r) before.push_back(job.rank(r).stats());
  runStep(job, all);  // from the response cache
  for (int r = 0; r < kRanks; ++r) {
    const RuntimeStats s = job.rank(r).stats();
    // One bucket per op each step, kPerOp tensors in each.
    EXPECT_EQ(s.bucketsExecuted - before[r].bucketsExecuted, 4u) << "rank " << r;
    EXPECT_EQ(s.cacheHits - before[r].cacheHits, uint64_t(4 * kPerOp)) << "rank " << r;
    for (ReduceOp op : kOps) {
      EXPECT_EQ(s.tensors.at(tensorName(op, 3)).lastBucketSize, size_t(kPerOp))
          << reduceOpName(op) << " on rank " << r;
    }
  }
}

TEST(RuntimeReduceOps, JoinedRankContributesTheIdentity) {
  Job job(kRanks);
  stepWithJoinedRank(job, 2, [&](const std::vector<int>& posters) { runStep(job, posters); });
}

TEST(RuntimeReduceOps, SparseMinMaxProductRefusedAtEnqueueOnEveryRank) {
  Job job(kRanks);
  job.onEachRank([&](int r, Runtime& rt) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      SparseInput in = makeSparse(r, 20, 2, 0.5);
      auto h = rt.enqueue(TensorOp::sparseAllreduce("emb", in.view(), op));
      ASSERT_FALSE(h.isOk()) << "rank " << r << " " << reduceOpName(op);
      EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(h.status().message().find("sparse allreduce reduces with sum or average, not " +
                                          std::string(reduceOpName(op))),
                std::string::npos)
          << h.status().message();
    }
    // The refused tensors left nothing behind: the same name goes through with Sum.
    SparseInput in = makeSparse(r, 20, 2, 0.5);
    auto h = rt.enqueue(TensorOp::sparseAllreduce("emb", in.view(), ReduceOp::kSum));
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    EXPECT_TRUE(waitFor(h.value()).isOk());
  });
}

}  // namespace
}  // namespace zen::testing
