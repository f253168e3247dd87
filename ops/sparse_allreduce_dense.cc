// The dense scheme (ALGORITHMS.md §6): densify, then the transport's dense allreduce; the
// baseline every sparse scheme is measured against.
//
// Steps on rank r of n:
//   1. densify the input locally: repeated indices summed in the accumulator type (fp32 for
//      16-bit floats), rounded once into a zeroed [numRows x rowSize] buffer of the dtype.
//   2. transport allreduce (Sum; every rank gets the same bits), then divide by n for Average.
//   3. sparse output: the rows with a non-zero element (core/nonzero.h), not the union of the
//      rows sent, which a dense sum no longer knows.
// Bytes on the wire per rank (M = numRows x rowSize x dtype bytes; 16-bit floats travel as
// fp32 on the message backends, so 2M there): the ring's 2 (n - 1) / n M sent and received
// (core/traffic_model.h's denseAllreduceTraffic).
#include "core/nonzero.h"
#include "ops/sparse_allreduce.h"
#include "ops/sparse_rows.h"

namespace zen::ops {

Status sparseAllreduceDense(const SparseAllreduceOptions& o, SparseAllreduceResult* result) {
  Transport& t = *o.transport;
  const SparseView& in = o.input;
  auto last = Clock::now();
  auto mark = [&](const char* phase) {
    const auto now = Clock::now();
    result->stats.phases.emplace_back(phase, std::chrono::duration<double>(now - last).count());
    last = now;
  };

  SparseTensor coalesced;
  ZEN_RETURN_IF_ERROR(coalesceRows({in}, 1, &coalesced, coalesceScratch(o)));
  const DenseRows dense = denseOutputRows(o, result);
  scatterToDense(coalesced, dense, o.pool);
  mark("densify");

  // One allreduce per output tensor (one, unless a fused bucket's tensors are written in place).
  for (const DensePiece& piece : dense.pieces()) {
    if (piece.rows == 0) continue;
    const size_t count = static_cast<size_t>(piece.rows) * static_cast<size_t>(in.rowSize);
    ZEN_RETURN_IF_ERROR(t.allreduce(piece.data, count, in.dtype));
    divideInPlace(piece.data, count, in.dtype, o.op == ReduceOp::kAverage ? t.size() : 1);
  }
  mark("allreduce");

  if (o.denseOutput) {
    result->sparse = emptyLike(in);
    result->stats.outputNnz = in.numRows;
    return Status::ok();
  }
  DenseView view;  // one block: the tensors are only for a dense output
  view.data = result->dense.data();
  view.dtype = in.dtype;
  view.shape = TensorShape({in.numRows, in.rowSize});
  ZEN_RETURN_IF_ERROR(extractNonzeroRows(view, &result->sparse));
  result->dense.clear();
  result->stats.outputNnz = result->sparse.nnz();
  mark("extract");
  return Status::ok();
}

}  // namespace zen::ops
