// The runtime end to end on in-process ranks: every op's result against a dense reference,
// out-of-order posting from several threads, and 1000 training-like steps whose steady state
// runs on the response cache's fast path.
#include <algorithm>
#include <atomic>

#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr int kRanks = 4;

float denseValue(int rank, int step, int tensor, size_t i) {
  return static_cast<float>((rank + 1) * 3 + step % 7 + tensor * 5 + static_cast<int>(i % 11));
}

TEST(Runtime, EveryOpOnFourRanks) {
  Job job(kRanks);
  job.onEachRank([&](int r, Runtime& rt) {
    // allreduce (sum, out of place), average (in place), allgather with uneven rows,
    // broadcast from rank 2, barrier.
    std::vector<float> a(12), aOut(12), b(6, static_cast<float>(r * 4));
    for (size_t i = 0; i < a.size(); ++i) a[i] = denseValue(r, 0, 0, i);
    std::vector<float> g(static_cast<size_t>(r + 1) * 3, static_cast<float>(r));
    std::vector<float> c(5, r == 2 ? 42.0f : -1.0f);
    auto h1 = rt.enqueue(
        TensorOp::allreduce("a", denseView(a, {3, 4}), denseView(aOut, {3, 4}), ReduceOp::kSum));
    auto h2 = rt.enqueue(TensorOp::allreduce("b", denseView(b, {6}), denseView(b, {6})));
    auto h3 = rt.enqueue(TensorOp::allgather("g", denseView(g, {r + 1, 3})));
    auto h4 = rt.enqueue(TensorOp::broadcast("c", denseView(c, {5}), 2));
    auto h5 = rt.enqueue(TensorOp::barrier());
    for (auto* h : {&h1, &h2, &h3, &h4, &h5}) {
      ASSERT_TRUE(h->isOk()) << h->status().toString();
      ASSERT_TRUE(waitFor(h->value()).isOk()) << "rank " << r;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      float want = 0;
      for (int p = 0; p < kRanks; ++p) want += denseValue(p, 0, 0, i);
      EXPECT_EQ(aOut[i], want) << i;
    }
    for (float x : b) EXPECT_EQ(x, 6.0f);  // mean of 0, 4, 8, 12
    const OpResult& gathered = h3.value().result();
    EXPECT_EQ(gathered.gatheredShape, TensorShape({10, 3}));
    const auto* gv = reinterpret_cast<const float*>(gathered.gathered.data());
    size_t at = 0;
    for (int p = 0; p < kRanks; ++p) {
      for (int k = 0; k < (p + 1) * 3; ++k) EXPECT_EQ(gv[at++], static_cast<float>(p));
    }
    for (float x : c) EXPECT_EQ(x, 42.0f);
  });
}

TEST(Runtime, OutOfOrderPostingFromSeveralThreads) {
  constexpr int kTensors = 24;
  constexpr int kThreads = 3;
  Job job(kRanks);
  std::vector<std::vector<SparseInput>> sparse(kTensors);  // [tensor][rank]
  for (int t = 0; t < kTensors; ++t) {
    for (int r = 0; r < kRanks; ++r) sparse[t].push_back(makeSparse(t * 100 + r, 50 + t, 2, 0.2));
  }
  job.onEachRank([&](int r, Runtime& rt) {
    // Each rank posts the tensors in its own order, spread over three threads.
    std::vector<int> order(kTensors);
    for (int t = 0; t < kTensors; ++t) order[t] = t;
    std::shuffle(order.begin(), order.end(), std::mt19937(r * 7 + 1));
    std::vector<std::vector<float>> dense(kTensors), out(kTensors);
    std::vector<Handle> handles(kTensors);
    std::vector<std::thread> posters;
    for (int th = 0; th < kThreads; ++th) {
      posters.emplace_back([&, th] {
        for (int k = th; k < kTensors; k += kThreads) {
          const int t = order[k];
          const std::string name = "t" + std::to_string(t);
          Result<Handle> h = Status::ok();
          if (t % 2 == 0) {
            dense[t].resize(8);
            out[t].resize(8);
            for (size_t i = 0; i < 8; ++i) dense[t][i] = denseValue(r, 0, t, i);
            h = rt.enqueue(TensorOp::allreduce(name, denseView(dense[t], {8}),
                                               denseView(out[t], {8}), ReduceOp::kSum));
          } else {
            h = rt.enqueue(TensorOp::sparseAllreduce(name, sparse[t][r].view(), ReduceOp::kSum));
          }
          ASSERT_TRUE(h.isOk()) << h.status().toString();
          handles[t] = h.value();
        }
      });
    }
    for (auto& p : posters) p.join();
    for (int t = 0; t < kTensors; ++t) {
      ASSERT_TRUE(waitFor(handles[t]).isOk()) << "rank " << r << " tensor " << t;
      if (t % 2 == 0) {
        for (size_t i = 0; i < 8; ++i) {
          float want = 0;
          for (int p = 0; p < kRanks; ++p) want += denseValue(p, 0, t, i);
          EXPECT_EQ(out[t][i], want);
        }
      } else {
        EXPECT_EQ(densify(handles[t].result().sparse), denseSum(sparse[t])) << "tensor " << t;
      }
    }
  });
}

