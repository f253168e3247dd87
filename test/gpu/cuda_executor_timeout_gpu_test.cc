// GPU test (device only; tools/gpu-check): a stuck bucket through the CUDA executor of a
// one-rank Runtime. The input's ready stream is held by a spinning kernel (spin_kernel.h), so
// its ready event never completes: a sparse bucket's bounded host wait for it, or a dense
// bucket's finalizer (its collective queued behind it on the daemon's stream; the finalizer
// finds the ready event pending at the deadline), must fail the handle with kTimeout within
// ZEN_TIMEOUT and a margin (not when the kernel ends: an ncclCommAbort at that point would wait
// for it), the runtime then stops (a timeout breaks the data plane), so a later post fails at
// once with kAborted naming the first error, and the shutdown ends within the bound.
//
// The timeout also bounds the NCCL communicator's creation, so one normal call of the same
// shape comes first: it creates the communicator and sizes every buffer, and the stuck call
// then neither creates nor allocates (a cudaFree would wait for the spinning kernel). The
// kernel is released as soon as the handle has ended or the bound has passed, and ends by itself
// at its cap anyway: a failure here does not wedge the device for the tests after it. Linked
// last into zen_gpu_runtime_test, so a hang here loses no other test's output.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>

#include "test/gpu/device_array.h"
#include "test/gpu/spin_kernel.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr double kTimeout = 5.0;   // ZEN_TIMEOUT: the bucket's bound (and NCCL creation's)
constexpr double kMargin = 3.0;    // for the loop thread and ncclCommAbort after the bound
constexpr double kSpinCap = 15.0;  // the kernel ends by itself after this, whatever happens

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Host-mapped flags of launchSpinUntilReleased; releases the kernel when it goes (an ASSERT
// leaving early must not leave it spinning until its cap behind the frees that follow).
class SpinFlags {
 public:
  SpinFlags() {
    EXPECT_EQ(
        cudaHostAlloc(reinterpret_cast<void**>(&flags_), 2 * sizeof(int), cudaHostAllocMapped),
        cudaSuccess);
    host()[0] = 0;
    host()[1] = cuda::testing::kSpinRunning;
    EXPECT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), flags_, 0), cudaSuccess);
  }
  ~SpinFlags() {
    release();
    (void)cudaFreeHost(flags_);  // waits for the kernel, which has been released
  }
  SpinFlags(const SpinFlags&) = delete;
  SpinFlags& operator=(const SpinFlags&) = delete;

  int* device() const { return device_; }
  void release() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    host()[0] = 1;
  }
  int outcome() const { return host()[1]; }

 private:
  volatile int* host() const { return flags_; }
  int* flags_ = nullptr;
  int* device_ = nullptr;
};

