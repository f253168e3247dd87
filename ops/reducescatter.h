#pragma once

// Horovod's reducescatter on the CPU (CONVENTIONS.md §3: options struct + free function), for
// one tensor or a fused bucket of them: every tensor is reduced over the ranks and rank p
// keeps piece p of its first dimension, scatterRows(rows, size, p) rows (core/message.h: the
// first rows % size ranks get one row more, as in Horovod).
//
// Steps:
//   1. FUSE: rank p's block of the scratch buffer holds piece p of every tensor, in order
//      (for one tensor that is the input as it is, copied once); a rank without a tensor
//      (joined) contributes the op's identity.
//   2. Transport::reducescatter over the blocks (ring on in-process and TCP,
//      MPI_Reduce_scatter on MPI; 16-bit floats in fp32, rounded once); kAverage is the sum
//      divided by size. size == 1 skips the wire.
//   3. UNFUSE: this rank's block into the outputs.
// Bytes on the wire per rank (the ring): every block but its own, (B - B/n) of a B-byte bucket
// sent to the right neighbour and about as much received from the left (16-bit floats travel
// as fp32: twice that); half an allreduce's 2(n-1)/n·B.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/executor.h"
#include "core/message.h"
#include "core/status.h"
#include "ops/reduce.h"
#include "ops/transport.h"

namespace zen::ops {

// One tensor of the bucket; rows and rowElements are the same on every rank.
struct ReducescatterTensor {
  const void* input = nullptr;  // [rows x rowElements]; null: this rank contributes the identity
  void* output = nullptr;       // this rank's piece of the result; null: not kept
  int64_t rows = 0;
  int64_t rowElements = 1;  // elements per row: the trailing dimensions
};

struct ReducescatterOptions {
  Transport* transport = nullptr;
  std::vector<ReducescatterTensor> tensors;  // the same order on every rank
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kAverage;           // any of the five
  std::vector<std::byte>* scratch = nullptr;  // the fused blocks, grown as needed (null: per call)
  std::vector<ExecPhase>* phases = nullptr;   // optional: FUSE, the wire collective, UNFUSE
};

Status reducescatter(const ReducescatterOptions& options);

// Rank `rank`'s piece of tensor x, in elements of x: scatterRows(rows, size, rank) rows from
// scatterOffset (core/message.h). The CUDA executor's layout (cuda/reducescatter_plan.h)
// splits the same way, so both executors keep the same rows on every rank.
ElementRange scatterPiece(const ReducescatterTensor& x, int size, int rank);

// Per rank p: the elements of its pieces of every tensor, rank p's block of the fused bucket.
std::vector<size_t> scatterBlocks(const std::vector<ReducescatterTensor>& tensors, int size);

}  // namespace zen::ops
