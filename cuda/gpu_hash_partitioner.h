#pragma once

// Algorithm 1 (ALGORITHMS.md §3) on the GPU: the Push partitioner of core/hash_partitioner.h
// for device tensors, with the same IndexMap, hash family, sizing and output.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/hash.h"
#include "core/hash_partitioner.h"
#include "core/index_map.h"
#include "core/push_lists.h"
#include "core/status.h"
#include "core/tensor.h"
#include "cuda/gpu_push_lists.h"
#include "cuda/workspace.h"

namespace zen::cuda {

// Phase times of one partition() call, for benchmarks (CUDA events; stream time).
struct GpuPartitionTimes {
  float claimMs = 0;    // Algorithm 1 proper: the claim pass (last attempt)
  float compactMs = 0;  // layout, spill sort, scatter of rows and duplicate sums
};

class GpuHashPartitioner {
 public:
  GpuHashPartitioner(const IndexMap& map, HashPartitionOptions options);

  // Splits a device COO tensor (indices and values in device memory, indices may repeat)
  // into per-owner lists in `out`: every distinct index once, in the list of its IndexMap
  // owner, with its local position and its rows summed in entry order in the accumulator
  // type (fp32 for fp16/bf16), rounded once — the CPU partitioner's result, bit for bit, as
  // a set (the order inside a list depends on which entry claimed which slot first).
  // Waits for `stream` twice (after the claim, and to copy the counts to out->offsets), each
  // wait at most setWaitTimeout's bound (then kTimeout).
  // An out-of-range index is kInvalidArgument naming the first such entry; `out` is then
  // untouched. `stats` and `times` are optional.
  Status partition(const SparseView& deviceInput,
                   GpuPushLists* out,
                   cudaStream_t stream,
                   PartitionStats* stats = nullptr,
                   GpuPartitionTimes* times = nullptr);

  // The bound on its waits for the stream (Workspace::setWaitTimeout; 30 s unless set).
  void setWaitTimeout(double seconds) { workspace_.setWaitTimeout(seconds); }

  // Claim passes the last call needed: 1, or more after a serial-memory overflow.
  int lastAttempts() const { return lastAttempts_; }
  size_t scratchBytes() const { return workspace_.heldBytes(); }

 private:
  IndexMap map_;
  HashPartitionOptions options_;
  HashFamily hashes_;
  Workspace workspace_;
  int lastAttempts_ = 0;
};

}  // namespace zen::cuda
