// The agsparse scheme (ALGORITHMS.md §6): what PyTorch's gloo sparse allreduce and Horovod's
// IndexedSlices path do, kept as the baseline whose traffic grows linearly with n.
//
// Steps on rank r of n:
//   1. encode the input as it is (uncoalesced: repeats travel) as one COO (indices) payload:
//      int64 indices, then the rows.
//   2. allgatherv: every rank receives every rank's payload.
//   3. validate every payload, then coalesce all n locally (ops/sparse_rows.h): rows of an index
//      summed in rank order in the accumulator type (fp32 for 16-bit floats), divided by n for
//      Average, rounded once; scattered into the dense output on request.
// Bytes on the wire per rank (nnz_p = entries of rank p, rb = bytes per row):
//   sent = (n - 1) (16 + nnz_r (8 + rb)),  received = sum_{p != r} 16 + nnz_p (8 + rb)
// i.e. core/traffic_model.h's agSparseTraffic with 8-byte indices, plus the headers.
#include <limits>

#include "ops/sparse_allreduce.h"
#include "ops/sparse_rows.h"
#include "ops/wire_format.h"

namespace zen::ops {

Status sparseAllreduceAgSparse(const SparseAllreduceOptions& o, SparseAllreduceResult* result) {
  Transport& t = *o.transport;
  const int n = t.size();
  const SparseView& in = o.input;
  const RowFormat format{in.dtype, in.rowSize};
  auto last = Clock::now();
  auto mark = [&](const char* phase) {
    const auto now = Clock::now();
    result->stats.phases.emplace_back(phase, std::chrono::duration<double>(now - last).count());
    last = now;
  };

  ByteVector payload;
  encodeCooIndices(format, in.indices, in.values, in.nnz, &payload);
  std::vector<ByteVector> gathered;
  ZEN_RETURN_IF_ERROR(t.allgatherv(payload.data(), payload.size(), &gathered));
  mark("allgather");

  std::vector<SparseView> views(n);
  for (int p = 0; p < n; ++p) {
    const Result<CooIndicesView> v =
        decodeCooIndices(gathered[p].data(), gathered[p].size(), format, in.numRows,
                         std::numeric_limits<int64_t>::max());
    if (!v.isOk()) {
      return ZEN_ERROR(v.status().code(), "agsparse: payload from rank {}: {}", p,
                       v.status().message());
    }
    SparseView& view = views[p];
    view = in;
    view.indices = v.value().indices;
    view.values = v.value().values;
    view.nnz = v.value().count;
  }
  const int divisor = o.op == ReduceOp::kAverage ? n : 1;
  ZEN_RETURN_IF_ERROR(coalesceRows(views, divisor, &result->sparse, coalesceScratch(o)));
  result->stats.outputNnz = result->sparse.nnz();
  if (o.denseOutput) {
    scatterToDense(result->sparse, &result->dense);
    result->sparse = emptyLike(in);
  }
  mark("coalesce");
  return Status::ok();
}

}  // namespace zen::ops
