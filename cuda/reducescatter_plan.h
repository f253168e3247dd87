#pragma once

// A reducescatter bucket on the device (cuda/cuda_executor.h), in plain C++ (no CUDA headers)
// so that test/cuda_host checks it on any machine. Rank p keeps piece p of every tensor's
// first dimension, scatterRows(rows, n, p) rows (Horovod's split, core/message.h).
//
// Layout: a staging buffer of n blocks of blockElements; block p holds piece p of every
// tensor in tensor order (the CPU executor's blocks, ops/reducescatter.h), then padding up to
// the largest block. One ncclReduceScatter over it leaves this rank's block reduced in place.
//
// Why padding and not a grouped ncclReduce of piece p to root p (the other way to serve
// uneven pieces): ncclReduceScatter is one collective, NCCL's ring, (n - 1) / n of the buffer
// per rank; n rooted reduces are n collectives in a group, each with its own pipeline fill, a
// latency that grows with n. Pieces differ by at most one row, so the padding is at most one
// row per tensor per block; it travels (and is counted as sent) but is never read back.
//
// A bucket of one tensor this rank posted, whose rows divide evenly, needs no staging: NCCL
// reads the input and writes this rank's piece straight into the output (`direct`). Its blocks
// are then the input's pieces, so a joined rank, which stages the identity, still agrees.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/message.h"
#include "core/status.h"
#include "core/tensor_queue.h"
#include "cuda/device_bucket.h"
#include "ops/reducescatter.h"

namespace zen::cuda {

struct ReducescatterPlan {
  // Per tensor: its rows and elements per row (the CPU executor's description, whose
  // ops::scatterPiece this layout splits by); input and output as posted here.
  std::vector<ops::ReducescatterTensor> tensors;
  std::vector<size_t> used;  // per rank: elements of its pieces in its block
  size_t blockElements = 0;  // the largest block: what every rank reduces
  bool direct = false;
};

// kInvalidArgument when the shapes do not match the tensors or a tensor has no first
// dimension, with the CPU executor's message (ops::checkReducescatter, ops/exchange_checks.h).
Result<ReducescatterPlan> planReducescatter(const Response& response,
                                            const std::vector<TensorEntry*>& entries,
                                            int ranks);

// The copies around the collective for rank `rank` (not for a direct plan): `in`, every
// present tensor's pieces into their blocks of `staging`; `zeros`, the slots of the tensors it
// did not post (joined), to fill with the op's identity; `out`, its own block's pieces into
// the outputs.
DenseFusionCopies reducescatterCopies(const ReducescatterPlan& plan,
                                      const Response& response,
                                      const std::vector<TensorEntry*>& entries,
                                      int rank,
                                      void* staging);

}  // namespace zen::cuda
