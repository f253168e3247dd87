// One Balanced-Parallelism round in one process (ALGORITHMS.md §5), for tests, the traffic
// model check and the benchmarks; the distributed version lives in ops/.
//
// Steps (n ranks, |G| rows):
//   1. every rank i: Algorithm 1 (HashPartitioner) -> n Push lists keyed by owner.
//   2. "all-to-all-v": list p of rank i goes to server p (kept in memory, bytes counted).
//   3. every server j (parallel over servers): PartitionAggregator scatter-adds the n lists
//      in rank order, then Algorithm 2 encodes (bitmap_j, rows_j), scaled by 1/n for Average.
//   4. "allgather-v": every rank receives all n parts; they are decoded once (identical on
//      every rank) into a sorted SparseTensor and, on request, a dense buffer.
// Bytes on the wire per rank i (self-traffic excluded):
//   push sent  = sum_{p != i} count_i(p) * (4 + rowBytes)
//   push recv  = sum_{r != i} count_r(i) * (4 + rowBytes)
//   pull sent  = (n - 1) * (ceil(|I_i| / 8) + nnz_i * rowBytes)
//   pull recv  = sum_{j != i} (ceil(|I_j| / 8) + nnz_j * rowBytes)
// The count exchange (n integers per rank) is not counted.
#include "core/bp_round.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

#include "core/aggregator.h"
#include "core/hash_bitmap.h"
#include "core/hash_partitioner.h"
#include "core/index_map.h"

namespace zen {
namespace {

Status withRank(const Status& s, const char* what, int64_t rank) {
  if (s.isOk()) return s;
  return ZEN_ERROR(s.code(), "{} {}: {}", what, rank, s.message());
}

Status validateRanks(const std::vector<SparseView>& ranks) {
  ZEN_CHECK_ARG(!ranks.empty(), "a round needs at least one rank");
  const SparseView& first = ranks[0];
  for (size_t i = 0; i < ranks.size(); ++i) {
    const SparseView& r = ranks[i];
    ZEN_CHECK_ARG(r.device.kind == Device::Kind::kCpu,
                  "rank {} tensor is on {}, the simulation runs on the CPU", i,
                  r.device.toString());
    ZEN_CHECK_ARG(r.dtype == first.dtype, "rank {} has dtype {}, rank 0 {}", i,
                  dataTypeName(r.dtype), dataTypeName(first.dtype));
    ZEN_CHECK_ARG(r.numRows == first.numRows && r.rowSize == first.rowSize,
                  "rank {} has {} rows x {}, rank 0 {} rows x {}", i, r.numRows, r.rowSize,
                  first.numRows, first.rowSize);
    ZEN_RETURN_IF_ERROR(withRank(validateSparse(r), "rank", static_cast<int64_t>(i)));
  }
  return Status::ok();
}

double imbalance(const std::vector<int64_t>& load) {
  int64_t total = 0, mx = 0;
  for (int64_t v : load) {
    total += v;
    mx = std::max(mx, v);
  }
  if (total == 0) return 1.0;
  return static_cast<double>(mx) * static_cast<double>(load.size()) / static_cast<double>(total);
}

void forEach(ThreadPool* pool, int64_t tasks, const std::function<void(int64_t)>& fn) {
  if (pool != nullptr) {
    pool->parallelFor(tasks, fn);
  } else {
    for (int64_t t = 0; t < tasks; ++t) fn(t);
  }
}

Status firstError(const std::vector<Status>& statuses) {
  for (const Status& s : statuses) {
    if (!s.isOk()) return s;
  }
  return Status::ok();
}

}  // namespace

Result<BpRoundResult> simulateBpRound(const std::vector<SparseView>& ranks,
                                      const BpRoundOptions& options) {
  ZEN_RETURN_IF_ERROR(validateRanks(ranks));
  const int n = static_cast<int>(ranks.size());
  const int64_t numRows = ranks[0].numRows;
  const int64_t rowSize = ranks[0].rowSize;
  const DataType dtype = ranks[0].dtype;
  const size_t rowBytes = ranks[0].rowBytes();
  const IndexMap map(static_cast<uint64_t>(numRows), n, options.seed);
  BpRoundResult result;

  // 1. Push partitioning, one rank after another (the partitioner owns the pool meanwhile).
  // Each rank gets its own partitioner, as it would in a real job. The partitioner needs a
  // pool; without one it runs on a single-thread pool.
  ThreadPool inlinePool(1);
  ThreadPool* partitionPool = options.pool != nullptr ? options.pool : &inlinePool;
  HashPartitionOptions hashOptions;
  hashOptions.hashFunctions = options.hashFunctions;
  hashOptions.memoryFactor = options.memoryFactor;
  std::vector<PushLists> lists(n);
  result.rankNnz.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    HashPartitioner partitioner(map, hashOptions, partitionPool);
    PartitionStats stats;
    ZEN_RETURN_IF_ERROR(withRank(partitioner.partition(ranks[i], &lists[i], &stats), "rank", i));
    ZEN_CHECK_ARG(lists[i].numParts() == n, "rank {}: partitioner produced {} lists for {} parts",
                  i, lists[i].numParts(), n);
    result.rankNnz[i] = lists[i].total();
    result.partition.input += stats.input;
    result.partition.unique += stats.unique;
    result.partition.duplicates += stats.duplicates;
    result.partition.spilled += stats.spilled;
    result.partition.overflowed += stats.overflowed;
    result.partition.lost += stats.lost;
    result.partition.scratchBytes = std::max(result.partition.scratchBytes, stats.scratchBytes);
  }

