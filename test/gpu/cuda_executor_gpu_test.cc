// The CUDA executor through the real Runtime with one rank (device only; tools/gpu-check):
// device tensors posted like a framework would (a ready stream whose work is still queued,
// poisoned outputs), every result compared with the same operation on host tensors through
// a CPU runtime. Inputs are random, fresh every run (the seed is printed).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "cuda/cuda_executor.h"
#include "test/common/sparse_inputs.h"
#include "test/gpu/device_array.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

uint64_t freshSeed() {
  static const uint64_t seed = [] {
    const uint64_t s = std::random_device{}();
    std::printf("cuda_executor_gpu_test seed %llu\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

DenseView deviceView(float* data, TensorShape shape) {
  DenseView v;
  v.data = data;
  v.shape = std::move(shape);
  v.device = Device::cuda(0);
  return v;
}

std::vector<float> randomFloats(std::mt19937_64& rng, size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(std::uniform_int_distribution<int>(-64, 64)(rng));
  return v;
}

// A sparse result the executor left on the device, copied to the host after checking where
// it is (device memory on cuda:0, nothing in the host fields).
SparseTensor hostCopy(const OpResult& r) {
  SparseTensor t;
  EXPECT_EQ(r.sparseDevice, Device::cuda(0));
  EXPECT_TRUE(r.sparse.indices.empty() && r.sparse.values.empty());
  t.numRows = r.sparse.numRows;
  t.rowSize = r.sparse.rowSize;
  t.dtype = r.sparse.dtype;
  // A coalesced result has at most numRows rows; a garbage count would size the copies.
  if (r.sparseDeviceNnz < 0 || r.sparseDeviceNnz > r.sparse.numRows) {
    ADD_FAILURE() << r.sparseDeviceNnz << " result rows of " << r.sparse.numRows;
    return t;
  }
  const auto nnz = static_cast<size_t>(r.sparseDeviceNnz);
  t.indices.resize(nnz);
  t.values.resize(nnz * t.rowBytes());
  if (nnz == 0) {
    EXPECT_EQ(r.sparseIndicesOnDevice, nullptr);
    return t;
  }
  for (const void* p : {r.sparseIndicesOnDevice.get(), r.sparseValuesOnDevice.get()}) {
    cudaPointerAttributes attributes{};
    EXPECT_EQ(cudaPointerGetAttributes(&attributes, p), cudaSuccess);
    EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
  }
  EXPECT_EQ(cudaMemcpy(t.indices.data(), r.sparseIndicesOnDevice.get(), nnz * sizeof(int64_t),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(t.values.data(), r.sparseValuesOnDevice.get(), t.values.size(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  return t;
}

// Any dtype's sparse tensor as dense bytes [numRows x rowBytes], absent rows zero.
std::vector<std::byte> denseBytes(const SparseTensor& t) {
  std::vector<std::byte> out(static_cast<size_t>(t.numRows) * t.rowBytes(), std::byte{0});
  for (size_t k = 0; k < t.indices.size(); ++k) {
    std::memcpy(out.data() + static_cast<size_t>(t.indices[k]) * t.rowBytes(),
                t.values.data() + k * t.rowBytes(), t.rowBytes());
  }
  return out;
}

class CudaExecutorGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);  // a device is there (cuda_device_main.cc)
    rng_.seed(freshSeed() +
              static_cast<uint64_t>(::testing::UnitTest::GetInstance()->random_seed()));
  }
  std::mt19937_64 rng_;
};

TEST_F(CudaExecutorGpu, DenseAllreduceInPlaceAndFusedMatchesTheCpu) {
  Job gpu(1), cpu(1);
  const std::vector<std::vector<int64_t>> shapes = {{1000, 3}, {17}, {0}, {4096}};
  std::vector<std::vector<float>> inputs;
  for (const auto& s : shapes) inputs.push_back(randomFloats(rng_, TensorShape(s).numElements()));
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    // Device: a fused group, inputs in place except the first, whose output is poisoned.
    std::vector<std::unique_ptr<DeviceArray<float>>> in, out;
    std::vector<TensorOp> ops;
    for (size_t i = 0; i < shapes.size(); ++i) {
      in.push_back(std::make_unique<DeviceArray<float>>(inputs[i]));
      std::vector<float> poison(inputs[i].size(), std::numeric_limits<float>::quiet_NaN());
      out.push_back(std::make_unique<DeviceArray<float>>(poison));
      float* dst = i == 0 ? out[i]->data() : in[i]->data();
      ops.push_back(TensorOp::allreduce("t" + std::to_string(i),
                                        deviceView(in[i]->data(), shapes[i]),
                                        deviceView(dst, shapes[i]), op));
    }
    auto hs = gpu.rank(0).enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk()) << waitFor(h).toString();
    for (size_t i = 0; i < shapes.size(); ++i) {
      std::vector<float> expected = inputs[i];
      auto h = cpu.rank(0).enqueue(TensorOp::allreduce("t" + std::to_string(i),
                                                       denseView(expected, shapes[i]),
                                                       denseView(expected, shapes[i]), op));
      ASSERT_TRUE(h.isOk());
      ASSERT_TRUE(waitFor(h.value()).isOk());
      EXPECT_EQ((i == 0 ? out[i] : in[i])->host(), expected) << "tensor " << i;
    }
    // One tensor alone runs in place in its output.
    DeviceArray<float> x(inputs[3]);
    auto h = gpu.rank(0).enqueue(TensorOp::allreduce("x", deviceView(x.data(), shapes[3]),
                                                     deviceView(x.data(), shapes[3]), op));
    ASSERT_TRUE(h.isOk());
    ASSERT_TRUE(waitFor(h.value()).isOk());
    EXPECT_EQ(x.host(), inputs[3]);
  }
  EXPECT_GE(gpu.rank(0).stats().bucketsByScheme["nccl-allreduce"], 2u);
}

// The input is written on the caller's stream behind a 200 ms host function: the daemon must
// wait for it (the framework's stream: the event the daemon records at enqueue; or the
// framework's own event; or the legacy default stream, what zen.torch passes for torch's
// default stream), not read stale memory.
TEST_F(CudaExecutorGpu, WaitsForTheFrameworksStreamOrEvent) {
  Job gpu(1);
  for (const char* mode : {"stream", "event", "legacy stream"}) {
    const bool withEvent = std::strcmp(mode, "event") == 0;
    const bool legacy = std::strcmp(mode, "legacy stream") == 0;
    const std::vector<float> fresh = randomFloats(rng_, 1 << 16);
    std::vector<float> stale(fresh.size(), -1.0f);
    DeviceArray<float> x(stale);
    // Out of place: one rank's in-place allreduce leaves x alone, so only y shows what the
    // daemon read (a host read of x on the legacy stream would wait for the write anyway).
    DeviceArray<float> y(stale);
    float* pinned = nullptr;
    ASSERT_EQ(cudaMallocHost(&pinned, fresh.size() * sizeof(float)), cudaSuccess);
    std::memcpy(pinned, fresh.data(), fresh.size() * sizeof(float));
    cudaStream_t user = cudaStreamLegacy;
    if (!legacy) {
      ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
    }
    ASSERT_EQ(cudaLaunchHostFunc(
                  user, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); },
                  nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(x.data(), pinned, fresh.size() * sizeof(float),
                              cudaMemcpyHostToDevice, user),
              cudaSuccess);
    cudaEvent_t ready = nullptr;
    ReadySignal signal{nullptr, user};
    if (withEvent) {
      ASSERT_EQ(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), cudaSuccess);
      ASSERT_EQ(cudaEventRecord(ready, user), cudaSuccess);
      signal = ReadySignal{ready, nullptr};
    }
    const TensorShape shape{static_cast<int64_t>(fresh.size())};
    auto h = gpu.rank(0).enqueue(TensorOp::allreduce("late", deviceView(x.data(), shape),
                                                     deviceView(y.data(), shape), ReduceOp::kSum)
                                     .withReady(signal));
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    ASSERT_TRUE(waitFor(h.value()).isOk());
    EXPECT_EQ(y.host(), fresh) << mode;
    cudaStreamSynchronize(user);
    if (ready != nullptr) cudaEventDestroy(ready);
    if (!legacy) cudaStreamDestroy(user);
    cudaFreeHost(pinned);
  }
}

