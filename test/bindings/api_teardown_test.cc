// Api::shutdown() from completions where waiting for a runtime's loop would deadlock: a
// completion of one in-process rank that shuts down another rank's Api (whose last cycle needs
// the first rank's loop, busy in that completion), over the synchronous CPU executor and over
// an asynchronous one; and a runtime whose last reference ends on its executor's thread (the
// reaper deletes it). Every test is bounded: a hang exits the binary at once.
#include <chrono>
#include <future>
#include <utility>

#include "test/bindings/bindings_test_util.h"
#include "test/runtime/gated_executor.h"

namespace zen::testing {
namespace {

using bindings::Api;
using Clock = std::chrono::steady_clock;

DenseView view(std::vector<float>& v) {
  DenseView d;
  d.data = v.data();
  d.shape = {static_cast<int64_t>(v.size())};
  return d;
}

// Initializes api as rank `rank` of `job` over a GatedExecutor (its gate open), which ends
// every bucket on a thread of its own, as the CUDA executor does; *executorThread: that thread.
Status initGated(Api& api,
                 const bindings::InProcessJob& job,
                 int rank,
                 const Config& config,
                 std::thread::id* executorThread) {
  return api.init(
      config,
      [&](const Config& c) -> Result<std::unique_ptr<Runtime>> {
        std::unique_ptr<Runtime> rt = rankOf(
            job, rank,
            [&](std::unique_ptr<ops::Transport> data) {
              auto e = std::make_unique<GatedExecutor>(
                  std::make_unique<ops::CpuExecutor>(std::move(data), ops::CpuExecutorOptions{}));
              e->open();
              *executorThread = e->threadId();
              return e;
            },
            c);
        if (!rt) return ZEN_ERROR(StatusCode::kInternal, "no runtime over the gated executor");
        return rt;
      },
      bindings::backendName(bindings::Backend::kInProcess));
}

// ZEN_TIMEOUT far above the bound a completion's shutdown() must meet: waiting for the other
// rank's loop would take that long.
Config slowTimeoutConfig() {
  return bindingsConfig({{"ZEN_TIMEOUT", "60"}});
}

// Rank 0's completion calls rank 1's shutdown(): it must return at once, and both ranks then
// stop together with rank 1's request as the cause.
void shutDownTheOtherRankFromACompletion(Api& rank0, Api& rank1) {
  std::vector<float> x0(2, 1.0f), x1(2, 1.0f);
  std::promise<std::pair<Status, double>> inside;
  auto id =
      rank0.enqueue(TensorOp::allreduce("x", view(x0), view(x0)), [&](int64_t, const Status&) {
        const auto start = Clock::now();
        Status s = rank1.shutdown();
        const std::chrono::duration<double> took = Clock::now() - start;
        inside.set_value({s, took.count()});
      });
  ASSERT_TRUE(id.isOk()) << id.status().toString();
  auto peer = rank1.enqueue(TensorOp::allreduce("x", view(x1), view(x1)));
  ASSERT_TRUE(peer.isOk()) << peer.status().toString();
  std::future<std::pair<Status, double>> f = inside.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "rank 1's shutdown() inside rank 0's completion did not return";
  auto [status, took] = f.get();
  EXPECT_TRUE(status.isOk()) << status.toString();
  EXPECT_LT(took, 10.0) << "the completion waited for rank 1's loop";
  EXPECT_FALSE(rank1.initialized());
  EXPECT_TRUE(waitDone(rank0, id.value()).isOk());

  // Rank 0 stops with rank 1's request: a new operation fails (at enqueue, or pending).
  std::vector<float> y(2, 1.0f);
  auto later = rank0.enqueue(TensorOp::allreduce("later", view(y), view(y)));
  const Status st = later.isOk() ? waitDone(rank0, later.value()) : later.status();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.toString();
  EXPECT_NE(st.message().find("shut down by rank 1"), std::string::npos) << st.message();
  EXPECT_TRUE(rank1.shutdown().isOk());  // joins the teardown the completion handed off
}

TEST(ApiTeardown, ACompletionShutsDownAnotherRankOnTheLoopThread) {
  runBounded(120, "another rank's shutdown from a completion", [] {
    ApiJob job(2, slowTimeoutConfig());
    shutDownTheOtherRankFromACompletion(job.rank(0), job.rank(1));
  });
}

TEST(ApiTeardown, ACompletionShutsDownAnotherRankOnTheExecutorThread) {
  runBounded(120, "another rank's shutdown from a completion on the executor thread", [] {
    auto job = bindings::InProcessJob::make(2);
    Api rank0, rank1;
    std::thread::id executor0, executor1;
    ASSERT_TRUE(initGated(rank0, job, 0, slowTimeoutConfig(), &executor0).isOk());
    ASSERT_TRUE(initGated(rank1, job, 1, slowTimeoutConfig(), &executor1).isOk());
    shutDownTheOtherRankFromACompletion(rank0, rank1);
  });
}

// The Api's reference to the runtime is the last one, and the completion that drops it runs
// on the executor's thread: the runtime cannot be deleted there (~Runtime joins that thread's
// executor), so a reaper of the Api's deletes it.
TEST(ApiTeardown, TheLastReferenceEndsOnTheExecutorThread) {
  runBounded(120, "shutdown from a completion on the executor thread", [] {
    auto job = bindings::InProcessJob::make(1);
    Api api;
    std::thread::id executorThread;
    ASSERT_TRUE(initGated(api, job, 0, bindingsConfig(), &executorThread).isOk());
    std::vector<float> x(2, 1.0f);
    std::promise<std::pair<Status, std::thread::id>> inside;
    auto id = api.enqueue(TensorOp::allreduce("x", view(x), view(x)), [&](int64_t, const Status&) {
      inside.set_value({api.shutdown(), std::this_thread::get_id()});
    });
    ASSERT_TRUE(id.isOk()) << id.status().toString();
    std::future<std::pair<Status, std::thread::id>> f = inside.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    auto [status, thread] = f.get();
    EXPECT_TRUE(status.isOk()) << status.toString();
    EXPECT_EQ(thread, executorThread) << "the completion did not run on the executor's thread";
    EXPECT_FALSE(api.initialized());
    EXPECT_TRUE(api.shutdown().isOk());  // joins the reaper
    EXPECT_TRUE(api.poll(id.value()).value());
    // The Api starts again afterwards.
    ASSERT_TRUE(
        initGated(api, bindings::InProcessJob::make(1), 0, bindingsConfig(), &executorThread)
            .isOk());
    auto again = api.enqueue(TensorOp::allreduce("x", view(x), view(x)));
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    EXPECT_TRUE(waitDone(api, again.value()).isOk());
  });
}

}  // namespace
}  // namespace zen::testing