// 1000 steps of two sparse gradients (nnz changes every step) and two dense ones, as a
// training loop posts them; every result is checked. After the first step the response cache
// serves every tensor: the steady state is the fast path (one AND per cycle, no gather).
TEST(Runtime, ThousandMixedStepsAgainstADenseReference) {
  const int steps = kSlowdown > 1 ? 300 : 1000;
  constexpr int64_t kRows[2] = {400, 97};
  constexpr int64_t kWidth[2] = {4, 1};
  Job job(kRanks);
  std::atomic<int> mismatches{0};
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<float> d0(64), d1(3), o0(64), o1(3);
    for (int step = 0; step < steps; ++step) {
      std::vector<SparseInput> in[2];
      for (int t = 0; t < 2; ++t) {
        for (int p = 0; p < kRanks; ++p) {
          const double density = 0.01 + 0.05 * ((step + p + t) % 5);
          in[t].push_back(
              makeSparse(uint64_t(step) * 1000 + t * 10 + p, kRows[t], kWidth[t], density));
        }
      }
      for (size_t i = 0; i < d0.size(); ++i) d0[i] = denseValue(r, step, 0, i);
      for (size_t i = 0; i < d1.size(); ++i) d1[i] = denseValue(r, step, 1, i);
      std::vector<TensorOp> ops;
      ops.push_back(TensorOp::sparseAllreduce("emb.0", in[0][r].view(), ReduceOp::kAverage));
      ops.push_back(TensorOp::sparseAllreduce("emb.1", in[1][r].view(), ReduceOp::kSum));
      ops.push_back(TensorOp::allreduce("fc.w", denseView(d0, {8, 8}), denseView(o0, {8, 8}),
                                        ReduceOp::kSum));
      ops.push_back(
          TensorOp::allreduce("fc.b", denseView(d1, {3}), denseView(o1, {3}), ReduceOp::kAverage));
      auto handles = rt.enqueueGroup(std::move(ops));
      ASSERT_TRUE(handles.isOk()) << handles.status().toString();
      for (const Handle& h : handles.value()) {
        ASSERT_TRUE(waitFor(h).isOk()) << "rank " << r << " step " << step;
      }
      const auto& hs = handles.value();
      if (densify(hs[0].result().sparse) != scaled(denseSum(in[0]), 1.0f / kRanks)) ++mismatches;
      if (densify(hs[1].result().sparse) != denseSum(in[1])) ++mismatches;
      for (size_t i = 0; i < o0.size(); ++i) {
        float want = 0;
        for (int p = 0; p < kRanks; ++p) want += denseValue(p, step, 0, i);
        if (o0[i] != want) ++mismatches;
      }
      for (size_t i = 0; i < o1.size(); ++i) {
        float want = 0;
        for (int p = 0; p < kRanks; ++p) want += denseValue(p, step, 1, i);
        if (o1[i] != want / kRanks) ++mismatches;
      }
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
  for (int r = 0; r < kRanks; ++r) {
    const RuntimeStats s = job.rank(r).stats();
    EXPECT_EQ(s.completed, uint64_t(4 * steps));
    EXPECT_EQ(s.failed, 0u);
    // Everything after the first negotiation of each name came from the cache.
    EXPECT_GE(s.cacheHits, uint64_t(4 * (steps - 1))) << "rank " << r;
    EXPECT_EQ(s.tensors.at("emb.0").cacheHits, uint64_t(steps - 1)) << "rank " << r;
    EXPECT_GT(s.fastPathCycles, uint64_t(steps - 1));
    EXPECT_LE(s.slowPathCycles, 8u) << "rank " << r;
    // auto: after profiling, every rank runs the scheme they agreed on.
    EXPECT_EQ(s.tensors.at("emb.0").lastScheme, job.rank(0).stats().tensors.at("emb.0").lastScheme);
    EXPECT_TRUE(s.tensors.at("emb.0").lastScheme == "zen" ||
                s.tensors.at("emb.0").lastScheme == "hc" ||
                s.tensors.at("emb.0").lastScheme == "agsparse");
    EXPECT_GT(s.bytesSent, 0u);
    EXPECT_GT(s.phaseSeconds.count("PUSH"), 0u);
  }
}

}  // namespace
}  // namespace zen::testing
