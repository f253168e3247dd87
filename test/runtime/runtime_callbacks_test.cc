// Completion through callbacks (they run on the background thread before waiters wake, may
// enqueue the next operation, and may ask for shutdown), and every sparse scheme behind the
// runtime's fused buckets.
#include <atomic>
#include <limits>

#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr int kRanks = 4;

// Each rank chains 20 allreduces: the callback of step s enqueues step s + 1 (a framework's
// done() continuing the graph). The loop's thread must accept enqueues from itself.
TEST(RuntimeCallbacks, CallbacksRunFirstAndMayEnqueue) {
  constexpr int kSteps = 20;
  Job job(kRanks);
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<float> x(3, 1.0f);
    std::atomic<int> completed{0};
    std::promise<Status> last;
    std::function<void(int)> post = [&](int s) {
      auto op = TensorOp::allreduce("chain", denseView(x, {3}), denseView(x, {3}), ReduceOp::kSum);
      op.withCallback([&, s](const Status& st, OpResult&) {
        ++completed;
        if (!st.isOk() || s + 1 == kSteps) return last.set_value(st);
        for (float& v : x) v = 1.0f;
        post(s + 1);
      });
      auto h = rt.enqueue(std::move(op));
      if (!h.isOk()) last.set_value(h.status());
    };
    post(0);
    auto done = last.get_future();
    ASSERT_EQ(done.wait_for(std::chrono::duration<double>(kWaitSeconds)), std::future_status::ready)
        << "rank " << r;
    EXPECT_TRUE(done.get().isOk());
    EXPECT_EQ(completed.load(), kSteps);
    for (float v : x) EXPECT_EQ(v, float(kRanks));
  });
}

TEST(RuntimeCallbacks, HandleIsDoneOnlyAfterItsCallback) {
  Job job(2);
  job.onEachRank([&](int, Runtime& rt) {
    std::vector<float> x(2, 1.0f);
    std::atomic<bool> called{false};
    auto h = rt.enqueue(TensorOp::allreduce("x", denseView(x, {2}), denseView(x, {2}))
                            .withCallback([&](const Status&, OpResult&) {
                              std::this_thread::sleep_for(std::chrono::milliseconds(20));
                              called = true;
                            }));
    ASSERT_TRUE(h.isOk());
    ASSERT_TRUE(waitFor(h.value()).isOk());
    EXPECT_TRUE(called.load());
  });
}

TEST(RuntimeCallbacks, ShutdownFromACallbackDoesNotDeadlock) {
  Job job(2);
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<float> x(2, 1.0f), y(2, 1.0f);
    auto first = rt.enqueue(TensorOp::allreduce("x", denseView(x, {2}), denseView(x, {2}))
                                .withCallback([&rt, r](const Status&, OpResult&) {
                                  if (r == 0) {
                                    EXPECT_TRUE(rt.shutdown().isOk());
                                  }
                                }));
    ASSERT_TRUE(first.isOk());
    EXPECT_TRUE(waitFor(first.value()).isOk());
    // Whatever comes next ends with rank 0's request.
    auto next = rt.enqueue(TensorOp::allreduce("y", denseView(y, {2}), denseView(y, {2})));
    const Status s = next.isOk() ? waitFor(next.value()) : next.status();
    EXPECT_NE(s.message().find("shut down by rank 0 at user request"), std::string::npos)
        << s.toString();
  });
}

class RuntimeSchemes : public ::testing::TestWithParam<const char*> {};

