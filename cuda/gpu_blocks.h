#pragma once

// The blocks scheme's kernels (cuda/blocks_steps.h over a grid), in the order
// gpu_sparse_allreduce_blocks.cc launches them. All asynchronous on `stream`; counts and
// geometry are host numbers, arrays device memory, the layouts blocks_steps.h's.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "cuda/blocks_steps.h"

namespace zen::cuda {

// Bytes of one accumulator element of dtype (fp32 for 16-bit floats, fp64, int64).
size_t blocksAccumulatorBytes(DataType dtype);

// flags[block of entry e] = 1 for e < nnz (flags zeroed before).
Status launchBlocksMark(const blocks::Geometry& g,
                        const int64_t* indices,
                        int64_t nnz,
                        int64_t* flags,
                        cudaStream_t stream);
// out[p] = slots[g.firstBlock(p)] for p <= g.ranks: each owner's first push slot, the total last.
Status launchBlocksOwnerSlots(const blocks::Geometry& g,
                              const int64_t* slots,
                              int64_t* out,
                              cudaStream_t stream);
// This rank's `blocks` push blocks: acc (blocks x R x rowSize accumulators) and masks zeroed
// here, entries summed in, rounded once into rows; ids written.
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
                        cudaStream_t stream);
// Checks a received list of `count` blocks (ids in [lo, hi), ascending, masks valid); the
// smallest bad base + k lands in *bad (all ones before).
Status launchBlocksCheck(const blocks::Geometry& g,
                         const uint32_t* ids,
                         const uint32_t* masks,
                         int64_t count,
                         int64_t lo,
                         int64_t hi,
                         unsigned long long base,
                         unsigned long long* bad,
                         cudaStream_t stream);
// One peer's checked push list into the owner's accumulators and seen rows.
Status launchBlocksAdd(const blocks::Geometry& g,
                       DataType dtype,
                       int64_t firstRow,
                       const uint32_t* ids,
                       const uint32_t* masks,
                       const void* rows,
                       int64_t count,
                       void* acc,
                       uint8_t* seen,
                       cudaStream_t stream);
// flags[j] = 1 for the owner's blocks with a seen row (flags zeroed before).
Status launchBlocksOwnFlags(const blocks::Geometry& g,
                            int64_t first,
                            int64_t firstRow,
                            const uint8_t* seen,
                            int64_t ownBlocks,
                            int64_t* flags,
                            cudaStream_t stream);
// The owner's pull list (masks zeroed here; `count` flagged blocks).
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
                        cudaStream_t stream);
// Checked pull lists (every owner's, concatenated) into a dense output zeroed before.
Status launchBlocksDecodeDense(const blocks::Geometry& g,
                               DataType dtype,
                               const uint32_t* ids,
                               const uint32_t* masks,
                               const void* rows,
                               int64_t count,
                               void* out,
                               cudaStream_t stream);
// counts[k] = present rows of block k < count.
Status launchBlocksRowCounts(const blocks::Geometry& g,
                             const uint32_t* masks,
                             int64_t count,
                             int64_t* counts,
                             cudaStream_t stream);
// Checked pull lists into (index, row) pairs at offsets (exclusive scan of the counts).
Status launchBlocksDecodeSparse(const blocks::Geometry& g,
                                DataType dtype,
                                const uint32_t* ids,
                                const uint32_t* masks,
                                const void* rows,
                                const int64_t* offsets,
                                int64_t count,
                                int64_t* outIndices,
                                void* outValues,
                                cudaStream_t stream);

}  // namespace zen::cuda
