// The zen scheme: Balanced Parallelism (ALGORITHMS.md §5) over any Transport.
//
// Steps on rank r of n (|G| = numRows, rb = bytes per row, IndexMap(|G|, n, seed)):
//   1. partition: Algorithm 1 (HashPartitioner) splits the input into n Push lists of
//      (4-byte local position, row), this rank's duplicate indices summed.
//   2. push: one alltoallv; list p goes to rank p as a COO (positions) payload behind this
//      rank's call summary (ops/call_summary.h; a failed rank, or one with no rows, sends the
//      summary alone). The own list stays local (the summary alone to self). The summaries'
//      verdict comes before any payload is read: an error, or no rows anywhere, ends the call
//      here on every rank alike.
//   3. aggregate: server r validates the n - 1 payloads, then scatter-adds all n lists in rank
//      order into its |I_r| accumulator rows (fp32 for 16-bit floats, PartitionAggregator).
//   4. encode: Algorithm 2 (core/hash_bitmap.h), scaled by 1/n for Average, then the fewest
//      bytes of four Pull encodings, told apart by the payload's kind byte: COO (ascending
//      positions + rows) for a handful of rows, the Elias-Fano code of the positions + rows
//      (core/elias_fano.h) when the aggregate is sparse, hash bitmap + rows when it is dense,
//      dense rows when every position of the part is occupied. (Dense for a merely nearly full
//      part would lose which rows were sent, the union the sparse output reports; it would
//      save at most 1/(8 rb) of the part's bytes.)
//   5. pull: one allgatherv of the n encoded parts.
//   6. decode: every part, own included, validated, into the dense output or into (index,
//      row) pairs sorted by index.
// Bytes on the wire per rank (16-byte header per message, arrays padded to 8 bytes;
// c_rp = entries rank r pushes to p, a_j = aggregated rows of part j; 56 the call summary):
//   push sent  = sum_{p != r} 56 + 16 + pad8(4 c_rp) + c_rp rb;  push recv likewise with c_pr
//                (56 alone from a rank with no rows)
//   pull sent  = (n - 1) part_r;                             pull recv = sum_{j != r} part_j
//   part_j     = min(16 + pad8(4 a_j) + a_j rb,              COO
//                    24 + pad8(ceil(a_j L / 8))              Elias-Fano, L = floor(log2(|I_j| /
//                       + pad8(ceil(H / 8)) + a_j rb,          a_j)), H = a_j + (|I_j| - 1) >> L
//                    24 + pad8(ceil(|I_j| / 8)) + a_j rb,    hash bitmap
//                    24 + |I_j| rb if a_j = |I_j|)           dense
// This is core/traffic_model.h's bpZenTraffic (with bitmaps only: bpHashBitmapTraffic, the
// paper's) plus the headers and the (n - 1) x 56 bytes of call summaries each way, in two
// rounds (Push, Pull).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/aggregator.h"
#include "core/bitmap_walk.h"
#include "core/default_init_allocator.h"
#include "core/distinct_key_ranks.h"
#include "core/hash_bitmap.h"
#include "core/hash_partitioner.h"
#include "core/index_map.h"
#include "core/radix_sort.h"
#include "ops/call_summary.h"
#include "ops/sparse_allreduce.h"
#include "ops/sparse_rows.h"
#include "ops/wire_format.h"

namespace zen::ops {

namespace {

// Entries [begin, end) of the sparse decode's keys, all of part `part`: one task of placing
// rows in parallel.
struct DecodePiece {
  int part;
  size_t begin;
  size_t end;
};

}  // namespace

// The zen scheme's memory, kept across calls; rebuilt when its key changes.
struct SparseAllreduceWorkspace::Zen {
  // Key: what the partitioner and aggregator were built for.
  int64_t numRows = -1;
  int n = 0;
  uint64_t seed = 0;
  int hashFunctions = 0;
  double memoryFactor = 0;
  ThreadPool* pool = nullptr;

