// What goes wrong reaches every rank as a clear Status: validation errors, a shutdown with
// pending work, a stalled rank, a rank whose data plane broke; and join with sparse tensors.
#include <atomic>
#include <chrono>
#include <future>

#include "controller/channel_negotiator.h"
#include "core/logging.h"
#include "ops/cpu_executor.h"
#include "ops/transport_control_channel.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr int kRanks = 4;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Every rank posts `name`; rank `odd` posts it differently (via make(rank)). Every rank's
// handle must fail with kInvalidArgument and a message containing `expect`.
void expectEveryRankFails(Job& job,
                          const std::function<TensorOp(int rank, std::vector<float>& data)>& make,
                          const std::string& expect) {
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<float> data(64, 1.0f);
    auto h = rt.enqueue(make(r, data));
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    const Status s = waitFor(h.value());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "rank " << r << ": " << s.toString();
    EXPECT_TRUE(contains(s.message(), expect)) << "rank " << r << ": " << s.message();
  });
}

TEST(RuntimeErrors, ValidationErrorsReachEveryRank) {
  Job job(kRanks);
  expectEveryRankFails(
      job,
      [](int r, std::vector<float>& d) {
        DenseView v = denseView(d, {4, 4});
        if (r == 2) v.dtype = DataType::kInt32;
        return TensorOp::allreduce("dtype", v, v);
      },
      "tensor 'dtype': rank 2 sent dtype int32, ranks 0-1, 3 float32");
  expectEveryRankFails(
      job,
      [](int r, std::vector<float>& d) {
        DenseView v = denseView(d, r == 1 ? TensorShape{8, 2} : TensorShape{4, 4});
        return TensorOp::allreduce("shape", v, v);
      },
      "tensor 'shape': rank 1 sent dense shape [8, 2], ranks 0, 2-3 [4, 4]");
  expectEveryRankFails(
      job,
      [](int r, std::vector<float>& d) {
        DenseView v = denseView(d, {4, 4});
        return r == 3 ? TensorOp::allgather("op", v) : TensorOp::allreduce("op", v, v);
      },
      "tensor 'op': rank 3 sent op allgather, ranks 0-2 allreduce");
  // An index out of range on rank 2 (the sparse allreduce tells every rank), alone ...
  std::vector<int64_t> bad = {1, 3, 1005};
  std::vector<float> rows(3, 1.0f);
  expectEveryRankFails(
      job,
      [&](int r, std::vector<float>&) {
        SparseView s;
        s.indices = bad.data();
        s.values = rows.data();
        s.nnz = r == 2 ? 3 : 2;
        s.numRows = 1000;
        return TensorOp::sparseAllreduce("index", s);
      },
      "rank 2: index 1005");
  // ... and fused with others, where it would otherwise land in a neighbour's rows.
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<TensorOp> ops;
    for (int t = 0; t < 3; ++t) {
      SparseView s;
      s.indices = bad.data();
      s.values = rows.data();
      s.nnz = r == 2 && t == 1 ? 3 : 2;
      s.numRows = 1000;
      ops.push_back(TensorOp::sparseAllreduce("fused." + std::to_string(t), s));
    }
    auto hs = rt.enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk());
    for (const Handle& h : hs.value()) {
      const Status s = waitFor(h);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_TRUE(contains(s.message(), "rank 2")) << s.message();
      if (r == 2) {
        EXPECT_TRUE(contains(s.message(), "tensor 'fused.1': index 1005")) << s.message();
      }
    }
  });
  // The job goes on after errors.
  job.onEachRank([&](int, Runtime& rt) {
    std::vector<float> x(4, 2.0f);
    auto h = rt.enqueue(TensorOp::allreduce("after", denseView(x, {4}), denseView(x, {4})));
    ASSERT_TRUE(h.isOk());
    EXPECT_TRUE(waitFor(h.value()).isOk());
  });
}

