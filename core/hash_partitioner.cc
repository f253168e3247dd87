// Algorithm 1, data-independent hierarchical hashing, on the CPU (ALGORITHMS.md §3).
//
// Steps for nnz input entries and n partitions (owners):
//   1. level 1 (parallel over tasks of kEntriesPerTask entries): the task's indices are
//      range-checked at once (their maximum), then (owner, pos) = IndexMap::place(idx),
//      evaluated in batches (core/feistel_batch.h, bit-identical to the scalar map the GPU and
//      the other ranks use). The entry goes to bucket owner * subs + sub, where sub splits the
//      owner's positions into `subs` equal ranges (subs is chosen so that a bucket's parallel
//      memory fits in L2); a counting sort inside the task's range groups its entries by
//      bucket as pos << 32 | entry words, and its scatter carries small rows along.
//   2. level 2 (parallel over buckets; one thread owns a bucket): the bucket's parallel
//      memory has r1 = memoryFactor x (its entries) slots; each entry, in entry order, tries
//      the k probes h_1..h_k(pos). An empty slot is claimed (pos << 32 | out row) and the
//      entry's row is copied to the output; a slot holding pos means a duplicate on this
//      rank (summed below); after k failures the entry goes to the serial memory (bounded to
//      r2 = serialFraction x r1 entries, at least 64; past that, the overflow list — the
//      fallback that loses nothing). Serial and overflow entries are sorted by position and
//      coalesced; every duplicate group is summed in entry order in the accumulator type.
//      Rows are written from out row bucketStart (a bucket has at most as many distinct
//      positions as entries), so no second pass is needed to find offsets.
//   3. layout: per-owner offsets from the bucket counts; if duplicates left gaps, the
//      buckets' rows slide down into place (one ordered memmove per bucket).
// This is the paper's algorithm with the GPU's "many threads, one partition" mapping turned
// into the CPU's "one thread, one cache-sized slice of a partition": the claim is a plain
// read and write (no locked compare-exchange, no cache line shared between cores), the
// slice's slots stay in L2, and the input rows are read in entry order. The GPU keeps the
// atomicCAS claim (cuda/hash_partition_steps.h). Output per owner: its buckets in position-
// range order; inside a bucket, first appearances in entry order, then the spilled positions
// ascending (the order is unspecified to callers; it does not depend on the thread count).
// Cost: one batched Feistel pass, one local scatter, one pass of k probes over L2-resident
// tables; rows of 2 to 32 bytes move with a compile-time size (core/fixed_size.h).
// Scratch: 8 bytes per entry, plus the row when carried (rows of <= 32 bytes), plus one
// bucket's parallel memory (8 bytes per slot) per thread: buckets claimed one after the other
// on a thread reuse its table.
// Wire bytes produced for owner p: count(p) * (4 + rowBytes).
#include "core/hash_partitioner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

#include "core/feistel_batch.h"
#include "core/fixed_size.h"
#include "core/row_sum.h"

