// OmniReduce-style block aggregation (ALGORITHMS.md §6): the range-partitioned baseline whose
// weakness is skew (§1).
//
// Geometry: rows are grouped into blocks of R = max(1, ceil(256 / rowSize)) rows (256
// elements; the last block may be shorter); the B = ceil(|G| / R) blocks are split into n
// contiguous ranges of ceil(B / n) blocks and rank j owns range j, i.e. the rows
// [j * ceil(B / n) * R, (j + 1) * ceil(B / n) * R). Uniform ranges: skewed indices load the
// low ranks, which stats.imbalance (max / mean of the blocks each owner receives) shows.
//
// Steps:
//   1. coalesce: sort this rank's rows by index, sum repeated ones (accumulator type), round
//      each row once to the dtype (ops/sparse_rows.h, as Zen's Push does).
//   2. push (alltoallv): each block holding at least one of this rank's rows goes to its
//      owner as (uint32 block id, ceil(R / 8)-byte row mask, the block's rows densely in the
//      dtype, absent rows zero), behind this rank's call summary (ops/call_summary.h: a failed
//      rank sends the summary alone). The mask keeps the union of the rows any rank sent. The
//      summaries' verdict comes before any part is read: an error, or no rows anywhere, ends
//      the call here on every rank alike.
//   3. aggregate: the owner sums the masked rows in the accumulator type (fp32 for 16-bit
//      floats) and ORs the masks; Average divides by n there; each row is rounded once.
//   4. pull (allgatherv): each owner sends (uint64 blocks it received, then its aggregated
//      blocks in the push encoding) to every rank.
//   5. decode every owner's part into the sparse (ascending) or dense output.
// The geometry and the encodings, with their validating decoders, are in ops/blocks_wire.h.
//
// Bytes on the wire per rank j, with blockBytes = 4 + ceil(R / 8) + R * rowBytes:
//   push sent     = (n - 1) * 56 (the call summaries)
//                   + (this rank's non-empty blocks owned by others) * blockBytes
//   pull sent     = (n - 1) * (8 + aggregated non-empty blocks of range j * blockBytes)
//   pull received = sum over the other owners of the same.
// A block costs its full R rows however few are set: at low density that is up to R times
// COO, at high density it approaches the dense allreduce.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "ops/blocks_wire.h"
#include "ops/byte_io.h"
#include "ops/call_summary.h"
#include "ops/sparse_allreduce.h"
#include "ops/sparse_rows.h"

namespace zen::ops {
namespace {

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Step 3: one owner's aggregation over its block range.
template <typename T>
class BlockOwner {
 public:
  using A = AccumulatorT<T>;

  BlockOwner(const BlockGeometry& g, int rank)
      : g_(g),
        rank_(rank),
        first_(g.firstBlock(rank)),
        end_(g.firstBlock(rank + 1)),
        firstRow_(first_ * g.rowsPerBlock),
        rows_(std::max<int64_t>(0, std::min(end_ * g.rowsPerBlock, g.numRows) - firstRow_)),
        acc_(static_cast<size_t>(rows_ * g.rowSize), A{0}),
        seen_(static_cast<size_t>(rows_), 0) {}

  // Adds rank `peer`'s push part, validated whole before any of it is read.
  Status add(const ConstBytes& part, int peer) {
    const Result<BlocksPartView> decoded =
        decodeBlocksPush(static_cast<const uint8_t*>(part.data), part.size, g_, rank_);
    if (!decoded.isOk()) {
      return ZEN_ERROR(StatusCode::kIoError, "blocks: corrupt part from rank {}: {}", peer,
                       decoded.status().message());
    }
    const size_t rowSize = static_cast<size_t>(g_.rowSize);
    forEachBlock(g_, decoded.value(),
                 [&](int64_t block, const uint8_t* mask, const uint8_t* values) {
                   ++received_;
                   const int64_t base = block * g_.rowsPerBlock - firstRow_;
                   for (int64_t r = 0; r < g_.rowsIn(block); ++r) {
                     if (!maskBit(mask, r)) continue;
                     seen_[base + r] = 1;
                     A* dst = acc_.data() + (base + r) * g_.rowSize;
                     for (size_t e = 0; e < rowSize; ++e)
                       dst[e] += toAccumulator<A>(loadAt<T>(values, r * rowSize + e));
                   }
                 });
    return Status::ok();
  }

