// A GPU bucket staged through the host (cuda/host_staging.h) whose copy fails on one rank,
// over MPI processes: that rank gives its data plane up (Transport::failAll), and the MPI
// transport's abort channel tells every other rank at once, so each fails with the cause long
// before ZEN_TIMEOUT, and the job still finalizes. The fake GPU of test/runtime/fake_device.h
// stands in for the device, as in runtime_host_staging_test.cc. CTest runs this test alone
// at 2 and 4 ranks (Adasum needs a power of two): runtime.mpi.staging_failure.np*.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "cuda/dispatch_executor.h"
#include "ops/mpi_transport.h"
#include "test/runtime/fake_device.h"
#include "test/runtime/gated_executor.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

TEST(MpiRuntimeStaging, AFailedCopyFailsEveryRankAtOnce) {
  const double timeout = 10 * kSlowdown;
  const Config config = testConfig({{"ZEN_TIMEOUT", std::to_string(timeout)}});
  const ops::MpiOptions options = ops::MpiOptions::fromConfig(config);
  auto control = ops::createMpiTransport(options);
  auto data = ops::createMpiTransport(options);
  ASSERT_TRUE(control.isOk() && data.isOk());
  const int r = control.value()->rank();
  const int n = control.value()->size();
  FakeDeviceStaging staging;
  if (r == 1) staging.failToHost = ZEN_ERROR(StatusCode::kInternal, "device fault in the test");
  auto rt = runtimeOver(
      std::move(control).value(), std::move(data).value(), r, n,
      [&](std::unique_ptr<ops::Transport> transport) -> std::unique_ptr<Executor> {
        return std::make_unique<cuda::DispatchExecutor>(
            r, std::make_unique<ops::CpuExecutor>(std::move(transport), ops::CpuExecutorOptions{}),
            std::make_unique<NoDeviceExecutor>(), &staging);
      },
      config);
  ASSERT_TRUE(rt);

  std::vector<float> x(8, static_cast<float>(r + 1));
  const auto start = std::chrono::steady_clock::now();
  auto h = rt->enqueue(TensorOp::allreduce("x", onDevice(denseView(x, {8})),
                                           onDevice(denseView(x, {8})), ReduceOp::kAdasum));
  ASSERT_TRUE(h.isOk()) << h.status().toString();
  const Status s = waitFor(h.value());
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(s.isOk()) << "rank " << r;
  EXPECT_NE(s.message().find("device fault in the test"), std::string::npos)
      << "rank " << r << ": " << s.toString();
  if (r == 1) {
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.toString();
  } else {
    EXPECT_NE(s.message().find("rank 1 aborted after an error"), std::string::npos)
        << "rank " << r << ": " << s.toString();
  }
  EXPECT_LT(took, timeout / 2) << "rank " << r << " waited for its timeout";
  EXPECT_EQ(x, std::vector<float>(8, static_cast<float>(r + 1))) << "rank " << r << " untouched";
  (void)rt->shutdown();  // the job already stopped on the failure, which shutdown repeats
}

}  // namespace
}  // namespace zen::testing
