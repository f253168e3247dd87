// Host staging on a GPU (device only; tools/gpu-check): the CUDA executor's copies
// (cuda/cuda_staging.h) round-trip more than one bounce buffer's worth, and the collectives
// staged through the host (Adasum, a process set's) give device tensors the CPU runtime's
// results, delivered on the device. Inputs are random, fresh every run (each test prints its
// seed: gpu_test_util.h's testSeed).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "cuda/cuda_executor.h"
#include "cuda/cuda_staging.h"
#include "test/gpu/device_array.h"
#include "test/gpu/gpu_test_util.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

std::vector<float> randomFloats(std::mt19937_64& rng, size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(std::uniform_int_distribution<int>(-64, 64)(rng));
  return v;
}

DenseView onCuda(void* data, TensorShape shape, DataType dtype = DataType::kFloat32) {
  DenseView v;
  v.data = data;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.device = Device::cuda(0);
  return v;
}

// `bytes` of device memory at p, checked to be device memory, on the host.
std::vector<std::byte> fromDevice(const void* p, size_t bytes) {
  std::vector<std::byte> out(bytes);
  if (bytes == 0) return out;
  cudaPointerAttributes attributes{};
  EXPECT_EQ(cudaPointerGetAttributes(&attributes, p), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
  EXPECT_EQ(cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

// Pageable host memory through the bounce buffer (2.5 buffers' worth, a small copy, an empty
// one), and the page-locked twins region straight, in the same calls.
TEST(CudaStagingGpu, CopiesRoundTripThroughTheBounceBufferAndTheTwinsRegion) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  std::mt19937_64 rng(cuda::testing::testSeed());
  cuda::CudaStaging staging(30.0, [](int device) {
    return cudaSetDevice(device) == cudaSuccess ? Status::ok()
                                                : ZEN_ERROR(StatusCode::kInternal, "no cuda:0");
  });
  ASSERT_TRUE(staging.prepare(0, {}).isOk());
  const size_t big = cuda::CudaStaging::kBounceBytes * 5 / 2 / sizeof(float);
  const std::vector<std::vector<float>> inputs = {
      randomFloats(rng, big), randomFloats(rng, 7), {}, randomFloats(rng, 1000)};
  const size_t twinFloats = inputs[3].size();
  Result<std::byte*> region = staging.hostMemory(twinFloats * sizeof(float));
  ASSERT_TRUE(region.isOk()) << region.status().toString();
  float* twin = reinterpret_cast<float*>(region.value());
  std::fill(twin, twin + twinFloats, -1.0f);
  std::vector<std::unique_ptr<DeviceArray<float>>> device;
  std::vector<std::vector<float>> host;  // the pageable ones; the last copy's is the twin
  std::vector<float*> hostOf;
  std::vector<cuda::StagedCopy> down, up;
  for (size_t i = 0; i < inputs.size(); ++i) {
    device.push_back(std::make_unique<DeviceArray<float>>(inputs[i]));
    host.emplace_back(i == 3 ? 0 : inputs[i].size(), -1.0f);
    hostOf.push_back(i == 3 ? twin : host.back().data());
    down.push_back({device.back()->data(), hostOf.back(), inputs[i].size() * sizeof(float)});
  }
  ASSERT_TRUE(staging.toHost(down).isOk());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_TRUE(std::equal(inputs[i].begin(), inputs[i].end(), hostOf[i])) << "copy " << i;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t k = 0; k < inputs[i].size(); ++k) hostOf[i][k] = -hostOf[i][k];
    up.push_back({hostOf[i], device[i]->data(), inputs[i].size() * sizeof(float)});
  }
  ASSERT_TRUE(staging.toDevice(up).isOk());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<float> got = device[i]->host();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), hostOf[i])) << "copy " << i;
  }
}

