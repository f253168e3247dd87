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
//      dtype, absent rows zero). The mask keeps the union of the rows any rank sent.
//   3. aggregate: the owner sums the masked rows in the accumulator type (fp32 for 16-bit
//      floats) and ORs the masks; Average divides by n there; each row is rounded once.
//   4. pull (allgatherv): each owner sends (uint64 blocks it received, then its aggregated
//      blocks in the push encoding) to every rank.
//   5. decode every owner's part into the sparse (ascending) or dense output.
//
// Bytes on the wire per rank j, with blockBytes = 4 + ceil(R / 8) + R * rowBytes:
//   push sent     = (this rank's non-empty blocks owned by others) * blockBytes
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

#include "ops/byte_io.h"
#include "ops/sparse_allreduce.h"
#include "ops/sparse_rows.h"

namespace zen::ops {
namespace {

constexpr int64_t kBlockElements = 256;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct BlockGeometry {
  BlockGeometry(int64_t numRowsIn, int64_t rowSizeIn, int n)
      : numRows(numRowsIn),
        rowSize(rowSizeIn),
        rowsPerBlock(std::max<int64_t>(1, (kBlockElements + rowSizeIn - 1) / rowSizeIn)),
        numBlocks((numRowsIn + rowsPerBlock - 1) / rowsPerBlock),
        blocksPerOwner(std::max<int64_t>(1, (numBlocks + n - 1) / n)),
        maskBytes(static_cast<size_t>((rowsPerBlock + 7) / 8)) {}

  int owner(int64_t block) const { return static_cast<int>(block / blocksPerOwner); }
  int64_t firstBlock(int owner) const { return std::min(owner * blocksPerOwner, numBlocks); }
  int64_t rowsIn(int64_t block) const {
    return std::min(rowsPerBlock, numRows - block * rowsPerBlock);
  }
  size_t blockBytes(int64_t block, size_t valueSize) const {
    return 4 + maskBytes + static_cast<size_t>(rowsIn(block) * rowSize) * valueSize;
  }

  int64_t numRows;
  int64_t rowSize;
  int64_t rowsPerBlock;
  int64_t numBlocks;
  int64_t blocksPerOwner;
  size_t maskBytes;
};

// Walks the blocks of one encoded part (push or pull encoding, after any header), checking
// ids (ascending, inside [first, end)) and lengths before calling
// fn(block, mask, rowBytes) for each.
template <typename T, typename Fn>
Status forEachBlock(const BlockGeometry& g,
                    const uint8_t* data,
                    size_t bytes,
                    int64_t first,
                    int64_t end,
                    int peer,
                    Fn&& fn) {
  int64_t previous = first - 1;
  size_t at = 0;
  while (at < bytes) {
    const int64_t block = bytes - at >= 4 ? loadAt<uint32_t>(data + at, 0) : -1;
    if (block <= previous || block >= end || bytes - at < g.blockBytes(block, sizeof(T))) {
      return ZEN_ERROR(StatusCode::kIoError,
                       "blocks: corrupt part from rank {} at byte {} of {}: block {} (expected "
                       "ascending blocks in [{}, {}) after {}, each complete)",
                       peer, at, bytes, block, first, end, previous);
    }
    fn(block, data + at + 4, data + at + 4 + g.maskBytes);
    at += g.blockBytes(block, sizeof(T));
    previous = block;
  }
  return Status::ok();
}

bool maskBit(const uint8_t* mask, int64_t i) {
  return (mask[i / 8] >> (i % 8)) & 1;
}

// Step 2's payloads: this rank's coalesced rows cut into blocks, one buffer per owner.
template <typename T>
std::vector<ByteVector> encodePush(const BlockGeometry& g, const SparseTensor& rows, int n) {
  std::vector<ByteVector> parts(static_cast<size_t>(n));
  const size_t rowBytes = static_cast<size_t>(g.rowSize) * sizeof(T);
  int64_t current = -1;
  size_t blockAt = 0;  // offset of the current block in its owner's buffer
  for (size_t k = 0; k < rows.indices.size(); ++k) {
    const int64_t block = rows.indices[k] / g.rowsPerBlock;
    ByteVector& part = parts[g.owner(block)];
    if (block != current) {
      current = block;
      blockAt = part.size();
      const auto id = static_cast<uint32_t>(block);
      appendBytes(&part, &id, 1);
      part.resize(part.size() + g.blockBytes(block, sizeof(T)) - 4, 0);
    }
    const int64_t row = rows.indices[k] - block * g.rowsPerBlock;
    part[blockAt + 4 + row / 8] |= static_cast<uint8_t>(1u << (row % 8));
    std::memcpy(part.data() + blockAt + 4 + g.maskBytes + row * rowBytes,
                rows.values.data() + k * rowBytes, rowBytes);
  }
  return parts;
}

// Step 3: one owner's aggregation over its block range.
template <typename T>
class BlockOwner {
 public:
  using A = AccumulatorT<T>;

