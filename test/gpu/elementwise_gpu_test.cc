// GPU test (device only, run by tools/gpu-check): the element-wise kernels of
// cuda/elementwise.h against the host. The identity fill (a joined rank's slots under
// min/max/product) must write exactly ops::fillIdentity's bytes for every dtype and op, over
// odd counts and into poisoned memory, and touch nothing past the end.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/message.h"
#include "cuda/elementwise.h"
#include "ops/reduce.h"
#include "test/gpu/gpu_test_util.h"

namespace zen::cuda {
namespace {

using testing::download;
using testing::kPoisonValueByte;

TEST(ElementwiseGpu, FillIdentityMatchesTheHostForEveryDtypeAndOp) {
  const DataType dtypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                             DataType::kBFloat16, DataType::kInt32,   DataType::kInt64};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct};
  for (const DataType dtype : dtypes) {
    for (const ReduceOp op : ops) {
      for (const size_t count : {size_t{1}, size_t{1027}, size_t{1} << 20}) {
        const size_t bytes = count * dataTypeSize(dtype);
        const size_t tail = 64;  // poisoned bytes after the range: must stay poisoned
        DeviceBuffer device;
        ASSERT_OK(device.reserve(bytes + tail));
        ASSERT_CUDA(cudaMemset(device.data(), kPoisonValueByte, bytes + tail));
        ASSERT_OK(launchFillIdentity(device.data(), count, dtype, op, nullptr));
        ASSERT_CUDA(cudaDeviceSynchronize());
        std::vector<unsigned char> expected(bytes + tail, kPoisonValueByte);
        ops::fillIdentity(expected.data(), count, dtype, op);
        const std::vector<unsigned char> got = download<unsigned char>(device.data(), bytes + tail);
        ASSERT_EQ(testing::firstMismatch(got, expected), "")
            << dataTypeName(dtype) << " " << reduceOpName(op) << " x" << count;
      }
    }
  }
}

TEST(ElementwiseGpu, FillIdentityOfNothingLaunchesNothing) {
  ASSERT_OK(launchFillIdentity(nullptr, 0, DataType::kFloat32, ReduceOp::kMin, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace zen::cuda
