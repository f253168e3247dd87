// The main of the GPU test programs. They need a CUDA device, and tools/gpu-check runs them
// only where there should be one: without one (no GPU, or a driver older than the runtime)
// every test would fail on its own, some after reading buffers no kernel wrote, and a skip
// would read as a pass. So the run fails once, naming the cause, before any test runs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

namespace {

class CudaDeviceEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    ASSERT_EQ(e, cudaSuccess) << "no usable CUDA device: " << cudaGetErrorName(e) << ": "
                              << cudaGetErrorString(e) << "; no test ran";
    ASSERT_GT(n, 0) << "no CUDA device; no test ran";
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new CudaDeviceEnvironment);  // gtest owns it
  return RUN_ALL_TESTS();
}
