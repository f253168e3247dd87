#pragma once

// The host-only checks of an alltoall's and a reducescatter's plan (Response), dtype-agnostic,
// shared by the CPU executor (ops/cpu_executor.h) and the CUDA executor's layouts
// (cuda/alltoall_plan.h, cuda/reducescatter_plan.h): a plan either executor cannot run fails
// the same way, with the same message, before any rank touches a peer. The plan is the same
// on every rank, so every rank fails it and none waits.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/message.h"
#include "core/status.h"
#include "core/tensor_queue.h"
#include "ops/reducescatter.h"

namespace zen::ops {

// This rank's part of an alltoall plan: Response::splits[s * n + d] is what rank s sends rank
// d, so its row is what it sends and its column what it receives, rank 0's rows first.
struct AlltoallRows {
  std::vector<int64_t> sendRows;  // to each rank; they add up to the input's first dimension
  std::vector<int64_t> recvRows;  // from each rank (OpResult::receivedSplits)
  size_t rowBytes = 0;            // one first-dimension row: trailing dims x dtype size
  TensorShape outputShape;        // [sum of recvRows, trailing dims...]
};

// kInvalidArgument when the bucket is not one tensor this rank posted (negotiation never fuses
// an alltoall and refuses one while a rank has joined), the splits are not ranks x ranks or
// hold a negative count, the tensor has no first dimension, or this rank's splits do not add
// up to its input's first dimension.
Result<AlltoallRows> checkAlltoall(const Response& response,
                                   const std::vector<TensorEntry*>& entries,
                                   int ranks,
                                   int rank);

// The bucket's tensors as ops::reducescatter takes them: rows and rowElements from the plan,
// input and output those posted here (null for a tensor this rank did not post: joined).
// kInvalidArgument when the entries do not match the shapes or a tensor has no first
// dimension.
Result<std::vector<ReducescatterTensor>> checkReducescatter(
    const Response& response, const std::vector<TensorEntry*>& entries);

}  // namespace zen::ops
