// Buckets that an executor ends later, on a thread of its own (Executor::submit, what the CUDA
// executor's finalizer does): the loop keeps cycling meanwhile, the names stay in flight, the
// handles complete with the executor's status, shutdown waits for buckets in flight, a
// callback on that thread may ask for shutdown, a failure reported there stops the job, a
// joined rank's bucket in flight is not taken for the next operation of its name, barrier and
// join complete only after this rank's earlier buckets, and stats and timeline readers may run
// alongside. Runs on the CPU: the "device" is a CpuExecutor
// whose completions a gate holds back.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>

#include "test/runtime/gated_executor.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

// A runtime of one rank over the executor that make(data transport) builds.
std::unique_ptr<Runtime> oneRank(const MakeExecutor& make) {
  return rankOf(bindings::InProcessJob::make(1), 0, make, testConfig());
}

struct GatedRank {
  GatedExecutor* executor = nullptr;
  std::unique_ptr<Runtime> runtime;
};

GatedRank makeGatedRank(const bindings::InProcessJob& job,
                        int r,
                        std::string failing = "",
                        const Config& config = testConfig()) {
  GatedRank rank;
  rank.runtime = rankOf(
      job, r,
      [&](std::unique_ptr<ops::Transport> data) {
        auto e = std::make_unique<GatedExecutor>(
            std::make_unique<ops::CpuExecutor>(std::move(data), ops::CpuExecutorOptions{}),
            std::move(failing), kWaitSeconds);
        rank.executor = e.get();
        return e;
      },
      config);
  return rank;
}

GatedRank makeGatedRank(std::string failing = "") {
  return makeGatedRank(bindings::InProcessJob::make(1), 0, std::move(failing));
}

// Two ranks over gated executors; rank 1's gate is open from the start, rank 0's is closed.
struct GatedPair {
  explicit GatedPair(const Config& config = testConfig()) {
    auto job = bindings::InProcessJob::make(2);
    for (int r = 0; r < 2; ++r) ranks.push_back(makeGatedRank(job, r, "", config));
    ranks[1].executor->open();
  }
  ~GatedPair() {
    ranks[0].executor->open();
    for (GatedRank& g : ranks) (void)g.runtime->shutdown();
  }
  Runtime& rt(int r) { return *ranks[static_cast<size_t>(r)].runtime; }
  // fn(rank) on one thread per rank; every wait inside must be bounded.
  void onEachRank(const std::function<void(int)>& fn) {
    std::thread other([&] { fn(1); });
    fn(0);
    other.join();
  }
  GatedExecutor& executor(int r) { return *ranks[static_cast<size_t>(r)].executor; }
  std::vector<GatedRank> ranks;
};

// Both ranks post "x"; rank 1's completes, rank 0's stays in flight behind its closed gate.
void postXWithRank0InFlight(GatedPair& pair,
                            std::vector<float>* x0,
                            std::vector<float>* x1,
                            Handle* h0) {
  auto a = pair.rt(0).enqueue(
      TensorOp::allreduce("x", denseView(*x0, {2}), denseView(*x0, {2}), ReduceOp::kSum));
  auto b = pair.rt(1).enqueue(
      TensorOp::allreduce("x", denseView(*x1, {2}), denseView(*x1, {2}), ReduceOp::kSum));
  ASSERT_TRUE(a.isOk() && b.isOk());
  ASSERT_TRUE(waitFor(b.value()).isOk());
  ASSERT_TRUE(pair.executor(0).waitSubmitted(1));
  *h0 = a.value();
}

// Rank 1 joins too; rank 0's join (join0) completes only once its gate opens and its "x" in
// flight (h0, over x0) ends with the sum of both ranks' first "x".
void joinRank1ThenReleaseRank0(GatedPair& pair,
                               const Handle& join0,
                               const Handle& h0,
                               const std::vector<float>& x0) {
  auto join1 = pair.rt(1).enqueue(TensorOp::join());
  ASSERT_TRUE(join1.isOk());
  EXPECT_TRUE(waitFor(join1.value()).isOk());
  // Rank 0's join waits for its "x" in flight.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(join0.poll());
  pair.executor(0).open();
  EXPECT_TRUE(waitFor(join0).isOk());
  EXPECT_TRUE(h0.poll());
  EXPECT_TRUE(waitFor(h0).isOk());
  EXPECT_EQ(x0, (std::vector<float>{11, 22}));
}

