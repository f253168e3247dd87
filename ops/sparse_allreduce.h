#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/message.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "ops/dense_rows.h"
#include "ops/transport.h"

namespace zen::ops {

// The reduction is core's (core/message.h), shared with the negotiation and the runtime.
using ::zen::ReduceOp;
using ::zen::reduceOpName;

struct CoalesceScratch;  // ops/sparse_rows.h

// Memory the schemes keep between calls (zen: Algorithm 1's tables, the server's aggregator,
// the payload buffers; hc: the merged set and the messages; every scheme: coalescing), so
// that a training loop does not reallocate every step. Optional;
// use one per calling thread (it is not locked). It adapts when the shape, the world or the
// settings change.
class SparseAllreduceWorkspace {
 public:
  SparseAllreduceWorkspace();
  ~SparseAllreduceWorkspace();
  SparseAllreduceWorkspace(const SparseAllreduceWorkspace&) = delete;
  SparseAllreduceWorkspace& operator=(const SparseAllreduceWorkspace&) = delete;

  struct Zen;  // defined in sparse_allreduce_zen.cc
  Zen& zen();
  struct Hc;  // defined in sparse_allreduce_hc.cc
  Hc& hc();
  // coalesceRows' memory, for the schemes that coalesce their input or what they gathered.
  CoalesceScratch& coalesce();

 private:
  // Deletes a scheme's memory in the scheme's file, the only one that completes its type.
  struct Release {
    void operator()(Zen* zen) const;
    void operator()(Hc* hc) const;
  };
  std::unique_ptr<Zen, Release> zen_;
  std::unique_ptr<Hc, Release> hc_;
  std::unique_ptr<CoalesceScratch> coalesce_;
};

// One sparse allreduce on the CPU (CONVENTIONS.md §3: options struct + free function). Every
// rank calls it with tensors of the same numRows, rowSize and dtype, the same op and scheme;
// nnz and the index sets differ freely (0 included). Indices may repeat (summed).
struct SparseAllreduceOptions {
  Transport* transport = nullptr;
  SparseView input;
  ReduceOp op = ReduceOp::kSum;
  Scheme scheme = Scheme::kZen;  // kAuto: the dispatcher picks (see sparse_allreduce.cc)
  bool denseOutput = false;      // fill result->dense instead of result->sparse
  // With denseOutput, optional: the result is written into these tensors instead, in place
  // (host memory of the dtype, every element overwritten; a bucket's outputs, which then need
  // no copy), the first holding the first rows, each the next numElements / rowSize; together
  // numRows rows. result->dense stays empty.
  std::vector<DenseView> denseOutputTensors;
  // The zen scheme's IndexMap seed (owner and local position of every row): must be equal on
  // every rank (checked). Algorithm 1's level-2 settings are local and may differ.
  uint64_t seed = 0x5eed2e2ULL;
  int hashFunctions = 3;
  double memoryFactor = 1.5;
  ThreadPool* pool = nullptr;  // CPU threads for partitioning/aggregation (null: 1 thread)
  SparseAllreduceWorkspace* workspace = nullptr;  // null: scratch memory is per call
};

// The call's coalesceRows memory: the workspace's, or null (per call).
inline CoalesceScratch* coalesceScratch(const SparseAllreduceOptions& o) {
  return o.workspace != nullptr ? &o.workspace->coalesce() : nullptr;
}

// Per-call statistics: what the benchmarks, the timeline and the tests read.
struct SyncStats {
  Scheme scheme = Scheme::kZen;  // the scheme that actually ran
  uint64_t bytesSent = 0;        // payload bytes this rank sent (transport counters)
  uint64_t bytesReceived = 0;
  double seconds = 0;                                  // wall time of the whole call on this rank
  std::vector<std::pair<std::string, double>> phases;  // (phase name, seconds) in order
  double imbalance = 1.0;  // scheme-specific max/mean load (zen: push side)
  // Rows of the result: the union of the rows sent (sparse schemes), the non-zero rows (dense
  // scheme, sparse output), numRows (dense scheme, dense output).
  int64_t outputNnz = 0;
  // Rows every rank sent, summed: 0 when the call exchanged no rows (short-circuited), or on
  // one rank.
  int64_t totalNnz = 0;
};

struct SparseAllreduceResult {
  // Coalesced rows, indices ascending: the union of the rows any rank sent (a row whose
  // sum is zero is kept) for the sparse schemes; for `dense`, the non-zero rows.
  SparseTensor sparse;
  // [numRows x rowSize] of the dtype, when denseOutput without denseOutputTensors.
  std::vector<std::byte> dense;
  SyncStats stats;
};

// The call's dense output, [numRows x rowSize] of the dtype: options.denseOutputTensors when
// set, else result->dense (its capacity kept across calls). For the schemes: a sorted result
// goes in with scatterToDense (which zeroes it part by part), anything else into the zeroed
// one (zeroed on options.pool).
DenseRows denseOutputRows(const SparseAllreduceOptions& options, SparseAllreduceResult* result);
DenseRows zeroedDenseOutput(const SparseAllreduceOptions& options, SparseAllreduceResult* result);

// Validates locally (rowSize, CPU tensor, index range), short-circuits size == 1, then sends
// every rank's call summary (~56 bytes) to every rank in the call's first collective (zen,
// agsparse and blocks: inside their first exchange; hc and dense: alone, first) so that a bad input
// on any rank, or ranks that disagree on numRows / rowSize / dtype / op / scheme / seed,
// becomes the same kInvalidArgument on every rank, naming the rank and the bad index;
// short-circuits when no rank has a non-zero; resolves kAuto to zen (the executor's
// ops/auto_scheme.h profiles and passes a concrete scheme) and runs the chosen scheme.
// Transport failures come back as the transport reported them.
Status sparseAllreduce(const SparseAllreduceOptions& options, SparseAllreduceResult* result);

// The schemes, one file each (sparse_allreduce_<scheme>.cc). Called by the dispatcher with
// size > 1. zen, agsparse and blocks carry the call summary in their first exchange
// (ops/call_summary.h): they get this rank's summary (failed when the local checks failed: they
// then send it alone) and return the verdict; they set stats.totalNnz, and when it is 0 they
// stop after that exchange, leaving the empty result to the dispatcher. hc and dense get
// options the dispatcher's summary round has validated.
struct CallInfo;  // ops/wire_format.h
Status sparseAllreduceZen(const SparseAllreduceOptions& options,
                          const CallInfo& summary,
                          SparseAllreduceResult* result);
Status sparseAllreduceHc(const SparseAllreduceOptions& options, SparseAllreduceResult* result);
Status sparseAllreduceAgSparse(const SparseAllreduceOptions& options,
                               const CallInfo& summary,
                               SparseAllreduceResult* result);
Status sparseAllreduceBlocks(const SparseAllreduceOptions& options,
                             const CallInfo& summary,
                             SparseAllreduceResult* result);
Status sparseAllreduceDense(const SparseAllreduceOptions& options, SparseAllreduceResult* result);

}  // namespace zen::ops
