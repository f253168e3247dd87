// The Api behind the C API (bindings/api.h) with in-process ranks as threads: every operation
// through the handle table, outputs readable in completions and after waits, the errors a
// caller sees at enqueue and at completion, lifecycle, stats, timeline, placement.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>

#include "test/bindings/bindings_test_util.h"

namespace zen::testing {
namespace {

using bindings::Api;

DenseView view(std::vector<float>& v, TensorShape shape) {
  DenseView d;
  d.data = v.data();
  d.shape = std::move(shape);
  return d;
}

TEST(Api, EveryOperationThroughHandles) {
  for (int n : {1, 2, 3}) {
    SCOPED_TRACE(n);
    ApiJob job(n);
    std::vector<Rows> rows;
    for (int r = 0; r < n; ++r) rows.push_back(makeRows(7 + r, 50, 3, 20));
    const std::vector<float> want = denseSum(rows);
    job.onEachRank([&](int r, Api& api) {
      // Sparse allreduce: a sparse result and a dense one.
      auto sparse = api.enqueue(TensorOp::sparseAllreduce("emb", rows[r].view(), ReduceOp::kSum));
      std::vector<float> denseOut(50 * 3, -1.0f);
      auto dense = api.enqueue(TensorOp::sparseAllreduce("emb.dense", rows[r].view(),
                                                         ReduceOp::kSum, view(denseOut, {50, 3})));
      // Allreduce (average, in place), allgather (r + 1 rows), broadcast from the last rank.
      std::vector<float> x(6, static_cast<float>(r * n));
      auto ar = api.enqueue(TensorOp::allreduce("x", view(x, {2, 3}), view(x, {2, 3})));
      std::vector<float> g(static_cast<size_t>(2 * (r + 1)), static_cast<float>(r));
      auto ag = api.enqueue(TensorOp::allgather("g", view(g, {r + 1, 2})));
      std::vector<float> b(4, static_cast<float>(r));
      auto bc = api.enqueue(TensorOp::broadcast("b", view(b, {4}), n - 1));
      auto barrier = api.enqueue(TensorOp::barrier());
      for (auto* id : {&sparse, &dense, &ar, &ag, &bc, &barrier}) {
        ASSERT_TRUE(id->isOk()) << id->status().toString();
        EXPECT_TRUE(waitDone(api, id->value()).isOk());
        EXPECT_TRUE(api.poll(id->value()).value());
      }
      const OpResult* s = api.result(sparse.value()).value();
      EXPECT_EQ(
          densify(s->sparse.indices.data(), reinterpret_cast<const float*>(s->sparse.values.data()),
                  s->sparse.nnz(), 50, 3),
          want);
      EXPECT_EQ(denseOut, want);
      const float mean = static_cast<float>(n * (n - 1)) / 2.0f;
      for (float v : x) EXPECT_FLOAT_EQ(v, mean);
      const OpResult* gathered = api.result(ag.value()).value();
      EXPECT_EQ(gathered->gatheredShape, TensorShape({n * (n + 1) / 2, 2}));
      const auto* gv = reinterpret_cast<const float*>(gathered->gathered.data());
      size_t at = 0;
      for (int p = 0; p < n; ++p) {
        for (int k = 0; k < 2 * (p + 1); ++k) EXPECT_EQ(gv[at++], static_cast<float>(p));
      }
      for (float v : b) EXPECT_EQ(v, static_cast<float>(n - 1));
      for (auto* id : {&sparse, &dense, &ar, &ag, &bc, &barrier}) {
        EXPECT_TRUE(api.release(id->value()).isOk());
      }
      EXPECT_EQ(api.handleCount(), 0u);
    });
  }
}

TEST(Api, CompletionsSeeTheirOutputsAndGroupsFuse) {
  ApiJob job(2);
  std::vector<Rows> rows = {makeRows(1, 40, 2, 10), makeRows(2, 40, 2, 10)};
  const std::vector<float> want = denseSum(rows);
  job.onEachRank([&](int r, Api& api) {
    std::atomic<int> calls{0};
    std::vector<float> seen;
    std::vector<float> a(8, 1.0f), b(8, 2.0f);
    std::vector<TensorOp> ops;
    ops.push_back(TensorOp::allreduce("a", view(a, {8}), view(a, {8}), ReduceOp::kSum));
    ops.push_back(TensorOp::allreduce("b", view(b, {8}), view(b, {8}), ReduceOp::kSum));
    ops.push_back(TensorOp::sparseAllreduce("s", rows[r].view(), ReduceOp::kSum));
    std::vector<bindings::Completion> done(3, [&](int64_t, const Status& st) {
      EXPECT_TRUE(st.isOk()) << st.toString();
      ++calls;
    });
    done[2] = [&](int64_t id, const Status& st) {
      EXPECT_TRUE(st.isOk());
      // Inside the completion: the outputs are already readable.
      auto res = api.result(id);
      ASSERT_TRUE(res.isOk()) << res.status().toString();
      const SparseTensor& t = res.value()->sparse;
      seen = densify(t.indices.data(), reinterpret_cast<const float*>(t.values.data()), t.nnz(),
                     t.numRows, t.rowSize);
      ++calls;
    };
    auto ids = api.enqueue(std::move(ops), std::move(done));
    ASSERT_TRUE(ids.isOk()) << ids.status().toString();
    for (int64_t id : ids.value()) EXPECT_TRUE(waitDone(api, id).isOk());
    EXPECT_EQ(calls.load(), 3);
    EXPECT_EQ(seen, want);
    for (float v : a) EXPECT_EQ(v, 2.0f);
    for (float v : b) EXPECT_EQ(v, 4.0f);
    // The dense pair ran as one bucket.
    const RuntimeStats stats = api.stats().value();
    EXPECT_EQ(stats.tensors.at("a").lastBucket, stats.tensors.at("b").lastBucket);
    EXPECT_EQ(stats.tensors.at("a").lastBucketSize, 2u);
  });
}

TEST(Api, ErrorsAtEnqueueAndAtCompletion) {
  ApiJob job(2);
  job.onEachRank([&](int r, Api& api) {
    // Mismatched dtypes between ranks: every rank's handle fails with the daemon's message.
    std::vector<float> f(4, 1.0f);
    std::vector<double> d(4, 1.0);
    DenseView v = r == 0 ? view(f, {4}) : DenseView{d.data(), DataType::kFloat64, {4}, {}};
    auto id = api.enqueue(TensorOp::allreduce("mixed", v, v));
    ASSERT_TRUE(id.isOk());
    const Status st = waitDone(api, id.value());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("mixed"), std::string::npos) << st.message();
    // Mismatched shapes.
    std::vector<float> s(6, 1.0f);
    auto shaped = api.enqueue(
        TensorOp::allreduce("shaped", view(s, {r == 0 ? 2 : 3, 2}), view(s, {r == 0 ? 2 : 3, 2})));
    ASSERT_TRUE(shaped.isOk());
    EXPECT_FALSE(waitDone(api, shaped.value()).isOk());

    // A name in flight fails at once; the first still completes. "dup.<rank>" is posted by
    // this rank alone first, and its peer posts it only after "dup.tried", which completes
    // once both ranks have tried their duplicate: so it cannot complete before the second
    // post (without "dup.tried" the peer, running ahead, could post it in between).
    std::vector<float> x(2, 1.0f), y(2, 1.0f), z(2, 1.0f);
    const std::string mine = "dup." + std::to_string(r);
    auto first = api.enqueue(TensorOp::allreduce(mine, view(x, {2}), view(x, {2})));
    ASSERT_TRUE(first.isOk());
    auto second = api.enqueue(TensorOp::allreduce(mine, view(x, {2}), view(x, {2})));
    ASSERT_FALSE(second.isOk());
    EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(second.status().message().find("already in flight"), std::string::npos);
    auto tried = api.enqueue(TensorOp::allreduce("dup.tried", view(z, {2}), view(z, {2})));
    ASSERT_TRUE(tried.isOk());
    ASSERT_TRUE(waitDone(api, tried.value()).isOk());
    auto peers = api.enqueue(
        TensorOp::allreduce("dup." + std::to_string(1 - r), view(y, {2}), view(y, {2})));
    ASSERT_TRUE(peers.isOk());
    EXPECT_TRUE(waitDone(api, first.value()).isOk());
    EXPECT_TRUE(waitDone(api, peers.value()).isOk());

    // Unknown handles; outputs before the end.
    EXPECT_FALSE(api.poll(999999).isOk());
    EXPECT_FALSE(api.release(999999).isOk());
    bool finished = true;
    EXPECT_FALSE(api.wait(999999, 0.0, &finished).isOk());
    EXPECT_FALSE(finished);
  });
  // A rank waits with a short timeout while its peer has not posted yet.
  std::vector<float> x(2, 1.0f);
  auto id = job.rank(0).enqueue(TensorOp::allreduce("late", view(x, {2}), view(x, {2})));
  ASSERT_TRUE(id.isOk());
  bool finished = true;
  EXPECT_TRUE(job.rank(0).wait(id.value(), 0.05, &finished).isOk());
  EXPECT_FALSE(finished);
  EXPECT_FALSE(job.rank(0).poll(id.value()).value());
  auto early = job.rank(0).result(id.value());
  EXPECT_EQ(early.status().code(), StatusCode::kFailedPrecondition);
  std::vector<float> y(2, 1.0f);
  auto peer = job.rank(1).enqueue(TensorOp::allreduce("late", view(y, {2}), view(y, {2})));
  ASSERT_TRUE(peer.isOk());
  EXPECT_TRUE(waitDone(job.rank(0), id.value()).isOk());
  EXPECT_TRUE(waitDone(job.rank(1), peer.value()).isOk());
}

TEST(Api, JoinReturnsTheLastRankAndJoinedRanksContributeNothing) {
  ApiJob job(3);
  job.onEachRank([&](int r, Api& api) {
    std::vector<float> x(3, 1.0f);
    if (r != 1) {
      auto id = api.enqueue(TensorOp::allreduce("x", view(x, {3}), view(x, {3}), ReduceOp::kSum));
      ASSERT_TRUE(id.isOk());
      EXPECT_TRUE(waitDone(api, id.value()).isOk());
      for (float v : x) EXPECT_EQ(v, 2.0f);  // rank 1 had joined: two contributions
    }
    auto join = api.enqueue(TensorOp::join());
    ASSERT_TRUE(join.isOk());
    EXPECT_TRUE(waitDone(api, join.value()).isOk());
    const int last = api.result(join.value()).value()->lastJoinedRank;
    EXPECT_TRUE(last == 0 || last == 2) << last;
  });
}

TEST(Api, LifecycleAndNotInitialized) {
  Api api;
  EXPECT_FALSE(api.initialized());
  std::vector<float> x(2, 1.0f);
  auto id = api.enqueue(TensorOp::allreduce("x", view(x, {2}), view(x, {2})));
  EXPECT_EQ(id.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(id.status().message().find("not initialized"), std::string::npos);
  EXPECT_FALSE(api.placement().isOk());
  EXPECT_FALSE(api.stats().isOk());
  EXPECT_TRUE(api.shutdown().isOk());  // nothing to stop

  // Init, an operation, shutdown (its handle stays readable), init again.
  for (int round = 0; round < 2; ++round) {
    auto job = bindings::InProcessJob::make(1);
    ASSERT_TRUE(api.init(
                       bindingsConfig(),
                       [&](const Config& c) { return bindings::createInProcessRuntime(c, 0, job); },
                       "in-process")
                    .isOk());
    EXPECT_TRUE(api.initialized());
    EXPECT_EQ(api.placement().value().size, 1);
    auto again = api.init(
        bindingsConfig(),
        [](const Config&) -> Result<std::unique_ptr<Runtime>> {
          ADD_FAILURE() << "init on an initialized Api builds nothing";
          return ZEN_ERROR(StatusCode::kInternal, "no");
        },
        "in-process");
    EXPECT_TRUE(again.isOk());
    auto op = api.enqueue(TensorOp::allreduce("x", view(x, {2}), view(x, {2})));
    ASSERT_TRUE(op.isOk());
    EXPECT_TRUE(waitDone(api, op.value()).isOk());
    EXPECT_TRUE(api.shutdown().isOk());
    EXPECT_FALSE(api.initialized());
    EXPECT_TRUE(api.poll(op.value()).value());
    EXPECT_TRUE(api.release(op.value()).isOk());
  }
  // A factory error reaches the caller and leaves the Api uninitialized.
  auto bad = api.init(
      bindingsConfig(),
      [](const Config&) -> Result<std::unique_ptr<Runtime>> {
        return ZEN_ERROR(StatusCode::kIoError, "no peers");
      },
      "tcp");
  EXPECT_EQ(bad.code(), StatusCode::kIoError);
  EXPECT_FALSE(api.initialized());
}

TEST(Api, EveryInitGetsTheControllerSocketOfItsConfig) {
  // An elastic worker that is rank 0 in several rounds hands the library a fresh listening
  // socket (ZEN_CONTROLLER_FD) at each init; none may be dropped for an earlier one.
  Api api;
  std::vector<std::optional<int>> seen;
  for (int round = 0; round < 3; ++round) {
    Config config = bindingsConfig();
    if (round != 1) config.controllerFd = 7 + round;
    auto job = bindings::InProcessJob::make(1);
    const Status up = api.init(
        config,
        [&](const Config& c) {
          seen.push_back(c.controllerFd);
          return bindings::createInProcessRuntime(c, 0, job);
        },
        "in-process");
    ASSERT_TRUE(up.isOk()) << up.toString();
    ASSERT_TRUE(api.shutdown().isOk());
  }
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], std::optional<int>(7));
  EXPECT_EQ(seen[1], std::nullopt);
  EXPECT_EQ(seen[2], std::optional<int>(9));
}

