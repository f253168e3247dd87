// GPU test (device only, run by tools/gpu-check): Algorithm 1 on the GPU against the CPU
// HashPartitioner with the same IndexMap and options, on fresh random inputs every run.
// The lists must be equal as sets (owner, position, row bytes) with equal per-owner counts:
// bit-exact for integer-valued data in every dtype, and for random fp32 values when no index
// repeats more than 32 times (the summation order is the CPU's). Outputs are poisoned first,
// so a row or position the kernels never wrote fails the comparison.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/hash_partitioner.h"
#include "cuda/gpu_hash_partitioner.h"
#include "test/common/sparse_inputs.h"
#include "test/core/reference.h"
#include "test/gpu/gpu_test_util.h"

namespace zen::cuda {
namespace {

using testing::asSet;
using testing::firstDifference;
using testing::testSeed;
using testing::upload;

// The input on the device, as a SparseView.
struct DeviceInput {
  DeviceBuffer indices;
  DeviceBuffer values;
  SparseView view;
};

void toDevice(const SparseTensor& t, DeviceInput* d) {
  ASSERT_OK(upload(t.indices, &d->indices));
  ASSERT_OK(upload(t.values, &d->values));
  d->view = t.view();
  d->view.indices = d->indices.as<const int64_t>();
  d->view.values = d->values.data();
  d->view.device = Device::cuda(0);
}

void poison(GpuPushLists* out, const SparseTensor& in) {
  out->dtype = in.dtype;
  out->rowSize = in.rowSize;
  ASSERT_OK(out->reserve(in.nnz() + 16));
  ASSERT_CUDA(
      cudaMemset(out->positions.data(), testing::kPoisonPositionByte, out->positions.capacity()));
  ASSERT_CUDA(cudaMemset(out->values.data(), testing::kPoisonValueByte, out->values.capacity()));
}

// Partitions `in` on both sides and compares; returns the GPU stats.
PartitionStats expectSameAsCpu(GpuHashPartitioner* gpu,
                               const IndexMap& map,
                               const HashPartitionOptions& options,
                               const SparseTensor& in,
                               cudaStream_t stream = nullptr) {
  HashPartitioner cpu(map, options, nullptr);
  PushLists want;
  PartitionStats cpuStats;
  Status s = cpu.partition(in.view(), &want, &cpuStats);
  EXPECT_TRUE(s.isOk()) << s.toString();

  DeviceInput d;
  toDevice(in, &d);
  GpuPushLists out;
  poison(&out, in);
  PartitionStats stats;
  if (::testing::Test::HasFatalFailure()) return stats;  // an upload or the poison failed
  s = gpu->partition(d.view, &out, stream, &stats);
  EXPECT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  PushLists got;
  if (s.isOk()) s = out.toHost(&got);
  EXPECT_TRUE(s.isOk()) << s.toString();

  EXPECT_EQ(got.offsets.size(), want.offsets.size());
  if (!s.isOk() || got.offsets.size() != want.offsets.size()) return stats;  // no lists to read
  for (int p = 0; p + 1 < static_cast<int>(want.offsets.size()); ++p) {
    EXPECT_EQ(got.count(p), want.count(p)) << "owner " << p;
  }
  const std::vector<int64_t> deviceOffsets =
      testing::download<int64_t>(out.deviceOffsets.data(), out.offsets.size());
  EXPECT_TRUE(deviceOffsets == out.offsets) << "device and host offsets differ";
  EXPECT_EQ(firstDifference(asSet(got), asSet(want)), "");
  EXPECT_EQ(stats.input, in.nnz());
  EXPECT_EQ(stats.unique, cpuStats.unique);
  EXPECT_EQ(stats.duplicates, cpuStats.duplicates);
  EXPECT_EQ(stats.lost, 0);
  return stats;
}

std::vector<int64_t> zipfIndices(int64_t rows, int64_t count, double s, std::mt19937_64& rng) {
  std::vector<int64_t> idx(count);
  for (auto& i : idx) i = zen::testing::zipfDraw(rows, s, rng);
  return idx;
}

TEST(HashPartitionerGpu, UniformDistinctLarge) {
  std::mt19937_64 rng(testSeed());
  const int64_t rows = 10'000'000;
  const IndexMap map(rows, 8, rng());
  HashPartitionOptions options;
  options.seed = rng();
  GpuHashPartitioner gpu(map, options);
  const auto in = zen::testing::makeSparse(
      zen::testing::distinctIndices(rows, 1'000'000, zen::testing::Skew::kUniform, rng), rows, 1,
      DataType::kFloat32, rng);
  const PartitionStats stats = expectSameAsCpu(&gpu, map, options, in);
  EXPECT_EQ(stats.duplicates, 0);
  EXPECT_EQ(gpu.lastAttempts(), 1);
}

TEST(HashPartitionerGpu, ZipfRepeatsEveryDtypeBitExact) {
  std::mt19937_64 rng(testSeed());
  for (DataType dtype : reference::kAllTypes) {
    for (int64_t rowSize : {int64_t{1}, int64_t{5}, int64_t{64}}) {
      SCOPED_TRACE(::testing::Message() << dataTypeName(dtype) << " rowSize " << rowSize);
      const int64_t rows = 1'000'000;
      const IndexMap map(rows, 7, rng());
      HashPartitionOptions options;
      options.seed = rng();
      GpuHashPartitioner gpu(map, options);
      // Zipf 1.2: a few indices repeat thousands of times (groups over 32: the tree path
      // for short rows), most once.
      const auto in =
          zen::testing::makeSparse(zipfIndices(rows, 200'000, 1.2, rng), rows, rowSize, dtype, rng);
      const PartitionStats stats = expectSameAsCpu(&gpu, map, options, in);
      EXPECT_GT(stats.duplicates, 0);
    }
  }
}

TEST(HashPartitionerGpu, RandomFloatsSmallGroupsMatchTheCpuOrder) {
  std::mt19937_64 rng(testSeed());
  const int64_t rows = 2'000'000;
  const IndexMap map(rows, 16, rng());
  HashPartitionOptions options;
  options.seed = rng();
  GpuHashPartitioner gpu(map, options);
  auto idx = zen::testing::distinctIndices(rows, 300'000, zen::testing::Skew::kUniform, rng);
  // Each of 5000 indices repeated 2..31 more times: groups of at most 32 entries.
  std::uniform_int_distribution<int> extra(1, 30);
  for (int g = 0; g < 5000; ++g) {
    const int64_t i = idx[g];
    for (int r = extra(rng); r >= 0; --r) idx.push_back(i);
  }
  std::shuffle(idx.begin(), idx.end(), rng);
  auto in = zen::testing::makeSparse(idx, rows, 3, DataType::kFloat32, rng);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto* v = reinterpret_cast<float*>(in.values.data());
  for (size_t e = 0; e < in.values.size() / sizeof(float); ++e) v[e] = u(rng);
  expectSameAsCpu(&gpu, map, options, in);
}

TEST(HashPartitionerGpu, OneIndexRepeatedOneHundredThousandTimes) {
  std::mt19937_64 rng(testSeed());
  const IndexMap map(1000, 4, rng());
  GpuHashPartitioner gpu(map, {});
  for (int64_t rowSize : {int64_t{1}, int64_t{40}}) {
    const auto in = zen::testing::makeSparse(std::vector<int64_t>(100'000, 0), 1000, rowSize,
                                             DataType::kInt32, rng);
    const PartitionStats stats = expectSameAsCpu(&gpu, map, {}, in);
    EXPECT_EQ(stats.unique, 1);
  }
}

TEST(HashPartitionerGpu, TinyMemoryForcesTheOverflowFallback) {
  std::mt19937_64 rng(testSeed());
  const int64_t rows = 1'000'000;
  const IndexMap map(rows, 4, rng());
  HashPartitionOptions options;
  options.memoryFactor = 0.0001;  // 8 parallel slots per owner
  options.serialFraction = 0;     // 64 serial entries per owner
  options.seed = rng();
  GpuHashPartitioner gpu(map, options);
  auto idx = zen::testing::distinctIndices(rows, 100'000, zen::testing::Skew::kUniform, rng);
  for (int i = 0; i < 10'000; ++i) idx.push_back(idx[rng() % idx.size()]);
  const auto in = zen::testing::makeSparse(idx, rows, 2, DataType::kBFloat16, rng);
  const PartitionStats stats = expectSameAsCpu(&gpu, map, options, in);
  EXPECT_GE(gpu.lastAttempts(), 2);
  EXPECT_GT(stats.overflowed, 0);
  EXPECT_GT(stats.spilled, 0);
}

TEST(HashPartitionerGpu, OneProbeAndManyOwners) {
  std::mt19937_64 rng(testSeed());
  const int64_t rows = 3'000'001;
  const IndexMap map(rows, 64, rng());
  HashPartitionOptions options;
  options.hashFunctions = 1;
  options.memoryFactor = 1.0;
  options.seed = rng();
  GpuHashPartitioner gpu(map, options);
  const auto in = zen::testing::makeSparse(zipfIndices(rows, 500'000, 1.05, rng), rows, 2,
                                           DataType::kFloat16, rng);
  const PartitionStats stats = expectSameAsCpu(&gpu, map, options, in);
  EXPECT_GT(stats.spilled, 0);
}

TEST(HashPartitionerGpu, EdgeShapesOnAStream) {
  std::mt19937_64 rng(testSeed());
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  for (int parts : {1, 3, 16}) {
    for (int64_t rows : {int64_t{1}, int64_t{9}, int64_t{1000}}) {
      SCOPED_TRACE(::testing::Message() << parts << " parts, " << rows << " rows");
      const IndexMap map(rows, parts, rng());
      GpuHashPartitioner gpu(map, {});
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < 3 * rows; ++i) idx.push_back(static_cast<int64_t>(rng() % rows));
      idx.push_back(0);  // index 0 is an ordinary index, never "empty"
      expectSameAsCpu(&gpu, map, {}, zen::testing::makeSparse(idx, rows, 1, DataType::kInt64, rng),
                      stream);
    }
  }
  ASSERT_CUDA(cudaStreamDestroy(stream));
}

TEST(HashPartitionerGpu, EmptyInput) {
  const IndexMap map(100, 4, 1);
  GpuHashPartitioner gpu(map, {});
  GpuPushLists out;
  SparseView empty;
  empty.numRows = 100;
  empty.device = Device::cuda(0);
  ASSERT_OK(gpu.partition(empty, &out, nullptr));
  EXPECT_EQ(out.offsets, std::vector<int64_t>(5, 0));
}

TEST(HashPartitionerGpu, ReuseAcrossSizesLeavesNoStaleState) {
  std::mt19937_64 rng(testSeed());
  const int64_t rows = 5'000'000;
  const IndexMap map(rows, 8, rng());
  GpuHashPartitioner gpu(map, {});
  for (int64_t nnz : {100'000, 1'000'000, 10'000, 1'000'000}) {
    SCOPED_TRACE(nnz);
    const auto in = zen::testing::makeSparse(zipfIndices(rows, nnz, 1.1, rng), rows, 2,
                                             DataType::kFloat32, rng);
    expectSameAsCpu(&gpu, map, {}, in);
  }
}

TEST(HashPartitionerGpu, OutOfRangeIndexIsReportedAndNothingWritten) {
  std::mt19937_64 rng(testSeed());
  const int64_t rows = 100'000;
  const IndexMap map(rows, 4, rng());
  GpuHashPartitioner gpu(map, {});
  std::vector<int64_t> idx(50'000);
  for (auto& i : idx) i = static_cast<int64_t>(rng() % rows);
  idx[40'000] = -5;
  idx[777] = rows;
  const auto in = zen::testing::makeSparse(idx, rows, 1, DataType::kFloat32, rng);
  DeviceInput d;
  toDevice(in, &d);
  GpuPushLists out;
  out.offsets = {42};
  const Status s = gpu.partition(d.view, &out, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("index 100000 at position 777"), std::string::npos) << s.toString();
  EXPECT_EQ(out.offsets, std::vector<int64_t>{42});

  SparseView onHost = in.view();  // a host tensor is refused before any device access
  EXPECT_EQ(gpu.partition(onHost, &out, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zen::cuda
