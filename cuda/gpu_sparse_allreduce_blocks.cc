// The blocks scheme on the GPU (ALGORITHMS.md §6, OmniReduce-style): the twin of
// ops/sparse_allreduce_blocks.cc over an NcclComm, same geometry and same results (the union
// of the rows any rank sent, each rank's repeats summed and rounded once, owners summing in
// rank order in the accumulator type, Average divided once there), blocks and their row
// masks as three NCCL messages per list (cuda/blocks_steps.h).
//
// Steps on rank r of n (R rows per block, W = ceil(R / 32) mask words, rb = bytes per row):
//   1. coalesce: flag every non-empty block of this rank, scan the flags into push slots (one
//      sync for the n + 1 owner boundaries), sum the entries into their blocks' accumulator
//      rows (atomics: repeats of a float row add in an unspecified order), round once.
//   2. push: exchangeCounts (blocks per owner, 8 bytes per pair), then three grouped
//      alltoallv's (ids, masks, rows). Bounded wait.
//   3. aggregate: every received list checked on the device (ids in the owner's range,
//      ascending, masks valid; one sync), added in rank order into the owner's accumulator
//      rows (no atomics: a list holds each block once), own blocks with a row flagged and
//      scanned into pull slots (one sync for the count), finished into the pull list.
//   4. pull: allgatherCounts of the pull blocks and of the push load, three grouped
//      allgatherv's (ids, masks, rows). Bounded wait.
//   5. decode: every owner's list checked (one sync), rows counted per block and scanned (one
//      sync for the total), written into the dense output (zeroed first) or into (index,
//      row) pairs, ascending.
// Bytes on the wire per rank (blockBytes = 4 + 4 W + R rb; the CPU sends ceil(R / 8) mask
// bytes and a short last block, the GPU whole words and R rows):
//   push sent = (this rank's non-empty blocks owned by others) blockBytes
//   pull sent = (n - 1) (aggregated non-empty blocks of range r) blockBytes
// plus the counts (8 bytes per pair, 16 per rank) and the dispatcher's call summary.
// Device memory: push and pull lists and their accumulators (non-empty blocks x R rows), the
// owner's accumulator rows (|G| / n rows), B + 1 flags and slots.
#include <algorithm>
#include <limits>

#include "cuda/cuda_check.h"
#include "cuda/gpu_blocks.h"
#include "cuda/gpu_sparse_allreduce_internal.h"
#include "cuda/gpu_sparse_plan.h"
#include "cuda/scan.h"

namespace zen::cuda {
namespace {

// The first bad block of a list set (all ones when none), after waiting for the stream.
Status readBad(NcclComm& comm,
               GpuBlocksState& b,
               cudaStream_t stream,
               const char* what,
               unsigned long long* bad) {
  ZEN_CHECK_CUDA(cudaMemcpyAsync(b.host.data(), b.bad.data(), sizeof(unsigned long long),
                                 cudaMemcpyDeviceToHost, stream));
  ZEN_RETURN_IF_ERROR(comm.wait(stream, what));
  *bad = *b.host.as<unsigned long long>();
  return Status::ok();
}

// Which list of `counts` (concatenated) holds block `k`.
int listOf(const std::vector<uint64_t>& counts, unsigned long long k) {
  unsigned long long first = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    if (k < first + counts[p]) return static_cast<int>(p);
    first += counts[p];
  }
  return static_cast<int>(counts.size()) - 1;
}

// Three views (ids, masks, rows) of the lists of `counts` blocks in three buffers.
struct ListLayout {
  std::vector<size_t> ids, masks, rows;
  ListLayout(const std::vector<uint64_t>& counts, size_t maskBytes, size_t rowBytes)
      : ids(segmentOffsets(counts, sizeof(uint32_t))),
        masks(segmentOffsets(counts, maskBytes)),
        rows(segmentOffsets(counts, rowBytes)) {}
};

}  // namespace

size_t GpuBlocksState::heldBytes() const {
  size_t bytes = host.capacity();
  for (const DeviceBuffer* d :
       {&flags, &slots, &ownerSlots, &pushAcc, &pushIds, &pushMasks, &pushRows, &recvIds,
        &recvMasks, &recvRows, &ownAcc, &seen, &pullIds, &pullMasks, &pullRows, &bad}) {
    bytes += d->capacity();
  }
  return bytes;
}

