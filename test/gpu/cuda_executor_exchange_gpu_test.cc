// Alltoall and reducescatter of device tensors through the CUDA executor and the real Runtime
// (device only; tools/gpu-check): one rank, and one rank per GPU where there are several
// (NCCL wants a device per rank). Every result is compared with the same operations on host
// tensors through a CPU runtime of as many ranks. Inputs are random small integers in every
// dtype, fresh each run (the seed is printed), so sums, minima, maxima and products are exact;
// float averages agree within rounding (NCCL's ncclAvg, natively in fp16; the CPU divides
// an fp32 sum once).
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include "cuda/cuda_executor.h"
#include "test/gpu/device_array.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

uint64_t freshSeed() {
  const uint64_t s = std::random_device{}();
  std::printf("cuda_executor_exchange_gpu_test seed %llu\n", static_cast<unsigned long long>(s));
  return s;
}

// 1, and one rank per GPU (at most 8) when there are several.
std::vector<int> rankCounts() {
  const int devices = std::min(cuda::cudaDeviceCount(), 8);
  if (devices <= 1) return {1};
  return {1, devices};
}

// `count` small integers of dtype: [-4, 4], or for a product signed powers of two up to 2 (any
// order of up to 8 factors is exact, fp16 included).
std::vector<std::byte> smallIntegers(std::mt19937_64& rng,
                                     int64_t count,
                                     DataType dtype,
                                     bool product) {
  static constexpr int kFactors[] = {1, -1, 2, -2};
  std::vector<std::byte> out(static_cast<size_t>(count) * dataTypeSize(dtype));
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
      const int v = product ? kFactors[rng() % 4] : static_cast<int>(rng() % 9) - 4;
      const T x = fromAccumulator<T, AccumulatorT<T>>(static_cast<AccumulatorT<T>>(v));
      std::memcpy(out.data() + i * sizeof(T), &x, sizeof(T));
    }
  });
  return out;
}

std::vector<double> asDoubles(const std::vector<std::byte>& bytes, DataType dtype) {
  std::vector<double> out;
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
      T v;
      std::memcpy(&v, bytes.data() + i, sizeof(T));
      out.push_back(static_cast<double>(toAccumulator<AccumulatorT<T>>(v)));
    }
  });
  return out;
}

