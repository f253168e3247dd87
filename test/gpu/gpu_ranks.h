#pragma once

// Ranks as threads for the NCCL device tests: one thread per GPU (NCCL refuses two ranks of a
// communicator on one device), each with its own stream and an NcclComm bootstrapped over an
// in-process host transport (the unique id travels through it, as it would over the control
// channel). testRankCounts() is {1} on a one-GPU machine, {1, devices} (at most 8) otherwise.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "cuda/nccl_comm.h"
#include "ops/inprocess_transport.h"

#ifndef EXPECT_OK
#define EXPECT_OK(expr)                                                  \
  do {                                                                   \
    const ::zen::Status zen_test_status_ = (expr);                       \
    EXPECT_TRUE(zen_test_status_.isOk()) << zen_test_status_.toString(); \
  } while (0)
#endif

namespace zen::cuda::testing {

inline int deviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

inline std::vector<int> testRankCounts() {
  const int devices = std::min(deviceCount(), 8);
  if (devices <= 1) return {1};
  return {1, devices};
}

struct RankContext {
  int rank = 0;
  int size = 1;
  NcclComm* comm = nullptr;
  cudaStream_t stream = nullptr;
};

// Runs fn on `size` threads, rank r on device r; failures are gtest EXPECTs inside fn.
inline void runRanks(int size,
                     const std::function<void(RankContext&)>& fn,
                     double timeoutSeconds = 60) {
  auto hub = ops::makeInProcessHub(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      ops::TransportOptions to;
      to.rank = r;
      to.size = size;
      to.timeoutSeconds = 60;
      auto transport = ops::createInProcessTransport(hub, to);
      ASSERT_TRUE(transport.isOk()) << transport.status().toString();
      NcclCommOptions co;
      co.deviceIndex = r;
      co.timeoutSeconds = timeoutSeconds;
      cudaStream_t stream = nullptr;
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
      {
        NcclComm comm(*transport.value(), co);
        RankContext ctx{r, size, &comm, stream};
        fn(ctx);
      }
      cudaStreamDestroy(stream);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace zen::cuda::testing