TEST_F(CudaExecutorGpu, SparseAllreduceDenseAndSparseResultsMatchTheCpu) {
  Job gpu(1), cpu(1);
  constexpr int64_t kRows = 5000, kRowSize = 4;
  const SparseInput a = makeSparse(rng_(), kRows, kRowSize, 0.05);
  const SparseInput b = makeSparse(rng_(), kRows / 2, kRowSize, 0.1);
  auto cpuSparse = [&](const SparseInput& in, const std::string& name) {
    auto h = cpu.rank(0).enqueue(TensorOp::sparseAllreduce(name, in.view(), ReduceOp::kSum));
    // No result to read after a failure (value() of an error would end the whole program).
    if (!h.isOk() || !waitFor(h.value()).isOk()) {
      ADD_FAILURE() << "the CPU reference of '" << name << "' failed";
      return SparseTensor{};
    }
    return h.value().result().sparse;
  };
  DeviceArray<int64_t> ai(a.indices), bi(b.indices);
  DeviceArray<float> av(a.values), bv(b.values);
  auto deviceSparse = [](const SparseInput& in, const DeviceArray<int64_t>& i,
                         const DeviceArray<float>& v) {
    SparseView s = in.view();
    s.indices = i.data();
    s.values = v.data();
    s.device = Device::cuda(0);
    return s;
  };
  // Sparse results (a fused bucket of two): on the device, equal to the CPU's.
  {
    std::vector<TensorOp> ops;
    ops.push_back(TensorOp::sparseAllreduce("a", deviceSparse(a, ai, av), ReduceOp::kSum));
    ops.push_back(TensorOp::sparseAllreduce("b", deviceSparse(b, bi, bv), ReduceOp::kSum));
    auto hs = gpu.rank(0).enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk()) << waitFor(h).toString();
    const SparseTensor ea = cpuSparse(a, "a");
    const SparseTensor eb = cpuSparse(b, "b");
    const SparseTensor ga = hostCopy(hs.value()[0].result());
    const SparseTensor gb = hostCopy(hs.value()[1].result());
    EXPECT_EQ(densify(ga), densify(ea));
    EXPECT_EQ(densify(gb), densify(eb));
    EXPECT_EQ(ga.indices, ea.indices);
    EXPECT_EQ(gb.indices, eb.indices);
  }
  // Dense outputs on the device, alone (in place) and fused, poisoned first.
  for (bool fused : {false, true}) {
    std::vector<float> poisonA(kRows * kRowSize, std::numeric_limits<float>::quiet_NaN());
    std::vector<float> poisonB(kRows / 2 * kRowSize, std::numeric_limits<float>::quiet_NaN());
    DeviceArray<float> outA(poisonA), outB(poisonB);
    std::vector<TensorOp> ops;
    ops.push_back(TensorOp::sparseAllreduce("da", deviceSparse(a, ai, av), ReduceOp::kSum,
                                            deviceView(outA.data(), {kRows, kRowSize})));
    if (fused) {
      ops.push_back(TensorOp::sparseAllreduce("db", deviceSparse(b, bi, bv), ReduceOp::kSum,
                                              deviceView(outB.data(), {kRows / 2, kRowSize})));
    }
    auto hs = gpu.rank(0).enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk()) << waitFor(h).toString();
    EXPECT_EQ(outA.host(), denseSum({a})) << (fused ? "fused" : "alone");
    if (fused) {
      EXPECT_EQ(outB.host(), denseSum({b}));
    }
  }
}