namespace zen {
namespace {

// A slot is (local position << 32 | output row); all-ones is no position, so EMPTY.
constexpr uint64_t kEmpty = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxEntries = std::numeric_limits<uint32_t>::max();
constexpr int64_t kEntriesPerTask = 1 << 13;
constexpr int64_t kMinSerial = 64;
// A bucket's parallel memory should stay in L2 (1 MiB here) beside its input and output.
constexpr double kTableBytes = 256 * 1024;
constexpr int64_t kMaxSubs = 1024;
constexpr int64_t kMinBucketEntries = 4096;
constexpr int32_t kRowAhead = 16;
constexpr size_t kMaxCarriedRowBytes = 32;
constexpr int32_t kSlotAhead = 8;
constexpr int64_t kSegmentAhead = 2;

int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

static_assert(kMaxCarriedRowBytes >= kLargestFixedRowBytes,
              "rows of withRowBytes' fixed sizes are all carried");

// Whether withRowBytes (core/fixed_size.h) gave fn a compile-time size (then the rows are
// carried).
template <typename Bytes>
constexpr bool kFixedRow = !std::is_same_v<Bytes, size_t>;

}  // namespace

HashPartitioner::HashPartitioner(const IndexMap& map,
                                 HashPartitionOptions options,
                                 ThreadPool* pool)
    : map_(map),
      options_(options),
      hashes_(std::clamp(options.hashFunctions, 1, HashFamily::kMaxFunctions), options.seed),
      pool_(pool) {
  if (pool_ == nullptr) {
    ownPool_ = std::make_unique<ThreadPool>(1);
    pool_ = ownPool_.get();
  }
}

size_t HashPartitioner::scratchBytes() const {
  return bucketed_.capacity() * sizeof(uint64_t) + carried_.capacity() +
         slots_.capacity() * sizeof(uint64_t) + segments_.capacity() * sizeof(uint32_t);
}

int64_t HashPartitioner::placeTask(const SparseView& in, int64_t task) {
  const int64_t begin = task * kEntriesPerTask;
  const int64_t end = std::min(in.nnz, begin + kEntriesPerTask);
  const IndexMapBatch batch(map_);
  // Indices as unsigned words: a negative one is then out of range too. Checked for the whole
  // task first (a max, branch-free); the first bad entry is looked for only when there is one.
  const auto* indices = reinterpret_cast<const uint64_t*>(in.indices);
  const uint64_t numRows = map_.numRows();
  uint64_t largest = 0;
  for (int64_t i = begin; i < end; ++i) largest = std::max(largest, indices[i]);
  if (largest >= numRows) {
    for (int64_t i = begin;; ++i) {
      if (indices[i] >= numRows) return i;  // the task's first bad entry: the call fails
    }
  }
  std::vector<int32_t> count(static_cast<size_t>(buckets_ + 1), 0);
  // Level 1 into a task-local buffer (pos << 32 | bucket), counting per bucket.
  uint64_t placed[kEntriesPerTask];
  uint64_t perm[FeistelBatch::kBatch];
  for (int64_t start = begin; start < end; start += FeistelBatch::kBatch) {
    const int64_t m = std::min<int64_t>(FeistelBatch::kBatch, end - start);
    batch.permute(indices + start, perm, static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      uint64_t owner;
      uint64_t pos;
      batch.split(perm[i], &owner, &pos);
      const uint64_t bucket = owner * static_cast<uint64_t>(subs_) + ((pos * subMul_) >> 32);
      placed[start - begin + i] = (pos << 32) | bucket;
      ++count[bucket + 1];
    }
  }
  // Counting sort inside the task's range, stable, so each bucket's entries stay ascending.
  // Segments are stored bucket-major, so the claim of one bucket reads them in a row.
  for (int64_t b = 0; b < buckets_; ++b) {
    segments_[b * tasks_ + task] =
        static_cast<uint32_t>(count[b]) | (static_cast<uint32_t>(count[b + 1]) << 16);
    count[b + 1] += count[b];
  }
  // The scatter writes the task's range of bucketed_ directly (no staging copy) and, in the
  // same pass, moves small rows with their words: the claim then reads them sequentially
  // instead of one cache (and TLB) miss per row in a large input.
  int32_t* cursor = count.data();  // count[b] is now bucket b's first slot in the task
  uint64_t* sorted = bucketed_.data() + begin;
  const int64_t size = end - begin;
  const auto* src =
      static_cast<const std::byte*>(in.values) + static_cast<size_t>(begin) * in.rowBytes();
  withRowBytes(in.rowBytes(), [&](auto bytes) {
    const bool carry = kFixedRow<decltype(bytes)> || carryRows_;
    std::byte* dst = carry ? carried_.data() + static_cast<size_t>(begin) * bytes : nullptr;
    for (int64_t i = 0; i < size; ++i) {
      const uint64_t w = placed[i];
      const int32_t at = cursor[w & 0xffffffffULL]++;
      sorted[at] = (w & 0xffffffff00000000ULL) | static_cast<uint64_t>(begin + i);
      if (carry)
        std::memcpy(dst + static_cast<size_t>(at) * bytes, src + static_cast<size_t>(i) * bytes,
                    bytes);
    }
  });
  return -1;
}

HashPartitioner::BucketResult HashPartitioner::claimBucket(const SparseView& in,
                                                           int64_t bucket,
                                                           int64_t tasks,
                                                           PushLists* out) {
  BucketResult result;
  const int64_t base = bucketStart_[bucket];
  const uint64_t r1 = static_cast<uint64_t>(tableStart_[bucket + 1] - tableStart_[bucket]);
  if (bucketStart_[bucket + 1] == base) return result;
  // A table from the pool: only the buckets being claimed right now need one.
  size_t tableIndex = 0;
  {
    std::lock_guard<std::mutex> lock(tableMu_);
    tableIndex = freeTables_.back();
    freeTables_.pop_back();
  }
  uint64_t* table = slots_.data() + tableIndex * maxR1_;
  const uint32_t* segs = segments_.data() + bucket * tasks;
  std::fill(table, table + r1, kEmpty);
  const size_t rowBytes = in.rowBytes();
  const auto* inValues = static_cast<const std::byte*>(in.values);
  uint32_t* positions = out->positions.data() + base;
  std::byte* values = out->values.data() + static_cast<size_t>(base) * rowBytes;
  const int k = hashes_.count();
  std::vector<uint64_t> serial;  // pos << 32 | entry: k probes failed
  std::vector<uint64_t> dups;    // out row << 32 | entry: a repeat of a claimed position
  uint32_t row = 0;
  withRowBytes(rowBytes, [&](auto bytes) {
    const bool carry = kFixedRow<decltype(bytes)> || carryRows_;
    for (int64_t t = 0; t < tasks; ++t) {
      const uint32_t segment = segs[t];
      const int32_t first = static_cast<int32_t>(segment & 0xffff);
      const int32_t stop = first + static_cast<int32_t>(segment >> 16);
      if (t + kSegmentAhead < tasks) {
        // The next segments are elsewhere (another task's range): fetch their first lines.
        const uint32_t next = segs[t + kSegmentAhead];
        const int64_t at = (t + kSegmentAhead) * kEntriesPerTask + (next & 0xffff);
        __builtin_prefetch(bucketed_.data() + at);
        __builtin_prefetch(bucketed_.data() + at + 8);
        if (carry) __builtin_prefetch(carried_.data() + static_cast<size_t>(at) * bytes);
      }
      const uint64_t* w = bucketed_.data() + t * kEntriesPerTask;
      const std::byte* rows =
          carry ? carried_.data() + static_cast<size_t>(t * kEntriesPerTask) * bytes : nullptr;
      // The first probe's slot of the next kSlotAhead entries, computed once: fetched ahead,
      // then used when the entry's turn comes.
      uint64_t firstSlot[kSlotAhead];
      const auto ring = [first](int32_t j) {
        return static_cast<uint32_t>(j - first) % kSlotAhead;
      };
      const auto aheadSlot = [&](int32_t j) {
        const uint64_t s = hashes_.probe(0, w[j] >> 32, r1);
        __builtin_prefetch(table + s, 1);
        firstSlot[ring(j)] = s;
      };
      for (int32_t j = first; j < std::min(stop, first + kSlotAhead); ++j) aheadSlot(j);
      for (int32_t j = first; j < stop; ++j) {
        // Rows not carried are read in entry order but sparsely (one bucket's share of the
        // input): fetch a few entries ahead.
        if (!carry && j + kRowAhead < stop) {
          __builtin_prefetch(inValues + (w[j + kRowAhead] & 0xffffffffULL) * bytes);
        }
        uint64_t* slot = table + firstSlot[ring(j)];
        if (j + kSlotAhead < stop) aheadSlot(j + kSlotAhead);
        const uint64_t word = w[j];
        const uint64_t pos = word >> 32;
        const uint64_t entry = word & 0xffffffffULL;
        // Probes h_1..h_k: claim an empty slot, or find the position already claimed; after
        // k failures, the serial memory.
        for (int h = 1;; ++h) {
          if (*slot == kEmpty) {
            *slot = (pos << 32) | row;
            positions[row] = static_cast<uint32_t>(pos);
            std::memcpy(values + static_cast<size_t>(row) * bytes,
                        carry ? rows + static_cast<size_t>(j) * bytes : inValues + entry * bytes,
                        bytes);
            ++row;
            break;
          }
          if ((*slot >> 32) == pos) {
            dups.push_back((*slot << 32) | entry);
            break;
          }
          if (h == k) {
            serial.push_back(word);
            break;
          }
          slot = table + hashes_.probe(h, pos, r1);
        }
      }
    }
  });
  {
    std::lock_guard<std::mutex> lock(tableMu_);
    freeTables_.push_back(tableIndex);
  }
  // Duplicates: members are the claimer (first in entry order; its row is already in the
  // output) and the repeats, summed in entry order, rounded once.
  if (!dups.empty()) {
    std::sort(dups.begin(), dups.end());
    std::vector<std::byte> first(rowBytes);
    for (size_t j = 0; j < dups.size();) {
      const uint32_t r = static_cast<uint32_t>(dups[j] >> 32);
      size_t end = j + 1;
      while (end < dups.size() && (dups[end] >> 32) == r) ++end;
      std::byte* dst = values + static_cast<size_t>(r) * rowBytes;
      std::memcpy(first.data(), dst, rowBytes);
      sumRows(
          in.dtype, in.rowSize, static_cast<int64_t>(end - j + 1),
          [&](int64_t m) {
            return m == 0 ? first.data() : inValues + (dups[j + m - 1] & 0xffffffffULL) * rowBytes;
          },
          dst);
      j = end;
    }
  }
  // Serial memory (r2 entries) and its overflow: by position, then entry; coalesced.
  const int64_t r2 =
      std::max<int64_t>(kMinSerial, static_cast<int64_t>(std::ceil(options_.serialFraction * r1)));
  result.overflowed = std::max<int64_t>(0, static_cast<int64_t>(serial.size()) - r2);
  std::sort(serial.begin(), serial.end());
  for (size_t j = 0; j < serial.size();) {
    const uint64_t pos = serial[j] >> 32;
    size_t end = j + 1;
    while (end < serial.size() && (serial[end] >> 32) == pos) ++end;
    positions[row] = static_cast<uint32_t>(pos);
    sumRows(
        in.dtype, in.rowSize, static_cast<int64_t>(end - j),
        [&](int64_t m) { return inValues + (serial[j + m] & 0xffffffffULL) * rowBytes; },
        values + static_cast<size_t>(row) * rowBytes);
    ++row;
    ++result.spilled;
    j = end;
  }
  result.count = row;
  return result;
}

Status checkPartitionInput(const IndexMap& map,
                           const SparseView& in,
                           Device::Kind device,
                           int64_t maxEntries) {
  ZEN_CHECK_ARG(in.device.kind == device, "the {} partitioner got a tensor on {}",
                device == Device::Kind::kCpu ? "CPU" : "GPU", in.device.toString());
  ZEN_CHECK_ARG(in.rowSize >= 1, "row size must be at least 1, got {}", in.rowSize);
  ZEN_CHECK_ARG(in.nnz >= 0, "negative nnz {}", in.nnz);
  ZEN_CHECK_ARG(static_cast<uint64_t>(in.numRows) == map.numRows(),
                "tensor has {} rows but the index map was built for {}", in.numRows, map.numRows());
  ZEN_CHECK_ARG(in.nnz == 0 || (in.indices != nullptr && in.values != nullptr),
                "sparse tensor with {} non-zeros has no index or value buffer", in.nnz);
  ZEN_CHECK_ARG(in.nnz <= maxEntries, "{} entries exceed the partitioner's {} per call", in.nnz,
                maxEntries);
  ZEN_CHECK_ARG(map.chunk() < 0xffffffffULL,
                "{} rows over {} parts exceed 2^32 - 1 positions per part", map.numRows(),
                map.numParts());
  return Status::ok();
}

Status HashPartitioner::partition(const SparseView& in, PushLists* out, PartitionStats* stats) {
  ZEN_RETURN_IF_ERROR(
      checkPartitionInput(map_, in, Device::Kind::kCpu, static_cast<int64_t>(kMaxEntries) - 1));
  const int64_t n = map_.numParts();
  const int64_t nnz = in.nnz;
  const size_t rowBytes = in.rowBytes();

  // Layout: split owners into position ranges until a bucket's table fits kTableBytes and
  // there are a few buckets per thread to balance.
  subs_ = 1;
  const auto tableBytes = [&](int64_t subs) {
    return options_.memoryFactor * 8.0 * static_cast<double>(nnz) / static_cast<double>(n * subs);
  };
  while (subs_ < kMaxSubs &&
         (tableBytes(subs_) > kTableBytes ||
          (n * subs_ < 4 * pool_->size() && nnz / (n * subs_) >= 2 * kMinBucketEntries))) {
    subs_ *= 2;
  }
  subMul_ = (static_cast<uint64_t>(subs_) << 32) / map_.chunk();
  buckets_ = n * subs_;

  // Step 1: level 1 and the per-task counting sort.
  const int64_t tasks = ceilDiv(nnz, kEntriesPerTask);
  if (bucketed_.size() < static_cast<size_t>(nnz)) bucketed_.resize(nnz);
  carryRows_ = rowBytes <= kMaxCarriedRowBytes;
  if (carryRows_ && carried_.size() < static_cast<size_t>(nnz) * rowBytes) {
    carried_.resize(static_cast<size_t>(nnz) * rowBytes);
  }
  tasks_ = tasks;
  segments_.resize(static_cast<size_t>(tasks * buckets_));
  taskBad_.assign(tasks, -1);
  pool_->parallelFor(tasks, [&](int64_t t) { taskBad_[t] = placeTask(in, t); });
  for (int64_t t = 0; t < tasks; ++t) {
    if (taskBad_[t] >= 0) {
      const int64_t bad = taskBad_[t];
      return ZEN_ERROR(StatusCode::kInvalidArgument,
                       "index {} at position {} is out of range [0, {})", in.indices[bad], bad,
                       in.numRows);
    }
  }

  // Bucket sizes, provisional output rows and parallel memory per bucket.
  bucketStart_.assign(buckets_ + 1, 0);
  for (int64_t b = 0; b < buckets_; ++b) {
    const uint32_t* segs = segments_.data() + b * tasks;
    for (int64_t t = 0; t < tasks; ++t) bucketStart_[b + 1] += segs[t] >> 16;
  }
  tableStart_.assign(buckets_ + 1, 0);
  maxR1_ = 0;
  for (int64_t b = 0; b < buckets_; ++b) {
    const int64_t entries = bucketStart_[b + 1];
    const int64_t r1 =
        entries == 0
            ? 0
            : std::max<int64_t>(8, static_cast<int64_t>(std::ceil(options_.memoryFactor *
                                                                  static_cast<double>(entries))));
    bucketStart_[b + 1] += bucketStart_[b];
    tableStart_[b + 1] = tableStart_[b] + r1;
    maxR1_ = std::max(maxR1_, static_cast<size_t>(r1));
  }
  const size_t tables = static_cast<size_t>(std::min<int64_t>(buckets_, pool_->size()));
  if (slots_.size() < tables * maxR1_) slots_.resize(tables * maxR1_);
  freeTables_.resize(tables);
  for (size_t t = 0; t < tables; ++t) freeTables_[t] = t;
  out->offsets.assign(n + 1, 0);
  out->positions.resize(nnz);
  out->values.resize(static_cast<size_t>(nnz) * rowBytes);
  out->dtype = in.dtype;
  out->rowSize = in.rowSize;

  // Step 2: level 2, one bucket per task.
  results_.assign(buckets_, BucketResult{});
  pool_->parallelFor(buckets_, [&](int64_t b) { results_[b] = claimBucket(in, b, tasks, out); });

  // Step 3: offsets, and close the gaps duplicates left.
  int64_t running = 0;
  PartitionStats local;
  for (int64_t b = 0; b < buckets_; ++b) {
    if (b % subs_ == 0) out->offsets[b / subs_] = running;
    const int64_t count = results_[b].count;
    const int64_t from = bucketStart_[b];
    if (from != running && count > 0) {
      std::memmove(out->positions.data() + running, out->positions.data() + from,
                   static_cast<size_t>(count) * sizeof(uint32_t));
      std::memmove(out->values.data() + static_cast<size_t>(running) * rowBytes,
                   out->values.data() + static_cast<size_t>(from) * rowBytes,
                   static_cast<size_t>(count) * rowBytes);
    }
    running += count;
    local.spilled += results_[b].spilled;
    local.overflowed += results_[b].overflowed;
  }
  out->offsets[n] = running;
  out->positions.resize(running);
  out->values.resize(static_cast<size_t>(running) * rowBytes);

  if (stats != nullptr) {
    *stats = local;
    stats->input = nnz;
    stats->unique = running;
    stats->duplicates = nnz - running;
    stats->lost = 0;
    stats->scratchBytes = scratchBytes();
  }
  return Status::ok();
}

}  // namespace zen