// One rank: Adasum of a fused group (the identity on one rank, through the host all the same),
// and a process set {0}'s allreduce, allgather and sparse allreduce, against a CPU runtime's.
TEST(CudaStagingGpu, AdasumAndProcessSetCollectivesMatchTheCpu) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  std::mt19937_64 rng(cuda::testing::testSeed());
  Job gpu(1), cpu(1);
  for (Job* job : {&gpu, &cpu}) {
    auto h = job->rank(0).enqueue(TensorOp::addProcessSet({0}));
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    ASSERT_TRUE(waitFor(h.value()).isOk());
    ASSERT_EQ(h.value().result().processSet, 1);
  }
  const std::vector<std::vector<int64_t>> shapes = {{300, 3}, {0}, {17}};
  for (int step = 0; step < 2; ++step) {  // the second from the response cache
    std::vector<std::vector<float>> inputs;
    std::vector<std::unique_ptr<DeviceArray<float>>> in, out;
    std::vector<TensorOp> gpuOps, cpuOps;
    std::vector<std::vector<float>> expected;
    for (size_t i = 0; i < shapes.size(); ++i) {
      inputs.push_back(randomFloats(rng, TensorShape(shapes[i]).numElements()));
      in.push_back(std::make_unique<DeviceArray<float>>(inputs[i]));
      std::vector<float> poison(inputs[i].size(), std::numeric_limits<float>::quiet_NaN());
      out.push_back(std::make_unique<DeviceArray<float>>(poison));
      expected.push_back(inputs[i]);
      const std::string name = "ada" + std::to_string(i);
      gpuOps.push_back(TensorOp::allreduce(name, onCuda(in[i]->data(), shapes[i]),
                                           onCuda(out[i]->data(), shapes[i]), ReduceOp::kAdasum));
      cpuOps.push_back(TensorOp::allreduce(name, denseView(expected[i], shapes[i]),
                                           denseView(expected[i], shapes[i]), ReduceOp::kAdasum));
    }
    // The set's: an allreduce in place, an allgather, a sparse allreduce to a sparse result.
    DeviceArray<float> sum(inputs[0]);
    std::vector<float> sumWant = inputs[0];
    gpuOps.push_back(
        TensorOp::allreduce("sum", onCuda(sum.data(), shapes[0]), onCuda(sum.data(), shapes[0]))
            .inProcessSet(1));
    cpuOps.push_back(
        TensorOp::allreduce("sum", denseView(sumWant, shapes[0]), denseView(sumWant, shapes[0]))
            .inProcessSet(1));
    gpuOps.push_back(TensorOp::allgather("ag", onCuda(in[2]->data(), shapes[2])).inProcessSet(1));
    cpuOps.push_back(TensorOp::allgather("ag", denseView(inputs[2], shapes[2])).inProcessSet(1));
    const SparseInput sparse = makeSparse(rng(), 500, 4, 0.1);
    const DeviceRows onGpu(sparse);
    gpuOps.push_back(TensorOp::sparseAllreduce("emb", onGpu.view, ReduceOp::kSum).inProcessSet(1));
    cpuOps.push_back(
        TensorOp::sparseAllreduce("emb", sparse.view(), ReduceOp::kSum).inProcessSet(1));

    std::vector<Handle> got, want;
    for (TensorOp& op : gpuOps) {
      auto h = gpu.rank(0).enqueue(std::move(op));
      ASSERT_TRUE(h.isOk()) << h.status().toString();
      got.push_back(h.value());
    }
    for (TensorOp& op : cpuOps) {
      auto h = cpu.rank(0).enqueue(std::move(op));
      ASSERT_TRUE(h.isOk()) << h.status().toString();
      want.push_back(h.value());
    }
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(waitFor(got[i]).isOk()) << waitFor(got[i]).toString();
      ASSERT_TRUE(waitFor(want[i]).isOk());
    }
    for (size_t i = 0; i < shapes.size(); ++i) EXPECT_EQ(out[i]->host(), expected[i]) << i;
    EXPECT_EQ(sum.host(), sumWant);
    const OpResult& ag = got[shapes.size() + 1].result();
    EXPECT_TRUE(ag.gathered.empty());
    EXPECT_EQ(ag.gatheredDevice, Device::cuda(0));
    EXPECT_EQ(fromDevice(ag.gatheredOnDevice.get(), ag.gatheredDeviceBytes),
              want[shapes.size() + 1].result().gathered);
    const OpResult& emb = got[shapes.size() + 2].result();
    const SparseTensor& embWant = want[shapes.size() + 2].result().sparse;
    EXPECT_EQ(emb.sparseDevice, Device::cuda(0));
    EXPECT_TRUE(emb.sparse.indices.empty());
    ASSERT_EQ(emb.sparseDeviceNnz, embWant.nnz());
    const std::vector<std::byte> idx =
        fromDevice(emb.sparseIndicesOnDevice.get(), static_cast<size_t>(emb.sparseDeviceNnz) * 8);
    EXPECT_EQ(std::memcmp(idx.data(), embWant.indices.data(), idx.size()), 0);
    const std::vector<std::byte> rows =
        fromDevice(emb.sparseValuesOnDevice.get(), embWant.values.size());
    EXPECT_EQ(std::memcmp(rows.data(), embWant.values.data(), rows.size()), 0);
  }
  size_t staged = 0;
  for (const auto& [scheme, buckets] : gpu.rank(0).stats().bucketsByScheme) {
    if (scheme.rfind("host-staged ", 0) == 0) staged += buckets;
  }
  EXPECT_GE(staged, 8u);  // per step: the Adasum bucket and the set's three
}

}  // namespace
}  // namespace zen::testing
