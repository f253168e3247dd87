// GPU tensors in the collectives the CUDA executor has no NCCL form of, staged through the
// host (cuda/host_staging.h), end to end on in-process ranks: each rank's runtime runs a CUDA
// build's DispatchExecutor over the real CPU executor, with test/runtime/fake_device.h's GPU
// (host memory the host code cannot dereference: a direct touch crashes the test) in place of
// the CUDA executor's. Every result is checked against a reference from every rank's input,
// and must come back on the device. Compiled in every build, the CPU-only sanitizer builds
// included; the real copies run in test/gpu (tools/gpu-check).
#include <algorithm>
#include <cmath>

#include "cuda/dispatch_executor.h"
#include "ops/cpu_executor.h"
#include "test/common/adasum_reference.h"
#include "test/runtime/fake_device.h"
#include "test/runtime/gated_executor.h"
#include "test/runtime/process_set_steps.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

// n ranks whose executors stage GPU buckets through staging[r].
struct StagedJob {
  explicit StagedJob(int n, const Config& config = testConfig()) : staging(n) {
    const bindings::InProcessJob job = bindings::InProcessJob::make(n);
    for (int r = 0; r < n; ++r) {
      ranks.push_back(rankOf(
          job, r,
          [&](std::unique_ptr<ops::Transport> data) -> std::unique_ptr<Executor> {
            return std::make_unique<cuda::DispatchExecutor>(
                r, std::make_unique<ops::CpuExecutor>(std::move(data), ops::CpuExecutorOptions{}),
                std::make_unique<NoDeviceExecutor>(), &staging[static_cast<size_t>(r)]);
          },
          config));
    }
  }
  ~StagedJob() {
    for (auto& rt : ranks) (void)rt->shutdown();
  }
  void onEachRank(const std::function<void(int, Runtime&)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
      threads.emplace_back([&, r] { fn(r, *ranks[static_cast<size_t>(r)]); });
    }
    for (auto& t : threads) t.join();
  }

  std::vector<FakeDeviceStaging> staging;
  std::vector<std::unique_ptr<Runtime>> ranks;
};

TEST(RuntimeHostStaging, ProcessSetCollectivesOfGpuTensors) {
  StagedJob job(4);
  job.onEachRank([](int r, Runtime& rt) {
    EXPECT_EQ(processSetSteps(rt, /*fakeDevice=*/true), "") << "rank " << r;
  });
  for (const FakeDeviceStaging& s : job.staging) EXPECT_GT(s.prepared, 0);
}

// Adasum of a fused bucket of GPU tensors (several sizes, one empty), against the binary tree.
constexpr int64_t kSizes[] = {5, 1, 64, 0, 33};
constexpr int kTensors = sizeof(kSizes) / sizeof(kSizes[0]);

float value(int r, int t, int64_t i) {
  return static_cast<float>((r * 5 + t * 3 + i * 7) % 13) / 4.0f - 1.5f;
}

void adasumStep(StagedJob& job, const std::vector<int>& posters) {
  const int n = static_cast<int>(job.ranks.size());
  job.onEachRank([&](int r, Runtime& rt) {
    if (std::find(posters.begin(), posters.end(), r) == posters.end()) return;
    std::vector<std::vector<float>> in(kTensors), out(kTensors);
    std::vector<TensorOp> ops;
    for (int t = 0; t < kTensors; ++t) {
      for (int64_t i = 0; i < kSizes[t]; ++i) in[t].push_back(value(r, t, i));
      out[t].assign(static_cast<size_t>(kSizes[t]), -99.0f);
      // Out of place for even tensors, in place for odd ones.
      std::vector<float>& dst = t % 2 == 0 ? out[t] : in[t];
      ops.push_back(TensorOp::allreduce(fmt::format("ada.{}", t),
                                        onDevice(denseView(in[t], {kSizes[t]})),
                                        onDevice(denseView(dst, {kSizes[t]})), ReduceOp::kAdasum));
    }
    auto hs = rt.enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (const Handle& h : hs.value()) {
      const Status s = waitFor(h);
      ASSERT_TRUE(s.isOk()) << "rank " << r << ": " << s.toString();
    }
    for (int t = 0; t < kTensors; ++t) {
      std::vector<std::vector<double>> inputs(n, std::vector<double>(kSizes[t], 0.0));
      for (int p : posters) {
        for (int64_t i = 0; i < kSizes[t]; ++i) inputs[p][i] = value(p, t, i);
      }
      const std::vector<double> want = adasumTree(inputs);
      const std::vector<float>& got = t % 2 == 0 ? out[t] : in[t];
      for (int64_t i = 0; i < kSizes[t]; ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-6 * (1 + std::abs(want[i])))
            << "ada." << t << " element " << i << " on rank " << r;
      }
    }
  });
}