TEST(RuntimeErrors, DuplicateNameFailsAtOnceAndTheFirstStillCompletes) {
  Job job(kRanks);
  // The others post "w" only once rank 1 has tried its duplicates: had every rank posted it,
  // it could complete in between and the second post would be legitimate.
  std::promise<void> refused;
  std::shared_future<void> triedDuplicates = refused.get_future().share();
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<float> x(4, 1.0f), y(4, 1.0f);
    if (r != 1) {
      ASSERT_EQ(triedDuplicates.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    }
    auto first = rt.enqueue(TensorOp::allreduce("w", denseView(x, {4}), denseView(x, {4})));
    ASSERT_TRUE(first.isOk());
    if (r == 1) {
      auto again = rt.enqueue(TensorOp::allreduce("w", denseView(y, {4}), denseView(y, {4})));
      ASSERT_FALSE(again.isOk());
      EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
      EXPECT_TRUE(contains(again.status().message(), "tensor 'w' is already in flight on rank 1"))
          << again.status().message();
      // A group holding a duplicate is refused as a whole.
      std::vector<TensorOp> ops;
      ops.push_back(TensorOp::allreduce("g", denseView(y, {4}), denseView(y, {4})));
      ops.push_back(TensorOp::allreduce("g", denseView(y, {4}), denseView(y, {4})));
      EXPECT_FALSE(rt.enqueueGroup(std::move(ops)).isOk());
      refused.set_value();
    }
    EXPECT_TRUE(waitFor(first.value()).isOk());
    // The name is free again once completed.
    auto next = rt.enqueue(TensorOp::allreduce("w", denseView(x, {4}), denseView(x, {4})));
    ASSERT_TRUE(next.isOk()) << next.status().toString();
    EXPECT_TRUE(waitFor(next.value()).isOk());
  });
}

TEST(RuntimeErrors, MalformedRequestsFailAtEnqueue) {
  Job job(1);
  std::vector<float> x(4);
  auto h = job.rank(0).enqueue(TensorOp::broadcast("b", denseView(x, {4}), 3));
  ASSERT_FALSE(h.isOk());
  EXPECT_TRUE(contains(h.status().message(), "broadcast root rank 3 outside [0, 1)"));
  std::vector<float> small(2);
  h = job.rank(0).enqueue(TensorOp::allreduce("a", denseView(x, {4}), denseView(small, {2})));
  ASSERT_FALSE(h.isOk());
  EXPECT_TRUE(contains(h.status().message(), "does not match input"));
}

TEST(RuntimeErrors, ShutdownWithPendingWorkNamesTheRankThatAsked) {
  Job job(kRanks);
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(4, 1.0f));
  std::vector<Handle> pending(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    if (r == 1) continue;
    // Names nobody else posts: they can only end by the shutdown.
    auto h = job.rank(r).enqueue(TensorOp::allreduce(
        "lonely." + std::to_string(r), denseView(data[r], {4}), denseView(data[r], {4})));
    ASSERT_TRUE(h.isOk());
    pending[r] = h.value();
  }
  EXPECT_TRUE(job.rank(1).shutdown().isOk());
  for (int r = 0; r < kRanks; ++r) {
    if (r != 1) {
      const Status s = waitFor(pending[r]);
      EXPECT_EQ(s.code(), StatusCode::kAborted);
      EXPECT_EQ(s.message(), "zen shut down: shut down by rank 1 at user request") << r;
    }
    // Every rank stops and refuses new work with the same cause.
    Status st = job.rank(r).status();
    for (int i = 0; i < 1000 && st.isOk(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      st = job.rank(r).status();
    }
    EXPECT_TRUE(contains(st.message(), "shut down by rank 1 at user request")) << st.toString();
    auto late = job.rank(r).enqueue(TensorOp::barrier());
    ASSERT_FALSE(late.isOk());
    EXPECT_TRUE(contains(late.status().message(), "shut down by rank 1 at user request"));
  }
  // Rank 0 did not ask: its own shutdown reports the cause.
  EXPECT_TRUE(contains(job.rank(0).shutdown().message(), "by rank 1"));
}