  // 2-3. Every server aggregates what the ranks sent it and encodes it.
  const double scale = options.average ? 1.0 / n : 1.0;
  std::vector<EncodedPart> parts(n);
  std::vector<Status> statuses(n);
  forEach(options.pool, n, [&](int64_t j) {
    PartitionAggregator agg;
    int64_t entries = 0;  // the step's, so that the aggregator picks its path once
    for (const PushLists& l : lists) entries += l.count(j);
    Status s = agg.reset(map, static_cast<uint32_t>(j), dtype, rowSize, entries);
    for (int r = 0; r < n && s.isOk(); ++r) {
      const PushLists& l = lists[r];
      const int64_t begin = l.offsets[j];
      s = withRank(agg.add(l.positions.data() + begin, l.row(begin), l.count(j)), "from rank", r);
    }
    if (s.isOk()) s = encode(agg, scale, &parts[j]);
    statuses[j] = withRank(s, "server", j);
  });
  ZEN_RETURN_IF_ERROR(firstError(statuses));

  // Traffic and balance.
  result.traffic.assign(n, BpRankTraffic{});
  result.pushPerServer.assign(n, 0);
  result.aggregatedPerServer.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < n; ++p) {
      result.pushPerServer[p] += lists[i].count(p);
      if (p == i) continue;
      const auto bytes = static_cast<int64_t>(lists[i].wireBytes(p));
      result.traffic[i].pushSent += bytes;
      result.traffic[p].pushRecv += bytes;
    }
  }
  for (int j = 0; j < n; ++j) {
    const auto wire = static_cast<int64_t>(parts[j].wireBytes());
    result.aggregatedPerServer[j] = parts[j].count;
    result.aggregatedNnz += parts[j].count;
    for (int i = 0; i < n; ++i) {
      result.traffic[i].bitmapBytesReceived += static_cast<int64_t>(parts[j].bitmap.size());
      if (i == j) continue;
      result.traffic[i].pullRecv += wire;
      result.traffic[j].pullSent += wire;
    }
  }
  result.pushImbalance = imbalance(result.pushPerServer);
  result.pullImbalance = imbalance(result.aggregatedPerServer);
  int64_t pushed = 0;
  for (int64_t v : result.rankNnz) pushed += v;
  result.gamma = pushed == 0
                     ? 0.0
                     : static_cast<double>(result.aggregatedNnz) * n / static_cast<double>(pushed);

  // 4. Decode the n parts (once: every rank receives the same bytes).
  std::vector<SparseTensor> decoded(n);
  forEach(options.pool, n, [&](int64_t j) {
    const EncodedPart& e = parts[j];
    statuses[j] = decodeToSparse(map, static_cast<uint32_t>(j), e.bitmap.data(), e.bitmap.size(),
                                 e.values.data(), e.values.size(), dtype, rowSize, &decoded[j]);
  });
  ZEN_RETURN_IF_ERROR(firstError(statuses));
  if (options.denseOutput) {
    result.dense.assign(static_cast<size_t>(numRows) * rowBytes, std::byte{0});
    DenseView view;
    view.data = result.dense.data();
    view.dtype = dtype;
    view.shape = TensorShape({numRows, rowSize});
    // Parts own disjoint rows, so they decode in parallel into one buffer.
    forEach(options.pool, n, [&](int64_t j) {
      const EncodedPart& e = parts[j];
      statuses[j] = decodeToDense(map, static_cast<uint32_t>(j), e.bitmap.data(), e.bitmap.size(),
                                  e.values.data(), e.values.size(), dtype, rowSize, view);
    });
    ZEN_RETURN_IF_ERROR(firstError(statuses));
  }

  // Sorted output: (index, part, row in part) ordered by index.
  std::vector<std::pair<int64_t, int64_t>> order;
  order.reserve(static_cast<size_t>(result.aggregatedNnz));
  for (int j = 0; j < n; ++j) {
    for (int64_t k = 0; k < decoded[j].nnz(); ++k) {
      order.emplace_back(decoded[j].indices[k], (static_cast<int64_t>(j) << 40) | k);
    }
  }
  std::sort(order.begin(), order.end());
  SparseTensor& out = result.output;
  out.numRows = numRows;
  out.rowSize = rowSize;
  out.dtype = dtype;
  out.indices.resize(order.size());
  out.values.resize(order.size() * rowBytes);
  for (size_t k = 0; k < order.size(); ++k) {
    const int64_t part = order[k].second >> 40;
    const int64_t row = order[k].second & ((int64_t{1} << 40) - 1);
    out.indices[k] = order[k].first;
    std::memcpy(out.row(static_cast<int64_t>(k)), decoded[part].row(row), rowBytes);
  }
  return result;
}

}  // namespace zen
