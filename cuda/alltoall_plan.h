#pragma once

// Where an alltoall's rows go on the device (cuda/cuda_executor.h), in plain C++ (no CUDA
// headers) so that test/cuda_host checks it on any machine. Response::splits[s * n + d] is
// what rank s sends rank d, the same matrix on every rank: this rank's row cuts its input
// into send segments, its column places what arrives in one output, rank 0's rows first (the
// CPU executor's concatenation, ops/alltoall.h). No staging: every segment is one range of
// the input or of the output, which NcclComm::alltoallv reads and writes directly.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/message.h"
#include "core/status.h"
#include "core/tensor_queue.h"

namespace zen::cuda {

struct AlltoallPlan {
  size_t rowBytes = 0;                  // one first-dimension row: trailing dims x dtype size
  std::vector<size_t> sendOffset;       // per rank, plus the end: byte offsets into the input
  std::vector<size_t> recvOffset;       // per rank, plus the end (the output's size)
  std::vector<int64_t> receivedSplits;  // rows from each rank (OpResult::receivedSplits)
  TensorShape outputShape;              // [sum of receivedSplits, trailing dims...]
};

// kInvalidArgument, with the CPU executor's message, for a plan the CPU executor refuses
// (ops::checkAlltoall, ops/exchange_checks.h).
Result<AlltoallPlan> planAlltoall(const Response& response,
                                  const std::vector<TensorEntry*>& entries,
                                  int ranks,
                                  int rank);

}  // namespace zen::cuda
