// Level-1 placement kernel: one thread per index, grid-stride. The Feistel permutation needs
// no table, so the kernel reads 8 bytes and writes 8 bytes per index.
#include "cuda/index_map_kernels.h"

#include "cuda/cuda_check.h"

namespace zen::cuda {
namespace {

__global__ void placeIndicesKernel(IndexMap map,
                                   const int64_t* indices,
                                   int64_t count,
                                   uint32_t* owners,
                                   uint32_t* positions,
                                   unsigned long long* badIndex) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    const int64_t idx = indices[i];
    if (idx < 0 || static_cast<uint64_t>(idx) >= map.numRows()) {
      atomicMin(badIndex, static_cast<unsigned long long>(i));
      continue;
    }
    const IndexMap::Place place = map.place(static_cast<uint64_t>(idx));
    owners[i] = place.owner;
    positions[i] = static_cast<uint32_t>(place.pos);
  }
}

}  // namespace

Status launchPlaceIndices(const IndexMap& map,
                          const int64_t* indices,
                          int64_t count,
                          uint32_t* owners,
                          uint32_t* positions,
                          unsigned long long* badIndex,
                          cudaStream_t stream) {
  if (count == 0) return Status::ok();
  constexpr int kThreads = 256;
  const int64_t blocks64 = (count + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(blocks64 < 65535 * 8 ? blocks64 : 65535 * 8);
  placeIndicesKernel<<<blocks, kThreads, 0, stream>>>(map, indices, count, owners, positions,
                                                      badIndex);
  ZEN_CHECK_LAUNCH("placeIndicesKernel");
  return Status::ok();
}

}  // namespace zen::cuda