TEST(RuntimeAsync, TheLoopKeepsGoingWhileBucketsAreInFlight) {
  GatedRank g = makeGatedRank();
  Runtime& rt = *g.runtime;
  std::vector<float> a(4, 2.0f), b(3, 5.0f);
  std::thread::id completedOn;
  auto ha = rt.enqueue(TensorOp::allreduce("a", denseView(a, {4}), denseView(a, {4}))
                           .withCallback([&](const Status&, OpResult&) {
                             completedOn = std::this_thread::get_id();
                           }));
  ASSERT_TRUE(ha.isOk());
  ASSERT_TRUE(g.executor->waitSubmitted(1));
  // "a" is in flight: its name is taken, and another tensor still reaches the executor.
  auto again = rt.enqueue(TensorOp::allreduce("a", denseView(a, {4}), denseView(a, {4})));
  EXPECT_FALSE(again.isOk());
  auto hb = rt.enqueue(TensorOp::allreduce("b", denseView(b, {3}), denseView(b, {3})));
  ASSERT_TRUE(hb.isOk());
  ASSERT_TRUE(g.executor->waitSubmitted(2));
  EXPECT_FALSE(ha.value().poll());
  EXPECT_FALSE(hb.value().poll());
  g.executor->open();
  ASSERT_TRUE(waitFor(ha.value()).isOk());
  ASSERT_TRUE(waitFor(hb.value()).isOk());
  EXPECT_EQ(completedOn, g.executor->threadId());
  for (float v : a) EXPECT_EQ(v, 2.0f);
  for (float v : b) EXPECT_EQ(v, 5.0f);
  const RuntimeStats stats = rt.stats();
  EXPECT_EQ(stats.bucketsExecuted, 2u);
  EXPECT_EQ(stats.completed, 2u);
  EXPECT_EQ(stats.tensors.at("a").lastBucket, 0);
  EXPECT_EQ(stats.tensors.at("b").lastBucket, 1);
}