  // Step 4's payload: blocks received, then the aggregated blocks, scaled and rounded once.
  ByteVector encodePull(int divisor) const {
    ByteVector out;
    startBlocksPull(received_, &out);
    std::vector<T> rows(static_cast<size_t>(g_.rowsPerBlock * g_.rowSize));
    for (int64_t block = first_; block < end_; ++block) {
      const int64_t base = block * g_.rowsPerBlock - firstRow_;
      const int64_t count = g_.rowsIn(block);
      if (std::none_of(seen_.begin() + base, seen_.begin() + base + count,
                       [](uint8_t s) { return s != 0; })) {
        continue;
      }
      const BlockSlots slots = appendBlock(g_, block, &out);
      for (int64_t r = 0; r < count; ++r) {
        if (seen_[base + r]) out[slots.mask + r / 8] |= static_cast<uint8_t>(1u << (r % 8));
      }
      // The block's rows in one go: finishRow is element-wise.
      finishRow<T>(acc_.data() + base * g_.rowSize, count * g_.rowSize, divisor, rows.data());
      std::memcpy(out.data() + slots.rows, rows.data(), static_cast<size_t>(count) * g_.rowBytes());
    }
    return out;
  }

 private:
  const BlockGeometry& g_;
  const int rank_;
  const int64_t first_;
  const int64_t end_;
  const int64_t firstRow_;
  const int64_t rows_;
  std::vector<A> acc_;         // [rows_ x rowSize]
  std::vector<uint8_t> seen_;  // per row: some rank sent it
  uint64_t received_ = 0;      // blocks received in the push, own included: the load
};

// Step 5: every owner's pull part into `dense` (zeroed), or into the result's sparse output
// when that is null; returns the owners' loads in *loads.
template <typename T>
Status decodePull(const BlockGeometry& g,
                  const std::vector<ByteVector>& parts,
                  const DenseRows* dense,
                  SparseAllreduceResult* result,
                  std::vector<uint64_t>* loads) {
  const size_t rowBytes = static_cast<size_t>(g.rowSize) * sizeof(T);
  SparseTensor& s = result->sparse;
  int64_t rowsOut = 0;
  loads->assign(parts.size(), 0);
  for (size_t p = 0; p < parts.size(); ++p) {
    const int owner = static_cast<int>(p);
    const Result<BlocksPartView> decoded =
        decodeBlocksPull(parts[p].data(), parts[p].size(), g, owner);
    if (!decoded.isOk()) {
      return ZEN_ERROR(StatusCode::kIoError, "blocks: corrupt pull part from rank {}: {}", owner,
                       decoded.status().message());
    }
    (*loads)[p] = decoded.value().load;
    forEachBlock(g, decoded.value(),
                 [&](int64_t block, const uint8_t* mask, const uint8_t* values) {
                   for (int64_t r = 0; r < g.rowsIn(block); ++r) {
                     if (!maskBit(mask, r)) continue;
                     const int64_t index = block * g.rowsPerBlock + r;
                     const uint8_t* row = values + r * rowBytes;
                     if (dense != nullptr) {
                       std::memcpy(dense->row(index), row, rowBytes);
                     } else {
                       s.indices.push_back(index);
                       const auto* b = reinterpret_cast<const std::byte*>(row);
                       s.values.insert(s.values.end(), b, b + rowBytes);
                     }
                     ++rowsOut;
                   }
                 });
  }
  result->stats.outputNnz = rowsOut;
  return Status::ok();
}

Status checkBlockIds(const BlockGeometry& g) {
  ZEN_CHECK_ARG(g.numBlocks <= int64_t{std::numeric_limits<uint32_t>::max()} + 1,
                "blocks: {} rows make {} blocks of {} rows, more than 32-bit block ids address",
                g.numRows, g.numBlocks, g.rowsPerBlock);
  return Status::ok();
}

template <typename T>
Status runBlocks(const SparseAllreduceOptions& options,
                 const CallInfo& summary,
                 SparseAllreduceResult* result) {
  Transport& t = *options.transport;
  const int n = t.size();
  const BlockGeometry g(options.input.numRows, options.input.rowSize, n, sizeof(T));
  auto& phases = result->stats.phases;

  // A failure before the push travels in the summary, so that nobody waits for this rank.
  auto start = Clock::now();
  CallInfo mine = summary;
  SparseTensor rows;
  Status local = checkBlockIds(g);
  if (local.isOk()) local = coalesceRows({options.input}, 1, &rows, coalesceScratch(options));
  if (!local.isOk()) failCall(local, &mine);
  ByteVector lead;
  startSummarized(mine, &lead);
  const std::vector<ByteVector> push =
      mine.failed
          ? std::vector<ByteVector>(n, lead)
          : encodeBlocksPush(g, rows.indices.data(), rows.values.data(), rows.indices.size(), lead);
  phases.emplace_back("coalesce", secondsSince(start));

  start = Clock::now();
  std::vector<ConstBytes> sends(push.size());
  for (size_t p = 0; p < push.size(); ++p) sends[p] = ConstBytes{push[p].data(), push[p].size()};
  std::vector<ByteVector> received;
  std::vector<ConstBytes> parts;
  ZEN_RETURN_IF_ERROR(exchangeSummaries(t, sends, &received, &parts, &result->stats.totalNnz));
  phases.emplace_back("push", secondsSince(start));
  if (result->stats.totalNnz == 0) return Status::ok();  // every rank stops here alike

  start = Clock::now();
  BlockOwner<T> owner(g, t.rank());
  for (int p = 0; p < n; ++p) ZEN_RETURN_IF_ERROR(owner.add(parts[p], p));
  const ByteVector pull = owner.encodePull(options.op == ReduceOp::kAverage ? n : 1);
  phases.emplace_back("aggregate", secondsSince(start));

  start = Clock::now();
  std::vector<ByteVector> gathered;
  ZEN_RETURN_IF_ERROR(t.allgatherv(pull.data(), pull.size(), &gathered));
  phases.emplace_back("pull", secondsSince(start));

  start = Clock::now();
  std::vector<uint64_t> loads;
  DenseRows dense;  // (the dispatcher emptied result->sparse, keeping its capacity)
  if (options.denseOutput) dense = zeroedDenseOutput(options, result);
  ZEN_RETURN_IF_ERROR(
      decodePull<T>(g, gathered, options.denseOutput ? &dense : nullptr, result, &loads));
  const uint64_t total = std::accumulate(loads.begin(), loads.end(), uint64_t{0});
  const uint64_t busiest = *std::max_element(loads.begin(), loads.end());
  result->stats.imbalance = total == 0 ? 1.0 : static_cast<double>(busiest) * n / total;
  phases.emplace_back("decode", secondsSince(start));
  return Status::ok();
}

}  // namespace

Status sparseAllreduceBlocks(const SparseAllreduceOptions& options,
                             const CallInfo& summary,
                             SparseAllreduceResult* result) {
  // A failed rank's dtype may be none at all: it sends its summary alone (the verdict).
  if (summary.failed) return agreeOnCall(*options.transport, summary, &result->stats.totalNnz);
  // The dispatcher fills bytes, seconds and the scheme around this call.
  return dispatchDataType(options.input.dtype, [&](auto tag) {
    return runBlocks<decltype(tag)>(options, summary, result);
  });
}

}  // namespace zen::ops