void expectReduced(const std::vector<std::byte>& got,
                   const std::vector<std::byte>& want,
                   DataType dtype,
                   ReduceOp op,
                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const bool integer = dtype == DataType::kInt32 || dtype == DataType::kInt64;
  const bool exact = op != ReduceOp::kAverage || integer;
  const std::vector<double> g = asDoubles(got, dtype);
  const std::vector<double> w = asDoubles(want, dtype);
  size_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = exact                         ? 0.0
                       : dtype == DataType::kFloat16 ? 2e-3 * std::abs(w[i]) + 1e-3
                                                     : 1e-6 * std::abs(w[i]) + 1e-6;
    if (!(std::abs(g[i] - w[i]) <= tol) && bad++ < 3) {  // a poisoned NaN fails too
      ADD_FAILURE() << what << " element " << i << ": got " << g[i] << ", want " << w[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

DenseView viewOf(void* data, DataType dtype, std::vector<int64_t> dims, Device device) {
  DenseView v;
  v.data = data;
  v.dtype = dtype;
  v.shape = TensorShape(std::move(dims));
  v.device = device;
  return v;
}

class CudaExecutorExchangeGpu : public ::testing::Test {
 protected:
  void SetUp() override { rng_.seed(freshSeed()); }
  std::mt19937_64 rng_;
};

// Per rank, per tensor: bytes.
using RankTensors = std::vector<std::vector<std::vector<std::byte>>>;

// One round of reducescatters of `shapes` (one group: a fused bucket), on device tensors of
// rank r's GPU or on host tensors; outputs poisoned first. With joinLast, the last rank joins
// instead of posting (it contributes the op's identity) and the others join afterwards.
RankTensors reducescatterRound(Job& job,
                               bool onDevice,
                               const std::string& prefix,
                               const std::vector<std::vector<int64_t>>& shapes,
                               RankTensors& inputs,
                               DataType dtype,
                               ReduceOp op,
                               bool joinLast) {
  const int n = job.size();
  RankTensors outputs(static_cast<size_t>(n));
  job.onEachRank([&](int r, Runtime& rt) {
    if (onDevice) {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    }
    auto join = [&] {
      auto h = rt.enqueue(TensorOp::join());
      ASSERT_TRUE(h.isOk()) << h.status().toString();
      const Status s = waitFor(h.value());
      ASSERT_TRUE(s.isOk()) << s.toString();
    };
    if (joinLast && r == n - 1) return join();
    std::vector<std::unique_ptr<DeviceArray<std::byte>>> in, out;
    std::vector<std::vector<std::byte>> host(shapes.size());
    std::vector<TensorOp> ops;
    for (size_t i = 0; i < shapes.size(); ++i) {
      std::vector<int64_t> piece = shapes[i];
      piece[0] = scatterRows(piece[0], n, r);
      host[i].assign(static_cast<size_t>(TensorShape(piece).numElements()) * dataTypeSize(dtype),
                     std::byte{0x7f});
      DenseView input = viewOf(inputs[r][i].data(), dtype, shapes[i], Device());
      DenseView output = viewOf(host[i].data(), dtype, piece, Device());
      if (onDevice) {
        in.push_back(std::make_unique<DeviceArray<std::byte>>(inputs[r][i]));
        out.push_back(std::make_unique<DeviceArray<std::byte>>(host[i]));
        input = viewOf(in.back()->data(), dtype, shapes[i], Device::cuda(r));
        output = viewOf(out.back()->data(), dtype, piece, Device::cuda(r));
      }
      ops.push_back(TensorOp::reducescatter(prefix + std::to_string(i), input, output, op));
    }
    auto hs = rt.enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (const Handle& h : hs.value()) {
      const Status s = waitFor(h);
      ASSERT_TRUE(s.isOk()) << s.toString();
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
      outputs[r].push_back(onDevice ? out[i]->host() : host[i]);
    }
    if (joinLast) join();
  });
  return outputs;
}

// A fused bucket with uneven pieces, pieces of zero rows (fewer rows than ranks) and an empty
// tensor; then single tensors whose rows divide evenly (no staging) and do not. Every op, four
// dtypes; on several GPUs also with a joined rank.
TEST_F(CudaExecutorExchangeGpu, ReducescatterFusedAloneAndJoinedMatchesTheCpu) {
  for (int n : rankCounts()) {
    Job gpu(n), cpu(n);
    const std::vector<std::vector<std::vector<int64_t>>> buckets = {
        {{7, 3}, {2}, {0, 4}, {4 * n + 1, 2}}, {{2 * n, 5}}, {{n + 1}}};
    int round = 0;
    for (DataType dtype :
         {DataType::kFloat32, DataType::kFloat16, DataType::kInt32, DataType::kInt64}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct}) {
        for (size_t b = 0; b < buckets.size(); ++b) {
          for (bool joinLast : {false, true}) {
            if (joinLast && (n == 1 || b != 0)) continue;
            const std::vector<std::vector<int64_t>>& shapes = buckets[b];
            RankTensors inputs(static_cast<size_t>(n));
            for (auto& mine : inputs) {
              for (const auto& s : shapes) {
                mine.push_back(smallIntegers(rng_, TensorShape(s).numElements(), dtype,
                                             op == ReduceOp::kProduct));
              }
            }
            const std::string prefix = fmt::format("rs{}.", round++);
            const RankTensors got =
                reducescatterRound(gpu, true, prefix, shapes, inputs, dtype, op, joinLast);
            const RankTensors want =
                reducescatterRound(cpu, false, prefix, shapes, inputs, dtype, op, joinLast);
            for (int r = 0; r < n; ++r) {
              if (joinLast && r == n - 1) continue;
              ASSERT_EQ(got[r].size(), shapes.size()) << "rank " << r;
              ASSERT_EQ(want[r].size(), shapes.size()) << "rank " << r;
              for (size_t i = 0; i < shapes.size(); ++i) {
                expectReduced(got[r][i], want[r][i], dtype, op,
                              fmt::format("{} {} n={} bucket {}{} rank {} tensor {}",
                                          dataTypeName(dtype), reduceOpName(op), n, b,
                                          joinLast ? " (last rank joined)" : "", r, i));
              }
            }
          }
        }
      }
    }
    EXPECT_GE(gpu.rank(0).stats().bucketsByScheme["nccl-reducescatter"], 60u);
  }
}

// What alltoall leaves in a handle, wherever it lives.
struct AlltoallOut {
  std::vector<std::byte> rows;
  TensorShape shape;
  std::vector<int64_t> receivedSplits;
};

// Random splits with zeros (or none: an equal split of 2n rows), three dtypes, trailing
// dimensions of several shapes; the GPU result stays on rank r's device in memory the handle
// owns, equal to the CPU runtime's host result byte for byte.
TEST_F(CudaExecutorExchangeGpu, AlltoallOnTheDeviceMatchesTheCpu) {
  for (int n : rankCounts()) {
    Job gpu(n), cpu(n);
    int round = 0;
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kInt64}) {
      for (int trial = 0; trial < 6; ++trial) {
        const std::vector<int64_t> trailing = trial % 3 == 0   ? std::vector<int64_t>{}
                                              : trial % 3 == 1 ? std::vector<int64_t>{3}
                                                               : std::vector<int64_t>{2, 2};
        const bool equal = trial == 5;
        std::vector<std::vector<int64_t>> splits(static_cast<size_t>(n));
        std::vector<std::vector<std::byte>> inputs;
        std::vector<std::vector<int64_t>> dims;
        for (int r = 0; r < n; ++r) {
          int64_t rows = 2 * n;
          if (!equal) {
            rows = 0;
            for (int d = 0; d < n; ++d) {
              // trial 0: nothing at all to send
              splits[r].push_back(trial == 0 || rng_() % 3 == 0 ? 0
                                                                : static_cast<int64_t>(rng_() % 5));
              rows += splits[r].back();
            }
          }
          dims.push_back({rows});
          dims.back().insert(dims.back().end(), trailing.begin(), trailing.end());
          inputs.push_back(
              smallIntegers(rng_, TensorShape(dims.back()).numElements(), dtype, false));
        }
        const std::string name = fmt::format("a2a{}", round++);
        auto run = [&](Job& job, bool onDevice) {
          std::vector<AlltoallOut> outs(static_cast<size_t>(n));
          job.onEachRank([&](int r, Runtime& rt) {
            if (onDevice) {
              ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
            }
            std::unique_ptr<DeviceArray<std::byte>> in;
            DenseView input = viewOf(inputs[r].data(), dtype, dims[r], Device());
            if (onDevice) {
              in = std::make_unique<DeviceArray<std::byte>>(inputs[r]);
              input = viewOf(in->data(), dtype, dims[r], Device::cuda(r));
            }
            auto h = rt.enqueue(TensorOp::alltoall(name, input, splits[r]));
            ASSERT_TRUE(h.isOk()) << h.status().toString();
            const Status s = waitFor(h.value());
            ASSERT_TRUE(s.isOk()) << s.toString();
            const OpResult& res = h.value().result();
            AlltoallOut& o = outs[r];
            o.shape = res.gatheredShape;
            o.receivedSplits = res.receivedSplits;
            if (!onDevice) {
              o.rows = res.gathered;
              return;
            }
            EXPECT_TRUE(res.gathered.empty());
            EXPECT_EQ(res.gatheredDevice, Device::cuda(r));
            const size_t bytes =
                static_cast<size_t>(res.gatheredShape.numElements()) * dataTypeSize(dtype);
            ASSERT_EQ(res.gatheredDeviceBytes, bytes);
            if (bytes == 0) return;
            ASSERT_NE(res.gatheredOnDevice, nullptr);
            cudaPointerAttributes attributes{};
            ASSERT_EQ(cudaPointerGetAttributes(&attributes, res.gatheredOnDevice.get()),
                      cudaSuccess);
            EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
            EXPECT_EQ(attributes.device, r);
            o.rows = downloadArray<std::byte>(res.gatheredOnDevice.get(), bytes);
          });
          return outs;
        };
        const std::vector<AlltoallOut> got = run(gpu, true);
        const std::vector<AlltoallOut> want = run(cpu, false);
        for (int r = 0; r < n; ++r) {
          const std::string what =
              fmt::format("{} trial {} n={} rank {}", dataTypeName(dtype), trial, n, r);
          EXPECT_EQ(got[r].shape, want[r].shape) << what;
          EXPECT_EQ(got[r].receivedSplits, want[r].receivedSplits) << what;
          EXPECT_TRUE(got[r].rows == want[r].rows) << what;
        }
      }
    }
    EXPECT_GE(gpu.rank(0).stats().bucketsByScheme["nccl-alltoallv"], 18u);
  }
}

}  // namespace
}  // namespace zen::testing
