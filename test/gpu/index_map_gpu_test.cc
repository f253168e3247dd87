// GPU test (device only, run by tools/gpu-check, never by CTest on a CPU machine): the
// placement kernel must agree with the CPU's IndexMap on fresh random indices, and report
// an out-of-range index instead of writing it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cuda/index_map_kernels.h"
#include "test/gpu/gpu_test_util.h"

namespace zen::cuda {
namespace {

TEST(IndexMapGpu, PlacementMatchesTheCpu) {
  std::mt19937_64 rng(testing::testSeed());
  const int64_t rows = 214'000'000;
  const int64_t count = 1 << 22;
  const IndexMap map(rows, 16, rng());
  std::vector<int64_t> indices(count);
  for (auto& i : indices) i = static_cast<int64_t>(rng() % rows);
  int64_t* dIndices = nullptr;
  uint32_t* dOwners = nullptr;
  uint32_t* dPositions = nullptr;
  unsigned long long* dBad = nullptr;
  ASSERT_CUDA(cudaMalloc(&dIndices, count * sizeof(int64_t)));
  ASSERT_CUDA(cudaMalloc(&dOwners, count * sizeof(uint32_t)));
  ASSERT_CUDA(cudaMalloc(&dPositions, count * sizeof(uint32_t)));
  ASSERT_CUDA(cudaMalloc(&dBad, sizeof(unsigned long long)));
  ASSERT_CUDA(
      cudaMemcpy(dIndices, indices.data(), count * sizeof(int64_t), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(dOwners, 0xff, count * sizeof(uint32_t)));  // poisoned outputs
  ASSERT_CUDA(cudaMemset(dPositions, 0xff, count * sizeof(uint32_t)));
  ASSERT_CUDA(cudaMemset(dBad, 0xff, sizeof(unsigned long long)));
  const Status s = launchPlaceIndices(map, dIndices, count, dOwners, dPositions, dBad, nullptr);
  ASSERT_TRUE(s.isOk()) << s.toString();
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<uint32_t> owners(count), positions(count);
  unsigned long long bad = 0;
  ASSERT_CUDA(cudaMemcpy(owners.data(), dOwners, count * 4, cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(positions.data(), dPositions, count * 4, cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(&bad, dBad, sizeof(bad), cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad, ~0ull);
  int64_t mismatches = 0;
  int64_t first = -1;
  for (int64_t i = 0; i < count; ++i) {
    const auto place = map.place(indices[i]);
    const bool differs = place.owner != owners[i] || place.pos != positions[i];
    if (differs && first < 0) first = i;
    mismatches += differs;
  }
  EXPECT_EQ(mismatches, 0) << "first at entry " << first << " (index "
                           << (first < 0 ? 0 : indices[first]) << ")";
  indices[12345] = rows;  // out of range
  ASSERT_CUDA(
      cudaMemcpy(dIndices, indices.data(), count * sizeof(int64_t), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(dBad, 0xff, sizeof(unsigned long long)));
  ASSERT_TRUE(launchPlaceIndices(map, dIndices, count, dOwners, dPositions, dBad, nullptr).isOk());
  ASSERT_CUDA(cudaDeviceSynchronize());
  ASSERT_CUDA(cudaMemcpy(&bad, dBad, sizeof(bad), cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad, 12345ull);
  cudaFree(dIndices);
  cudaFree(dOwners);
  cudaFree(dPositions);
  cudaFree(dBad);
}

}  // namespace
}  // namespace zen::cuda