  BlockOwner(const BlockGeometry& g, int rank)
      : g_(g),
        first_(g.firstBlock(rank)),
        end_(g.firstBlock(rank + 1)),
        firstRow_(first_ * g.rowsPerBlock),
        rows_(std::max<int64_t>(0, std::min(end_ * g.rowsPerBlock, g.numRows) - firstRow_)),
        acc_(static_cast<size_t>(rows_ * g.rowSize), A{0}),
        seen_(static_cast<size_t>(rows_), 0) {}

  Status add(const ByteVector& part, int peer) {
    const size_t rowSize = static_cast<size_t>(g_.rowSize);
    return forEachBlock<T>(g_, part.data(), part.size(), first_, end_, peer,
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
  }

  // Step 4's payload: blocks received, then the aggregated blocks, scaled and rounded once.
  ByteVector encodePull(int divisor) const {
    ByteVector out;
    appendBytes(&out, &received_, 1);
    std::vector<T> rows(static_cast<size_t>(g_.rowsPerBlock * g_.rowSize));
    for (int64_t block = first_; block < end_; ++block) {
      const int64_t base = block * g_.rowsPerBlock - firstRow_;
      const int64_t count = g_.rowsIn(block);
      if (std::none_of(seen_.begin() + base, seen_.begin() + base + count,
                       [](uint8_t s) { return s != 0; })) {
        continue;
      }
      const auto id = static_cast<uint32_t>(block);
      appendBytes(&out, &id, 1);
      const size_t maskAt = out.size();
      out.resize(out.size() + g_.maskBytes, 0);
      for (int64_t r = 0; r < count; ++r) {
        if (seen_[base + r]) out[maskAt + r / 8] |= static_cast<uint8_t>(1u << (r % 8));
      }
      // The block's rows in one go: finishRow is element-wise.
      finishRow<T>(acc_.data() + base * g_.rowSize, count * g_.rowSize, divisor, rows.data());
      appendBytes(&out, rows.data(), static_cast<size_t>(count * g_.rowSize));
    }
    return out;
  }

 private:
  const BlockGeometry& g_;
  const int64_t first_;
  const int64_t end_;
  const int64_t firstRow_;
  const int64_t rows_;
  std::vector<A> acc_;         // [rows_ x rowSize]
  std::vector<uint8_t> seen_;  // per row: some rank sent it
  uint64_t received_ = 0;      // blocks received in the push, own included: the load
};

// Step 5: every owner's pull part into the output; returns the owners' loads in *loads.
template <typename T>
Status decodePull(const BlockGeometry& g,
                  const std::vector<ByteVector>& parts,
                  bool denseOutput,
                  SparseAllreduceResult* result,
                  std::vector<uint64_t>* loads) {
  const size_t rowBytes = static_cast<size_t>(g.rowSize) * sizeof(T);
  SparseTensor& s = result->sparse;
  if (denseOutput) result->dense.assign(static_cast<size_t>(g.numRows) * rowBytes, std::byte{0});
  int64_t rowsOut = 0;
  loads->assign(parts.size(), 0);
  for (size_t p = 0; p < parts.size(); ++p) {
    const ByteVector& part = parts[p];
    if (part.size() < sizeof(uint64_t)) {
      return ZEN_ERROR(StatusCode::kIoError,
                       "blocks: pull part from rank {} has {} bytes, expected at least 8", p,
                       part.size());
    }
    (*loads)[p] = loadAt<uint64_t>(part.data(), 0);
    const int owner = static_cast<int>(p);
    ZEN_RETURN_IF_ERROR(forEachBlock<T>(
        g, part.data() + 8, part.size() - 8, g.firstBlock(owner), g.firstBlock(owner + 1), owner,
        [&](int64_t block, const uint8_t* mask, const uint8_t* values) {
          for (int64_t r = 0; r < g.rowsIn(block); ++r) {
            if (!maskBit(mask, r)) continue;
            const int64_t index = block * g.rowsPerBlock + r;
            const uint8_t* row = values + r * rowBytes;
            if (denseOutput) {
              std::memcpy(result->dense.data() + index * rowBytes, row, rowBytes);
            } else {
              s.indices.push_back(index);
              const auto* b = reinterpret_cast<const std::byte*>(row);
              s.values.insert(s.values.end(), b, b + rowBytes);
            }
            ++rowsOut;
          }
        }));
  }
  result->stats.outputNnz = rowsOut;
  return Status::ok();
}

template <typename T>
Status runBlocks(const SparseAllreduceOptions& options, SparseAllreduceResult* result) {
  Transport& t = *options.transport;
  const int n = t.size();
  const BlockGeometry g(options.input.numRows, options.input.rowSize, n);
  ZEN_CHECK_ARG(g.numBlocks <= int64_t{std::numeric_limits<uint32_t>::max()} + 1,
                "blocks: {} rows make {} blocks of {} rows, more than 32-bit block ids address",
                g.numRows, g.numBlocks, g.rowsPerBlock);
  auto& phases = result->stats.phases;

  auto start = Clock::now();
  SparseTensor rows;
  ZEN_RETURN_IF_ERROR(coalesceRows({options.input}, 1, &rows));
  const std::vector<ByteVector> push = encodePush<T>(g, rows, n);
  phases.emplace_back("coalesce", secondsSince(start));

  start = Clock::now();
  std::vector<ConstBytes> sends(push.size());
  for (size_t p = 0; p < push.size(); ++p) sends[p] = ConstBytes{push[p].data(), push[p].size()};
  std::vector<ByteVector> received;
  ZEN_RETURN_IF_ERROR(t.alltoallv(sends, &received));
  phases.emplace_back("push", secondsSince(start));

  start = Clock::now();
  BlockOwner<T> owner(g, t.rank());
  for (int p = 0; p < n; ++p) ZEN_RETURN_IF_ERROR(owner.add(received[p], p));
  const ByteVector pull = owner.encodePull(options.op == ReduceOp::kAverage ? n : 1);
  phases.emplace_back("aggregate", secondsSince(start));

  start = Clock::now();
  std::vector<ByteVector> gathered;
  ZEN_RETURN_IF_ERROR(t.allgatherv(pull.data(), pull.size(), &gathered));
  phases.emplace_back("pull", secondsSince(start));

  start = Clock::now();
  std::vector<uint64_t> loads;
  result->sparse = emptyLike(options.input);
  ZEN_RETURN_IF_ERROR(decodePull<T>(g, gathered, options.denseOutput, result, &loads));
  const uint64_t total = std::accumulate(loads.begin(), loads.end(), uint64_t{0});
  const uint64_t busiest = *std::max_element(loads.begin(), loads.end());
  result->stats.imbalance = total == 0 ? 1.0 : static_cast<double>(busiest) * n / total;
  phases.emplace_back("decode", secondsSince(start));
  return Status::ok();
}

}  // namespace

Status sparseAllreduceBlocks(const SparseAllreduceOptions& options, SparseAllreduceResult* result) {
  // The dispatcher fills bytes, seconds and the scheme around this call.
  return dispatchDataType(options.input.dtype,
                          [&](auto tag) { return runBlocks<decltype(tag)>(options, result); });
}

}  // namespace zen::ops