TEST(Api, ShutdownFailsPendingOperationsOnEveryRank) {
  ApiJob job(2);
  std::vector<float> x(2, 1.0f);
  std::atomic<int> failed{0};
  auto id = job.rank(1).enqueue(TensorOp::allreduce("never", view(x, {2}), view(x, {2})),
                                [&](int64_t, const Status& st) {
                                  if (st.code() == StatusCode::kAborted) ++failed;
                                });
  ASSERT_TRUE(id.isOk());
  job.rank(0).shutdown();
  const Status st = waitDone(job.rank(1), id.value());
  EXPECT_EQ(st.code(), StatusCode::kAborted);
  EXPECT_NE(st.message().find("shut down by rank 0"), std::string::npos) << st.message();
  EXPECT_EQ(failed.load(), 1);
  // The stopped rank refuses new work with the cause.
  auto later = job.rank(1).enqueue(TensorOp::allreduce("later", view(x, {2}), view(x, {2})));
  EXPECT_EQ(later.status().code(), StatusCode::kAborted);
}

// The last reference to a runtime dropped on its own background thread: a completion calls
// shutdown(). The runtime must be torn down off that thread (it cannot join itself).
TEST(Api, ShutdownFromACompletionOnTheBackgroundThread) {
  runBounded(60, "shutdown from a completion", [] {
    auto job = bindings::InProcessJob::make(1);
    Api api;
    ASSERT_TRUE(api.init(
                       bindingsConfig(),
                       [&](const Config& c) { return bindings::createInProcessRuntime(c, 0, job); },
                       "in-process")
                    .isOk());
    std::vector<float> x(2, 1.0f);
    std::promise<Status> inside;
    auto id = api.enqueue(TensorOp::allreduce("x", view(x, {2}), view(x, {2})),
                          [&](int64_t, const Status&) { inside.set_value(api.shutdown()); });
    ASSERT_TRUE(id.isOk());
    std::future<Status> f = inside.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    EXPECT_TRUE(f.get().isOk());
    EXPECT_FALSE(api.initialized());
    EXPECT_TRUE(api.shutdown().isOk());  // waits for the teardown the completion started
    EXPECT_TRUE(api.poll(id.value()).value());
  });
}

