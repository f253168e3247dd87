// Batched device copies and index shifts of the CUDA executor (cuda/batched_copy.h).
// Memory traffic: each copied byte read once and written once; zero fills written once.
#include <cstdint>

#include "cuda/batched_copy.h"
#include "cuda/cuda_check.h"
#include "cuda/gpu_plan.h"

namespace zen::cuda {
namespace {

struct CopyBatch {
  const void* src[kMaxCopiesPerLaunch];
  void* dst[kMaxCopiesPerLaunch];
  size_t bytes[kMaxCopiesPerLaunch];
};
static_assert(sizeof(CopyBatch) <= 4096, "a kernel argument of at most 4 KiB");

// blockIdx.y = the copy; the blocks along x stride over its bytes.
__global__ void batchedCopyKernel(CopyBatch batch) {
  const int j = static_cast<int>(blockIdx.y);
  const auto* src = static_cast<const uint8_t*>(batch.src[j]);
  auto* dst = static_cast<uint8_t*>(batch.dst[j]);
  const size_t bytes = batch.bytes[j];
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool wide =
      ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) | bytes) & 15u) == 0;
  if (wide) {
    const size_t units = bytes / 16;
    const auto* s = reinterpret_cast<const uint4*>(src);
    auto* d = reinterpret_cast<uint4*>(dst);
    for (size_t k = first; k < units; k += stride) d[k] = src ? s[k] : make_uint4(0, 0, 0, 0);
    return;
  }
  for (size_t k = first; k < bytes; k += stride) dst[k] = src ? src[k] : uint8_t{0};
}

__global__ void offsetIndicesKernel(
    const int64_t* src, int64_t* dst, int64_t n, int64_t offset, int64_t rows) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride) {
    const int64_t v = src[k];
    dst[k] = v >= 0 && v < rows ? v + offset : -1;
  }
}

}  // namespace

Status batchedCopy(const std::vector<CopyJob>& jobs, cudaStream_t stream) {
  for (const std::vector<CopyJob>& launch : batchCopies(jobs)) {
    CopyBatch batch{};
    size_t largest = 0;
    for (size_t j = 0; j < launch.size(); ++j) {
      batch.src[j] = launch[j].src;
      batch.dst[j] = launch[j].dst;
      batch.bytes[j] = launch[j].bytes;
      largest = std::max(largest, launch[j].bytes);
    }
    // Enough blocks per copy for its largest member, in 16-byte units, capped.
    const int blocks = gridBlocks(static_cast<int64_t>((largest + 15) / 16), kBlockThreads, 0);
    const dim3 grid(static_cast<unsigned>(std::min(blocks, 1024)),
                    static_cast<unsigned>(launch.size()));
    batchedCopyKernel<<<grid, kBlockThreads, 0, stream>>>(batch);
    ZEN_CHECK_LAUNCH("batchedCopyKernel");
  }
  return Status::ok();
}

Status offsetIndices(const int64_t* src,
                     int64_t* dst,
                     int64_t n,
                     int64_t offset,
                     int64_t rows,
                     cudaStream_t stream) {
  if (n <= 0) return Status::ok();
  offsetIndicesKernel<<<gridBlocks(n, kBlockThreads, 0), kBlockThreads, 0, stream>>>(src, dst, n,
                                                                                     offset, rows);
  ZEN_CHECK_LAUNCH("offsetIndicesKernel");
  return Status::ok();
}

}  // namespace zen::cuda