TEST(RuntimeErrors, StalledRankIsNamedByRankZero) {
  Job job(kRanks, testConfig({{"ZEN_STALL_CHECK_TIME_SECONDS", "0.2"}}));
  job.onEachRank([&](int r, Runtime& rt) {
    // Rank 3 posts only once rank 0 has named it (a sleep would not do: ranks 0-2 or rank 0's
    // loop descheduled longer would find rank 3's post already there).
    for (int i = 0;
         r == 3 && i < kWaitSeconds * 100 && !contains(job.log(0), "Missing ranks:\n3: ["); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::vector<float> x(4, 1.0f);
    auto h = rt.enqueue(TensorOp::allreduce("slow.grad", denseView(x, {4}), denseView(x, {4})));
    ASSERT_TRUE(h.isOk());
    EXPECT_TRUE(waitFor(h.value()).isOk());
  });
  const std::string log = job.log(0);
  EXPECT_TRUE(contains(log, "Missing ranks:\n3: [slow.grad]")) << log;
  EXPECT_GE(job.rank(0).stats().stallWarnings, 1u);
  EXPECT_FALSE(contains(job.log(1), "Missing ranks"));
}

TEST(RuntimeErrors, StallShutdownFailsEveryRankNamingTheStalledOne) {
  Job job(kRanks, testConfig({{"ZEN_STALL_CHECK_TIME_SECONDS", "0.1"},
                              {"ZEN_STALL_SHUTDOWN_TIME_SECONDS", "0.3"}}));
  job.onEachRank([&](int r, Runtime& rt) {
    if (r == 2) return;  // never posts
    std::vector<float> x(4, 1.0f);
    auto h = rt.enqueue(TensorOp::allreduce("never", denseView(x, {4}), denseView(x, {4})));
    ASSERT_TRUE(h.isOk());
    const Status s = waitFor(h.value());
    EXPECT_EQ(s.code(), StatusCode::kAborted);
    EXPECT_TRUE(contains(s.message(), "shut down by rank 0 after a stall")) << s.message();
    EXPECT_TRUE(contains(s.message(), "2!: [never]")) << s.message();
  });
}

// A CpuExecutor whose data plane breaks on rank 2 at the tensor "boom": a receive that
// nobody answers times out (rank 2's data transport has a short timeout), and the transport
// aborts, as it would on a dead link; the other ranks, waiting on rank 2, fail in turn.
class BreakingExecutor final : public Executor {
 public:
  BreakingExecutor(std::unique_ptr<ops::CpuExecutor> inner, int rank)
      : inner_(std::move(inner)), rank_(rank) {}
  Status execute(const Response& response,
                 const std::vector<TensorEntry*>& entries,
                 BucketReport* report) override {
    if (rank_ == 2 && response.tensorNames.front() == "boom") {
      uint64_t word = 0;
      return inner_->transport().recv(3, &word, sizeof(word), 77);
    }
    return inner_->execute(response, entries, report);
  }

 private:
  std::unique_ptr<ops::CpuExecutor> inner_;
  int rank_;
};

TEST(RuntimeErrors, ABrokenDataPlaneStopsEveryRankWithItsFirstCause) {
  const Config config = testConfig();
  auto job = bindings::InProcessJob::make(kRanks);
  std::vector<std::unique_ptr<Runtime>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ops::TransportOptions o = ops::TransportOptions::fromConfig(config);
    o.rank = r;
    o.size = kRanks;
    auto control = ops::createInProcessTransport(job.control, o);
    if (r == 2) o.timeoutSeconds = 0.2;
    auto data = ops::createInProcessTransport(job.data, o);
    ASSERT_TRUE(control.isOk() && data.isOk());
    auto executor = std::make_unique<BreakingExecutor>(
        std::make_unique<ops::CpuExecutor>(std::move(data).value(), ops::CpuExecutorOptions{}), r);
    auto rt = Runtime::create(
        RuntimeOptions::fromConfig(config, r, kRanks),
        std::make_unique<ops::TransportControlChannel>(std::move(control).value()),
        std::make_unique<controller::ChannelNegotiator>(
            controller::NegotiatorOptions::fromConfig(config, r, kRanks), makeLogger(r, "off")),
        std::move(executor));
    ASSERT_TRUE(rt.isOk()) << rt.status().toString();
    ranks.push_back(std::move(rt).value());
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      Runtime& rt = *ranks[r];
      std::vector<float> x(4, 1.0f), y(4, 1.0f);
      auto boom = rt.enqueue(TensorOp::allreduce("boom", denseView(x, {4}), denseView(x, {4})));
      ASSERT_TRUE(boom.isOk());
      const Status first = waitFor(boom.value());
      EXPECT_FALSE(first.isOk());
      // What this rank posts next ends with the cause rank 2 reported, not with what the
      // others saw of it.
      auto later = rt.enqueue(TensorOp::allreduce("later", denseView(y, {4}), denseView(y, {4})));
      const Status s = later.isOk() ? waitFor(later.value()) : later.status();
      EXPECT_EQ(s.code(), StatusCode::kAborted) << s.toString();
      EXPECT_TRUE(contains(s.message(),
                           "zen shut down: rank 2 failed: Timeout: rank 2: recv timed out after "
                           "0.2 s waiting for rank 3 (tag 77)"))
          << "rank " << r << ": " << s.message();
    });
  }
  for (auto& t : threads) t.join();
}

