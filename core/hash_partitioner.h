#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/hash.h"
#include "core/index_map.h"
#include "core/push_lists.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace zen {

struct HashPartitionOptions {
  int hashFunctions = 3;         // k level-2 probes (ZEN_HASH_FUNCTIONS)
  double memoryFactor = 1.5;     // r1 = memoryFactor * nnz / n parallel slots per partition
  double serialFraction = 0.1;   // r2 = serialFraction * r1 (+ a floor) serial slots
  uint64_t seed = 0x5eed2e2ULL;  // level-2 hash seed (level 1 lives in the IndexMap)
};

// The checks every partitioner (CPU and GPU) makes before touching its input: the device
// kind, sizes, buffers, the index map's row count, at most maxEntries entries per call and
// local positions that fit 32 bits. Index ranges are checked while partitioning.
Status checkPartitionInput(const IndexMap& map,
                           const SparseView& in,
                           Device::Kind device,
                           int64_t maxEntries);

// Algorithm 1 (ALGORITHMS.md §3): data-independent hierarchical hashing, the Push
// partitioner. Level 1 is IndexMap::place (owner + local position); level 2 claims a slot in
// the owner's parallel memory with compare-exchange over k probes, then appends to a bounded
// serial memory, then to an overflow list: nothing is ever dropped. Duplicate indices on this
// rank are summed (in the accumulator type). Scratch memory is kept and reused across calls.
class HashPartitioner {
 public:
  // pool == nullptr runs single-threaded on the calling thread.
  HashPartitioner(const IndexMap& map, HashPartitionOptions options, ThreadPool* pool);

  // Splits `in` into per-owner lists. Fails (nothing written) on an index out of range.
  Status partition(const SparseView& in, PushLists* out, PartitionStats* stats = nullptr);

  size_t scratchBytes() const;

 private:
  struct Sizing {
    int64_t r1 = 0;  // parallel slots per partition
    int64_t r2 = 0;  // serial entries per partition
  };
  Sizing sizeFor(int64_t nnz) const;
  void reserve(const Sizing& sizing, int64_t nnz, int64_t tasks);
  // Phase A: claim slots; returns the first out-of-range entry or -1.
  int64_t claim(const SparseView& in, const Sizing& sizing, int64_t tasks);
  // Phase B: per-partition counts, offsets, positions and first rows.
  void compact(const SparseView& in, const Sizing& sizing, PushLists* out, PartitionStats* stats);
  // Phase C: sum the rows of repeated indices in the accumulator type.
  void mergeDuplicates(const SparseView& in, const Sizing& sizing, PushLists* out);

  IndexMap map_;
  HashPartitionOptions options_;
  HashFamily hashes_;
  std::unique_ptr<ThreadPool> ownPool_;  // when the caller gives none: run on this thread
  ThreadPool* pool_;
  // Scratch, sized for the largest input so far and reused across calls.
  std::unique_ptr<std::atomic<uint64_t>[]> slots_;  // numParts * r1: (position, claimer) or empty
  size_t slotCapacity_ = 0;
  std::vector<int64_t> serial_;  // numParts * r2: input entries that found k slots taken
  std::unique_ptr<std::atomic<int64_t>[]> serialCount_;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> taskDuplicates_;  // (slot, entry)
  std::vector<std::vector<int64_t>> taskOverflow_;                        // entries
  std::vector<std::vector<std::pair<uint32_t, int64_t>>> spill_;          // per part: (pos, entry)
  std::vector<int64_t> sliceCount_;
};

}  // namespace zen
