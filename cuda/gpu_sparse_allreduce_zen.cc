// The zen scheme on the GPU: Balanced Parallelism (ALGORITHMS.md §5) over an NcclComm, the
// twin of ops/sparse_allreduce_zen.cc with the hash-bitmap Pull encoding only.
//
// Steps on rank r of n (|G| = numRows, rb = bytes per row, IndexMap(|G|, n, seed)):
//   1. partition: Algorithm 1 (GpuHashPartitioner) splits the device input into n Push lists
//      of (4-byte local position, row), this rank's duplicates summed (syncs twice).
//   2. push: exchangeCounts (8 bytes per pair, through NCCL), then two grouped
//      ncclSend/ncclRecv alltoallv's (positions, rows) into one receive buffer each; the own
//      list is a device copy. Bounded wait.
//   3. aggregate: GpuAggregator scatter-adds the n received lists in rank order into |I_r|
//      accumulator rows (fp32 for 16-bit floats) and the occupancy bitmap.
//   4. encode: Algorithm 2 (gpuEncode), scaled by 1/n for Average: ceil(|I_r| / 8) bitmap
//      bytes and a_r rows in bit order (syncs once).
//   5. pull: allgatherCounts of a_r (8 bytes per rank), then two grouped allgatherv's
//      (bitmaps, whose sizes every rank knows from the map, and rows). Bounded wait.
//   6. decode: every part, own included, into the dense output (zeroed first) or into
//      (index, row) pairs at the part's offset: gpuDecodeToDense / ToSparse (one sync each).
// Bytes on the wire per rank (c_rp = entries rank r pushes to p, a_j = aggregated rows of
// part j; no headers: NCCL messages carry none):
//   push sent = sum_{p != r} c_rp (4 + rb);        push recv = sum_{p != r} c_pr (4 + rb)
//   pull sent = (n - 1) (ceil(|I_r| / 8) + a_r rb); pull recv = sum_{j != r} ceil(|I_j| / 8) + a_j
//   rb
// plus 8 bytes per pair for the push counts, 8 per rank for the pull counts and the
// dispatcher's 128-byte call summary (the counters leave the count exchanges out).
#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/gpu_sparse_allreduce_internal.h"
#include "cuda/gpu_sparse_plan.h"

