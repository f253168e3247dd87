// A GPU bucket staged through the host (cuda/host_staging.h) whose copy fails on one rank,
// over MPI processes: that rank gives its data plane up (Transport::failAll), and the MPI
// transport's abort channel tells every other rank at once, so each fails with the cause long
// before ZEN_TIMEOUT, and the job still finalizes, a collective left posted on the others
// included. The fake GPU of test/runtime/fake_device.h stands in for the device, as in
// runtime_host_staging_test.cc. CTest runs each test alone (a failed MPI job is not reused):
// runtime.mpi.staging_failure.adasum.np{2,4} (a power of two) and .set.np{3,4}.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <vector>

#include "cuda/dispatch_executor.h"
#include "ops/mpi_transport.h"
#include "test/runtime/fake_device.h"
#include "test/runtime/gated_executor.h"
#include "test/runtime/process_set_steps.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr double kTimeout = 10 * kSlowdown;

// This process's rank of a runtime over two MPI transports, whose executor stages GPU
// buckets through `staging`, failing its copies to the host on rank 1.
struct StagedMpiRank {
  StagedMpiRank() {
    const Config config = testConfig({{"ZEN_TIMEOUT", std::to_string(kTimeout)}});
    const ops::MpiOptions options = ops::MpiOptions::fromConfig(config);
    auto control = ops::createMpiTransport(options);
    auto data = ops::createMpiTransport(options);
    EXPECT_TRUE(control.isOk() && data.isOk());
    if (!control.isOk() || !data.isOk()) return;
    rank = control.value()->rank();
    size = control.value()->size();
    if (rank == 1)
      staging.failToHost = ZEN_ERROR(StatusCode::kInternal, "device fault in the test");
    runtime = runtimeOver(
        std::move(control).value(), std::move(data).value(), rank, size,
        [&](std::unique_ptr<ops::Transport> transport) -> std::unique_ptr<Executor> {
          return std::make_unique<cuda::DispatchExecutor>(
              rank,
              std::make_unique<ops::CpuExecutor>(std::move(transport), ops::CpuExecutorOptions{}),
              std::make_unique<NoDeviceExecutor>(), &staging);
        },
        config);
  }
  ~StagedMpiRank() {
    if (runtime) (void)runtime->shutdown();  // the job stopped on the failure already
  }

  // Posts `op` (over x) and checks that it fails on this rank with rank 1's cause, long before
  // the timeout, leaving x as it was. A member of the failed collective hears it from rank 1
  // itself (the abort channel); `member` false: a rank outside it, stopped with the job.
  void expectFailsAtOnce(TensorOp op, const std::vector<float>& x, bool member = true) {
    const auto start = std::chrono::steady_clock::now();
    auto h = runtime->enqueue(std::move(op));
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    const Status s = waitFor(h.value());
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_FALSE(s.isOk()) << "rank " << rank;
    EXPECT_NE(s.message().find("device fault in the test"), std::string::npos)
        << "rank " << rank << ": " << s.toString();
    if (rank == 1) {
      EXPECT_EQ(s.code(), StatusCode::kAborted) << s.toString();
    } else if (member) {
      EXPECT_NE(s.message().find("rank 1 aborted after an error"), std::string::npos)
          << "rank " << rank << ": " << s.toString();
    }
    EXPECT_LT(took, kTimeout / 2) << "rank " << rank << " waited for its timeout";
    EXPECT_EQ(x, std::vector<float>(x.size(), static_cast<float>(rank + 1)))
        << "rank " << rank << " untouched";
  }

  int rank = 0;
  int size = 1;
  FakeDeviceStaging staging;
  std::unique_ptr<Runtime> runtime;
};

// Adasum runs over point-to-point messages: the peers' receives are withdrawn.
TEST(MpiRuntimeStaging, AFailedCopyFailsEveryRankAtOnce) {
  StagedMpiRank me;
  ASSERT_TRUE(me.runtime);
  std::vector<float> x(8, static_cast<float>(me.rank + 1));
  me.expectFailsAtOnce(TensorOp::allreduce("x", onDevice(denseView(x, {8})),
                                           onDevice(denseView(x, {8})), ReduceOp::kAdasum),
                       x);
}

// A process set's allreduce is an MPI collective on the set's communicator, which the other
// members have posted when they hear of rank 1's failure and which can never complete: the
// job must still shut down and finalize (a hang here is the CTest entry's timeout). The set
// is every rank but the last, which waits on a host allreduce of the whole job meanwhile.
TEST(MpiRuntimeStaging, AFailedCopyInAProcessSetFailsEveryRankAndTheJobStillEnds) {
  StagedMpiRank me;
  ASSERT_TRUE(me.runtime);
  ASSERT_GE(me.size, 3);
  std::vector<int32_t> members(static_cast<size_t>(me.size - 1));
  std::iota(members.begin(), members.end(), 0);
  Result<int32_t> set = addSet(*me.runtime, members);
  ASSERT_TRUE(set.isOk()) << set.status().toString();
  std::vector<float> x(8, static_cast<float>(me.rank + 1));
  if (me.rank == me.size - 1) {
    me.expectFailsAtOnce(
        TensorOp::allreduce("y", denseView(x, {8}), denseView(x, {8}), ReduceOp::kSum), x,
        /*member=*/false);
    return;
  }
  me.expectFailsAtOnce(TensorOp::allreduce("x", onDevice(denseView(x, {8})),
                                           onDevice(denseView(x, {8})), ReduceOp::kSum)
                           .inProcessSet(set.value()),
                       x);
}

}  // namespace
}  // namespace zen::testing