TEST(RuntimeJoin, SparseTensorsWhileARankHasJoined) {
  constexpr int kSteps = 5;
  constexpr int kShortRank = 3;  // leaves after 2 steps
  Job job(kRanks);
  std::vector<std::vector<SparseInput>> in(kSteps);  // [step][rank]
  for (int s = 0; s < kSteps; ++s) {
    for (int r = 0; r < kRanks; ++r) in[s].push_back(makeSparse(s * 10 + r, 300, 3, 0.1));
  }
  std::vector<int32_t> lastJoined(kRanks, -2);
  job.onEachRank([&](int r, Runtime& rt) {
    const int steps = r == kShortRank ? 2 : kSteps;
    for (int s = 0; s < steps; ++s) {
      std::vector<float> dense(300 * 3);
      std::vector<float> g(2, float(r));
      std::vector<TensorOp> ops;
      ops.push_back(TensorOp::sparseAllreduce("emb", in[s][r].view(), ReduceOp::kAverage));
      ops.push_back(TensorOp::sparseAllreduce("emb.dense", in[s][r].view(), ReduceOp::kSum,
                                              denseView(dense, {300, 3})));
      ops.push_back(TensorOp::allgather("ids", denseView(g, {1, 2})));
      auto hs = rt.enqueueGroup(std::move(ops));
      ASSERT_TRUE(hs.isOk()) << hs.status().toString();
      for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk()) << "rank " << r;
      // Joined ranks contribute no rows (zeros); Average still divides by every rank.
      std::vector<SparseInput> present;
      for (int p = 0; p < kRanks; ++p) {
        if (s < 2 || p != kShortRank) present.push_back(in[s][p]);
      }
      EXPECT_EQ(densify(hs.value()[0].result().sparse), scaled(denseSum(present), 0.25f));
      EXPECT_EQ(dense, denseSum(present));
      EXPECT_EQ(hs.value()[2].result().gatheredShape, TensorShape({s < 2 ? 4 : 3, 2}));
    }
    auto join = rt.enqueue(TensorOp::join());
    ASSERT_TRUE(join.isOk());
    // While joined, this rank may not post.
    if (r == kShortRank) {
      std::vector<float> x(1);
      EXPECT_FALSE(
          rt.enqueue(TensorOp::allreduce("x", denseView(x, {1}), denseView(x, {1}))).isOk());
    }
    ASSERT_TRUE(waitFor(join.value()).isOk());
    lastJoined[r] = join.value().result().lastJoinedRank;
  });
  EXPECT_NE(lastJoined[0], kShortRank);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(lastJoined[r], lastJoined[0]);
  EXPECT_GE(lastJoined[0], 0);
  // After the join every rank posts again.
  job.onEachRank([&](int, Runtime& rt) {
    std::vector<float> x(2, 1.0f);
    auto h = rt.enqueue(
        TensorOp::allreduce("again", denseView(x, {2}), denseView(x, {2}), ReduceOp::kSum));
    ASSERT_TRUE(h.isOk());
    ASSERT_TRUE(waitFor(h.value()).isOk());
    EXPECT_EQ(x[0], 4.0f);
  });
}

TEST(Runtime, SingleRankNeedsNoNetwork) {
  auto rt = bindings::createRuntime(testConfig());
  ASSERT_TRUE(rt.isOk()) << rt.status().toString();
  EXPECT_EQ(rt.value()->size(), 1);
  auto in = makeSparse(5, 50, 2, 0.3);
  auto h = rt.value()->enqueue(TensorOp::sparseAllreduce("s", in.view(), ReduceOp::kSum));
  ASSERT_TRUE(h.isOk());
  ASSERT_TRUE(waitFor(h.value()).isOk());
  EXPECT_EQ(densify(h.value().result().sparse), denseSum({in}));
}

}  // namespace
}  // namespace zen::testing
