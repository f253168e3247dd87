// The dense scheme on the GPU (ALGORITHMS.md §6): densify, then ncclAllReduce; the baseline
// every sparse scheme is measured against.
//
// Steps on rank r of n:
//   1. densify locally: the input's rows (repeats summed in fp32 for 16-bit floats, through a
//      one-part GpuAggregator) decoded into a zeroed [numRows x rowSize] buffer of the dtype:
//      the dense output itself, or workspace memory for a sparse output.
//   2. ncclAllReduce in place: Sum, or Average (ncclAvg for floats; integers summed, then
//      divided with truncation). fp16 / bf16 are summed natively by NCCL. Bounded wait.
//   3. sparse output: the rows with a non-zero element (GpuNonzeroExtractor), ascending — not
//      the union of the rows sent, which a dense sum no longer knows.
// Bytes on the wire per rank (M = numRows x rowSize x dtype bytes): a ring's 2 (n - 1) / n M
// sent and received (NCCL picks ring or tree; the counters report the ring's bytes).
#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/gpu_sparse_allreduce_internal.h"

namespace zen::cuda {

Status gpuSparseAllreduceDense(const GpuSchemeCall& c, GpuSparseAllreduceResult* result) {
  const GpuSparseAllreduceOptions& o = *c.options;
  NcclComm& comm = *o.comm;
  auto& st = *c.state;
  const SparseView& in = c.input;
  const cudaStream_t stream = o.stream;
  GpuPhaseClock clock(&result->stats);

  DenseView dense = c.denseOut;
  if (!o.denseOutput) {
    dense.dtype = in.dtype;
    dense.shape = TensorShape({in.numRows, in.rowSize});
    dense.device = in.device;
    ZEN_RETURN_IF_ERROR(st.denseScratch.reserve(std::max<size_t>(dense.bytes(), 1)));
    dense.data = st.denseScratch.data();
  }
  GpuSchemeCall densify = c;
  densify.denseOut = dense;
  GpuSparseAllreduceOptions denseOptions = o;
  denseOptions.denseOutput = true;
  densify.options = &denseOptions;
  ZEN_RETURN_IF_ERROR(aggregateWhole({in}, st, stream));
  ZEN_RETURN_IF_ERROR(decodeWhole(densify, 1.0, result));
  clock.mark("densify");

  const size_t count = static_cast<size_t>(in.numRows) * static_cast<size_t>(in.rowSize);
  ZEN_RETURN_IF_ERROR(comm.allreduce(dense.data, count, in.dtype, o.op, stream));
  ZEN_RETURN_IF_ERROR(comm.wait(stream, "dense allreduce"));
  clock.mark("allreduce");

  if (o.denseOutput) {
    result->stats.outputNnz = in.numRows;
    return Status::ok();
  }
  ZEN_RETURN_IF_ERROR(st.extractor.extract(dense, &result->sparse, stream));
  result->stats.outputNnz = result->sparse.nnz;
  clock.mark("extract");
  return Status::ok();
}

}  // namespace zen::cuda
