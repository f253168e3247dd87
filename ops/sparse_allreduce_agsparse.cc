// The agsparse scheme (ALGORITHMS.md §6): what PyTorch's gloo sparse allreduce and Horovod's
// IndexedSlices path do, kept as the baseline whose traffic grows linearly with n.
//
// Steps on rank r of n:
//   1. one message: the call summary (ops/call_summary.h), then the input as it is
//      (uncoalesced: repeats travel) as one COO (indices) payload: int64 indices, then the rows.
//      A failed rank, or one with no rows, sends the summary alone.
//   2. gather: the same message to every rank (an alltoallv, the call's one collective), so
//      every rank receives every rank's message; the summaries' verdict before any payload is
//      read (an error, or no rows anywhere: stop here).
//   3. validate every payload, then coalesce all n locally (ops/sparse_rows.h): rows of an index
//      summed in rank order in the accumulator type (fp32 for 16-bit floats), divided by n for
//      Average, rounded once; scattered into the dense output on request.
// Bytes on the wire per rank (nnz_p = entries of rank p, rb = bytes per row, 56 the summary):
//   sent = (n - 1) (56 + 16 + nnz_r (8 + rb)),  received = sum_{p != r} 56 + 16 + nnz_p (8 + rb)
// (no 16-byte header from a rank with no rows), i.e. core/traffic_model.h's agSparseTraffic
// with 8-byte indices, plus the headers and summaries.
#include <limits>

#include "ops/call_summary.h"
#include "ops/sparse_allreduce.h"
#include "ops/sparse_rows.h"
#include "ops/wire_format.h"

namespace zen::ops {

Status sparseAllreduceAgSparse(const SparseAllreduceOptions& o,
                               const CallInfo& summary,
                               SparseAllreduceResult* result) {
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

  ByteVector message;
  const size_t at = startSummarized(summary, &message);
  if (!summary.failed && in.nnz > 0) {
    encodeCooIndices(format, in.indices, in.values, in.nnz, &message, at);
  }
  const std::vector<ConstBytes> sends(n, ConstBytes{message.data(), message.size()});
  std::vector<ByteVector> gathered;
  std::vector<ConstBytes> payloads;
  const Status agreed = exchangeSummaries(t, sends, &gathered, &payloads, &result->stats.totalNnz);
  mark("allgather");
  ZEN_RETURN_IF_ERROR(agreed);
  if (result->stats.totalNnz == 0) return Status::ok();

  std::vector<SparseView> views(n, in);
  for (int p = 0; p < n; ++p) {
    SparseView& view = views[p];
    if (payloads[p].size == 0) {  // a rank with no rows sent its summary alone
      view.indices = nullptr;
      view.values = nullptr;
      view.nnz = 0;
      continue;
    }
    const Result<CooIndicesView> v =
        decodeCooIndices(static_cast<const uint8_t*>(payloads[p].data), payloads[p].size, format,
                         in.numRows, std::numeric_limits<int64_t>::max());
    if (!v.isOk()) {
      return ZEN_ERROR(v.status().code(), "agsparse: payload from rank {}: {}", p,
                       v.status().message());
    }
    view.indices = v.value().indices;
    view.values = v.value().values;
    view.nnz = v.value().count;
  }
  const int divisor = o.op == ReduceOp::kAverage ? n : 1;
  ZEN_RETURN_IF_ERROR(coalesceRows(views, divisor, &result->sparse, coalesceScratch(o)));
  result->stats.outputNnz = result->sparse.nnz();
  if (o.denseOutput) {
    scatterToDense(result->sparse, denseOutputRows(o, result), o.pool);
    // Emptied with its capacity kept: the next call coalesces into it again.
    result->sparse.indices.clear();
    result->sparse.values.clear();
  }
  mark("coalesce");
  return Status::ok();
}

}  // namespace zen::ops