// A completion that runs while another thread's shutdown() drains the runtime calls
// shutdown() and init(): neither may wait for that drain.
TEST(Api, ShutdownAndInitFromACompletionDuringShutdown) {
  runBounded(60, "shutdown and init from a completion during shutdown", [] {
    ApiJob job(2);
    std::vector<float> x(2, 1.0f);
    std::promise<std::pair<Status, Status>> inside;
    Api& api = job.rank(0);
    auto id = api.enqueue(TensorOp::allreduce("never", view(x, {2}), view(x, {2})),
                          [&](int64_t, const Status&) {
                            Status down = api.shutdown();
                            Status up = api.init(
                                bindingsConfig(),
                                [](const Config&) -> Result<std::unique_ptr<Runtime>> {
                                  return ZEN_ERROR(StatusCode::kInternal, "not reached");
                                },
                                "in-process");
                            inside.set_value({down, up});
                          });
    ASSERT_TRUE(id.isOk());
    EXPECT_TRUE(api.shutdown().isOk());
    std::future<std::pair<Status, Status>> f = inside.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    auto [down, up] = f.get();
    EXPECT_TRUE(down.isOk()) << down.toString();
    EXPECT_EQ(up.code(), StatusCode::kFailedPrecondition) << up.toString();
    EXPECT_FALSE(api.initialized());
  });
}

