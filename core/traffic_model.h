#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zen {

// Closed-form traffic of the synchronization schemes (ALGORITHMS.md §2, §4, §6), in bytes
// received per rank (for the symmetric schemes also the bytes sent), written in terms of
// quantities one can measure on a step: no bandwidth, no latency, no message headers, no
// count exchange. The paper's times are these bytes divided by the bandwidth b.
struct TrafficInputs {
  int n = 1;                 // ranks
  int64_t numRows = 0;       // |G|, rows (units) of the dense tensor
  double rankNnz = 0;        // mean distinct rows per rank before aggregation: d * |G|
  double aggregatedNnz = 0;  // distinct rows of the sum of all n ranks: gamma_n * d * |G|
  size_t rowBytes = 4;       // bytes of one value row (rowSize * dtype size)
  size_t indexBytes = 4;     // bytes of one index on the wire (4: BP local positions)
};

struct TrafficEstimate {
  double push = 0;  // phase 1: scatter to the owners / first half
  double pull = 0;  // phase 2: gather of the aggregates
  double total() const { return push + pull; }
};

// Dense ring allreduce: 2 (n - 1) / n * M, M = |G| * rowBytes (push = reduce-scatter,
// pull = allgather, (n - 1) / n * M each).
TrafficEstimate denseAllreduceTraffic(int n, int64_t numRows, size_t rowBytes);

// Balanced Parallelism, COO both ways: each rank keeps 1/n of its non-zeros and of the
// aggregate, so push = (n - 1) / n * rankNnz * (indexBytes + rowBytes) and
// pull = (n - 1) / n * aggregatedNnz * (indexBytes + rowBytes). With indexBytes = rowBytes
// the total is the paper's 2 (n - 1) / n * (gamma_n + 1) * d * M.
TrafficEstimate bpCooTraffic(const TrafficInputs& in);

// Balanced Parallelism as Zen runs it: COO push (4-byte local positions, indexBytes), hash
// bitmap pull: pull = (n - 1) / n * (|G| / 8 + aggregatedNnz * rowBytes), the n - 1 other
// servers' bitmaps and rows (the n bitmaps together are ceil(|G| / 8) bytes).
TrafficEstimate bpHashBitmapTraffic(const TrafficInputs& in);

// Balanced Parallelism as the zen scheme runs it (ops/sparse_allreduce_zen.cc): COO push as
// above, and each Pull part (|G| / n positions, aggregatedNnz / n rows) in the smallest of
// its encodings: COO positions (indexBytes each), the hash bitmap (|G| / n bits), the
// Elias-Fano code of its positions (a (L + 1) + |G| / (n 2^L) bits, L = floor(log2(|G| /
// aggregatedNnz)); core/elias_fano.h), or the dense rows alone when every position is
// occupied; pull = (n - 1) x that part.
TrafficEstimate bpZenTraffic(const TrafficInputs& in);

// AGsparse (allgather of every rank's COO, local sum): (n - 1) * rankNnz * (indexBytes +
// rowBytes) received, linear in n. Reported as pull; push is 0.
TrafficEstimate agSparseTraffic(const TrafficInputs& in);

// Hierarchical Centralization (SparCML, recursive doubling, n a power of two): in step i
// = 1..log2 n each rank exchanges its merge of 2^(i-1) ranks with its partner.
// mergedNnz[i - 1] = distinct rows of that merge (gamma_{2^(i-1)} * d * |G|); a step sends
// min(COO bytes, dense bytes |G| * rowBytes) (SparCML's dense switch). The paper writes the
// sum as 2 * sum_i gamma_{2^(i-1)} * d * M (the 2 being the indices when indexBytes =
// rowBytes). Reported as push; pull is 0.
TrafficEstimate hcTraffic(const std::vector<double>& mergedNnz,
                          int64_t numRows,
                          size_t indexBytes,
                          size_t rowBytes);

// Aggregated density above which Pull's hash bitmap is smaller than COO for it:
// 1 / (8 * indexBytes) (1/32 for 4-byte indices).
double bitmapBreakEvenDensity(size_t indexBytes);

}  // namespace zen