namespace zen::cuda {

namespace {

// The partitioner for this call's map and settings, rebuilt when they change.
void preparePartitioner(const GpuSchemeCall& c, int n) {
  auto& st = *c.state;
  const auto& o = *c.options;
  if (st.partitioner != nullptr && st.zenNumRows == c.input.numRows && st.zenParts == n &&
      st.zenSeed == o.seed && st.zenHashFunctions == o.hashFunctions &&
      st.zenMemoryFactor == o.memoryFactor) {
    return;
  }
  st.zenMap = IndexMap(static_cast<uint64_t>(c.input.numRows), n, o.seed);
  HashPartitionOptions options;
  options.hashFunctions = o.hashFunctions;
  options.memoryFactor = o.memoryFactor;
  st.partitioner = std::make_unique<GpuHashPartitioner>(st.zenMap, options);
  st.zenNumRows = c.input.numRows;
  st.zenParts = n;
  st.zenSeed = o.seed;
  st.zenHashFunctions = o.hashFunctions;
  st.zenMemoryFactor = o.memoryFactor;
}

}  // namespace

Status gpuSparseAllreduceZen(const GpuSchemeCall& c, GpuSparseAllreduceResult* result) {
  const GpuSparseAllreduceOptions& o = *c.options;
  NcclComm& comm = *o.comm;
  auto& st = *c.state;
  const SparseView& in = c.input;
  const cudaStream_t stream = o.stream;
  const int n = comm.size();
  const int r = comm.rank();
  const size_t rb = in.rowBytes();
  GpuPhaseClock clock(&result->stats);

  // 1. partition
  preparePartitioner(c, n);
  st.partitioner->setWaitTimeout(comm.timeoutSeconds());
  ZEN_RETURN_IF_ERROR(st.partitioner->partition(in, &st.lists, stream));
  std::vector<uint64_t> sendCounts(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) sendCounts[p] = static_cast<uint64_t>(st.lists.count(p));
  result->stats.imbalance = imbalanceOf(sendCounts);
  clock.mark("partition");

  // 2. push
  std::vector<uint64_t> recvCounts;
  ZEN_RETURN_IF_ERROR(comm.exchangeCounts(sendCounts, &recvCounts, stream));
  const std::vector<size_t> posOff = segmentOffsets(recvCounts, sizeof(uint32_t));
  const std::vector<size_t> valOff = segmentOffsets(recvCounts, rb);
  ZEN_RETURN_IF_ERROR(st.recvPositions.reserve(std::max<size_t>(posOff.back(), 1)));
  ZEN_RETURN_IF_ERROR(st.recvValues.reserve(std::max<size_t>(valOff.back(), 1)));
  std::vector<DeviceBytes> posSends(n), valSends(n);
  std::vector<DeviceMutableBytes> posRecvs(n), valRecvs(n);
  auto* recvPos = st.recvPositions.as<unsigned char>();
  auto* recvVal = st.recvValues.as<unsigned char>();
  const auto* listPos = reinterpret_cast<const unsigned char*>(st.lists.devicePositions());
  const auto* listVal = static_cast<const unsigned char*>(st.lists.deviceValues());
  for (int p = 0; p < n; ++p) {
    const size_t first = static_cast<size_t>(st.lists.offsets[p]);
    posSends[p] = {listPos + first * sizeof(uint32_t), sendCounts[p] * sizeof(uint32_t)};
    valSends[p] = {listVal + first * rb, sendCounts[p] * rb};
    posRecvs[p] = {recvPos + posOff[p], posOff[p + 1] - posOff[p]};
    valRecvs[p] = {recvVal + valOff[p], valOff[p + 1] - valOff[p]};
  }
  ZEN_RETURN_IF_ERROR(comm.alltoallv(posSends, posRecvs, stream));
  ZEN_RETURN_IF_ERROR(comm.alltoallv(valSends, valRecvs, stream));
  ZEN_RETURN_IF_ERROR(comm.wait(stream, "zen push"));
  clock.mark("push");

  // 3. aggregate (rank order, like the CPU: lists of distinct positions give its bits)
  ZEN_RETURN_IF_ERROR(
      st.aggregator.reset(st.zenMap, static_cast<uint32_t>(r), in.dtype, in.rowSize, stream));
  for (int p = 0; p < n; ++p) {
    if (recvCounts[p] == 0) continue;
    ZEN_RETURN_IF_ERROR(st.aggregator.add(reinterpret_cast<const uint32_t*>(recvPos + posOff[p]),
                                          recvVal + valOff[p], static_cast<int64_t>(recvCounts[p]),
                                          stream));
  }
  clock.mark("aggregate");

  // 4. encode
  const double scale = o.op == ReduceOp::kAverage ? 1.0 / n : 1.0;
  ZEN_RETURN_IF_ERROR(gpuEncode(st.aggregator, scale, &st.encoded, &st.scratch, stream));
  clock.mark("encode");

  // 5. pull
  std::vector<uint64_t> rowCounts;
  ZEN_RETURN_IF_ERROR(
      comm.allgatherCounts(static_cast<uint64_t>(st.encoded.count), &rowCounts, stream));
  std::vector<uint64_t> bitmapSizes(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) bitmapSizes[j] = (st.zenMap.partSize(j) + 7) / 8;
  if (bitmapSizes[r] != st.encoded.bitmapBytes) {
    return ZEN_ERROR(StatusCode::kInternal,
                     "zen pull on rank {}: encoded {} bitmap bytes, the map says {}", r,
                     st.encoded.bitmapBytes, bitmapSizes[r]);
  }
  const std::vector<size_t> bitOff = segmentOffsets(bitmapSizes, 1);
  const std::vector<size_t> rowOff = segmentOffsets(rowCounts, rb);
  ZEN_RETURN_IF_ERROR(st.pullBitmaps.reserve(std::max<size_t>(bitOff.back(), 1)));
  ZEN_RETURN_IF_ERROR(st.pullValues.reserve(std::max<size_t>(rowOff.back(), 1)));
  auto* bits = st.pullBitmaps.as<unsigned char>();
  auto* rows = st.pullValues.as<unsigned char>();
  std::vector<DeviceMutableBytes> bitRecvs(n), rowRecvs(n);
  for (int j = 0; j < n; ++j) {
    bitRecvs[j] = {bits + bitOff[j], bitOff[j + 1] - bitOff[j]};
    rowRecvs[j] = {rows + rowOff[j], rowOff[j + 1] - rowOff[j]};
  }
  ZEN_RETURN_IF_ERROR(
      comm.allgatherv(st.encoded.bitmap.data(), st.encoded.bitmapBytes, bitRecvs, stream));
  ZEN_RETURN_IF_ERROR(
      comm.allgatherv(st.encoded.values.data(), st.encoded.valueBytes(), rowRecvs, stream));
  ZEN_RETURN_IF_ERROR(comm.wait(stream, "zen pull"));
  clock.mark("pull");

  // 6. decode
  if (o.denseOutput) {
    ZEN_CHECK_CUDA(cudaMemsetAsync(c.denseOut.data, 0, c.denseOut.bytes(), stream));
    for (int j = 0; j < n; ++j) {
      ZEN_RETURN_IF_ERROR(gpuDecodeToDense(
          st.zenMap, static_cast<uint32_t>(j), bits + bitOff[j], bitmapSizes[j], rows + rowOff[j],
          rowOff[j + 1] - rowOff[j], in.dtype, in.rowSize, c.denseOut, &st.scratch, stream));
    }
    result->stats.outputNnz = 0;
    for (uint64_t a : rowCounts) result->stats.outputNnz += static_cast<int64_t>(a);
  } else {
    GpuSparse& s = result->sparse;
    const int64_t total = static_cast<int64_t>(rowOff.back() / rb);
    s.numRows = in.numRows;
    s.rowSize = in.rowSize;
    s.dtype = in.dtype;
    s.deviceIndex = in.device.index;
    ZEN_RETURN_IF_ERROR(s.reserve(std::max<int64_t>(total, 1)));
    s.nnz = total;
    int64_t first = 0;
    for (int j = 0; j < n; ++j) {
      ZEN_RETURN_IF_ERROR(gpuDecodeToSparse(
          st.zenMap, static_cast<uint32_t>(j), bits + bitOff[j], bitmapSizes[j], rows + rowOff[j],
          rowOff[j + 1] - rowOff[j], in.dtype, in.rowSize, s.indices.as<int64_t>() + first,
          s.values.as<unsigned char>() + static_cast<size_t>(first) * rb, &st.scratch, stream));
      first += static_cast<int64_t>(rowCounts[j]);
    }
    result->stats.outputNnz = total;
  }
  clock.mark("decode");
  return Status::ok();
}

}  // namespace zen::cuda
