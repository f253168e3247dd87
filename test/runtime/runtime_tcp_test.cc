// The runtime over TCP between real processes: a job runs to completion with correct results,
// and a rank killed mid-run (SIGKILL) fails every survivor's pending handles with an error
// naming it, from the closed connections (well before ZEN_TIMEOUT); the survivors then refuse
// new work with that error.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "test/runtime/fork_ranks.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

using Clock = std::chrono::steady_clock;

int fail(int code, Runtime& rt, const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", rt.rank(), what.c_str());
  return code;
}

// One step: a sparse gradient and a dense one; 0 when both results are right.
int step(Runtime& rt, int s, int n) {
  std::vector<SparseInput> in;
  for (int p = 0; p < n; ++p) in.push_back(makeSparse(s * 10 + p, 500, 4, 0.05));
  std::vector<float> dense(32, float(rt.rank() + s));
  std::vector<TensorOp> ops;
  ops.push_back(TensorOp::sparseAllreduce("emb", in[rt.rank()].view(), ReduceOp::kSum));
  ops.push_back(
      TensorOp::allreduce("fc", denseView(dense, {32}), denseView(dense, {32}), ReduceOp::kSum));
  auto handles = rt.enqueueGroup(std::move(ops));
  if (!handles.isOk()) return fail(20, rt, handles.status().toString());
  for (const Handle& h : handles.value()) {
    const Status st = h.wait(kWaitSeconds);
    if (!h.poll() || !st.isOk()) return fail(21, rt, fmt::format("step {}: {}", s, st.toString()));
  }
  if (densify(handles.value()[0].result().sparse) != denseSum(in)) return fail(22, rt, "sparse");
  const float want = static_cast<float>(n * (n - 1) / 2 + n * s);
  for (float x : dense) {
    if (x != want) return fail(23, rt, fmt::format("dense {} != {}", x, want));
  }
  return 0;
}

TEST(RuntimeTcp, ForkedRanksRunStepsOverTcp) {
  const auto ends = forkRuntimeRanks(3, {{"ZEN_TIMEOUT", "20"}}, 120 * kSlowdown, [](Runtime& rt) {
    for (int s = 0; s < 20; ++s) {
      if (int code = step(rt, s, rt.size())) return code;
    }
    const Status st = rt.shutdown();
    return st.isOk() || st.message().find("at user request") != std::string::npos ? 0 : 24;
  });
  for (size_t r = 0; r < ends.size(); ++r) EXPECT_EQ(ends[r].exitCode, 0) << "rank " << r;
}

bool namesRank2(const std::string& message) {
  for (const char* how : {"rank 2 closed the connection", "connection to rank 2 failed",
                          "to rank 2 failed", "rank 2 has left"}) {
    if (message.find(how) != std::string::npos) return true;
  }
  return false;
}

// Whether `count` bytes arrived on fd within `seconds`.
bool readBytes(int fd, int count, double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  for (int got = 0; got < count;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    pollfd readable{fd, POLLIN, 0};
    char byte = 0;
    if (left <= 0 || poll(&readable, 1, static_cast<int>(left)) != 1 || read(fd, &byte, 1) != 1) {
      return false;
    }
    ++got;
  }
  return true;
}

// Rank 2 dies (SIGKILL) once every survivor has completed step 4 (they say so on a pipe; a
// death while one is still finishing that step would fail it): either before posting step
// 5 (the survivors find out on the control channel) or in the middle of step 5's plan, between
// its two buckets, from the callback of the first (the survivors find out in the second
// bucket's collective). ZEN_TIMEOUT is generous, so a slow step on a loaded machine is no
// failure; the survivors must find out from the closed connections, well before it.
void killedRankScenario(bool midPlan) {
  constexpr double kTimeout = 20 * kSlowdown;
  constexpr double kBound = 10 * kSlowdown;
  int stepped[2];
  ASSERT_EQ(pipe(stepped), 0);
  const auto ends = forkRuntimeRanks(
      4, {{"ZEN_TIMEOUT", std::to_string(kTimeout)}}, 120 * kSlowdown, [&](Runtime& rt) {
        for (int s = 0; s < 5; ++s) {
          if (int code = step(rt, s, rt.size())) return code;
        }
        if (rt.rank() != 2) {
          const char byte = 1;
          if (write(stepped[1], &byte, 1) != 1) return fail(36, rt, "cannot write the pipe");
        } else if (!readBytes(stepped[0], rt.size() - 1, kWaitSeconds)) {
          return fail(37, rt, "the survivors did not all finish step 4");
        }
        if (rt.rank() == 2 && !midPlan) raise(SIGKILL);
        // Two buckets in one plan ("a" runs first: names in order, dtypes differ).
        std::vector<int32_t> a(4, 1);
        std::vector<float> w(1 << 16, 1.0f);
        DenseView av{a.data(), DataType::kInt32, TensorShape({4}), Device::cpu()};
        std::vector<TensorOp> ops;
        ops.push_back(TensorOp::allreduce("a", av, av, ReduceOp::kSum)
                          .withCallback([&rt](const Status&, OpResult&) {
                            if (rt.rank() == 2) raise(SIGKILL);
                          }));
        ops.push_back(TensorOp::allreduce("w", denseView(w, {1 << 16}), denseView(w, {1 << 16}),
                                          ReduceOp::kSum));
        const auto posted = Clock::now();
        auto hs = rt.enqueueGroup(std::move(ops));
        // Either the post was already refused, or the pending handle fails.
        Status st = hs.isOk() ? hs.value()[1].wait(kTimeout) : hs.status();
        const double took = std::chrono::duration<double>(Clock::now() - posted).count();
        if (hs.isOk() && !hs.value()[1].poll()) return fail(30, rt, "still pending");
        if (st.isOk()) return fail(31, rt, "the step succeeded without rank 2");
        if (!namesRank2(st.message())) return fail(32, rt, "not naming rank 2: " + st.message());
        if (took > kBound) return fail(33, rt, fmt::format("took {} s", took));
        // From now on the runtime refuses work, naming the same rank.
        Result<Handle> late = Status::ok();
        for (int i = 0; i < 100; ++i) {  // the loop may still be stopping
          late = rt.enqueue(TensorOp::barrier());
          if (!late.isOk()) break;
          (void)late.value().wait(kTimeout);
        }
        if (late.isOk()) return fail(34, rt, "accepted work after the failure");
        if (!namesRank2(late.status().message())) {
          return fail(35, rt, "refused with: " + late.status().message());
        }
        std::fprintf(stderr, "rank %d: failed as expected after %.3f s: %s\n", rt.rank(), took,
                     st.message().c_str());
        return 0;
      });
  close(stepped[0]);
  close(stepped[1]);
  EXPECT_EQ(ends[2].signal, SIGKILL);
  for (size_t r : {0, 1, 3}) EXPECT_EQ(ends[r].exitCode, 0) << "rank " << r;
}

TEST(RuntimeTcp, RankKilledWhileIdleFailsThePendingHandlesNamingIt) {
  killedRankScenario(false);
}

TEST(RuntimeTcp, RankKilledMidPlanFailsThePendingHandlesNamingIt) {
  killedRankScenario(true);
}

}  // namespace
}  // namespace zen::testing