// One fused bucket of sparse results, float32 and float16, sum and average, over several steps
// (workspace and pinned memory reused): an empty tensor, a tensor with rows but no entry here,
// repeated indices within the rank, and a large one (a radix sort of several passes). Each
// result stays on the device, its indices local, ascending, and equal, bytes and all, to the
// CPU runtime's for the same input.
TEST_F(CudaExecutorGpu, SparseResultsStayOnTheDeviceAndMatchTheCpu) {
  Job gpu(1), cpu(1);
  const std::vector<int64_t> rows = {5000, 0, 300, 2500, 200000};
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (int step = 0; step < 3; ++step) {
        std::vector<SparseTensor> inputs;
        for (size_t i = 0; i < rows.size(); ++i) {
          std::vector<int64_t> idx;
          if (i != 2) {
            idx = ::zen::testing::distinctIndices(rows[i], rows[i] / 10, Skew::kZipf, rng_);
          }
          if (i == 3) {  // repeated rows, summed
            const std::vector<int64_t> again(idx.begin(), idx.begin() + idx.size() / 3);
            idx.insert(idx.end(), again.begin(), again.end());
            std::shuffle(idx.begin(), idx.end(), rng_);
          }
          inputs.push_back(::zen::testing::makeSparse(idx, rows[i], 3, dtype, rng_));
        }
        std::vector<std::unique_ptr<DeviceArray<int64_t>>> di;
        std::vector<std::unique_ptr<DeviceArray<std::byte>>> dv;
        std::vector<TensorOp> ops;
        for (size_t i = 0; i < rows.size(); ++i) {
          di.push_back(std::make_unique<DeviceArray<int64_t>>(inputs[i].indices));
          dv.push_back(std::make_unique<DeviceArray<std::byte>>(inputs[i].values));
          SparseView v = inputs[i].view();
          v.indices = di[i]->data();
          v.values = dv[i]->data();
          v.device = Device::cuda(0);
          ops.push_back(TensorOp::sparseAllreduce("s" + std::to_string(i), v, op));
        }
        auto hs = gpu.rank(0).enqueueGroup(std::move(ops));
        ASSERT_TRUE(hs.isOk()) << hs.status().toString();
        for (size_t i = 0; i < rows.size(); ++i) {
          const Handle& h = hs.value()[i];
          ASSERT_TRUE(waitFor(h).isOk()) << waitFor(h).toString();
          const SparseTensor got = hostCopy(h.result());
          auto c = cpu.rank(0).enqueue(
              TensorOp::sparseAllreduce("s" + std::to_string(i), inputs[i].view(), op));
          ASSERT_TRUE(c.isOk());
          ASSERT_TRUE(waitFor(c.value()).isOk());
          const SparseTensor& want = c.value().result().sparse;
          const std::string what = std::string(dataTypeName(dtype)) + " tensor " +
                                   std::to_string(i) + " step " + std::to_string(step);
          EXPECT_EQ(got.numRows, rows[i]) << what;
          EXPECT_EQ(got.dtype, dtype) << what;
          EXPECT_TRUE(std::is_sorted(got.indices.begin(), got.indices.end())) << what;
          EXPECT_EQ(got.indices, want.indices) << what;
          EXPECT_EQ(got.values, want.values) << what;
        }
      }
    }
  }
}

