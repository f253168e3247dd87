// Algorithm 1, data-independent hierarchical hashing, on the CPU (ALGORITHMS.md §3).
//
// Steps for nnz input entries and n partitions:
//   A. claim   (parallel over entries): (owner, pos) = IndexMap::place(idx); try k slots
//      h_1..h_k(pos) of the owner's parallel memory with compare-exchange(kEmpty ->
//      pos:entry), one 8-byte word so the claim and its claimer cost one cache line.
//      A slot already holding pos is a duplicate on this rank (summed in C). After k
//      failures append to the owner's bounded serial memory; past it, to an overflow list.
//   B. compact (parallel over slices of slots): count, prefix-sum into per-owner offsets,
//      write each owner's positions and first rows; serial + overflow entries are sorted by
//      position and coalesced per owner.
//   C. merge   (parallel over duplicate groups): sum every repeated index's rows, in entry
//      order, in the accumulator type.
// Cost: one pass over the entries plus one over 1.5x nnz slots. Scratch: 8 bytes per slot
// (r1 = memoryFactor * nnz / n per owner) + 8 per serial entry, reused across calls.
// Wire bytes produced for owner p: count(p) * (4 + rowBytes).
#include "core/hash_partitioner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/row_sum.h"

namespace zen {
namespace {

// A slot is (local position << 32 | claiming entry); all-ones is no position, so EMPTY.
constexpr uint64_t kEmpty = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxEntries = std::numeric_limits<uint32_t>::max();

uint64_t packSlot(uint32_t pos, int64_t entry) {
  return (static_cast<uint64_t>(pos) << 32) | static_cast<uint64_t>(entry);
}
uint32_t slotPos(uint64_t slot) {
  return static_cast<uint32_t>(slot >> 32);
}
int64_t slotEntry(uint64_t slot) {
  return static_cast<int64_t>(slot & 0xffffffffULL);
}
constexpr int64_t kEntriesPerTask = 1 << 14;
constexpr int64_t kSlotsPerSlice = 1 << 15;
constexpr int64_t kMinSerial = 64;
constexpr int64_t kBatch = 32;
constexpr uint64_t kBadEntry = std::numeric_limits<uint64_t>::max();

int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

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

HashPartitioner::Sizing HashPartitioner::sizeFor(int64_t nnz) const {
  const int64_t n = map_.numParts();
  Sizing s;
  const double perPart = static_cast<double>(nnz) / static_cast<double>(n);
  s.r1 = std::max<int64_t>(8, static_cast<int64_t>(std::ceil(options_.memoryFactor * perPart)));
  s.r2 = std::max<int64_t>(kMinSerial,
                           static_cast<int64_t>(std::ceil(options_.serialFraction * s.r1)));
  return s;
}

size_t HashPartitioner::scratchBytes() const {
  size_t bytes = slotCapacity_ * sizeof(uint64_t) + serial_.capacity() * sizeof(int64_t);
  for (const auto& d : taskDuplicates_) bytes += d.capacity() * sizeof(d[0]);
  for (const auto& o : taskOverflow_) bytes += o.capacity() * sizeof(o[0]);
  for (const auto& s : spill_) bytes += s.capacity() * sizeof(s[0]);
  return bytes;
}

void HashPartitioner::reserve(const Sizing& sizing, int64_t /*nnz*/, int64_t tasks) {
  const int64_t n = map_.numParts();
  const size_t slots = static_cast<size_t>(n * sizing.r1);
  if (slots > slotCapacity_) {
    slots_.reset(new std::atomic<uint64_t>[slots]);
    slotCapacity_ = slots;
  }
  if (serial_.size() < static_cast<size_t>(n * sizing.r2)) serial_.resize(n * sizing.r2);
  if (!serialCount_ || spill_.size() != static_cast<size_t>(n)) {
    serialCount_.reset(new std::atomic<int64_t>[n]);
    spill_.assign(n, {});
  }
  for (int64_t p = 0; p < n; ++p) serialCount_[p].store(0, std::memory_order_relaxed);
  // Exactly `tasks` lists: the later phases walk all of them, so none may keep an earlier
  // call's entries.
  taskDuplicates_.resize(tasks);
  taskOverflow_.resize(tasks);
  for (int64_t t = 0; t < tasks; ++t) {
    taskDuplicates_[t].clear();
    taskOverflow_[t].clear();
  }
  const int64_t fillTasks = ceilDiv(static_cast<int64_t>(slots), kSlotsPerSlice);
  pool_->parallelFor(fillTasks, [&](int64_t t) {
    const size_t end = std::min(slots, static_cast<size_t>((t + 1) * kSlotsPerSlice));
    for (size_t s = t * kSlotsPerSlice; s < end; ++s) {
      slots_[s].store(kEmpty, std::memory_order_relaxed);
    }
  });
}

int64_t HashPartitioner::claim(const SparseView& in, const Sizing& sizing, int64_t tasks) {
  std::atomic<int64_t> firstBad{std::numeric_limits<int64_t>::max()};
  const int k = hashes_.count();
  const uint64_t r1 = static_cast<uint64_t>(sizing.r1);
  pool_->parallelFor(tasks, [&](int64_t t) {
    auto& duplicates = taskDuplicates_[t];
    auto& overflow = taskOverflow_[t];
    const int64_t end = std::min(in.nnz, (t + 1) * kEntriesPerTask);
    // Entries go in batches: place all, prefetch their first slots, then claim. A locked
    // compare-exchange stalls the pipeline, so without the prefetch every claim would pay a
    // full cache miss in series; with it the misses overlap.
    uint64_t slotOfEntry[kBatch];
    uint32_t posOfEntry[kBatch];
    for (int64_t batch = t * kEntriesPerTask; batch < end; batch += kBatch) {
      const int64_t count = std::min<int64_t>(kBatch, end - batch);
      for (int64_t b = 0; b < count; ++b) {
        const int64_t idx = in.indices[batch + b];
        if (idx < 0 || idx >= in.numRows) {
          slotOfEntry[b] = kBadEntry;
          continue;
        }
        const IndexMap::Place place = map_.place(static_cast<uint64_t>(idx));
        posOfEntry[b] = static_cast<uint32_t>(place.pos);
        slotOfEntry[b] = place.owner * r1;  // the owner's base; probes add to it
        __builtin_prefetch(&slots_[slotOfEntry[b] + hashes_.probe(0, posOfEntry[b], r1)], 1);
      }
      for (int64_t b = 0; b < count; ++b) {
        const int64_t i = batch + b;
        if (slotOfEntry[b] == kBadEntry) {
          int64_t seen = firstBad.load();
          while (i < seen && !firstBad.compare_exchange_weak(seen, i)) {
          }
          continue;
        }
        const uint32_t pos = posOfEntry[b];
        const uint64_t base = slotOfEntry[b];
        bool done = false;
        for (int h = 0; h < k && !done; ++h) {
          const uint64_t s = base + hashes_.probe(h, pos, r1);
          uint64_t expected = kEmpty;
          if (slots_[s].compare_exchange_strong(expected, packSlot(pos, i),
                                                std::memory_order_acq_rel)) {
            done = true;
          } else if (slotPos(expected) == pos) {
            duplicates.emplace_back(static_cast<int64_t>(s), i);
            done = true;
          }
        }
        if (done) continue;
        const uint64_t owner = base / r1;
        const int64_t at = serialCount_[owner].fetch_add(1, std::memory_order_relaxed);
        if (at < sizing.r2) {
          serial_[owner * sizing.r2 + at] = i;
        } else {
          overflow.push_back(i);  // bounded serial memory is full: fall back, never drop
        }
      }
    }
  });
  const int64_t bad = firstBad.load();
  return bad == std::numeric_limits<int64_t>::max() ? -1 : bad;
}

void HashPartitioner::compact(const SparseView& in,
                              const Sizing& sizing,
                              PushLists* out,
                              PartitionStats* stats) {
  const int64_t n = map_.numParts();
  const int64_t slicesPerPart = ceilDiv(sizing.r1, kSlotsPerSlice);
  const int64_t slices = n * slicesPerPart;
  const size_t rowBytes = in.rowBytes();

  // Entries outside the parallel memory: sort by position so repeats are adjacent.
  for (auto& s : spill_) s.clear();
  for (int64_t p = 0; p < n; ++p) {
    const int64_t count = std::min(serialCount_[p].load(), sizing.r2);
    for (int64_t j = 0; j < count; ++j) {
      const int64_t i = serial_[p * sizing.r2 + j];
      spill_[p].emplace_back(static_cast<uint32_t>(map_.localPos(in.indices[i])), i);
    }
  }
  for (const auto& overflow : taskOverflow_) {
    for (int64_t i : overflow) {
      const auto place = map_.place(in.indices[i]);
      spill_[place.owner].emplace_back(static_cast<uint32_t>(place.pos), i);
    }
  }
  std::vector<int64_t> spillUnique(n, 0);
  pool_->parallelFor(n, [&](int64_t p) {
    std::sort(spill_[p].begin(), spill_[p].end());
    int64_t unique = 0;
    for (size_t j = 0; j < spill_[p].size(); ++j) {
      unique += j == 0 || spill_[p][j].first != spill_[p][j - 1].first;
    }
    spillUnique[p] = unique;
  });

  // Count occupied slots per slice, then lay out: per owner, its slices then its spill.
  sliceCount_.assign(slices + n, 0);
  auto sliceRange = [&](int64_t slice) {
    const int64_t p = slice / slicesPerPart;
    const int64_t begin = p * sizing.r1 + (slice % slicesPerPart) * kSlotsPerSlice;
    const int64_t end = std::min(begin + kSlotsPerSlice, (p + 1) * sizing.r1);
    return std::pair<int64_t, int64_t>(begin, end);
  };
  pool_->parallelFor(slices, [&](int64_t slice) {
    const auto [begin, end] = sliceRange(slice);
    int64_t count = 0;
    for (int64_t s = begin; s < end; ++s) {
      count += slots_[s].load(std::memory_order_relaxed) != kEmpty;
    }
    sliceCount_[slice] = count;
  });
  out->offsets.assign(n + 1, 0);
  std::vector<int64_t> sliceStart(slices);
  std::vector<int64_t> spillStart(n);
  int64_t running = 0;
  for (int64_t p = 0; p < n; ++p) {
    out->offsets[p] = running;
    for (int64_t j = 0; j < slicesPerPart; ++j) {
      sliceStart[p * slicesPerPart + j] = running;
      running += sliceCount_[p * slicesPerPart + j];
    }
    spillStart[p] = running;
    running += spillUnique[p];
  }
  out->offsets[n] = running;
  out->positions.resize(running);
  out->values.resize(static_cast<size_t>(running) * rowBytes);
  out->dtype = in.dtype;
  out->rowSize = in.rowSize;

  // Write positions and first rows. A slot then holds its row's offset inside the owner's
  // list, which phase C needs to find where a duplicate's row goes.
  pool_->parallelFor(slices + n, [&](int64_t task) {
    if (task < slices) {
      const auto [begin, end] = sliceRange(task);
      const int64_t ownerStart = out->offsets[task / slicesPerPart];
      int64_t o = sliceStart[task];
      for (int64_t s = begin; s < end; ++s) {
        const uint64_t slot = slots_[s].load(std::memory_order_relaxed);
        if (slot == kEmpty) continue;
        out->positions[o] = slotPos(slot);
        std::memcpy(out->values.data() + o * rowBytes, in.row(slotEntry(slot)), rowBytes);
        // From here on the slot's high half is its row's offset in the owner's list.
        slots_[s].store(packSlot(static_cast<uint32_t>(o - ownerStart), slotEntry(slot)),
                        std::memory_order_relaxed);
        ++o;
      }
      return;
    }
    const int64_t p = task - slices;
    const auto& spill = spill_[p];
    int64_t o = spillStart[p];
    for (size_t j = 0; j < spill.size();) {
      size_t end = j + 1;
      while (end < spill.size() && spill[end].first == spill[j].first) ++end;
      out->positions[o] = spill[j].first;
      sumRows(
          in.dtype, in.rowSize, static_cast<int64_t>(end - j),
          [&](int64_t r) { return in.row(spill[j + r].second); },
          out->values.data() + o * rowBytes);
      ++o;
      j = end;
    }
  });

  if (stats != nullptr) {
    stats->spilled = 0;
    stats->overflowed = 0;
    for (int64_t p = 0; p < n; ++p) {
      stats->spilled += spillUnique[p];
      stats->overflowed += std::max<int64_t>(0, serialCount_[p].load() - sizing.r2);
    }
  }
}

void HashPartitioner::mergeDuplicates(const SparseView& in, const Sizing& sizing, PushLists* out) {
  std::vector<std::pair<int64_t, int64_t>> dups;  // (slot, entry)
  for (const auto& d : taskDuplicates_) dups.insert(dups.end(), d.begin(), d.end());
  if (dups.empty()) return;
  std::sort(dups.begin(), dups.end());
  // Split into one task per group of equal slots, batched so tasks are not tiny.
  std::vector<size_t> groupStart;
  for (size_t j = 0; j < dups.size(); ++j) {
    if (j == 0 || dups[j].first != dups[j - 1].first) groupStart.push_back(j);
  }
  groupStart.push_back(dups.size());
  const int64_t groups = static_cast<int64_t>(groupStart.size()) - 1;
  const int64_t perTask = std::max<int64_t>(1, groups / (4 * pool_->size()));
  const size_t rowBytes = in.rowBytes();
  pool_->parallelFor(ceilDiv(groups, perTask), [&](int64_t t) {
    std::vector<int64_t> members;
    for (int64_t g = t * perTask; g < std::min(groups, (t + 1) * perTask); ++g) {
      const int64_t slot = dups[groupStart[g]].first;
      const uint64_t word = slots_[slot].load(std::memory_order_relaxed);
      members.assign(1, slotEntry(word));
      for (size_t j = groupStart[g]; j < groupStart[g + 1]; ++j) members.push_back(dups[j].second);
      // Entry order, not claim order, so the sum is the same whichever thread claimed first.
      std::sort(members.begin(), members.end());
      const int64_t owner = slot / sizing.r1;
      const int64_t o = out->offsets[owner] + slotPos(word);
      sumRows(
          in.dtype, in.rowSize, static_cast<int64_t>(members.size()),
          [&](int64_t r) { return in.row(members[r]); }, out->values.data() + o * rowBytes);
    }
  });
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

  const Sizing sizing = sizeFor(in.nnz);
  const int64_t tasks = ceilDiv(in.nnz, kEntriesPerTask);
  reserve(sizing, in.nnz, tasks);
  const int64_t bad = claim(in, sizing, tasks);
  if (bad >= 0) {
    return ZEN_ERROR(StatusCode::kInvalidArgument,
                     "index {} at position {} is out of range [0, {})", in.indices[bad], bad,
                     in.numRows);
  }
  PartitionStats local;
  compact(in, sizing, out, &local);
  mergeDuplicates(in, sizing, out);
  if (stats != nullptr) {
    *stats = local;
    stats->input = in.nnz;
    stats->unique = out->total();
    stats->duplicates = in.nnz - out->total();
    stats->lost = 0;
    stats->scratchBytes = scratchBytes();
  }
  return Status::ok();
}

}  // namespace zen
