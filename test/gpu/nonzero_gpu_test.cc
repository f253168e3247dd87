// GPU test (device only, run by tools/gpu-check): nonzero extraction on the GPU must return
// exactly what the CPU's extractNonzeroRows returns — the same rows in the same (ascending)
// order with the same bytes — for every dtype, thread-per-row and warp-per-row shapes, tile
// boundaries, -0.0 (dropped) and NaN (kept), into poisoned outputs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/nonzero.h"
#include "cuda/gpu_nonzero.h"
#include "test/core/reference.h"
#include "test/gpu/gpu_test_util.h"

namespace zen::cuda {
namespace {

using testing::download;
using testing::testSeed;
using testing::upload;

// A dense [rows x rowSize] host tensor: each row is non-zero with probability `density`
// (small random integers, some elements zero), else zero — and, for float dtypes, some
// "zero" rows hold -0.0 and some non-zero rows hold only a NaN or only a last element.
std::vector<std::byte> makeDense(
    std::mt19937_64& rng, DataType dtype, int64_t rows, int64_t rowSize, double density) {
  std::vector<std::byte> data(static_cast<size_t>(rows * rowSize) * dataTypeSize(dtype));
  std::bernoulli_distribution keep(density);
  std::uniform_int_distribution<int> value(-4, 4);
  std::uniform_int_distribution<int> special(0, 19);
  const bool isFloat = !reference::isInteger(dtype);
  for (int64_t r = 0; r < rows; ++r) {
    const size_t first = static_cast<size_t>(r * rowSize);
    if (!keep(rng)) {
      if (isFloat && special(rng) == 0) {
        for (int64_t e = 0; e < rowSize; ++e)
          reference::storeDouble(data.data(), dtype, first + e, -0.0);
      }
      continue;
    }
    const int kind = special(rng);
    if (kind == 0 && isFloat) {
      reference::storeDouble(data.data(), dtype, first + rowSize - 1,
                             std::numeric_limits<double>::quiet_NaN());
    } else if (kind == 1) {
      reference::storeDouble(data.data(), dtype, first + rowSize - 1, 3);  // only the last
    } else {
      for (int64_t e = 0; e < rowSize; ++e)
        reference::storeDouble(data.data(), dtype, first + e, value(rng));
      reference::storeDouble(data.data(), dtype, first, 1);  // at least one non-zero
    }
  }
  return data;
}

void expectMatchesCpu(GpuNonzeroExtractor* extractor,
                      DataType dtype,
                      int64_t rows,
                      int64_t rowSize,
                      double density,
                      std::mt19937_64& rng) {
  SCOPED_TRACE(::testing::Message()
               << dataTypeName(dtype) << " " << rows << " x " << rowSize << " density " << density);
  const auto host = makeDense(rng, dtype, rows, rowSize, density);
  DenseView hostView{const_cast<std::byte*>(host.data()), dtype, TensorShape({rows, rowSize}),
                     Device::cpu()};
  SparseTensor want;
  ASSERT_OK(extractNonzeroRows(hostView, &want));

  DeviceBuffer dense;
  ASSERT_OK(upload(host, &dense));
  GpuSparse out;
  out.rowSize = rowSize;
  out.dtype = dtype;
  ASSERT_OK(out.reserve(rows + 1));  // large enough that extract() keeps the poison
  ASSERT_CUDA(cudaMemset(out.indices.data(), testing::kPoisonPositionByte, out.indices.capacity()));
  ASSERT_CUDA(cudaMemset(out.values.data(), testing::kPoisonValueByte, out.values.capacity()));
  DenseView view{dense.data(), dtype, TensorShape({rows, rowSize}), Device::cuda(0)};
  ASSERT_OK(extractor->extract(view, &out, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  SparseTensor got;
  ASSERT_OK(out.toHost(&got));
  ASSERT_EQ(got.nnz(), want.nnz());
  EXPECT_EQ(got.numRows, rows);
  EXPECT_EQ(got.rowSize, rowSize);
  EXPECT_EQ(testing::firstMismatch(got.indices, want.indices), "") << "indices differ";
  EXPECT_EQ(testing::firstMismatch(got.values, want.values), "") << "rows differ";
}

TEST(NonzeroGpu, MatchesTheCpuForEveryDtypeAndShape) {
  std::mt19937_64 rng(testSeed());
  GpuNonzeroExtractor extractor;  // one extractor for all: its workspace is reused
  for (DataType dtype : reference::kAllTypes) {
    expectMatchesCpu(&extractor, dtype, 200'003, 1, 0.05, rng);  // thread per row, many tiles
    expectMatchesCpu(&extractor, dtype, 8'193, 3, 0.3, rng);     // a tile boundary + 1
    expectMatchesCpu(&extractor, dtype, 8'192, 8, 0.5, rng);     // 16..64-byte rows
    expectMatchesCpu(&extractor, dtype, 1'001, 40, 0.1, rng);    // warp per row
    expectMatchesCpu(&extractor, dtype, 77, 1000, 0.2, rng);     // long rows
  }
}

TEST(NonzeroGpu, EdgeDensitiesAndSizes) {
  std::mt19937_64 rng(testSeed());
  GpuNonzeroExtractor extractor;
  for (int64_t rows :
       {int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{8191}, int64_t{1} << 20}) {
    for (double density : {0.0, 0.001, 1.0}) {
      expectMatchesCpu(&extractor, DataType::kFloat32, rows, 1, density, rng);
      expectMatchesCpu(&extractor, DataType::kFloat16, rows, 33, density, rng);
    }
  }
}

TEST(NonzeroGpu, EmptyTensorAndHostTensorRejected) {
  GpuNonzeroExtractor extractor;
  GpuSparse out;
  DenseView empty{nullptr, DataType::kFloat32, TensorShape({0, 4}), Device::cuda(0)};
  ASSERT_OK(extractor.extract(empty, &out, nullptr));
  EXPECT_EQ(out.nnz, 0);
  std::vector<float> host(16, 1.0f);
  DenseView onHost{host.data(), DataType::kFloat32, TensorShape({16}), Device::cpu()};
  const Status s = extractor.extract(onHost, &out, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
}

TEST(NonzeroGpu, LargeTensorOnAStream) {
  std::mt19937_64 rng(testSeed());
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  const int64_t rows = int64_t{1} << 24;
  const auto host = makeDense(rng, DataType::kFloat32, rows, 1, 0.01);
  DenseView hostView{const_cast<std::byte*>(host.data()), DataType::kFloat32, TensorShape({rows}),
                     Device::cpu()};
  SparseTensor want;
  ASSERT_OK(extractNonzeroRows(hostView, &want));
  DeviceBuffer dense;
  ASSERT_OK(upload(host, &dense));
  GpuNonzeroExtractor extractor;
  GpuSparse out;
  ASSERT_OK(extractor.extract(
      {dense.data(), DataType::kFloat32, TensorShape({rows}), Device::cuda(0)}, &out, stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  SparseTensor got;
  ASSERT_OK(out.toHost(&got));
  ASSERT_EQ(got.nnz(), want.nnz());
  EXPECT_EQ(testing::firstMismatch(got.indices, want.indices), "") << "indices differ";
  EXPECT_EQ(testing::firstMismatch(got.values, want.values), "") << "rows differ";
  ASSERT_CUDA(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace zen::cuda
