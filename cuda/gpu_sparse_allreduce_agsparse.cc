// The agsparse scheme on the GPU (ALGORITHMS.md §6): every rank gathers every rank's
// (index, row) pairs and sums them locally; the baseline whose traffic grows with n.
//
// Steps on rank r of n:
//   1. allgatherCounts of nnz_r (8 bytes per rank).
//   2. two grouped allgatherv's: the int64 indices and the rows, as they are (uncoalesced:
//      repeats travel). Bounded wait.
//   3. local sum: indices -> positions of a one-part IndexMap (a bijection of [0, |G|)), one
//      GpuAggregator scatter-add of all gathered entries (fp32 for 16-bit floats; atomics, so
//      the order of a float sum is unspecified), gpuEncode scaled by 1/n for Average.
//   4. decode into the dense output (zeroed first) or into (index, row) pairs: the union of
//      the rows any rank sent, in the map's order (not sorted).
// Bytes on the wire per rank (rb = bytes per row):
//   sent = (n - 1) nnz_r (8 + rb),  received = sum_{p != r} nnz_p (8 + rb)
// plus 8 bytes per rank for the counts and the dispatcher's call summary.
// Device memory: the gathered entries, and |G| accumulator rows (the dense size, in fp32 for
// 16-bit floats) for the local sum; |G| < 2^32.
#include <algorithm>

#include "cuda/gpu_sparse_allreduce_internal.h"
#include "cuda/gpu_sparse_plan.h"

namespace zen::cuda {

Status gpuSparseAllreduceAgSparse(const GpuSchemeCall& c, GpuSparseAllreduceResult* result) {
  const GpuSparseAllreduceOptions& o = *c.options;
  NcclComm& comm = *o.comm;
  auto& st = *c.state;
  const SparseView& in = c.input;
  const cudaStream_t stream = o.stream;
  const int n = comm.size();
  const size_t rb = in.rowBytes();
  GpuPhaseClock clock(&result->stats);

  std::vector<uint64_t> counts;
  ZEN_RETURN_IF_ERROR(comm.allgatherCounts(static_cast<uint64_t>(in.nnz), &counts, stream));
  const std::vector<size_t> idxOff = segmentOffsets(counts, sizeof(int64_t));
  const std::vector<size_t> valOff = segmentOffsets(counts, rb);
  ZEN_RETURN_IF_ERROR(st.recvIndices.reserve(std::max<size_t>(idxOff.back(), 1)));
  ZEN_RETURN_IF_ERROR(st.recvValues.reserve(std::max<size_t>(valOff.back(), 1)));
  auto* idx = st.recvIndices.as<unsigned char>();
  auto* val = st.recvValues.as<unsigned char>();
  std::vector<DeviceMutableBytes> idxRecvs(n), valRecvs(n);
  for (int p = 0; p < n; ++p) {
    idxRecvs[p] = {idx + idxOff[p], idxOff[p + 1] - idxOff[p]};
    valRecvs[p] = {val + valOff[p], valOff[p + 1] - valOff[p]};
  }
  ZEN_RETURN_IF_ERROR(
      comm.allgatherv(in.indices, static_cast<size_t>(in.nnz) * sizeof(int64_t), idxRecvs, stream));
  ZEN_RETURN_IF_ERROR(
      comm.allgatherv(in.values, static_cast<size_t>(in.nnz) * rb, valRecvs, stream));
  ZEN_RETURN_IF_ERROR(comm.wait(stream, "agsparse allgather"));
  clock.mark("allgather");

  SparseView gathered = in;
  gathered.indices = st.recvIndices.as<const int64_t>();
  gathered.values = st.recvValues.data();
  gathered.nnz = static_cast<int64_t>(idxOff.back() / sizeof(int64_t));
  ZEN_RETURN_IF_ERROR(aggregateWhole({gathered}, st, stream));
  const double scale = o.op == ReduceOp::kAverage ? 1.0 / n : 1.0;
  ZEN_RETURN_IF_ERROR(decodeWhole(c, scale, result));
  result->stats.outputNnz = st.encoded.count;
  clock.mark("sum");
  return Status::ok();
}

}  // namespace zen::cuda