Status gpuSparseAllreduceBlocks(const GpuSchemeCall& c, GpuSparseAllreduceResult* result) {
  const GpuSparseAllreduceOptions& o = *c.options;
  NcclComm& comm = *o.comm;
  GpuBlocksState& b = c.state->blocks;
  Workspace& scratch = c.state->scratch;
  const SparseView& in = c.input;
  const cudaStream_t stream = o.stream;
  const int n = comm.size();
  const int r = comm.rank();
  const blocks::Geometry g = blocks::makeGeometry(in.numRows, in.rowSize, n);
  ZEN_CHECK_ARG(g.numBlocks <= int64_t{std::numeric_limits<uint32_t>::max()} + 1,
                "blocks: {} rows make {} blocks of {} rows, more than 32-bit block ids address",
                g.numRows, g.numBlocks, g.rowsPerBlock);
  const size_t accBytes = blocksAccumulatorBytes(in.dtype);
  const size_t maskBytes = static_cast<size_t>(g.maskWords) * sizeof(uint32_t);
  const size_t blockRowBytes = static_cast<size_t>(g.blockElements()) * dataTypeSize(in.dtype);
  const auto blockElements = static_cast<size_t>(g.blockElements());
  GpuPhaseClock clock(&result->stats);
  ZEN_RETURN_IF_ERROR(b.host.reserve((static_cast<size_t>(n) + 1) * sizeof(int64_t)));
  ZEN_RETURN_IF_ERROR(b.bad.reserve(sizeof(unsigned long long)));
  auto* hostWords = b.host.as<int64_t>();

  // 1. coalesce into push blocks
  const auto flagCount = static_cast<size_t>(g.numBlocks) + 1;
  ZEN_RETURN_IF_ERROR(b.flags.reserve(flagCount * sizeof(int64_t)));
  ZEN_RETURN_IF_ERROR(b.slots.reserve(flagCount * sizeof(int64_t)));
  ZEN_RETURN_IF_ERROR(b.ownerSlots.reserve((static_cast<size_t>(n) + 1) * sizeof(int64_t)));
  ZEN_CHECK_CUDA(cudaMemsetAsync(b.flags.data(), 0, flagCount * sizeof(int64_t), stream));
  ZEN_RETURN_IF_ERROR(launchBlocksMark(g, in.indices, in.nnz, b.flags.as<int64_t>(), stream));
  ZEN_RETURN_IF_ERROR(exclusiveSum(b.flags.as<const int64_t>(), b.slots.as<int64_t>(),
                                   static_cast<int64_t>(flagCount), &scratch, stream));
  ZEN_RETURN_IF_ERROR(
      launchBlocksOwnerSlots(g, b.slots.as<const int64_t>(), b.ownerSlots.as<int64_t>(), stream));
  ZEN_CHECK_CUDA(cudaMemcpyAsync(hostWords, b.ownerSlots.data(),
                                 (static_cast<size_t>(n) + 1) * sizeof(int64_t),
                                 cudaMemcpyDeviceToHost, stream));
  ZEN_RETURN_IF_ERROR(comm.wait(stream, "blocks push layout"));
  std::vector<int64_t> ownerFirst(hostWords, hostWords + n + 1);
  const int64_t pushBlocks = ownerFirst[static_cast<size_t>(n)];
  std::vector<uint64_t> sendCounts(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p)
    sendCounts[p] = static_cast<uint64_t>(ownerFirst[p + 1] - ownerFirst[p]);
  const auto pushCount = static_cast<size_t>(pushBlocks);
  ZEN_RETURN_IF_ERROR(b.pushAcc.reserve(std::max<size_t>(pushCount * blockElements * accBytes, 1)));
  ZEN_RETURN_IF_ERROR(b.pushIds.reserve(std::max<size_t>(pushCount * sizeof(uint32_t), 1)));
  ZEN_RETURN_IF_ERROR(b.pushMasks.reserve(std::max<size_t>(pushCount * maskBytes, 1)));
  ZEN_RETURN_IF_ERROR(b.pushRows.reserve(std::max<size_t>(pushCount * blockRowBytes, 1)));
  ZEN_RETURN_IF_ERROR(launchBlocksPush(g, in.dtype, in.indices, in.values, in.nnz,
                                       b.slots.as<const int64_t>(), pushBlocks, b.pushAcc.data(),
                                       b.pushMasks.as<uint32_t>(), b.pushIds.as<uint32_t>(),
                                       b.pushRows.data(), stream));
  clock.mark("coalesce");

  // 2. push
  std::vector<uint64_t> recvCounts;
  ZEN_RETURN_IF_ERROR(comm.exchangeCounts(sendCounts, &recvCounts, stream));
  const ListLayout recv(recvCounts, maskBytes, blockRowBytes);
  ZEN_RETURN_IF_ERROR(b.recvIds.reserve(std::max<size_t>(recv.ids.back(), 1)));
  ZEN_RETURN_IF_ERROR(b.recvMasks.reserve(std::max<size_t>(recv.masks.back(), 1)));
  ZEN_RETURN_IF_ERROR(b.recvRows.reserve(std::max<size_t>(recv.rows.back(), 1)));
  {
    std::vector<DeviceBytes> idSends(n), maskSends(n), rowSends(n);
    std::vector<DeviceMutableBytes> idRecvs(n), maskRecvs(n), rowRecvs(n);
    const auto* ids = b.pushIds.as<const unsigned char>();
    const auto* masks = b.pushMasks.as<const unsigned char>();
    const auto* rows = b.pushRows.as<const unsigned char>();
    for (int p = 0; p < n; ++p) {
      const auto first = static_cast<size_t>(ownerFirst[p]);
      idSends[p] = {ids + first * sizeof(uint32_t), sendCounts[p] * sizeof(uint32_t)};
      maskSends[p] = {masks + first * maskBytes, sendCounts[p] * maskBytes};
      rowSends[p] = {rows + first * blockRowBytes, sendCounts[p] * blockRowBytes};
      idRecvs[p] = {b.recvIds.as<unsigned char>() + recv.ids[p], recv.ids[p + 1] - recv.ids[p]};
      maskRecvs[p] = {b.recvMasks.as<unsigned char>() + recv.masks[p],
                      recv.masks[p + 1] - recv.masks[p]};
      rowRecvs[p] = {b.recvRows.as<unsigned char>() + recv.rows[p],
                     recv.rows[p + 1] - recv.rows[p]};
    }
    ZEN_RETURN_IF_ERROR(comm.alltoallv(idSends, idRecvs, stream));
    ZEN_RETURN_IF_ERROR(comm.alltoallv(maskSends, maskRecvs, stream));
    ZEN_RETURN_IF_ERROR(comm.alltoallv(rowSends, rowRecvs, stream));
    ZEN_RETURN_IF_ERROR(comm.wait(stream, "blocks push"));
  }
  clock.mark("push");

  // 3. aggregate
  const int64_t first = g.firstBlock(r);
  const int64_t end = g.firstBlock(r + 1);
  const int64_t ownBlocks = end - first;
  const int64_t firstRow = first * g.rowsPerBlock;
  const int64_t ownRows =
      std::max<int64_t>(0, std::min(end * g.rowsPerBlock, g.numRows) - firstRow);
  auto* bad = b.bad.as<unsigned long long>();
  ZEN_CHECK_CUDA(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));
  uint64_t load = 0;
  for (int p = 0; p < n; ++p) {
    ZEN_RETURN_IF_ERROR(launchBlocksCheck(g, b.recvIds.as<const uint32_t>() + load,
                                          b.recvMasks.as<const uint32_t>() + load * g.maskWords,
                                          static_cast<int64_t>(recvCounts[p]), first, end, load,
                                          bad, stream));
    load += recvCounts[p];
  }
  unsigned long long badBlock = 0;
  ZEN_RETURN_IF_ERROR(readBad(comm, b, stream, "blocks push check", &badBlock));
  if (badBlock != ~0ull) {
    return ZEN_ERROR(StatusCode::kIoError,
                     "blocks: corrupt part from rank {}: a block outside [{}, {}), out of order "
                     "or with a bad row mask",
                     listOf(recvCounts, badBlock), first, end);
  }
  ZEN_RETURN_IF_ERROR(
      b.ownAcc.reserve(std::max<size_t>(static_cast<size_t>(ownRows) * in.rowSize * accBytes, 1)));
  ZEN_RETURN_IF_ERROR(b.seen.reserve(std::max<size_t>(static_cast<size_t>(ownRows), 1)));
  ZEN_CHECK_CUDA(cudaMemsetAsync(b.ownAcc.data(), 0,
                                 static_cast<size_t>(ownRows) * in.rowSize * accBytes, stream));
  ZEN_CHECK_CUDA(cudaMemsetAsync(b.seen.data(), 0, static_cast<size_t>(ownRows), stream));
  {
    uint64_t at = 0;
    for (int p = 0; p < n; ++p) {  // rank order, one launch each: the CPU's sum order
      ZEN_RETURN_IF_ERROR(launchBlocksAdd(
          g, in.dtype, firstRow, b.recvIds.as<const uint32_t>() + at,
          b.recvMasks.as<const uint32_t>() + at * g.maskWords,
          b.recvRows.as<const unsigned char>() + at * blockRowBytes,
          static_cast<int64_t>(recvCounts[p]), b.ownAcc.data(), b.seen.as<uint8_t>(), stream));
      at += recvCounts[p];
    }
  }
  // Own flags and pull slots reuse the push flags and slots (B + 1 >= ownBlocks + 1).
  const auto ownFlagCount = static_cast<size_t>(ownBlocks) + 1;
  ZEN_CHECK_CUDA(cudaMemsetAsync(b.flags.data(), 0, ownFlagCount * sizeof(int64_t), stream));
  ZEN_RETURN_IF_ERROR(launchBlocksOwnFlags(g, first, firstRow, b.seen.as<const uint8_t>(),
                                           ownBlocks, b.flags.as<int64_t>(), stream));
  ZEN_RETURN_IF_ERROR(exclusiveSum(b.flags.as<const int64_t>(), b.slots.as<int64_t>(),
                                   static_cast<int64_t>(ownFlagCount), &scratch, stream));
  ZEN_CHECK_CUDA(cudaMemcpyAsync(hostWords, b.slots.as<int64_t>() + ownBlocks, sizeof(int64_t),
                                 cudaMemcpyDeviceToHost, stream));
  ZEN_RETURN_IF_ERROR(comm.wait(stream, "blocks pull layout"));
  const int64_t pullBlocks = hostWords[0];
  const auto pullCount = static_cast<size_t>(pullBlocks);
  ZEN_RETURN_IF_ERROR(b.pullIds.reserve(std::max<size_t>(pullCount * sizeof(uint32_t), 1)));
  ZEN_RETURN_IF_ERROR(b.pullMasks.reserve(std::max<size_t>(pullCount * maskBytes, 1)));
  ZEN_RETURN_IF_ERROR(b.pullRows.reserve(std::max<size_t>(pullCount * blockRowBytes, 1)));
  const int divisor = o.op == ReduceOp::kAverage ? n : 1;
  ZEN_RETURN_IF_ERROR(launchBlocksPull(
      g, in.dtype, first, firstRow, b.flags.as<const int64_t>(), b.slots.as<const int64_t>(),
      b.ownAcc.data(), b.seen.as<const uint8_t>(), divisor, ownBlocks, pullBlocks,
      b.pullIds.as<uint32_t>(), b.pullMasks.as<uint32_t>(), b.pullRows.data(), stream));
  clock.mark("aggregate");

  // 4. pull
  std::vector<uint64_t> pullCounts, loads;
  ZEN_RETURN_IF_ERROR(comm.allgatherCounts(static_cast<uint64_t>(pullBlocks), &pullCounts, stream));
  ZEN_RETURN_IF_ERROR(comm.allgatherCounts(load, &loads, stream));
  const ListLayout pulled(pullCounts, maskBytes, blockRowBytes);
  // The gathered lists reuse the receive buffers of the push.
  ZEN_RETURN_IF_ERROR(b.recvIds.reserve(std::max<size_t>(pulled.ids.back(), 1)));
  ZEN_RETURN_IF_ERROR(b.recvMasks.reserve(std::max<size_t>(pulled.masks.back(), 1)));
  ZEN_RETURN_IF_ERROR(b.recvRows.reserve(std::max<size_t>(pulled.rows.back(), 1)));
  {
    std::vector<DeviceMutableBytes> idRecvs(n), maskRecvs(n), rowRecvs(n);
    for (int p = 0; p < n; ++p) {
      idRecvs[p] = {b.recvIds.as<unsigned char>() + pulled.ids[p],
                    pulled.ids[p + 1] - pulled.ids[p]};
      maskRecvs[p] = {b.recvMasks.as<unsigned char>() + pulled.masks[p],
                      pulled.masks[p + 1] - pulled.masks[p]};
      rowRecvs[p] = {b.recvRows.as<unsigned char>() + pulled.rows[p],
                     pulled.rows[p + 1] - pulled.rows[p]};
    }
    ZEN_RETURN_IF_ERROR(
        comm.allgatherv(b.pullIds.data(), pullCount * sizeof(uint32_t), idRecvs, stream));
    ZEN_RETURN_IF_ERROR(
        comm.allgatherv(b.pullMasks.data(), pullCount * maskBytes, maskRecvs, stream));
    ZEN_RETURN_IF_ERROR(
        comm.allgatherv(b.pullRows.data(), pullCount * blockRowBytes, rowRecvs, stream));
    ZEN_RETURN_IF_ERROR(comm.wait(stream, "blocks pull"));
  }
  clock.mark("pull");

  // 5. decode
  const auto* ids = b.recvIds.as<const uint32_t>();
  const auto* masks = b.recvMasks.as<const uint32_t>();
  const void* rows = b.recvRows.data();
  ZEN_CHECK_CUDA(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));
  uint64_t total = 0;
  for (int j = 0; j < n; ++j) {
    ZEN_RETURN_IF_ERROR(launchBlocksCheck(g, ids + total, masks + total * g.maskWords,
                                          static_cast<int64_t>(pullCounts[j]), g.firstBlock(j),
                                          g.firstBlock(j + 1), total, bad, stream));
    total += pullCounts[j];
  }
  // Present rows per block, scanned (the push flags and slots hold B + 1 >= total + 1 words:
  // each owner sends at most its own range's blocks).
  const auto countWords = static_cast<size_t>(total) + 1;
  ZEN_CHECK_CUDA(cudaMemsetAsync(b.flags.data(), 0, countWords * sizeof(int64_t), stream));
  ZEN_RETURN_IF_ERROR(
      launchBlocksRowCounts(g, masks, static_cast<int64_t>(total), b.flags.as<int64_t>(), stream));
  ZEN_RETURN_IF_ERROR(exclusiveSum(b.flags.as<const int64_t>(), b.slots.as<int64_t>(),
                                   static_cast<int64_t>(countWords), &scratch, stream));
  ZEN_CHECK_CUDA(cudaMemcpyAsync(hostWords + 1, b.slots.as<int64_t>() + total, sizeof(int64_t),
                                 cudaMemcpyDeviceToHost, stream));
  ZEN_RETURN_IF_ERROR(readBad(comm, b, stream, "blocks pull check", &badBlock));
  if (badBlock != ~0ull) {
    return ZEN_ERROR(StatusCode::kIoError,
                     "blocks: corrupt pull part from rank {}: a block outside its range, out of "
                     "order or with a bad row mask",
                     listOf(pullCounts, badBlock));
  }
  const int64_t outRows = hostWords[1];
  if (o.denseOutput) {
    ZEN_CHECK_CUDA(cudaMemsetAsync(c.denseOut.data, 0, c.denseOut.bytes(), stream));
    ZEN_RETURN_IF_ERROR(launchBlocksDecodeDense(
        g, in.dtype, ids, masks, rows, static_cast<int64_t>(total), c.denseOut.data, stream));
  } else {
    GpuSparse& s = result->sparse;
    s.numRows = in.numRows;
    s.rowSize = in.rowSize;
    s.dtype = in.dtype;
    s.deviceIndex = in.device.index;
    ZEN_RETURN_IF_ERROR(s.reserve(std::max<int64_t>(outRows, 1)));
    s.nnz = outRows;
    ZEN_RETURN_IF_ERROR(launchBlocksDecodeSparse(
        g, in.dtype, ids, masks, rows, b.slots.as<const int64_t>(), static_cast<int64_t>(total),
        s.indices.as<int64_t>(), s.values.data(), stream));
  }
  ZEN_RETURN_IF_ERROR(comm.wait(stream, "blocks decode"));
  result->stats.outputNnz = outRows;
  result->stats.imbalance = imbalanceOf(loads);
  clock.mark("decode");
  return Status::ok();
}

}  // namespace zen::cuda
