// A CUDA build's GPU executor fails an alltoall or reducescatter plan it cannot run at once,
// on the host, before touching a device or a peer: every rank gets the same plan, so every
// rank fails the bucket and none waits (no GPU needed: the check comes first). Without NCCL
// it refuses every GPU bucket the same way. Compiled into zen_runtime_test only where CUDA is
// enabled; the collectives themselves run in test/gpu (tools/gpu-check).
#include <gtest/gtest.h>

#include "cuda/cuda_executor.h"
#include "ops/inprocess_transport.h"

namespace zen::testing {
namespace {

Status runOnOneRank(const Response& r, TensorEntry* entry) {
  ops::TransportOptions options;
  auto transport = ops::createInProcessTransport(ops::makeInProcessHub(1), options);
  EXPECT_TRUE(transport.isOk()) << transport.status().toString();
  if (!transport.isOk()) return transport.status();
  cuda::CudaExecutor executor(*transport.value(), cuda::CudaExecutorOptions{});
  BucketReport report;
  return executor.execute(r, {entry}, &report);
}

Response planFor(ResponseType type, TensorShape shape) {
  Response r;
  r.type = type;
  r.tensorNames = {"x"};
  r.shapes = {std::move(shape)};
  r.devices = {Device::cuda(0)};
  return r;
}

TEST(CudaExecutorPlanCheck, AlltoallAndReducescatterThatCannotRunFailAtOnce) {
  TensorEntry entry;
  entry.request.name = "x";
  entry.input.shape = TensorShape({4, 2});
  entry.input.device = Device::cuda(0);
  // Splits of a two-rank job on a one-rank executor; a reducescatter of a scalar.
  Response a2a = planFor(ResponseType::kAlltoall, TensorShape({4, 2}));
  a2a.splits = {1, 3, 2, 2};
  const Response scalar = planFor(ResponseType::kReducescatter, TensorShape({}));
  const std::pair<const Response*, const char*> cases[] = {
      {&a2a, "alltoall: 4 splits for 1 ranks"},
      {&scalar, "reducescatter: tensor 0 is a scalar"},
  };
  for (const auto& [r, message] : cases) {
    const Status s = runOnOneRank(*r, &entry);
#ifdef ZEN_HAVE_NCCL
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
    EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
#else
    (void)message;
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.toString();
    EXPECT_NE(s.message().find("without NCCL"), std::string::npos) << s.message();
#endif
    // The bucket is named, as every executor error is.
    EXPECT_NE(s.message().find(std::string(responseTypeName(r->type)) + " of 'x'"),
              std::string::npos)
        << s.message();
  }
}

}  // namespace
}  // namespace zen::testing
