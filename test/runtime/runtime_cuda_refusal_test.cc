// A CUDA build's GPU executor refuses alltoall and reducescatter of device tensors at once,
// with kUnimplemented, before touching a device or a peer: every rank gets the same plan, so
// every rank fails the bucket and none waits (no GPU needed: the refusal comes first).
// Compiled into zen_runtime_test only where CUDA is enabled.
#include <gtest/gtest.h>

#include "cuda/cuda_executor.h"
#include "ops/inprocess_transport.h"

namespace zen::testing {
namespace {

TEST(CudaExecutorRefusal, AlltoallAndReducescatterFailAtOnceWithUnimplemented) {
  ops::TransportOptions options;
  auto transport = ops::createInProcessTransport(ops::makeInProcessHub(1), options);
  ASSERT_TRUE(transport.isOk()) << transport.status().toString();
  cuda::CudaExecutor executor(*transport.value(), cuda::CudaExecutorOptions{});
  for (ResponseType type : {ResponseType::kAlltoall, ResponseType::kReducescatter}) {
    Response r;
    r.type = type;
    r.tensorNames = {"x"};
    r.shapes = {TensorShape({4, 2})};
    r.devices = {Device::cuda(0)};
    if (type == ResponseType::kAlltoall) r.splits = {4};
    TensorEntry entry;
    entry.request.name = "x";
    BucketReport report;
    const Status s = executor.execute(r, {&entry}, &report);
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.toString();
    EXPECT_NE(s.message().find(std::string(responseTypeName(type)) +
                               " of CUDA tensors is not implemented"),
              std::string::npos)
        << s.message();
  }
}

}  // namespace
}  // namespace zen::testing
