#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
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
// partitioner. Level 1 is IndexMap::place (owner + local position), evaluated in batches and
// used to bucket the entries by owner (a histogram and a scatter); level 2 claims a slot in
// the owner's parallel memory over k probes, then appends to a bounded serial memory, then
// to an overflow list: nothing is ever dropped. On the CPU each owner's parallel memory is
// split by position range into slices small enough for L2, and one thread claims a slice's
// entries, so a claim is a plain read and write instead of a locked compare-exchange (the
// GPU keeps atomicCAS: cuda/hash_partition_steps.h). Duplicate indices on this rank are
// summed in entry order (in the accumulator type). Scratch memory is reused across calls.
class HashPartitioner {
 public:
  // pool == nullptr runs single-threaded on the calling thread.
  HashPartitioner(const IndexMap& map, HashPartitionOptions options, ThreadPool* pool);

  // Splits `in` into per-owner lists. Fails (nothing written) on an index out of range.
  // Within an owner's list the order is unspecified (it is deterministic: by position
  // range, then first appearance, then the spilled positions in ascending order).
  Status partition(const SparseView& in, PushLists* out, PartitionStats* stats = nullptr);

  size_t scratchBytes() const;

 private:
  struct BucketResult {
    int64_t count = 0;       // distinct positions written
    int64_t spilled = 0;     // distinct positions that went through the serial memory
    int64_t overflowed = 0;  // entries past the bounded serial memory
  };
  // Step 1, one task's entries: level 1, then a counting sort by bucket inside the task's
  // range. Returns the task's first out-of-range entry or -1.
  int64_t placeTask(const SparseView& in, int64_t task);
  // Step 2, one bucket: level 2; writes its rows from out row bucketStart_[bucket] on.
  BucketResult claimBucket(const SparseView& in, int64_t bucket, int64_t tasks, PushLists* out);

  IndexMap map_;
  HashPartitionOptions options_;
  HashFamily hashes_;
  std::unique_ptr<ThreadPool> ownPool_;  // when the caller gives none: run on this thread
  ThreadPool* pool_;
  // Layout of the current call: numParts * subs_ buckets, bucket = owner * subs_ + sub, where
  // sub = (pos * subMul_) >> 32 splits an owner's positions into subs_ equal ranges.
  int64_t subs_ = 1;
  uint64_t subMul_ = 0;
  int64_t buckets_ = 0;
  // Scratch, sized for the largest input so far and reused across calls.
  std::vector<uint64_t> bucketed_;  // nnz: pos << 32 | entry, by task, then bucket, then entry
  bool carryRows_ = false;          // rows of at most kMaxCarriedRowBytes move with their words
  std::vector<std::byte> carried_;  // nnz rows in bucketed_ order, when carryRows_
  int64_t tasks_ = 0;
  std::vector<uint32_t> segments_;    // buckets * tasks: start | count << 16 of a bucket in a task
  std::vector<int64_t> bucketStart_;  // buckets + 1: entries in the buckets before each
  std::vector<int64_t> tableStart_;   // buckets + 1: parallel slots of the buckets before each
  // Parallel memory, one table of maxR1_ slots per thread (pos << 32 | out row, or empty),
  // handed to the bucket being claimed.
  std::vector<uint64_t> slots_;
  size_t maxR1_ = 0;
  std::mutex tableMu_;
  std::vector<size_t> freeTables_;
  std::vector<BucketResult> results_;  // buckets
  std::vector<int64_t> taskBad_;       // tasks
};

}  // namespace zen
