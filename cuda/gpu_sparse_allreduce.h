#pragma once

// One sparse allreduce over device tensors and an NcclComm: the GPU twin of
// ops/sparse_allreduce.h (CONVENTIONS.md §3: options struct + free function, one dispatcher,
// one scheme per file: gpu_sparse_allreduce_{zen,hc,agsparse,blocks,dense}.cc).
//
// Contract:
// - Input: a device COO tensor (indices int64 [nnz], values [nnz x rowSize], device memory on
//   comm->deviceIndex(), indices may repeat: summed) OR a dense device tensor
//   [numRows x rowSize] whose non-zero rows are extracted first (GpuNonzeroExtractor). Every
//   rank passes the same numRows, rowSize, dtype, op, scheme and seed (checked: a mismatch
//   or an out-of-range index on any rank is the same kInvalidArgument on every rank).
// - Stream: all work runs on options.stream. The input must be ready in that stream's order
//   (the caller makes the stream wait on the framework's ready event); the input is only read.
// - Synchronization: the call synchronizes the stream several times (counts and sizes come
//   back to the host), each NCCL step with NcclComm::wait's bounded deadline. When it returns
//   OK, the outputs are complete: no further synchronization is needed. On an error the
//   outputs are unspecified; an NCCL error or timeout aborts the comm (see nccl_comm.h), and
//   so does a timeout of a kernel's own bounded wait for the stream (cuda/stream_wait.h:
//   every wait is bounded by comm->timeoutSeconds()).
// - Outputs are owned by the result object (device buffers grown, never shrunk, so a result
//   kept across steps does not reallocate), unless options.denseOutputView is set: then the
//   dense result is written there (every element overwritten) and result->dense is unused.
// - Workspace: optional, one per calling thread/stream, reused across calls (Algorithm 1's
//   tables, the aggregator, receive buffers; sized from nnz, ALGORITHMS.md §3). Null: scratch
//   memory is allocated per call.
// - No size == 1 short-circuit: one rank runs the full scheme (NCCL to itself), which is
//   what the single-GPU device tests exercise. The call returns early only when no rank has
//   a non-zero (outputs: zeros / empty).
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "core/config.h"
#include "core/message.h"
#include "core/status.h"
#include "core/tensor.h"
#include "cuda/device_buffer.h"
#include "cuda/gpu_sparse.h"
#include "cuda/nccl_comm.h"
#include "ops/sparse_allreduce.h"

namespace zen::cuda {

// Device memory the GPU schemes keep between calls; rebuilt when the shape, the world or the
// settings change. Not locked: one per calling thread.
class GpuSparseAllreduceWorkspace {
 public:
  GpuSparseAllreduceWorkspace();
  ~GpuSparseAllreduceWorkspace();
  GpuSparseAllreduceWorkspace(const GpuSparseAllreduceWorkspace&) = delete;
  GpuSparseAllreduceWorkspace& operator=(const GpuSparseAllreduceWorkspace&) = delete;

  struct State;  // defined in gpu_sparse_allreduce.cc
  State& state();
  // Device memory held (scratch, receive buffers, tables).
  size_t heldBytes() const;

 private:
  std::unique_ptr<State> state_;
};

struct GpuSparseAllreduceOptions {
  NcclComm* comm = nullptr;
  // Exactly one of the two inputs: a device COO tensor (input.indices non-null or nnz == 0
  // with numRows set), or a dense device tensor (denseInput.data non-null) to extract from.
  SparseView input;
  DenseView denseInput;
  ReduceOp op = ReduceOp::kSum;
  Scheme scheme = Scheme::kZen;  // kAuto: zen
  bool denseOutput = false;      // fill the dense output instead of result->sparse
  DenseView denseOutputView;     // optional destination of the dense output (device memory)
  // The zen scheme's IndexMap seed (equal on every rank, checked) and Algorithm 1's
  // level-2 settings (local).
  uint64_t seed = 0x5eed2e2ULL;
  int hashFunctions = 3;
  double memoryFactor = 1.5;
  cudaStream_t stream = nullptr;
  GpuSparseAllreduceWorkspace* workspace = nullptr;
};

struct GpuSparseAllreduceResult {
  // Sparse output (denseOutput false), device memory: each row of the result once, UNSORTED
  // (zen: in (owner part, local position) order; agsparse, hc: the order of a one-part
  // IndexMap's permutation; dense and blocks schemes: ascending). Which rows: like the CPU schemes
  // — the union of the rows any rank sent (zen, agsparse; a row whose sum is zero is kept), the
  // non-zero rows (dense scheme). sparse.nnz is the row count; the buffers may be larger.
  GpuSparse sparse;
  // Dense output [numRows x rowSize] of the dtype (denseOutput true and no
  // denseOutputView): device memory.
  DeviceBuffer dense;
  // Timing (host wall clock of each phase, including its waits), bytes from comm->counters(),
  // imbalance (zen: push side), outputNnz.
  ops::SyncStats stats;
};

// Validates locally, exchanges a small call summary through NCCL (ncclAllGather, 128 bytes per
// rank) so every rank agrees on the arguments and on errors, short-circuits when no rank has a
// non-zero, resolves kAuto, then runs the scheme.
Status gpuSparseAllreduce(const GpuSparseAllreduceOptions& options,
                          GpuSparseAllreduceResult* result);

}  // namespace zen::cuda