TEST(Api, StatsAndTimeline) {
  // Named by this process: ctest -j runs other processes of this test binary at once.
  const std::string path =
      ::testing::TempDir() + "zen_api_timeline" + std::to_string(getpid()) + ".json";
  ApiJob job(2);
  job.onEachRank([&](int r, Api& api) {
    EXPECT_TRUE(api.startTimeline(path, true).isOk());
    std::vector<float> x(4, 1.0f);
    for (int step = 0; step < 3; ++step) {
      auto id = api.enqueue(TensorOp::allreduce("w", view(x, {4}), view(x, {4})));
      ASSERT_TRUE(id.isOk());
      EXPECT_TRUE(waitDone(api, id.value()).isOk());
      EXPECT_TRUE(api.release(id.value()).isOk());
    }
    EXPECT_TRUE(api.stopTimeline().isOk());
    const RuntimeStats s = api.stats().value();
    EXPECT_EQ(s.tensors.at("w").completed, 3u);
    EXPECT_GE(s.cacheHits, 1u);
    std::ifstream in(path.substr(0, path.size() - 5) + ".rank" + std::to_string(r) + ".json");
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("\"w\""), std::string::npos) << text.str().substr(0, 200);
    EXPECT_NE(text.str().find("ALLREDUCE"), std::string::npos);
  });
  // ZEN_TIMELINE naming a file: the timeline runs from init and cannot be started again.
  ApiJob fixed(1, bindingsConfig({{"ZEN_TIMELINE", ::testing::TempDir() + "zen_fixed" +
                                                       std::to_string(getpid()) + ".json"}}));
  EXPECT_EQ(fixed.rank(0).startTimeline(path, false).code(), StatusCode::kFailedPrecondition);
}