// The order in which a test's callbacks ran (they run on the loop's or the executor's thread).
class Order {
 public:
  Callback note(std::string what, const Handle* mustBeDone = nullptr) {
    return [this, what = std::move(what), mustBeDone](const Status&, OpResult&) {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(what);
      if (mustBeDone != nullptr && !mustBeDone->poll()) seen_.push_back(what + " too early");
    };
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> seen_;
};

// Horovod's barrier: every op this rank posted before it has completed when it completes.
TEST(RuntimeAsync, ABarrierCompletesOnlyAfterTheBucketsPostedBeforeIt) {
  GatedRank g = makeGatedRank();
  Runtime& rt = *g.runtime;
  Order order;
  std::vector<float> a(4, 2.0f), b(3, 5.0f);
  Handle first;
  auto ha = rt.enqueue(
      TensorOp::allreduce("a", denseView(a, {4}), denseView(a, {4})).withCallback(order.note("a")));
  ASSERT_TRUE(ha.isOk());
  first = ha.value();
  ASSERT_TRUE(g.executor->waitSubmitted(1));
  auto barrier = rt.enqueue(TensorOp::barrier().withCallback(order.note("barrier", &first)));
  ASSERT_TRUE(barrier.isOk()) << barrier.status().toString();
  // The loop is not blocked meanwhile: a tensor posted after the barrier still reaches the
  // executor.
  auto hb = rt.enqueue(
      TensorOp::allreduce("b", denseView(b, {3}), denseView(b, {3})).withCallback(order.note("b")));
  ASSERT_TRUE(hb.isOk());
  ASSERT_TRUE(g.executor->waitSubmitted(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // many 1 ms cycles
  EXPECT_FALSE(barrier.value().poll());
  EXPECT_FALSE(ha.value().poll());
  g.executor->open();
  EXPECT_TRUE(waitFor(barrier.value()).isOk());
  EXPECT_TRUE(ha.value().poll());
  EXPECT_TRUE(waitFor(ha.value()).isOk());
  EXPECT_TRUE(waitFor(hb.value()).isOk());
  const std::vector<std::string> seen = order.seen();
  ASSERT_EQ(seen.size(), 3u) << ::testing::PrintToString(seen);
  EXPECT_EQ(seen.front(), "a") << ::testing::PrintToString(seen);
  EXPECT_NE(std::find(seen.begin(), seen.end(), "barrier"), seen.end());
  EXPECT_TRUE(rt.stats().tensors.count(kBarrierTensorName) == 1);
  EXPECT_EQ(rt.stats().tensors.at(kBarrierTensorName).completed, 1u);
  // With nothing in flight a barrier completes at once, as on the CPU.
  auto again = rt.enqueue(TensorOp::barrier());
  ASSERT_TRUE(again.isOk()) << again.status().toString();
  EXPECT_TRUE(waitFor(again.value()).isOk());
}

// After join returns, every name this rank posted before it is free again.
TEST(RuntimeAsync, AJoinCompletesAfterTheBucketsInFlightAndTheirNamesMayBePostedAgain) {
  GatedRank g = makeGatedRank();
  Runtime& rt = *g.runtime;
  Order order;
  std::vector<float> x(2, 3.0f);
  Handle first;
  auto hx =
      rt.enqueue(TensorOp::allreduce("x", denseView(x, {2}), denseView(x, {2}), ReduceOp::kSum)
                     .withCallback(order.note("x")));
  ASSERT_TRUE(hx.isOk());
  first = hx.value();
  ASSERT_TRUE(g.executor->waitSubmitted(1));
  auto join = rt.enqueue(TensorOp::join().withCallback(order.note("join", &first)));
  ASSERT_TRUE(join.isOk()) << join.status().toString();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // many 1 ms cycles
  EXPECT_FALSE(join.value().poll());
  EXPECT_FALSE(hx.value().poll());
  g.executor->open();
  ASSERT_TRUE(waitFor(join.value()).isOk());
  EXPECT_EQ(join.value().result().lastJoinedRank, 0);
  // Right after join returns: "x" is no longer in flight.
  std::vector<float> y(2, 4.0f);
  auto again =
      rt.enqueue(TensorOp::allreduce("x", denseView(y, {2}), denseView(y, {2}), ReduceOp::kSum));
  ASSERT_TRUE(again.isOk()) << again.status().toString();
  EXPECT_TRUE(waitFor(again.value()).isOk());
  EXPECT_TRUE(waitFor(hx.value()).isOk());
  EXPECT_EQ(x, (std::vector<float>{3, 3}));
  EXPECT_EQ(y, (std::vector<float>{4, 4}));
  EXPECT_EQ(order.seen(), (std::vector<std::string>{"x", "join"}));
}

TEST(RuntimeAsync, ShutdownWaitsForBucketsInFlight) {
  GatedRank g = makeGatedRank();
  Runtime& rt = *g.runtime;
  std::vector<float> a(4, 1.0f);
  auto h = rt.enqueue(TensorOp::allreduce("a", denseView(a, {4}), denseView(a, {4})));
  ASSERT_TRUE(h.isOk());
  ASSERT_TRUE(g.executor->waitSubmitted(1));
  std::atomic<bool> returned{false};
  std::thread stopper([&] {
    (void)rt.shutdown();
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The device still uses the tensor: neither the handle nor shutdown may end yet.
  EXPECT_FALSE(returned.load());
  EXPECT_FALSE(h.value().poll());
  g.executor->open();
  stopper.join();
  EXPECT_TRUE(waitFor(h.value()).isOk());  // its bucket ended well before the stop
  EXPECT_FALSE(rt.enqueue(TensorOp::allreduce("b", denseView(a, {4}), denseView(a, {4}))).isOk());
}

TEST(RuntimeAsync, ShutdownFromACallbackOnTheExecutorsThreadDoesNotDeadlock) {
  GatedRank g = makeGatedRank();
  Runtime& rt = *g.runtime;
  g.executor->open();
  std::vector<float> a(2, 1.0f);
  auto h = rt.enqueue(TensorOp::allreduce("a", denseView(a, {2}), denseView(a, {2}))
                          .withCallback([&](const Status&, OpResult&) { (void)rt.shutdown(); }));
  ASSERT_TRUE(h.isOk());
  EXPECT_TRUE(waitFor(h.value()).isOk());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (rt.running() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(rt.running());
}

TEST(RuntimeAsync, AFailureReportedLaterStopsTheRankWithItsCause) {
  GatedRank g = makeGatedRank("boom");
  Runtime& rt = *g.runtime;
  g.executor->open();
  std::vector<float> a(2, 1.0f);
  auto h = rt.enqueue(TensorOp::allreduce("boom", denseView(a, {2}), denseView(a, {2})));
  ASSERT_TRUE(h.isOk());
  const Status first = waitFor(h.value());
  EXPECT_EQ(first.code(), StatusCode::kAborted);
  EXPECT_NE(first.message().find("device lost while running 'boom'"), std::string::npos);
  auto later = rt.enqueue(TensorOp::allreduce("later", denseView(a, {2}), denseView(a, {2})));
  const Status s = later.isOk() ? waitFor(later.value()) : later.status();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.toString();
  EXPECT_NE(s.message().find("rank 0 failed: Aborted: device lost"), std::string::npos)
      << s.message();
}

// A rank that joined while its own "x" is still in flight is asked to run the other ranks'
// next "x" (a joined rank contributes zeros). That bucket is not this rank's entry: the old
// one must neither be fed to it (its tensor is still in use, and the others would sum its
// data) nor be completed, freed or recorded by it.
TEST(RuntimeAsync, AJoinedRanksBucketInFlightIsNotTheNextOneOfTheSameName) {
  GatedPair pair;
  std::vector<float> x0 = {1, 2}, x1 = {10, 20};
  Handle h0;
  ASSERT_NO_FATAL_FAILURE(postXWithRank0InFlight(pair, &x0, &x1, &h0));
  EXPECT_FALSE(h0.poll());  // rank 0's "x" is in flight: its gate is closed

  auto join0 = pair.rt(0).enqueue(TensorOp::join());
  ASSERT_TRUE(join0.isOk()) << join0.status().toString();
  std::vector<float> next1 = {100, 200};
  auto n1 = pair.rt(1).enqueue(
      TensorOp::allreduce("x", denseView(next1, {2}), denseView(next1, {2}), ReduceOp::kSum));
  ASSERT_TRUE(n1.isOk()) << n1.status().toString();
  ASSERT_TRUE(waitFor(n1.value()).isOk());
  EXPECT_EQ(next1, (std::vector<float>{100, 200}));  // rank 0 joined: it adds zeros
  EXPECT_EQ(x0, (std::vector<float>{11, 22}));       // its tensor in flight is left alone
  EXPECT_FALSE(h0.poll());

  ASSERT_NO_FATAL_FAILURE(joinRank1ThenReleaseRank0(pair, join0.value(), h0, x0));
  const RuntimeStats stats = pair.rt(0).stats();
  EXPECT_EQ(stats.tensors.at("x").completed, 1u);
  EXPECT_EQ(stats.tensors.at("x").failed, 0u);
  // Rank 0 may post "x" again, and that entry is its own.
  std::vector<float> again0 = {3, 4}, again1 = {30, 40};
  auto a0 = pair.rt(0).enqueue(
      TensorOp::allreduce("x", denseView(again0, {2}), denseView(again0, {2}), ReduceOp::kSum));
  auto a1 = pair.rt(1).enqueue(
      TensorOp::allreduce("x", denseView(again1, {2}), denseView(again1, {2}), ReduceOp::kSum));
  ASSERT_TRUE(a0.isOk() && a1.isOk());
  EXPECT_TRUE(waitFor(a0.value()).isOk());
  EXPECT_TRUE(waitFor(a1.value()).isOk());
  EXPECT_EQ(again0, (std::vector<float>{33, 44}));
}

// The same for a response the loop completes itself: an error about the other ranks' next
// "x" (a broadcast from rank 0, which has joined) must not fail rank 0's "x" in flight.
TEST(RuntimeAsync, AnErrorAboutTheNextOpOfANameLeavesTheBucketInFlightAlone) {
  GatedPair pair;
  std::vector<float> x0 = {1, 2}, x1 = {10, 20};
  Handle h0;
  ASSERT_NO_FATAL_FAILURE(postXWithRank0InFlight(pair, &x0, &x1, &h0));

  auto join0 = pair.rt(0).enqueue(TensorOp::join());
  ASSERT_TRUE(join0.isOk());
  std::vector<float> b1 = {5, 6};
  auto bad = pair.rt(1).enqueue(TensorOp::broadcast("x", denseView(b1, {2}), 0));
  ASSERT_TRUE(bad.isOk()) << bad.status().toString();
  const Status refused = waitFor(bad.value());
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.toString();
  EXPECT_FALSE(h0.poll()) << h0.wait(0).toString();

  ASSERT_NO_FATAL_FAILURE(joinRank1ThenReleaseRank0(pair, join0.value(), h0, x0));
  EXPECT_EQ(pair.rt(0).stats().tensors.at("x").completed, 1u);
  EXPECT_EQ(pair.rt(0).stats().tensors.at("x").failed, 0u);
}

// Steps whose buckets end on the executors' threads while the loops plan the next ones, with
// another thread per rank reading the stats and starting and stopping the timeline the whole
// time: everything the two threads share (stats, timeline, queue, handles) is locked (the
// ThreadSanitizer build checks it) and every result is right.
TEST(RuntimeAsync, StepsEndingOnTheExecutorsThreadWhileOthersReadStatsAndTimeline) {
  GatedPair pair(testConfig({{"ZEN_TIMELINE", "DYNAMIC"}}));
  pair.executor(0).open();
  const int steps = 60;
  std::atomic<bool> done{false};
  std::vector<std::thread> observers;
  for (int r = 0; r < 2; ++r) {
    observers.emplace_back([&, r] {
      const std::string path =
          ::testing::TempDir() + "async_observed" + std::to_string(getpid()) + ".json";
      Runtime& rt = pair.rt(r);
      for (int i = 0; !done.load(); ++i) {
        EXPECT_LE(rt.stats().completed, static_cast<uint64_t>(3 * steps));
        if (i % 2 == 0) {
          EXPECT_TRUE(rt.startTimeline(path, i % 4 == 0).isOk());
        } else {
          EXPECT_TRUE(rt.stopTimeline().isOk());
        }
        EXPECT_TRUE(rt.status().isOk());
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  pair.onEachRank([&](int r) {
    Runtime& rt = pair.rt(r);
    for (int step = 0; step < steps; ++step) {
      std::vector<std::vector<float>> data(3);
      std::vector<TensorOp> ops;
      std::atomic<int> called{0};
      for (int t = 0; t < 3; ++t) {
        data[t].assign(static_cast<size_t>(t + 1), static_cast<float>((r + 1) * (step + t)));
        const auto n = static_cast<int64_t>(t + 1);
        ops.push_back(TensorOp::allreduce("t" + std::to_string(t), denseView(data[t], {n}),
                                          denseView(data[t], {n}), ReduceOp::kSum)
                          .withCallback([&](const Status&, OpResult&) { ++called; }));
      }
      auto handles = rt.enqueueGroup(std::move(ops));
      ASSERT_TRUE(handles.isOk()) << handles.status().toString();
      for (int t = 0; t < 3; ++t) {
        ASSERT_TRUE(waitFor(handles.value()[static_cast<size_t>(t)]).isOk());
        for (float v : data[t]) ASSERT_EQ(v, static_cast<float>(3 * (step + t)));
      }
      EXPECT_EQ(called.load(), 3);
    }
  });
  done = true;
  for (auto& t : observers) t.join();
  for (int r = 0; r < 2; ++r) {
    const RuntimeStats stats = pair.rt(r).stats();
    EXPECT_EQ(stats.completed, static_cast<uint64_t>(3 * steps));
    EXPECT_EQ(stats.failed, 0u);
    EXPECT_EQ(stats.tensors.at("t2").completed, static_cast<uint64_t>(steps));
  }
}

TEST(RuntimeAsync, HostOnlyExecutorsRefuseDeviceTensorsAtEnqueue) {
  std::unique_ptr<Runtime> rt = oneRank([](std::unique_ptr<ops::Transport> data) {
    return std::make_unique<ops::CpuExecutor>(std::move(data), ops::CpuExecutorOptions{});
  });
  ASSERT_TRUE(rt);
  std::vector<float> a(2, 1.0f);
  DenseView v = denseView(a, {2});
  v.device = Device::cuda(0);
  auto h = rt->enqueue(TensorOp::allreduce("gpu", v, v));
  ASSERT_FALSE(h.isOk());
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("built without CUDA"), std::string::npos)
      << h.status().message();
  // A host tensor with a ready signal, or views on two devices, are malformed anyway.
  DenseView host = denseView(a, {2});
  int fake = 0;
  auto withEvent = rt->enqueue(TensorOp::allreduce("ev", host, host).withReady({&fake, nullptr}));
  EXPECT_FALSE(withEvent.isOk());
  auto mixed = rt->enqueue(TensorOp::allreduce("mixed", host, v));
  EXPECT_FALSE(mixed.isOk());
}

}  // namespace
}  // namespace zen::testing
