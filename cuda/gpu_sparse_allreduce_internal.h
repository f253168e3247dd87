#pragma once

// Shared by the dispatcher and the GPU scheme files: the workspace's state and one validated
// call (not part of the public interface; see gpu_sparse_allreduce.h).
#include <memory>
#include <vector>

#include "core/index_map.h"
#include "cuda/gpu_aggregator.h"
#include "cuda/gpu_hash_bitmap.h"
#include "cuda/gpu_hash_partitioner.h"
#include "cuda/gpu_nonzero.h"
#include "cuda/gpu_push_lists.h"
#include "cuda/gpu_sparse_allreduce.h"
#include "cuda/workspace.h"

namespace zen::cuda {

// The blocks scheme's buffers (gpu_sparse_allreduce_blocks.cc).
struct GpuBlocksState {
  DeviceBuffer flags;       // B + 1 int64: non-empty blocks, then own flags, then row counts
  DeviceBuffer slots;       // their exclusive scans
  DeviceBuffer ownerSlots;  // n + 1 int64: each owner's first push slot
  DeviceBuffer pushAcc;     // this rank's blocks: accumulators, ids, masks, rows
  DeviceBuffer pushIds;
  DeviceBuffer pushMasks;
  DeviceBuffer pushRows;
  DeviceBuffer recvIds;  // received push lists, then the gathered pull lists
  DeviceBuffer recvMasks;
  DeviceBuffer recvRows;
  DeviceBuffer ownAcc;  // the owner's accumulator rows and seen bytes
  DeviceBuffer seen;
  DeviceBuffer pullIds;  // the owner's pull list
  DeviceBuffer pullMasks;
  DeviceBuffer pullRows;
  DeviceBuffer bad;   // first bad block of a checked list set
  PinnedBuffer host;  // n + 1 words read back

  size_t heldBytes() const;
};

struct GpuSparseAllreduceWorkspace::State {
  // The zen scheme's partitioner and its key (rebuilt when the key changes).
  int64_t zenNumRows = -1;
  int zenParts = 0;
  uint64_t zenSeed = 0;
  int zenHashFunctions = 0;
  double zenMemoryFactor = 0;
  IndexMap zenMap;
  std::unique_ptr<GpuHashPartitioner> partitioner;

  GpuNonzeroExtractor extractor;  // dense input -> extracted
  GpuSparse extracted;
  GpuPushLists lists;          // zen: this rank's Push lists
  GpuAggregator aggregator;    // zen: server part; agsparse / dense: the whole tensor
  GpuEncodedPart encoded;      // Algorithm 2's output of the aggregator
  Workspace scratch;           // encode / decode scratch (cub, tiles)
  DeviceBuffer recvPositions;  // zen push: uint32 per received entry
  DeviceBuffer recvValues;     // zen push: rows; agsparse: gathered rows
  DeviceBuffer recvIndices;    // agsparse: gathered int64 indices
  DeviceBuffer owners;         // agsparse / dense: launchPlaceIndices' owners (unused)
  DeviceBuffer positions;      // agsparse / dense: positions in the one-part map
  DeviceBuffer pullBitmaps;    // zen pull: every part's bitmap
  DeviceBuffer pullValues;     // zen pull: every part's rows
  DeviceBuffer denseScratch;   // dense scheme with sparse output: the summed dense tensor
  DeviceBuffer hcIndices[2];   // hc: the merged set (current, next), int64 indices
  DeviceBuffer hcValues[2];    // hc: its rows
  DeviceBuffer summary;        // n + 1 call summaries, then the bad-entry word
  PinnedBuffer hostSummary;    // n + 1 call summaries, then the bad-entry word
  GpuBlocksState blocks;       // blocks scheme

  size_t heldBytes() const;
};

// One call after the dispatcher's checks: the device COO input (extracted when the caller
// passed a dense tensor), where the dense output goes, and the state to reuse.
struct GpuSchemeCall {
  const GpuSparseAllreduceOptions* options = nullptr;
  SparseView input;    // device memory, indices in range on every rank
  DenseView denseOut;  // valid when options->denseOutput: [numRows x rowSize], device
  GpuSparseAllreduceWorkspace::State* state = nullptr;
};

Status gpuSparseAllreduceZen(const GpuSchemeCall& call, GpuSparseAllreduceResult* result);
Status gpuSparseAllreduceAgSparse(const GpuSchemeCall& call, GpuSparseAllreduceResult* result);
Status gpuSparseAllreduceDense(const GpuSchemeCall& call, GpuSparseAllreduceResult* result);
Status gpuSparseAllreduceHc(const GpuSchemeCall& call, GpuSparseAllreduceResult* result);
Status gpuSparseAllreduceBlocks(const GpuSchemeCall& call, GpuSparseAllreduceResult* result);

// Shared steps (gpu_sparse_allreduce.cc).
// Sums device COO tensors (indices in range, repeats summed in fp32 for 16-bit floats) into
// the state's one-part aggregator: the local reduction of agsparse, hc and the dense scheme.
Status aggregateWhole(const std::vector<SparseView>& inputs,
                      GpuSparseAllreduceWorkspace::State& st,
                      cudaStream_t stream);
// Encodes the state's one-part aggregation scaled by `scale` (gpuEncode) and decodes it into
// the dense output (zeroed first) or into result->sparse.
Status decodeWhole(const GpuSchemeCall& call, double scale, GpuSparseAllreduceResult* result);

// Appends (phase, host seconds since the last mark) to the stats.
class GpuPhaseClock {
 public:
  explicit GpuPhaseClock(ops::SyncStats* stats);
  void mark(const char* phase);

 private:
  ops::SyncStats* stats_;
  ops::Clock::time_point last_;
};

}  // namespace zen::cuda
