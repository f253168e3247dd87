#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/push_lists.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace zen {

struct BpRoundOptions {
  uint64_t seed = 0x2e2;      // IndexMap seed: owner and local position of every index
  int hashFunctions = 3;      // Algorithm 1's k
  double memoryFactor = 1.5;  // Algorithm 1's r1 = memoryFactor * nnz / n
  bool average = false;       // Average (scale 1/n) instead of Sum
  bool denseOutput = false;   // also decode into a dense [numRows x rowSize] buffer
  ThreadPool* pool = nullptr;
};

// Payload bytes one rank puts on / takes off the wire in one round, self-traffic excluded
// (a rank does not send to itself). Pull is modelled as direct sends: server j sends its
// (bitmap, values) to each of the n - 1 other ranks.
struct BpRankTraffic {
  int64_t pushSent = 0;             // positions + rows to the n - 1 other servers
  int64_t pushRecv = 0;             // positions + rows from the n - 1 other ranks
  int64_t pullSent = 0;             // (n - 1) x this server's bitmap + rows
  int64_t pullRecv = 0;             // the n - 1 other servers' bitmaps + rows
  int64_t bitmapBytesReceived = 0;  // all n bitmaps incl. its own: ceil(|G| / 8)
};

struct BpRoundResult {
  // The allreduce result as a coalesced row-sparse tensor, indices ascending: every row some
  // rank sent (union semantics: a row that sums to zero is still there).
  SparseTensor output;
  std::vector<std::byte> dense;  // the same, dense, when options.denseOutput
  std::vector<BpRankTraffic> traffic;
  std::vector<int64_t> rankNnz;              // per rank: distinct rows pushed (duplicates summed)
  std::vector<int64_t> pushPerServer;        // per server: push entries received, incl. its own
  std::vector<int64_t> aggregatedPerServer;  // per server: distinct rows after aggregation
  int64_t aggregatedNnz = 0;
  double pushImbalance = 1.0;  // max / mean of pushPerServer (1 when nothing was pushed)
  double pullImbalance = 1.0;  // max / mean of aggregatedPerServer
  double gamma = 0.0;          // densification: aggregatedNnz / mean rankNnz (0 if none)
  PartitionStats partition;    // Algorithm 1's statistics summed over ranks
};

// One round of Balanced Parallelism (ALGORITHMS.md §5) simulated in one process: every rank
// partitions with Algorithm 1, "sends" list p to server p, every server aggregates and
// encodes with Algorithm 2, and the n parts are decoded once (every rank receives the same
// bytes; the traffic is counted for each). ranks[i] is rank i's tensor; all must agree on
// numRows, rowSize and dtype and live on the CPU.
Result<BpRoundResult> simulateBpRound(const std::vector<SparseView>& ranks,
                                      const BpRoundOptions& options);

}  // namespace zen