TEST(RuntimeHostStaging, AdasumOfGpuTensorsMatchesTheTree) {
  StagedJob job(4);
  adasumStep(job, {0, 1, 2, 3});
  adasumStep(job, {0, 1, 2, 3});  // from the response cache
  for (const FakeDeviceStaging& s : job.staging) EXPECT_EQ(s.prepared, 2);
}

TEST(RuntimeHostStaging, AJoinedRankStagesNothingAndContributesZeros) {
  StagedJob job(4);
  Handle join;
  std::thread joiner([&] {
    auto h = job.ranks[2]->enqueue(TensorOp::join());
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    join = h.value();
  });
  joiner.join();
  adasumStep(job, {0, 1, 3});
  job.onEachRank([](int r, Runtime& rt) {
    if (r == 2) return;
    auto h = rt.enqueue(TensorOp::join());
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    ASSERT_TRUE(waitFor(h.value()).isOk());
  });
  ASSERT_TRUE(waitFor(join).isOk());
  EXPECT_EQ(job.staging[2].prepared, 0);
  EXPECT_EQ(job.staging[0].prepared, 1);
}

// A copy that fails on one rank fails its tensor with that error there, and its peers within
// the timeout: nobody waits forever, nobody gets a result without that rank's gradient.
// Rank 1's copy to the host fails, so it cannot take part in the Adasum its peer runs: it
// gives its data plane up (kAborted), and the peer, told by the transport, fails with that
// cause at once instead of waiting out ZEN_TIMEOUT.
TEST(RuntimeHostStaging, AFailedCopyFailsEveryRankAtOnce) {
  const double timeout = 3 * kSlowdown;
  StagedJob job(2, testConfig({{"ZEN_TIMEOUT", std::to_string(timeout)}}));
  job.staging[1].failToHost = ZEN_ERROR(StatusCode::kInternal, "device fault in the test");
  const auto start = std::chrono::steady_clock::now();
  job.onEachRank([](int r, Runtime& rt) {
    std::vector<float> x(8, static_cast<float>(r + 1));
    auto h = rt.enqueue(TensorOp::allreduce("x", onDevice(denseView(x, {8})),
                                            onDevice(denseView(x, {8})), ReduceOp::kAdasum));
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    const Status s = waitFor(h.value());
    EXPECT_FALSE(s.isOk()) << "rank " << r;
    EXPECT_NE(s.message().find("device fault in the test"), std::string::npos)
        << "rank " << r << ": " << s.toString();
    if (r == 0) {
      EXPECT_NE(s.message().find("rank 1 aborted"), std::string::npos) << s.toString();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kAborted) << s.toString();
      EXPECT_NE(s.message().find("allreduce of 'x' staged through the host"), std::string::npos)
          << s.toString();
    }
    EXPECT_EQ(x, std::vector<float>(8, static_cast<float>(r + 1))) << "rank " << r << " untouched";
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            timeout);
}

}  // namespace
}  // namespace zen::testing