// A bucket mixing dense outputs (poisoned first) and sparse results: each dense output is the
// CPU's result densified (absent rows zero), each sparse result the CPU's, on the device.
TEST_F(CudaExecutorGpu, AMixedSparseBucketFillsBothKindsOfOutput) {
  Job gpu(1), cpu(1);
  const std::vector<int64_t> rows = {4000, 700, 0, 1500, 90};
  const std::vector<bool> dense = {true, false, true, true, false};
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    std::vector<SparseTensor> inputs;
    for (size_t i = 0; i < rows.size(); ++i) {
      std::vector<int64_t> idx =
          ::zen::testing::distinctIndices(rows[i], rows[i] / 7, Skew::kUniform, rng_);
      if (!idx.empty()) idx.push_back(idx.front());  // a repeat
      inputs.push_back(::zen::testing::makeSparse(idx, rows[i], 5, dtype, rng_));
    }
    std::vector<std::unique_ptr<DeviceArray<int64_t>>> di;
    std::vector<std::unique_ptr<DeviceArray<std::byte>>> dv, out;
    std::vector<TensorOp> ops;
    for (size_t i = 0; i < rows.size(); ++i) {
      di.push_back(std::make_unique<DeviceArray<int64_t>>(inputs[i].indices));
      dv.push_back(std::make_unique<DeviceArray<std::byte>>(inputs[i].values));
      out.push_back(std::make_unique<DeviceArray<std::byte>>(std::vector<std::byte>(
          static_cast<size_t>(rows[i]) * inputs[i].rowBytes(), std::byte{0x7f})));
      SparseView v = inputs[i].view();
      v.indices = di[i]->data();
      v.values = dv[i]->data();
      v.device = Device::cuda(0);
      const std::string name = "m" + std::to_string(i);
      if (!dense[i]) {
        ops.push_back(TensorOp::sparseAllreduce(name, v, ReduceOp::kSum));
        continue;
      }
      DenseView o;
      o.data = out[i]->data();
      o.dtype = dtype;
      o.shape = TensorShape({rows[i], 5});
      o.device = Device::cuda(0);
      ops.push_back(TensorOp::sparseAllreduce(name, v, ReduceOp::kSum, o));
    }
    auto hs = gpu.rank(0).enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (size_t i = 0; i < rows.size(); ++i) {
      const Handle& h = hs.value()[i];
      ASSERT_TRUE(waitFor(h).isOk()) << waitFor(h).toString();
      auto c = cpu.rank(0).enqueue(
          TensorOp::sparseAllreduce("m" + std::to_string(i), inputs[i].view(), ReduceOp::kSum));
      ASSERT_TRUE(c.isOk());
      ASSERT_TRUE(waitFor(c.value()).isOk());
      const SparseTensor& want = c.value().result().sparse;
      const std::string what = std::string(dataTypeName(dtype)) + " tensor " + std::to_string(i);
      if (dense[i]) {
        EXPECT_EQ(out[i]->host(), denseBytes(want)) << what;
        EXPECT_EQ(h.result().sparseIndicesOnDevice, nullptr) << what;
        continue;
      }
      const SparseTensor got = hostCopy(h.result());
      EXPECT_EQ(got.indices, want.indices) << what;
      EXPECT_EQ(got.values, want.values) << what;
    }
  }
}