  IndexMap map;
  std::unique_ptr<HashPartitioner> partitioner;
  std::unique_ptr<PartitionAggregator> aggregator;
  PushLists lists;
  std::vector<ByteVector> pushPayloads;
  std::vector<ByteVector> received;
  std::vector<CooPositionsView> pushedViews;  // the received Push lists, validated
  EncodedPart encoded;
  ByteVector pullPayload;
  std::vector<ByteVector> gathered;
  // Each Pull part's positions where its payload carries them coded (Elias-Fano).
  std::vector<std::vector<uint32_t>> pullPositions;
  // decodeSparse: every part's indices back to back (part j's from partStart[j]), its rows
  // read in place from `gathered` (part j's row 0 at partRows[j]).
  std::vector<uint64_t, DefaultInitAllocator<uint64_t>> keys;
  std::vector<size_t> partStart;
  std::vector<const std::byte*> partRows;
  DistinctKeyRanks ranks;
  std::vector<DecodePiece> pieces;  // the counting path's tasks when a pool places the rows
  std::vector<KeyValue> entries;    // the radix path: (index, row address)
  std::vector<KeyValue> sortScratch;
};

SparseAllreduceWorkspace::Zen& SparseAllreduceWorkspace::zen() {
  if (zen_ == nullptr) zen_.reset(new Zen());
  return *zen_;
}

void SparseAllreduceWorkspace::Release::operator()(Zen* zen) const {
  delete zen;
}

namespace {

using Zen = SparseAllreduceWorkspace::Zen;

// Appends (name, seconds since the last mark) to the stats.
class PhaseClock {
 public:
  explicit PhaseClock(SyncStats* stats) : stats_(stats), last_(Clock::now()) {}
  void mark(const char* name) {
    const auto now = Clock::now();
    stats_->phases.emplace_back(name, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

 private:
  SyncStats* stats_;
  Clock::time_point last_;
};

void prepare(const SparseAllreduceOptions& o, int n, Zen* ws) {
  const SparseView& in = o.input;
  if (ws->partitioner != nullptr && ws->numRows == in.numRows && ws->n == n && ws->seed == o.seed &&
      ws->hashFunctions == o.hashFunctions && ws->memoryFactor == o.memoryFactor &&
      ws->pool == o.pool) {
    return;
  }
  ws->numRows = in.numRows;
  ws->n = n;
  ws->seed = o.seed;
  ws->hashFunctions = o.hashFunctions;
  ws->memoryFactor = o.memoryFactor;
  ws->pool = o.pool;
  ws->map = IndexMap(static_cast<uint64_t>(in.numRows), n, o.seed);
  HashPartitionOptions hashOptions;
  hashOptions.hashFunctions = o.hashFunctions;
  hashOptions.memoryFactor = o.memoryFactor;
  ws->partitioner = std::make_unique<HashPartitioner>(ws->map, hashOptions, o.pool);
  ws->aggregator = std::make_unique<PartitionAggregator>(o.pool);
}

Status fromRank(const Status& s, const char* what, int rank) {
  if (s.isOk()) return s;
  return ZEN_ERROR(s.code(), "zen: {} from rank {}: {}", what, rank, s.message());
}

// A task of decodeSparse's parallel placing: at least this many rows, and about this many
// bytes of them, so that a hand-off to a worker costs little against the stores.
constexpr size_t kMinRowsPerDecodeTask = 4096;
constexpr size_t kBytesPerDecodeTask = size_t{256} << 10;

// Step 4's choice of Pull encoding for an Algorithm 2 part of |I_j| = partSize positions.
void encodePullPart(const EncodedPart& e, uint64_t partSize, const RowFormat& f, ByteVector* out) {
  const size_t rb = f.rowBytes();
  if (partSize > 0 && static_cast<uint64_t>(e.count) == partSize) {
    // Full: bit order is position order, so the values are already the dense rows.
    encodeDenseRange(f, 0, e.values.data(), e.count, out);
    return;
  }
  const size_t coo = cooPositionsBytes(e.count, rb);
  const size_t bitmap = bitmapPartBytes(partSize, e.count, rb);
  if (eliasFanoPartBytes(partSize, e.count, rb) < std::min(coo, bitmap)) {
    EliasFanoPartSlots slots = startEliasFanoPart(f, partSize, e.count, out);
    forEachSetBit(e.bitmap.data(), e.bitmap.size(), [&](uint64_t p) { slots.positions.push(p); });
    slots.positions.finish();
    if (e.count > 0) std::memcpy(slots.values, e.values.data(), e.values.size());
    return;
  }
  if (coo < bitmap) {
    const CooPositionsSlots slots = startCooPositions(f, e.count, out);
    uint32_t* pos = slots.positions;
    forEachSetBit(e.bitmap.data(), e.bitmap.size(),
                  [&](uint64_t p) { *pos++ = static_cast<uint32_t>(p); });
    if (e.count > 0) std::memcpy(slots.values, e.values.data(), e.values.size());
    return;
  }
  encodeBitmapPart(f, e.bitmap.data(), partSize, e.values.data(), e.count, out);
}

// Validates part j's Pull payload and calls fn(indices, rows, n) for its rows in order, in
// batches: indices[i] is the global index of row i of `rows` (contiguous, rowBytes each). An
// Elias-Fano part's positions are decoded into *positions first.
template <typename Fn>
Result<int64_t> visitPullPart(const Zen& ws,
                              uint32_t j,
                              const ByteVector& payload,
                              const RowFormat& f,
                              std::vector<uint32_t>* positions,
                              Fn&& fn) {
  const uint64_t partSize = ws.map.partSize(static_cast<int>(j));
  const size_t rb = f.rowBytes();
  ZEN_ASSIGN_OR_RETURN(const PayloadKind kind, peekPayloadKind(payload.data(), payload.size()));
  const std::byte* rows = nullptr;
  auto batch = [&](const uint64_t* idx, size_t n, int64_t first) {
    fn(idx, rows + static_cast<size_t>(first) * rb, n);
  };
  switch (kind) {
    case PayloadKind::kCooPositions: {
      ZEN_ASSIGN_OR_RETURN(const CooPositionsView v,
                           decodeCooPositions(payload.data(), payload.size(), f, partSize,
                                              static_cast<int64_t>(partSize), true));
      rows = v.values;
      forEachPositionIndex(
          ws.map, j, v.count, [&](int64_t k) { return uint64_t{v.positions[k]}; }, batch);
      return v.count;
    }
    case PayloadKind::kBitmap: {
      ZEN_ASSIGN_OR_RETURN(const BitmapPartView v,
                           decodeBitmapPart(payload.data(), payload.size(), f, partSize));
      rows = v.values;
      forEachSetBitIndex(ws.map, j, v.bitmap, v.bitmapBytes, batch);
      return v.count;
    }
    case PayloadKind::kEliasFano: {
      ZEN_ASSIGN_OR_RETURN(
          const EliasFanoPartView v,
          decodeEliasFanoPart(payload.data(), payload.size(), f, partSize, positions));
      rows = v.values;
      forEachPositionIndex(
          ws.map, j, v.count, [&](int64_t k) { return uint64_t{v.positions[k]}; }, batch);
      return v.count;
    }
    case PayloadKind::kDenseRange: {
      ZEN_ASSIGN_OR_RETURN(const DenseRangeView v,
                           decodeDenseRange(payload.data(), payload.size(), f, partSize));
      ZEN_CHECK_ARG(v.begin == 0 && static_cast<uint64_t>(v.count) == partSize,
                    "dense part covers positions [{}, {}), expected the whole part [0, {})",
                    v.begin, v.begin + v.count, partSize);
      rows = v.values;
      forEachPositionIndex(
          ws.map, j, v.count, [](int64_t k) { return static_cast<uint64_t>(k); }, batch);
      return v.count;
    }
    default:
      return ZEN_ERROR(StatusCode::kInvalidArgument, "a {} payload is no Pull part",
                       payloadKindName(kind));
  }
}

// Step 6 into the dense output: parts own disjoint rows, so they decode in parallel.
Status decodeDense(Zen& ws,
                   const RowFormat& f,
                   const SparseAllreduceOptions& o,
                   SparseAllreduceResult* result) {
  const DenseRows dense = zeroedDenseOutput(o, result);
  ThreadPool* pool = o.pool;
  const int n = ws.n;
  std::vector<Result<int64_t>> counts(n, Status::ok());
  ws.pullPositions.resize(static_cast<size_t>(n));
  auto decodePart = [&](int64_t j) {
    counts[j] = visitPullPart(ws, static_cast<uint32_t>(j), ws.gathered[j], f, &ws.pullPositions[j],
                              [&](const uint64_t* idx, const std::byte* rows, size_t n) {
                                dense.copyRows(idx, rows, n);
                              });
  };
  if (pool != nullptr) {
    pool->parallelFor(n, decodePart);
  } else {
    for (int j = 0; j < n; ++j) decodePart(j);
  }
  int64_t total = 0;
  for (int j = 0; j < n; ++j) {
    ZEN_RETURN_IF_ERROR(fromRank(counts[j].status(), "pull part", j));
    total += counts[j].value();
  }
  result->stats.outputNnz = total;
  return Status::ok();
}

// Splits every part's entries into pieces of at most `step` for decodeSparse's tasks.
void splitIntoPieces(const std::vector<size_t>& partStart,
                     size_t step,
                     std::vector<DecodePiece>* out) {
  out->clear();
  for (size_t j = 0; j + 1 < partStart.size(); ++j) {
    for (size_t b = partStart[j]; b < partStart[j + 1]; b += step) {
      out->push_back(DecodePiece{static_cast<int>(j), b, std::min(b + step, partStart[j + 1])});
    }
  }
}

// Step 6 into result->sparse: (index, row) of every part, sorted by index, each row copied
// once from the gathered payloads into its sorted slot (by the pool's threads, when there
// are enough rows).

Status decodeSparse(
    Zen& ws, const RowFormat& f, int64_t numRows, ThreadPool* pool, SparseAllreduceResult* result) {
  const size_t rb = f.rowBytes();
  const int n = ws.n;
  ws.keys.clear();
  ws.pullPositions.resize(static_cast<size_t>(n));
  ws.partStart.assign(static_cast<size_t>(n) + 1, 0);
  ws.partRows.assign(static_cast<size_t>(n), nullptr);
  for (int j = 0; j < n; ++j) {
    const size_t begin = ws.keys.size();
    ws.partStart[j] = begin;
    const Result<int64_t> count =
        visitPullPart(ws, static_cast<uint32_t>(j), ws.gathered[j], f, &ws.pullPositions[j],
                      [&](const uint64_t* idx, const std::byte* rows, size_t m) {
                        const size_t at = ws.keys.size();
                        if (at == begin) ws.partRows[j] = rows;  // the part's first batch
                        ws.keys.resize(at + m);                  // not zeroed: copied over next
                        std::memcpy(ws.keys.data() + at, idx, m * sizeof(uint64_t));
                      });
    ZEN_RETURN_IF_ERROR(fromRank(count.status(), "pull part", j));
  }
  const size_t total = ws.keys.size();
  ws.partStart[n] = total;
  SparseTensor& out = result->sparse;
  out.numRows = numRows;
  out.rowSize = f.rowSize;
  out.dtype = f.dtype;
  out.indices.resize(total);
  // Not zeroed (RowBytes): both placings below write every slot exactly once, the ranks
  // being a permutation of 0..total-1.
  out.values.resize(total * rb);
  // Raw pointers, captured by value: through the vectors, every row's store (std::byte may
  // alias anything) would reload their data pointers.
  int64_t* const indices = out.indices.data();
  std::byte* const values = out.values.data();
  // Parts own disjoint index sets and no part repeats a position: the indices are distinct
  // and below numRows, so each one's slot can be counted (a repeat would be a bug upstream,
  // refused by build). Much sparser outputs, where the count's table would outweigh the
  // entries, are radix-sorted instead. Rows of the common sizes are copied by fixed-size
  // moves (withRowBytes), not a call each.
  const auto bound = static_cast<uint64_t>(numRows);
  if (DistinctKeyRanks::worthIt(total, bound)) {
    const Status built = ws.ranks.build(ws.keys.data(), total, bound);
    if (!built.isOk()) {
      return ZEN_ERROR(StatusCode::kInternal, "zen: decoded Pull parts: {}", built.message());
    }
    // The indices in order straight from the bitmap; only the rows are scattered (one
    // random store per entry instead of two: those stores are most of the decode's time).
    withRowBytes(rb, [&, values](auto bytes) {
      auto place = [&, values, bytes](const DecodePiece& piece) {
        const std::byte* const rows =
            ws.partRows[piece.part] + (piece.begin - ws.partStart[piece.part]) * bytes;
        ws.ranks.forEachRank(ws.keys.data() + piece.begin, piece.end - piece.begin,
                             [=](size_t i, uint64_t slot) {
                               std::memcpy(values + slot * bytes, rows + i * bytes, bytes);
                             });
      };
      // Slots are disjoint, so pieces place in parallel, the sorted keys beside them: on a
      // rank with spare cores this is most of the decode's time (one random store per row).
      const size_t step = std::max<size_t>(kMinRowsPerDecodeTask, kBytesPerDecodeTask / rb);
      if (pool != nullptr && pool->size() > 1 && total >= 2 * step) {
        splitIntoPieces(ws.partStart, step, &ws.pieces);
        const auto pieces = static_cast<int64_t>(ws.pieces.size());
        pool->parallelFor(pieces + 1, [&](int64_t task) {
          if (task == pieces) {
            ws.ranks.writeSortedKeys(indices);
          } else {
            place(ws.pieces[task]);
          }
        });
        return;
      }
      ws.ranks.writeSortedKeys(indices);
      for (int j = 0; j < n; ++j) place(DecodePiece{j, ws.partStart[j], ws.partStart[j + 1]});
    });
  } else {
    ws.entries.resize(total);
    for (int j = 0; j < n; ++j) {
      for (size_t k = ws.partStart[j], i = 0; k < ws.partStart[j + 1]; ++k, ++i) {
        ws.entries[k] = KeyValue{ws.keys[k], reinterpret_cast<uintptr_t>(ws.partRows[j] + i * rb)};
      }
    }
    radixSortByKey(&ws.entries, &ws.sortScratch);
    const KeyValue* const sorted = ws.entries.data();
    withRowBytes(rb, [=](auto bytes) {
      for (size_t k = 0; k < total; ++k) {
        indices[k] = static_cast<int64_t>(sorted[k].key);
        std::memcpy(values + k * bytes, reinterpret_cast<const std::byte*>(sorted[k].value), bytes);
      }
    });
  }
  result->stats.outputNnz = out.nnz();
  return Status::ok();
}

}  // namespace

Status sparseAllreduceZen(const SparseAllreduceOptions& o,
                          const CallInfo& callSummary,
                          SparseAllreduceResult* result) {
  Transport& t = *o.transport;
  const int n = t.size();
  const int r = t.rank();
  const SparseView& in = o.input;
  const RowFormat format{in.dtype, in.rowSize};
  SparseAllreduceWorkspace scratch;
  Zen& ws = o.workspace != nullptr ? o.workspace->zen() : scratch.zen();
  PhaseClock clock(&result->stats);
  const PushLists& lists = ws.lists;

  // 1. Algorithm 1 (not on a failed rank: its input may be what failed).
  CallInfo summary = callSummary;
  if (!summary.failed) {
    prepare(o, n, &ws);
    const Status partitioned = ws.partitioner->partition(in, &ws.lists, nullptr);
    if (!partitioned.isOk()) failCall(partitioned, &summary);  // told in the Push, not left
  }
  const bool hasRows = !summary.failed && in.nnz > 0;  // else the summary alone
  if (hasRows) {
    int64_t largest = 0;
    for (int p = 0; p < n; ++p) largest = std::max(largest, lists.count(p));
    result->stats.imbalance =
        lists.total() == 0 ? 1.0 : static_cast<double>(largest) * n / lists.total();
  }
  clock.mark("partition");

  // 2. Push, each list behind the call summary; the own list stays local.
  ws.pushPayloads.resize(n);
  std::vector<ConstBytes> messages(n);
  for (int p = 0; p < n; ++p) {
    const size_t at = startSummarized(summary, &ws.pushPayloads[p]);
    if (hasRows && p != r) {
      const int64_t begin = lists.offsets[p];
      encodeCooPositions(format, lists.positions.data() + begin, lists.row(begin), lists.count(p),
                         &ws.pushPayloads[p], at);
    }
    messages[p] = ConstBytes{ws.pushPayloads[p].data(), ws.pushPayloads[p].size()};
  }
  std::vector<ConstBytes> pushed;
  ZEN_RETURN_IF_ERROR(
      exchangeSummaries(t, messages, &ws.received, &pushed, &result->stats.totalNnz));
  clock.mark("push");
  if (result->stats.totalNnz == 0) return Status::ok();  // every rank stops here alike

  // 3. Aggregate, in rank order, every payload validated first: the step's entries then
  // choose the aggregator's path once (a switch part way copies the rows already summed).
  PartitionAggregator& agg = *ws.aggregator;
  const uint64_t partSize = ws.map.partSize(r);
  std::vector<CooPositionsView>& views = ws.pushedViews;
  views.assign(n, CooPositionsView{});
  int64_t entries = lists.count(r);
  for (int p = 0; p < n; ++p) {
    if (p == r || pushed[p].size == 0) continue;  // own list local; no rows: summary alone
    Result<CooPositionsView> view =
        decodeCooPositions(static_cast<const uint8_t*>(pushed[p].data), pushed[p].size, format,
                           partSize, static_cast<int64_t>(partSize), false);
    ZEN_RETURN_IF_ERROR(fromRank(view.status(), "push payload", p));
    views[p] = view.value();
    entries += views[p].count;
  }
  ZEN_RETURN_IF_ERROR(agg.reset(ws.map, static_cast<uint32_t>(r), in.dtype, in.rowSize, entries));
  for (int p = 0; p < n; ++p) {
    if (p == r) {
      const int64_t begin = lists.offsets[p];
      ZEN_RETURN_IF_ERROR(
          agg.add(lists.positions.data() + begin, lists.row(begin), lists.count(p)));
    } else if (views[p].count > 0) {
      ZEN_RETURN_IF_ERROR(agg.add(views[p].positions, views[p].values, views[p].count));
    }
  }
  clock.mark("aggregate");

  // 4-5. Algorithm 2, the Pull encoding, allgatherv.
  const double scale = o.op == ReduceOp::kAverage ? 1.0 / n : 1.0;
  ZEN_RETURN_IF_ERROR(encode(agg, scale, &ws.encoded));
  agg.clear();  // the rows encode just read are in cache now; the next reset's would be cold
  encodePullPart(ws.encoded, partSize, format, &ws.pullPayload);
  ZEN_RETURN_IF_ERROR(t.allgatherv(ws.pullPayload.data(), ws.pullPayload.size(), &ws.gathered));
  clock.mark("pull");

  // 6. Decode.
  Status decoded = o.denseOutput ? decodeDense(ws, format, o, result)
                                 : decodeSparse(ws, format, in.numRows, o.pool, result);
  clock.mark("decode");
  return decoded;
}

}  // namespace zen::ops