// dense: an in-place allreduce of a device tensor; else a sparse allreduce. `timedOut` is in
// the handle's message and in the refusal of the next post.
void stuckReadyStream(bool dense, const std::string& timedOut) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  Job gpu(1, testConfig({{"ZEN_TIMEOUT", std::to_string(kTimeout)}}));
  const SparseInput in = makeSparse(7, 5000, 4, 0.05);
  const DeviceRows rows(in);
  const SparseView& view = rows.view;
  DeviceArray<float> denseValues(in.values);  // the dense tensor: the same floats, 1-D
  DenseView denseView;
  denseView.data = denseValues.data();
  denseView.shape = TensorShape({static_cast<int64_t>(in.values.size())});
  denseView.device = Device::cuda(0);
  cudaStream_t user = nullptr;  // the framework's stream; non-blocking: no legacy-stream syncs
  ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
  Handle warm;     // its result is device memory: freed after the release below
  SpinFlags spin;  // declared after the device memory: released before it is freed
  auto op = [&](const std::string& name) {
    return (dense ? TensorOp::allreduce(name, denseView, denseView, ReduceOp::kSum)
                  : TensorOp::sparseAllreduce(name, view, ReduceOp::kSum))
        .withReady({nullptr, user});
  };
  auto post = [&](const std::string& name) {
    auto h = gpu.rank(0).enqueue(op(name));
    EXPECT_TRUE(h.isOk()) << h.status().toString();
    return h.isOk() ? h.value() : Handle();
  };

  // The warm-up: creates the communicator (under the same bound) and sizes every buffer.
  warm = post("warm");
  ASSERT_TRUE(warm.valid());
  const Status warmed = waitFor(warm);
  ASSERT_TRUE(warmed.isOk()) << "the warm-up failed (a communicator creation slower than "
                             << kTimeout << " s would, too: raise kTimeout): " << warmed.toString();

  ASSERT_EQ(cuda::testing::launchSpinUntilReleased(spin.device(), kSpinCap, user), cudaSuccess);
  const auto start = std::chrono::steady_clock::now();
  const Handle stuck = post("stuck");
  ASSERT_TRUE(stuck.valid());
  (void)stuck.wait(kTimeout + kMargin);
  const bool endedInTime = stuck.poll();
  const double waited = secondsSince(start);
  spin.release();
  EXPECT_TRUE(endedInTime) << "the stuck bucket had not ended " << waited
                           << " s after its post, the kernel still spinning: something waits "
                              "for the device without the bound (ncclCommAbort's frees?)";
  // Once released the kernel ends, and with it whatever waited for it.
  const Status failed = stuck.wait(kSpinCap);
  ASSERT_TRUE(stuck.poll()) << "the stuck bucket never ended";
  EXPECT_EQ(failed.code(), StatusCode::kTimeout) << failed.toString();
  EXPECT_NE(failed.message().find(timedOut), std::string::npos) << failed.toString();
  EXPECT_NE(failed.message().find("'stuck'"), std::string::npos) << failed.toString();
  if (endedInTime) {
    EXPECT_GE(waited, kTimeout * 0.9);  // the bound, not an early error
  }
  ASSERT_EQ(cudaStreamSynchronize(user), cudaSuccess);
  EXPECT_EQ(spin.outcome(), cuda::testing::kSpinReleased)
      << "the kernel ended at its cap, not at the release";

  // A timeout breaks the data plane: the runtime stops (core/runtime_loop.cc), so the next
  // post is refused, at enqueue or on its handle, at once and naming the first error.
  const auto after = std::chrono::steady_clock::now();
  auto next = gpu.rank(0).enqueue(op("next"));
  const Status refused = next.isOk() ? waitFor(next.value(), kTimeout + kMargin) : next.status();
  EXPECT_EQ(refused.code(), StatusCode::kAborted) << refused.toString();
  EXPECT_NE(refused.message().find(timedOut), std::string::npos) << refused.toString();
  EXPECT_LT(secondsSince(after), kTimeout) << "the refusal waited for something";

  const auto closing = std::chrono::steady_clock::now();
  gpu.close();
  EXPECT_LT(secondsSince(closing), kTimeout + kMargin) << "the shutdown waited past its bound";
  EXPECT_EQ(cudaStreamDestroy(user), cudaSuccess);
}

TEST(CudaExecutorTimeoutGpu, AStuckReadyStreamTimesOutAndTheRuntimeStops) {
  stuckReadyStream(false, "did not complete within");
}

// A dense bucket enqueues its collective behind the ready event without a host wait; the
// finalizer's timeout finds the event pending and fails the communicator without an abort
// (Finalizer::Fault::kInputs, NcclComm::requestFail). Once released, the kernel lets the queued
// one-rank allreduce run, so the shutdown's waits end.
TEST(CudaExecutorTimeoutGpu, ADenseBucketBehindAStuckReadyStreamFailsWithoutAnAbort) {
  stuckReadyStream(true, "its input 'stuck' was not ready within");
}

}  // namespace
}  // namespace zen::testing
