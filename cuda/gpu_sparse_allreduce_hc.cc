// The hc scheme on the GPU: Hierarchical Centralization (SparCML's recursive doubling with
// incremental merge, ALGORITHMS.md §2 and §6), the twin of ops/sparse_allreduce_hc.cc without
// its dense switch: the set always travels as COO.
//
// Steps (n ranks, p = the largest power of two <= n, e = n - p extra ranks):
//   0. coalesce: this rank's rows summed by index (one-part GpuAggregator, encode, decode to
//      (index, row) pairs) into the current set.
//   1. fold (only when e > 0): extra rank p + i sends its set to rank i, which merges it.
//   2. log2 p doubling steps: in step s rank r < p swaps its set with rank r xor 2^s and
//      merges what it gets.
//   3. unfold (only when e > 0): rank i sends the final set to rank p + i.
//   4. scale (Average: 1/n) and write the dense output or the (index, row) pairs.
// Every exchange is exchangeCounts + two alltoallv's (indices, rows) that every rank calls,
// only the partner's segments non-empty. A merge is aggregate (fp32 for 16-bit floats) +
// encode + decode, so unlike the CPU scheme (partial sums in the accumulator type) a 16-bit
// set is rounded to the dtype after every merge: up to log2 p + 1 roundings. Each merge also
// touches the |G|-row accumulator and bitmap (O(|G|) work per step): a baseline, not tuned.
// Bytes sent per rank r < p (k_s = rows of r's set before step s, rb = bytes per row):
//   sum_{s=0..log2 p - 1} k_s (8 + rb), plus the unfold message for ranks i < e; extra ranks
//   send their coalesced input once and receive the result once. Plus 8 bytes per pair per
//   exchange for the counts and the dispatcher's call summary.
#include <algorithm>

#include "cuda/gpu_sparse_allreduce_internal.h"