// In a fused bucket an index past its own tensor's rows would land in the next tensor's:
// it is refused instead, on both tensors of the bucket.
TEST_F(CudaExecutorGpu, AFusedSparseIndexOutsideItsTensorIsAnError) {
  Job gpu(1);
  SparseInput a = makeSparse(rng_(), 100, 2, 0.2);
  const SparseInput b = makeSparse(rng_(), 100, 2, 0.2);
  a.indices.push_back(150);  // inside the bucket's 200 rows, outside a's 100
  a.values.insert(a.values.end(), {1.0f, 1.0f});
  DeviceArray<int64_t> ai(a.indices), bi(b.indices);
  DeviceArray<float> av(a.values), bv(b.values);
  auto device = [](const SparseInput& in, const DeviceArray<int64_t>& i,
                   const DeviceArray<float>& v) {
    SparseView s = in.view();
    s.indices = i.data();
    s.values = v.data();
    s.device = Device::cuda(0);
    return s;
  };
  std::vector<TensorOp> ops;
  ops.push_back(TensorOp::sparseAllreduce("a", device(a, ai, av), ReduceOp::kSum));
  ops.push_back(TensorOp::sparseAllreduce("b", device(b, bi, bv), ReduceOp::kSum));
  auto hs = gpu.rank(0).enqueueGroup(std::move(ops));
  ASSERT_TRUE(hs.isOk()) << hs.status().toString();
  for (const Handle& h : hs.value()) {
    const Status s = waitFor(h);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
  }
}