// Three sparse tensors of different row counts fused into one bucket (one with a dense
// output), through each scheme, five steps with nnz changing every step.
TEST_P(RuntimeSchemes, FusedSparseBucketsMatchTheReference) {
  Job job(kRanks, testConfig({{"ZEN_SCHEME", GetParam()}}));
  constexpr int64_t kRows[3] = {300, 17, 1000};
  job.onEachRank([&](int r, Runtime& rt) {
    for (int s = 0; s < 5; ++s) {
      std::vector<std::vector<SparseInput>> in(3);
      for (int t = 0; t < 3; ++t) {
        for (int p = 0; p < kRanks; ++p) {
          in[t].push_back(makeSparse(s * 100 + t * 10 + p, kRows[t], 2, 0.02 + 0.03 * t));
        }
      }
      std::vector<float> dense(static_cast<size_t>(kRows[2] * 2));
      std::vector<TensorOp> ops;
      ops.push_back(TensorOp::sparseAllreduce("a", in[0][r].view(), ReduceOp::kSum));
      ops.push_back(TensorOp::sparseAllreduce("b", in[1][r].view(), ReduceOp::kSum));
      ops.push_back(TensorOp::sparseAllreduce("c", in[2][r].view(), ReduceOp::kSum,
                                              denseView(dense, {kRows[2], 2})));
      auto hs = rt.enqueueGroup(std::move(ops));
      ASSERT_TRUE(hs.isOk()) << hs.status().toString();
      for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk()) << GetParam();
      EXPECT_EQ(densify(hs.value()[0].result().sparse), denseSum(in[0]));
      EXPECT_EQ(densify(hs.value()[1].result().sparse), denseSum(in[1]));
      EXPECT_EQ(dense, denseSum(in[2]));
    }
    const RuntimeStats stats = rt.stats();
    EXPECT_EQ(stats.bucketsExecuted, 5u);  // the three tensors always fused
    if (std::string(GetParam()) == "auto") {
      // Profiling (ops/auto_scheme.h, 3 calls of each by default) runs zen, hc, agsparse in
      // turn (runtime_auto_scheme_test: the choice after it).
      EXPECT_EQ(stats.bucketsByScheme.at("zen"), 2u);
      EXPECT_EQ(stats.bucketsByScheme.at("hc"), 2u);
      EXPECT_EQ(stats.bucketsByScheme.at("agsparse"), 1u);
    } else {
      EXPECT_EQ(stats.bucketsByScheme.at(GetParam()), 5u);
    }
  });
}

// Buckets whose tensors all have dense outputs, which the scheme writes in place (no sparse
// result, no split): a large tensor alone (2.4 MB, zeroed in parts on the executor's
// threads), a small one alone, averaged, and three fused; one rank sends nothing at one step.
// The outputs start poisoned every step, so every element must be written.
TEST_P(RuntimeSchemes, DenseOutputsAreWrittenInPlace) {
  Job job(kRanks, testConfig({{"ZEN_SCHEME", GetParam()}, {"ZEN_THREADS", "2"}}));
  struct Tensor {
    const char* name;
    int64_t rows;
    double density;
    ReduceOp op;
    int group;  // tensors of one group are posted together (one bucket)
  };
  const Tensor tensors[] = {
      {"large", 300'000, 0.004, ReduceOp::kSum, 0}, {"small", 53, 0.1, ReduceOp::kAverage, 1},
      {"fused.a", 1'000, 0.05, ReduceOp::kSum, 2},  {"fused.b", 7, 0.5, ReduceOp::kSum, 2},
      {"fused.c", 20'000, 0.01, ReduceOp::kSum, 2},
  };
  job.onEachRank([&](int r, Runtime& rt) {
    for (int s = 0; s < 4; ++s) {
      for (int group = 0; group < 3; ++group) {
        std::vector<std::vector<SparseInput>> in;
        std::vector<std::vector<float>> out;
        std::vector<const Tensor*> posted;
        for (const Tensor& t : tensors) {
          if (t.group != group) continue;
          posted.push_back(&t);
          in.emplace_back();
          for (int p = 0; p < kRanks; ++p) {
            const double density = s == 2 && p == 1 ? 0.0 : t.density;
            in.back().push_back(makeSparse(s * 100 + posted.size() * 10 + p, t.rows, 2, density));
          }
          out.emplace_back(static_cast<size_t>(t.rows * 2),
                           std::numeric_limits<float>::quiet_NaN());
        }
        std::vector<TensorOp> ops;
        for (size_t i = 0; i < posted.size(); ++i) {
          ops.push_back(TensorOp::sparseAllreduce(posted[i]->name, in[i][r].view(), posted[i]->op,
                                                  denseView(out[i], {posted[i]->rows, 2})));
        }
        auto hs = rt.enqueueGroup(std::move(ops));
        ASSERT_TRUE(hs.isOk()) << hs.status().toString();
        for (const Handle& h : hs.value()) {
          ASSERT_TRUE(waitFor(h).isOk()) << GetParam() << " step " << s;
        }
        for (size_t i = 0; i < posted.size(); ++i) {
          const float scale = posted[i]->op == ReduceOp::kAverage ? 1.0f / kRanks : 1.0f;
          EXPECT_EQ(out[i], scaled(denseSum(in[i]), scale))
              << GetParam() << " step " << s << " " << posted[i]->name;
        }
      }
    }
    // Each group one bucket, the fused one included.
    EXPECT_EQ(rt.stats().bucketsExecuted, 12u);
  });
}

INSTANTIATE_TEST_SUITE_P(Schemes,
                         RuntimeSchemes,
                         ::testing::Values("auto", "zen", "hc", "agsparse", "blocks", "dense"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace zen::testing