namespace zen::cuda {

namespace {

// One pairwise exchange every rank calls: `send` goes to rank `to` (-1: none), rank `from`'s
// set (-1: none) lands in the state's receive buffers as *received.
Status exchangeSet(
    const GpuSchemeCall& c, int to, const SparseView& send, int from, SparseView* received) {
  NcclComm& comm = *c.options->comm;
  auto& st = *c.state;
  const cudaStream_t stream = c.options->stream;
  const int n = comm.size();
  const size_t rb = send.rowBytes();
  std::vector<uint64_t> sendCounts(static_cast<size_t>(n), 0);
  if (to >= 0) sendCounts[to] = static_cast<uint64_t>(send.nnz);
  std::vector<uint64_t> recvCounts;
  ZEN_RETURN_IF_ERROR(comm.exchangeCounts(sendCounts, &recvCounts, stream));
  for (int p = 0; p < n; ++p) {
    if (p != from && recvCounts[p] != 0) {
      return ZEN_ERROR(StatusCode::kInternal,
                       "hc on rank {}: rank {} sent {} rows outside this step's pairing",
                       comm.rank(), p, recvCounts[p]);
    }
  }
  const uint64_t got = from >= 0 ? recvCounts[from] : 0;
  ZEN_RETURN_IF_ERROR(st.recvIndices.reserve(std::max<size_t>(got * sizeof(int64_t), 1)));
  ZEN_RETURN_IF_ERROR(st.recvValues.reserve(std::max<size_t>(got * rb, 1)));
  std::vector<DeviceBytes> idxSends(n), valSends(n);
  std::vector<DeviceMutableBytes> idxRecvs(n), valRecvs(n);
  if (to >= 0) {
    idxSends[to] = {send.indices, static_cast<size_t>(send.nnz) * sizeof(int64_t)};
    valSends[to] = {send.values, static_cast<size_t>(send.nnz) * rb};
  }
  if (from >= 0) {
    idxRecvs[from] = {st.recvIndices.data(), got * sizeof(int64_t)};
    valRecvs[from] = {st.recvValues.data(), got * rb};
  }
  ZEN_RETURN_IF_ERROR(comm.alltoallv(idxSends, idxRecvs, stream));
  ZEN_RETURN_IF_ERROR(comm.alltoallv(valSends, valRecvs, stream));
  ZEN_RETURN_IF_ERROR(comm.wait(stream, "hc exchange"));
  *received = send;
  received->indices = st.recvIndices.as<const int64_t>();
  received->values = st.recvValues.data();
  received->nnz = static_cast<int64_t>(got);
  return Status::ok();
}

// The sum of `parts` (rounded to the dtype) becomes the current set, in the hc buffer that
// *slot does not name; *slot then names it.
Status mergeSets(const GpuSchemeCall& c,
                 const std::vector<SparseView>& parts,
                 int* slot,
                 SparseView* current) {
  auto& st = *c.state;
  const cudaStream_t stream = c.options->stream;
  const SparseView& like = parts.front();
  const size_t rb = like.rowBytes();
  ZEN_RETURN_IF_ERROR(aggregateWhole(parts, st, stream));
  ZEN_RETURN_IF_ERROR(gpuEncode(st.aggregator, 1.0, &st.encoded, &st.scratch, stream));
  const int next = 1 - *slot;
  const int64_t count = st.encoded.count;
  ZEN_RETURN_IF_ERROR(
      st.hcIndices[next].reserve(std::max<size_t>(count * sizeof(int64_t), sizeof(int64_t))));
  ZEN_RETURN_IF_ERROR(st.hcValues[next].reserve(std::max<size_t>(count * rb, 1)));
  const IndexMap map(static_cast<uint64_t>(like.numRows), 1, 0);
  ZEN_RETURN_IF_ERROR(gpuDecodeToSparse(
      map, 0, st.encoded.bitmap.as<const uint8_t>(), st.encoded.bitmapBytes,
      st.encoded.values.data(), st.encoded.valueBytes(), like.dtype, like.rowSize,
      st.hcIndices[next].as<int64_t>(), st.hcValues[next].data(), &st.scratch, stream));
  *slot = next;
  *current = like;
  current->indices = st.hcIndices[next].as<const int64_t>();
  current->values = st.hcValues[next].data();
  current->nnz = count;
  return Status::ok();
}

}  // namespace

Status gpuSparseAllreduceHc(const GpuSchemeCall& c, GpuSparseAllreduceResult* result) {
  const GpuSparseAllreduceOptions& o = *c.options;
  NcclComm& comm = *o.comm;
  const int n = comm.size();
  const int r = comm.rank();
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int e = n - p;
  GpuPhaseClock clock(&result->stats);

  // 0. coalesce (the slot starts at 1 so that the first set lands in buffer 0)
  int slot = 1;
  SparseView current;
  ZEN_RETURN_IF_ERROR(mergeSets(c, {c.input}, &slot, &current));
  clock.mark("coalesce");

  // 1. fold
  SparseView received;
  if (e > 0) {
    const int to = r >= p ? r - p : -1;
    const int from = r < e ? r + p : -1;
    ZEN_RETURN_IF_ERROR(exchangeSet(c, to, current, from, &received));
    if (from >= 0) ZEN_RETURN_IF_ERROR(mergeSets(c, {current, received}, &slot, &current));
  }
  // 2. doubling
  for (int step = 1; step < p; step *= 2) {
    const int partner = r < p ? (r ^ step) : -1;
    ZEN_RETURN_IF_ERROR(exchangeSet(c, partner, current, partner, &received));
    if (partner >= 0) ZEN_RETURN_IF_ERROR(mergeSets(c, {current, received}, &slot, &current));
  }
  // 3. unfold
  if (e > 0) {
    const int to = r < e ? r + p : -1;
    const int from = r >= p ? r - p : -1;
    ZEN_RETURN_IF_ERROR(exchangeSet(c, to, current, from, &received));
    if (from >= 0) current = received;
  }
  clock.mark("exchange");

  // 4. scale and output
  ZEN_RETURN_IF_ERROR(aggregateWhole({current}, *c.state, o.stream));
  ZEN_RETURN_IF_ERROR(decodeWhole(c, o.op == ReduceOp::kAverage ? 1.0 / n : 1.0, result));
  result->stats.outputNnz = c.state->encoded.count;
  clock.mark("output");
  return Status::ok();
}

}  // namespace zen::cuda