TEST_F(CudaExecutorGpu, BroadcastInPlace) {
  Job gpu(1);
  const std::vector<float> v = randomFloats(rng_, 999);
  DeviceArray<float> x(v);
  const TensorShape shape{999};
  auto h = gpu.rank(0).enqueue(TensorOp::broadcast("b", deviceView(x.data(), shape), 0));
  ASSERT_TRUE(h.isOk());
  ASSERT_TRUE(waitFor(h.value()).isOk());
  EXPECT_EQ(x.host(), v);
}

// Allgather of device tensors (a fused group, one of 0 rows): each result stays on the device
// in memory the handle owns, equal to the CPU runtime's host result. Repeated so that the
// completion events come back from the pool.
TEST_F(CudaExecutorGpu, AllgatherFusedOnTheDeviceMatchesTheCpu) {
  Job gpu(1), cpu(1);
  const std::vector<std::vector<int64_t>> shapes = {{37, 3}, {5}, {0, 4}, {1000, 2, 2}};
  for (int step = 0; step < 20; ++step) {
    std::vector<std::vector<float>> inputs;
    std::vector<std::unique_ptr<DeviceArray<float>>> in;
    std::vector<TensorOp> ops;
    for (size_t i = 0; i < shapes.size(); ++i) {
      inputs.push_back(randomFloats(rng_, TensorShape(shapes[i]).numElements()));
      in.push_back(std::make_unique<DeviceArray<float>>(inputs[i]));
      ops.push_back(
          TensorOp::allgather("ag" + std::to_string(i), deviceView(in[i]->data(), shapes[i])));
    }
    auto hs = gpu.rank(0).enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Handle& h = hs.value()[i];
      ASSERT_TRUE(waitFor(h).isOk()) << waitFor(h).toString();
      const OpResult& r = h.result();
      EXPECT_TRUE(r.gathered.empty());
      EXPECT_EQ(r.gatheredDevice, Device::cuda(0));
      EXPECT_EQ(r.gatheredShape, TensorShape(shapes[i]));
      const size_t bytes = inputs[i].size() * sizeof(float);
      ASSERT_EQ(r.gatheredDeviceBytes, bytes);
      std::vector<float> got(inputs[i].size(), std::numeric_limits<float>::quiet_NaN());
      if (bytes > 0) {
        ASSERT_NE(r.gatheredOnDevice, nullptr);
        cudaPointerAttributes attributes{};
        ASSERT_EQ(cudaPointerGetAttributes(&attributes, r.gatheredOnDevice.get()), cudaSuccess);
        EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
        ASSERT_EQ(cudaMemcpy(got.data(), r.gatheredOnDevice.get(), bytes, cudaMemcpyDeviceToHost),
                  cudaSuccess);
      }
      std::vector<float> host = inputs[i];
      auto c = cpu.rank(0).enqueue(
          TensorOp::allgather("ag" + std::to_string(i), denseView(host, shapes[i])));
      ASSERT_TRUE(c.isOk());
      ASSERT_TRUE(waitFor(c.value()).isOk());
      const std::vector<std::byte>& expected = c.value().result().gathered;
      ASSERT_EQ(expected.size(), bytes);
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), bytes), 0) << "tensor " << i;
    }
  }
  EXPECT_GE(gpu.rank(0).stats().bucketsByScheme["nccl-allgatherv"], 20u);
}

TEST_F(CudaExecutorGpu, BadDeviceIsRefusedAtEnqueue) {
  Job gpu(1);
  std::vector<float> v(4);
  DeviceArray<float> x(v);
  DenseView bad = deviceView(x.data(), {4});
  bad.device = Device::cuda(cuda::cudaDeviceCount());
  auto h = gpu.rank(0).enqueue(TensorOp::allreduce("bad", bad, bad));
  ASSERT_FALSE(h.isOk());
  EXPECT_NE(h.status().message().find("CUDA device(s)"), std::string::npos) << h.status().message();
}

}  // namespace
}  // namespace zen::testing
