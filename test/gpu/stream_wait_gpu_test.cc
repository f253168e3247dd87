// GPU test (device only, run by tools/gpu-check): the kernels' bounded stream wait
// (cuda/stream_wait.h). A kernel spinning on a host-mapped flag stands in for a hung NCCL
// kernel: the wait on its stream, and a kernel wrapper's own wait behind it
// (GpuAggregator::check), return kTimeout naming what they waited for within the bound; once
// the host releases the kernel, the next waits return OK (the GPU is not left wedged).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>

#include "core/index_map.h"
#include "cuda/gpu_aggregator.h"
#include "cuda/stream_wait.h"
#include "test/gpu/gpu_test_util.h"
#include "test/gpu/spin_kernel.h"

namespace zen::cuda {
namespace {

using testing::kSpinCapped;
using testing::kSpinReleased;
using testing::kSpinRunning;

constexpr double kShortWait = 0.5;  // the bound the stuck waits get
constexpr double kLongWait = 10.0;  // the waits after the release
constexpr double kSpinCap = 5.0;    // the kernel ends by itself after this, whatever happens

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(StreamWait, AStuckStreamTimesOutThenFinishesOnceReleased) {
  // Everything allocated before the kernel spins: an allocation could wait for the device.
  int* flags = nullptr;
  ASSERT_CUDA(
      cudaHostAlloc(reinterpret_cast<void**>(&flags), 2 * sizeof(int), cudaHostAllocMapped));
  volatile int* hostFlags = flags;
  hostFlags[0] = 0;
  hostFlags[1] = kSpinRunning;
  int* deviceFlags = nullptr;
  ASSERT_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&deviceFlags), flags, 0));
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GpuAggregator agg;
  ASSERT_OK(agg.reset(IndexMap(1000, 1, 7), 0, DataType::kFloat32, 1, stream));
  ASSERT_OK(waitStream(stream, kLongWait, "the aggregator's reset"));

  ASSERT_CUDA(testing::launchSpinUntilReleased(deviceFlags, kSpinCap, stream));
  auto start = std::chrono::steady_clock::now();
  const Status stuck = waitStream(stream, kShortWait, "the spinning kernel");
  double waited = secondsSince(start);
  EXPECT_EQ(stuck.code(), StatusCode::kTimeout) << stuck.toString();
  EXPECT_NE(stuck.message().find("the spinning kernel did not complete within 0.5 s"),
            std::string::npos)
      << stuck.toString();
  EXPECT_GE(waited, kShortWait);
  EXPECT_LT(waited, kSpinCap - 1.0);  // returned on its own bound, not when the kernel ended

  // A kernel wrapper's read-back behind the stuck kernel: its own bounded wait times out.
  start = std::chrono::steady_clock::now();
  const Status wrapper = agg.check(stream, kShortWait);
  waited = secondsSince(start);
  EXPECT_EQ(wrapper.code(), StatusCode::kTimeout) << wrapper.toString();
  EXPECT_NE(wrapper.message().find("the GPU aggregator's error words"), std::string::npos)
      << wrapper.toString();
  EXPECT_LT(waited, kSpinCap - 1.0);
  EXPECT_EQ(hostFlags[1], kSpinRunning) << "the kernel ended before the release";

  std::atomic_thread_fence(std::memory_order_seq_cst);
  hostFlags[0] = 1;  // release it
  const Status released = waitStream(stream, kLongWait, "the released kernel");
  EXPECT_TRUE(released.isOk()) << released.toString();
  EXPECT_EQ(hostFlags[1], kSpinReleased)
      << (hostFlags[1] == kSpinCapped ? "the kernel never saw the release (ended at its cap)"
                                      : "the kernel did not end");
  // The stream is usable again: a wrapper's wait on it returns OK.
  EXPECT_TRUE(agg.check(stream, kLongWait).isOk());

  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(flags), cudaSuccess);
}

TEST(StreamWait, AnIdleStreamReturnsAtOnce) {
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  EXPECT_TRUE(waitStream(stream, 0.0, "an idle stream").isOk());
  EXPECT_TRUE(waitStream(nullptr, kLongWait, "the legacy default stream").isOk());
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace zen::cuda