TEST(Api, PlacementFromConfig) {
  // zenrun's variables.
  auto p = bindings::placementFor(bindingsConfig({{"ZEN_LOCAL_RANK", "1"},
                                                  {"ZEN_LOCAL_SIZE", "2"},
                                                  {"ZEN_CROSS_RANK", "1"},
                                                  {"ZEN_CROSS_SIZE", "2"}}),
                                  3, 4, "tcp");
  EXPECT_EQ(p.localRank, 1);
  EXPECT_EQ(p.localSize, 2);
  EXPECT_EQ(p.crossRank, 1);
  EXPECT_EQ(p.crossSize, 2);
  // mpirun's local placement; hosts filled in rank order.
  p = bindings::placementFor(
      bindingsConfig({{"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}), 2,
      5, "mpi");
  EXPECT_EQ(p.localRank, 0);
  EXPECT_EQ(p.localSize, 2);
  EXPECT_EQ(p.crossRank, 1);
  EXPECT_EQ(p.crossSize, 3);
  // Nothing said: one host.
  p = bindings::placementFor(bindingsConfig(), 2, 3, "tcp");
  EXPECT_EQ(p.localRank, 2);
  EXPECT_EQ(p.localSize, 3);
  EXPECT_EQ(p.crossRank, 0);
  EXPECT_EQ(p.crossSize, 1);
}

}  // namespace
}  // namespace zen::testing
