// The blocks scheme's kernels (cuda/gpu_blocks.h): grid-stride loops over the per-thread
// steps of cuda/blocks_steps.h, which test/cuda_host runs on the CPU.
//
// Memory traffic per item: push reads one input element and does one atomic add into the
// block's accumulators (plus one mask atomicOr per entry), then one read and one write per
// block element to round; the owner reads each received block element once (a mask word
// and a read-modify-write of the accumulator when present); the pull reads one accumulator
// element and writes one row element per own block element; decode reads one block element
// and writes it when present.
#include "cuda/gpu_blocks.h"

#include "cuda/cuda_check.h"
#include "cuda/device_util.cuh"

namespace zen::cuda {
namespace {

// Launches kernel(args...) over `items` grid-stride work items (nothing for none) and checks
// the launch; `what` names it in the error.
template <typename... Params, typename... Args>
Status launchItems(
    const char* what, int64_t items, cudaStream_t stream, void (*kernel)(Params...), Args... args) {
  if (items <= 0) return Status::ok();
  kernel<<<gridBlocks(items, kBlockThreads, -1), kBlockThreads, 0, stream>>>(args...);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cudaErrorStatus(err, what, __FILE__, __LINE__);
  return Status::ok();
}

__global__ void markKernel(blocks::Geometry g,
                           const int64_t* indices,
                           int64_t nnz,
                           int64_t* flags) {
  for (int64_t e = globalThread(); e < nnz; e += gridThreads())
    blocks::markEntry(g, indices, e, flags);
}

__global__ void ownerSlotsKernel(blocks::Geometry g, const int64_t* slots, int64_t* out) {
  for (int64_t p = globalThread(); p <= g.ranks; p += gridThreads())
    out[p] = slots[g.firstBlock(static_cast<int>(p))];
}

template <typename T, typename A>
__global__ void pushKernel(blocks::Geometry g,
                           const int64_t* indices,
                           const T* values,
                           int64_t items,
                           const int64_t* slots,
                           A* acc,
                           uint32_t* masks,
                           uint32_t* ids) {
  for (int64_t i = globalThread(); i < items; i += gridThreads())
    blocks::pushEntryItem(g, indices, values, slots, i, acc, masks, ids);
}

template <typename T, typename A>
__global__ void roundKernel(const A* acc, int64_t items, T* rows) {
  for (int64_t i = globalThread(); i < items; i += gridThreads())
    blocks::roundPushItem(acc, i, rows);
}

__global__ void checkKernel(blocks::Geometry g,
                            const uint32_t* ids,
                            const uint32_t* masks,
                            int64_t count,
                            int64_t lo,
                            int64_t hi,
                            unsigned long long base,
                            unsigned long long* bad) {
  for (int64_t k = globalThread(); k < count; k += gridThreads())
    blocks::checkBlock(g, ids, masks, k, lo, hi, base, bad);
}

template <typename T, typename A>
__global__ void addKernel(blocks::Geometry g,
                          int64_t firstRow,
                          const uint32_t* ids,
                          const uint32_t* masks,
                          const T* rows,
                          int64_t items,
                          A* acc,
                          uint8_t* seen) {
  for (int64_t i = globalThread(); i < items; i += gridThreads())
    blocks::addItem(g, firstRow, ids, masks, rows, i, acc, seen);
}

__global__ void ownFlagsKernel(blocks::Geometry g,
                               int64_t first,
                               int64_t firstRow,
                               const uint8_t* seen,
                               int64_t ownBlocks,
                               int64_t* flags) {
  for (int64_t j = globalThread(); j < ownBlocks; j += gridThreads())
    blocks::ownBlockFlag(g, first, firstRow, seen, j, flags);
}

template <typename T, typename A>
__global__ void pullKernel(blocks::Geometry g,
                           int64_t first,
                           int64_t firstRow,
                           const int64_t* flags,
                           const int64_t* slots,
                           const A* acc,
                           const uint8_t* seen,
                           int divisor,
                           int64_t items,
                           uint32_t* ids,
                           uint32_t* masks,
                           T* rows) {
  for (int64_t i = globalThread(); i < items; i += gridThreads())
    blocks::pullItem(g, first, firstRow, flags, slots, acc, seen, divisor, i, ids, masks, rows);
}

template <typename T>
__global__ void decodeDenseKernel(blocks::Geometry g,
                                  const uint32_t* ids,
                                  const uint32_t* masks,
                                  const T* rows,
                                  int64_t items,
                                  T* out) {
  for (int64_t i = globalThread(); i < items; i += gridThreads())
    blocks::decodeDenseItem(g, ids, masks, rows, i, out);
}

__global__ void rowCountsKernel(blocks::Geometry g,
                                const uint32_t* masks,
                                int64_t count,
                                int64_t* counts) {
  for (int64_t k = globalThread(); k < count; k += gridThreads())
    blocks::blockRowCount(g, masks, k, counts);
}

template <typename T>
__global__ void decodeSparseKernel(blocks::Geometry g,
                                   const uint32_t* ids,
                                   const uint32_t* masks,
                                   const T* rows,
                                   const int64_t* offsets,
                                   int64_t items,
                                   int64_t* outIndices,
                                   T* outValues) {
  for (int64_t i = globalThread(); i < items; i += gridThreads())
    blocks::decodeSparseItem(g, ids, masks, rows, offsets, i, outIndices, outValues);
}

}  // namespace

size_t blocksAccumulatorBytes(DataType dtype) {
  return dispatchDataType(dtype, [](auto tag) { return sizeof(AccumulatorT<decltype(tag)>); });
}

Status launchBlocksMark(const blocks::Geometry& g,
                        const int64_t* indices,
                        int64_t nnz,
                        int64_t* flags,
                        cudaStream_t stream) {
  return launchItems("blocks markKernel", nnz, stream, markKernel, g, indices, nnz, flags);
}

Status launchBlocksOwnerSlots(const blocks::Geometry& g,
                              const int64_t* slots,
                              int64_t* out,
                              cudaStream_t stream) {
  return launchItems("blocks ownerSlotsKernel", g.ranks + 1, stream, ownerSlotsKernel, g, slots,
                     out);
}

Status launchBlocksPush(const blocks::Geometry& g,
                        DataType dtype,
                        const int64_t* indices,
                        const void* values,
                        int64_t nnz,
                        const int64_t* slots,
                        int64_t blocks,
                        void* acc,
                        uint32_t* masks,
                        uint32_t* ids,
                        void* rows,
                        cudaStream_t stream) {
  if (blocks == 0) return Status::ok();
  const int64_t blockItems = blocks * g.blockElements();
  ZEN_CHECK_CUDA(cudaMemsetAsync(
      acc, 0, static_cast<size_t>(blockItems) * blocksAccumulatorBytes(dtype), stream));
  ZEN_CHECK_CUDA(cudaMemsetAsync(masks, 0, static_cast<size_t>(blocks * g.maskWords) * 4, stream));
  return dispatchDataType(dtype, [&](auto tag) -> Status {
    using T = decltype(tag);
    using A = AccumulatorT<T>;
    const int64_t entryItems = nnz * g.rowSize;
    ZEN_RETURN_IF_ERROR(launchItems("blocks pushKernel", entryItems, stream, pushKernel<T, A>, g,
                                    indices, static_cast<const T*>(values), entryItems, slots,
                                    static_cast<A*>(acc), masks, ids));
    return launchItems("blocks roundKernel", blockItems, stream, roundKernel<T, A>,
                       static_cast<const A*>(acc), blockItems, static_cast<T*>(rows));
  });
}

Status launchBlocksCheck(const blocks::Geometry& g,
                         const uint32_t* ids,
                         const uint32_t* masks,
                         int64_t count,
                         int64_t lo,
                         int64_t hi,
                         unsigned long long base,
                         unsigned long long* bad,
                         cudaStream_t stream) {
  return launchItems("blocks checkKernel", count, stream, checkKernel, g, ids, masks, count, lo, hi,
                     base, bad);
}

Status launchBlocksAdd(const blocks::Geometry& g,
                       DataType dtype,
                       int64_t firstRow,
                       const uint32_t* ids,
                       const uint32_t* masks,
                       const void* rows,
                       int64_t count,
                       void* acc,
                       uint8_t* seen,
                       cudaStream_t stream) {
  const int64_t items = count * g.blockElements();
  if (items == 0) return Status::ok();
  return dispatchDataType(dtype, [&](auto tag) -> Status {
    using T = decltype(tag);
    using A = AccumulatorT<T>;
    return launchItems("blocks addKernel", items, stream, addKernel<T, A>, g, firstRow, ids, masks,
                       static_cast<const T*>(rows), items, static_cast<A*>(acc), seen);
  });
}

Status launchBlocksOwnFlags(const blocks::Geometry& g,
                            int64_t first,
                            int64_t firstRow,
                            const uint8_t* seen,
                            int64_t ownBlocks,
                            int64_t* flags,
                            cudaStream_t stream) {
  return launchItems("blocks ownFlagsKernel", ownBlocks, stream, ownFlagsKernel, g, first, firstRow,
                     seen, ownBlocks, flags);
}

Status launchBlocksPull(const blocks::Geometry& g,
                        DataType dtype,
                        int64_t first,
                        int64_t firstRow,
                        const int64_t* flags,
                        const int64_t* slots,
                        const void* acc,
                        const uint8_t* seen,
                        int divisor,
                        int64_t ownBlocks,
                        int64_t count,
                        uint32_t* ids,
                        uint32_t* masks,
                        void* rows,
                        cudaStream_t stream) {
  if (count == 0) return Status::ok();
  ZEN_CHECK_CUDA(cudaMemsetAsync(masks, 0, static_cast<size_t>(count * g.maskWords) * 4, stream));
  const int64_t items = ownBlocks * g.blockElements();
  return dispatchDataType(dtype, [&](auto tag) -> Status {
    using T = decltype(tag);
    using A = AccumulatorT<T>;
    return launchItems("blocks pullKernel", items, stream, pullKernel<T, A>, g, first, firstRow,
                       flags, slots, static_cast<const A*>(acc), seen, divisor, items, ids, masks,
                       static_cast<T*>(rows));
  });
}

Status launchBlocksDecodeDense(const blocks::Geometry& g,
                               DataType dtype,
                               const uint32_t* ids,
                               const uint32_t* masks,
                               const void* rows,
                               int64_t count,
                               void* out,
                               cudaStream_t stream) {
  const int64_t items = count * g.blockElements();
  if (items == 0) return Status::ok();
  return dispatchDataType(dtype, [&](auto tag) -> Status {
    using T = decltype(tag);
    return launchItems("blocks decodeDenseKernel", items, stream, decodeDenseKernel<T>, g, ids,
                       masks, static_cast<const T*>(rows), items, static_cast<T*>(out));
  });
}

Status launchBlocksRowCounts(const blocks::Geometry& g,
                             const uint32_t* masks,
                             int64_t count,
                             int64_t* counts,
                             cudaStream_t stream) {
  return launchItems("blocks rowCountsKernel", count, stream, rowCountsKernel, g, masks, count,
                     counts);
}

Status launchBlocksDecodeSparse(const blocks::Geometry& g,
                                DataType dtype,
                                const uint32_t* ids,
                                const uint32_t* masks,
                                const void* rows,
                                const int64_t* offsets,
                                int64_t count,
                                int64_t* outIndices,
                                void* outValues,
                                cudaStream_t stream) {
  const int64_t items = count * g.blockElements();
  if (items == 0) return Status::ok();
  return dispatchDataType(dtype, [&](auto tag) -> Status {
    using T = decltype(tag);
    return launchItems("blocks decodeSparseKernel", items, stream, decodeSparseKernel<T>, g, ids,
                       masks, static_cast<const T*>(rows), offsets, items, outIndices,
                       static_cast<T*>(outValues));
  });
}

}  // namespace zen::cuda
