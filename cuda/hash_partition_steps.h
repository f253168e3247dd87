#pragma once

// Algorithm 1 on the GPU, one thread's share of each step, as host/device functions. The
// kernels of gpu_hash_partitioner.cu run them over a grid; test/cuda_host runs the very same
// functions on the CPU (the claim from several threads, so its races are real) to check the
// logic and the output layout on machines without a GPU.
//
// Words are unsigned long long (CUDA's 64-bit atomic type), split as high << 32 | low:
//   slot word      position << 32 | claiming entry, bit 31 of the low half set once the slot
//                  has a duplicate; all ones = empty (never a real word: positions < 2^32 - 1)
//   serial entry   position << 32 | entry
//   spill key      owner << 32 | position (sorted, so each owner's spill is one range)
//   member         slot << 32 | entry after the claim; output row << 32 | entry once the
//                  layout is known (sorted, so each group is one range in entry order)
#include <cstdint>

#include "core/dtype.h"
#include "core/hash.h"
#include "core/host_device.h"
#include "core/index_map.h"
#include "cuda/atomics.h"

namespace zen::cuda::hp {

inline constexpr unsigned long long kEmptySlot = ~0ULL;
inline constexpr unsigned long long kDupBit = 1ULL << 31;
inline constexpr unsigned long long kEntryMask = kDupBit - 1;

// The counters the host reads after the claim (one array, one copy back).
enum Counter : int {
  kBadEntry = 0,    // smallest entry with an out-of-range index; all ones when none
  kDupMembers = 1,  // members recorded in dupMembers
  kOccupied = 2,    // occupied parallel slots (written by the selection after the claim)
  kGroups = 3,      // groups to sum (written by the group selection)
  kSerialCounts = 4,
  // kSerialCounts + p: entries partition p sent to its serial memory (may exceed r2)
};
ZEN_HOST_DEVICE int countersFor(int numParts) {
  return kSerialCounts + numParts;
}

ZEN_HOST_DEVICE unsigned long long packWord(uint64_t high, uint64_t low) {
  return (high << 32) | (low & 0xffffffffULL);
}
ZEN_HOST_DEVICE uint32_t wordHigh(unsigned long long w) {
  return static_cast<uint32_t>(w >> 32);
}
ZEN_HOST_DEVICE uint32_t wordLow(unsigned long long w) {
  return static_cast<uint32_t>(w);
}

struct ClaimArgs {
  IndexMap map;
  HashFamily hashes;
  const int64_t* indices;
  uint64_t r1;                     // parallel slots per partition
  uint64_t r2;                     // serial entries per partition
  unsigned long long* slots;       // numParts * r1, all kEmptySlot before the pass
  unsigned long long* serial;      // numParts * r2
  unsigned long long* counters;    // countersFor(numParts): kBadEntry all ones, the rest 0
  unsigned long long* dupMembers;  // nnz: every member of every duplicated slot
};

// Step A, entry i: level 1 (owner, position), then k probes into the owner's parallel
// memory, each a compare-and-swap from empty. Finding the same position means a duplicate
// on this rank: it is recorded as a member of the slot's group (the first duplicate also
// records the claimer), never dropped. After k failures the entry goes to the owner's
// serial memory if there is room; if not, only the count grows — the host sees it above r2
// and redoes the pass with more serial memory. Nothing is written past any buffer.
ZEN_HOST_DEVICE void claimEntry(const ClaimArgs& a, int64_t i) {
  const int64_t idx = a.indices[i];
  if (idx < 0 || static_cast<uint64_t>(idx) >= a.map.numRows()) {
    atomicMinU64(&a.counters[kBadEntry], static_cast<unsigned long long>(i));
    return;
  }
  const IndexMap::Place place = a.map.place(static_cast<uint64_t>(idx));
  const auto pos = static_cast<uint32_t>(place.pos);
  const uint64_t base = static_cast<uint64_t>(place.owner) * a.r1;
  const unsigned long long word = packWord(pos, static_cast<uint64_t>(i));
  for (int h = 0; h < a.hashes.count(); ++h) {
    const uint64_t s = base + a.hashes.probe(h, pos, a.r1);
    const unsigned long long old = atomicCasU64(&a.slots[s], kEmptySlot, word);
    if (old == kEmptySlot) return;       // claimed
    if (wordHigh(old) != pos) continue;  // another index holds it: next probe
    const unsigned long long prev = atomicOrU64(&a.slots[s], kDupBit);
    const bool first = (prev & kDupBit) == 0;
    const unsigned long long at = atomicAddU64(&a.counters[kDupMembers], first ? 2 : 1);
    a.dupMembers[at] = packWord(s, static_cast<uint64_t>(i));
    if (first) a.dupMembers[at + 1] = packWord(s, prev & kEntryMask);
    return;
  }
  const unsigned long long at = atomicAddU64(&a.counters[kSerialCounts + place.owner], 1);
  if (at < a.r2) a.serial[place.owner * a.r2 + at] = word;
}

// Step C1, serial slot t < numParts * r2: copy the owner's spilled entries to the flat spill
// list (spillStart = exclusive prefix of the per-owner counts) as (owner, position) keys.
ZEN_HOST_DEVICE void gatherSpill(uint64_t r2,
                                 const unsigned long long* serial,
                                 const unsigned long long* counters,
                                 const int64_t* spillStart,
                                 unsigned long long* keys,
                                 uint32_t* entries,
                                 int64_t t) {
  const uint64_t p = static_cast<uint64_t>(t) / r2;
  const uint64_t j = static_cast<uint64_t>(t) % r2;
  if (j >= counters[kSerialCounts + p]) return;
  const unsigned long long w = serial[t];
  const int64_t dst = spillStart[p] + static_cast<int64_t>(j);
  keys[dst] = packWord(p, wordHigh(w));
  entries[dst] = wordLow(w);
}

// Step C2, j <= spillTotal over the sorted keys: 1 where a new (owner, position) starts.
ZEN_HOST_DEVICE int64_t spillHead(const unsigned long long* sortedKeys,
                                  int64_t spillTotal,
                                  int64_t j) {
  if (j >= spillTotal) return 0;
  return j == 0 || sortedKeys[j] != sortedKeys[j - 1] ? 1 : 0;
}

// First k in [0, n) with sorted[k] >= value (n when none).
ZEN_HOST_DEVICE int64_t lowerBound(const uint32_t* sorted, int64_t n, uint64_t value) {
  int64_t lo = 0;
  int64_t hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < value) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The output layout: owner p's list is [offsets[p], offsets[p + 1]) and holds first its
// occupied parallel slots in slot order, then its distinct spilled positions in position
// order. occList is the ascending list of occupied slot ids (a stream compaction).
struct Layout {
  const uint32_t* occList;
  int64_t occupied;
  uint64_t r1;
  int numParts;
  int64_t spillTotal;         // spilled entries (0: no spill arrays)
  const int64_t* spillStart;  // numParts + 1: owner p's spill is [spillStart[p], spillStart[p+1])
  const int64_t* headRank;    // spillTotal + 1: exclusive prefix of spillHead
  int64_t* offsets;           // numParts + 1
  int64_t* occBefore;         // numParts + 1: occupied slots of owners < p
  int64_t* spillBase;         // numParts: distinct spilled positions of owners < p
};

// Step D1, p <= numParts.
ZEN_HOST_DEVICE void occupiedBefore(const Layout& l, int p) {
  l.occBefore[p] = p >= l.numParts
                       ? l.occupied
                       : lowerBound(l.occList, l.occupied, static_cast<uint64_t>(p) * l.r1);
}

// Step D2, one thread: per-owner counts to offsets. Returns the distinct spilled positions.
ZEN_HOST_DEVICE int64_t prefixOffsets(const Layout& l) {
  int64_t run = 0;
  for (int p = 0; p < l.numParts; ++p) {
    l.offsets[p] = run;
    const int64_t occupied = l.occBefore[p + 1] - l.occBefore[p];
    int64_t spilled = 0;
    l.spillBase[p] = 0;
    if (l.spillTotal > 0) {
      l.spillBase[p] = l.headRank[l.spillStart[p]];
      spilled = l.headRank[l.spillStart[p + 1]] - l.spillBase[p];
    }
    run += occupied + spilled;
  }
  l.offsets[l.numParts] = run;
  return l.spillTotal > 0 ? l.headRank[l.spillTotal] : 0;
}

// Output row of the k-th occupied slot s (owner s / r1).
ZEN_HOST_DEVICE int64_t slotOutputRow(const Layout& l, uint32_t s, int64_t k) {
  const uint64_t p = s / l.r1;
  return l.offsets[p] + (k - l.occBefore[p]);
}

// Step E1, k < occupied: where the k-th occupied slot goes, its position, and the entry
// whose row it takes (-1 for a duplicated slot: the group sum writes that row).
struct SlotRow {
  int64_t outRow;
  uint32_t position;
  int64_t source;
};
ZEN_HOST_DEVICE SlotRow slotRow(const Layout& l, const unsigned long long* slots, int64_t k) {
  const uint32_t s = l.occList[k];
  const unsigned long long w = slots[s];
  SlotRow r;
  r.outRow = slotOutputRow(l, s, k);
  r.position = wordHigh(w);
  r.source = (w & kDupBit) != 0 ? -1 : static_cast<int64_t>(w & kEntryMask);
  return r;
}

// Step E2, d < dupMembers: slot << 32 | entry becomes output row << 32 | entry.
ZEN_HOST_DEVICE void dupMemberRow(const Layout& l, unsigned long long* members, int64_t d) {
  const unsigned long long m = members[d];
  const uint32_t s = wordHigh(m);
  const int64_t k = lowerBound(l.occList, l.occupied, s);
  members[d] = packWord(static_cast<uint64_t>(slotOutputRow(l, s, k)), wordLow(m));
}

// Step E3, j < spillTotal over the sorted spill: the group's output row (after the owner's
// occupied slots), its position (written once, by the group's first entry) and a member.
ZEN_HOST_DEVICE void spillMemberRow(const Layout& l,
                                    const unsigned long long* sortedKeys,
                                    const uint32_t* sortedEntries,
                                    uint32_t* positions,
                                    unsigned long long* spillMembers,
                                    int64_t j) {
  const unsigned long long key = sortedKeys[j];
  const uint32_t p = wordHigh(key);
  const int64_t group = l.headRank[j + 1] - 1;
  const int64_t occupied = l.occBefore[p + 1] - l.occBefore[p];
  const int64_t outRow = l.offsets[p] + occupied + (group - l.spillBase[p]);
  if (l.headRank[j + 1] != l.headRank[j]) positions[outRow] = wordLow(key);
  spillMembers[j] = packWord(static_cast<uint64_t>(outRow), sortedEntries[j]);
}

// Step F1, j < members (sorted): a group starts where the output row changes.
ZEN_HOST_DEVICE bool isGroupHead(const unsigned long long* sortedMembers, int64_t j) {
  return j == 0 || wordHigh(sortedMembers[j]) != wordHigh(sortedMembers[j - 1]);
}

// Step F2, one element e of one group [begin, end) of sorted members: the rows summed in
// entry order in the accumulator type (fp32 for fp16/bf16) and rounded once, as the CPU
// partitioner does, so the result is bit-identical to it.
template <typename T>
ZEN_HOST_DEVICE void sumGroupElement(const T* values,
                                     int64_t rowSize,
                                     const unsigned long long* sortedMembers,
                                     int64_t begin,
                                     int64_t end,
                                     int64_t e,
                                     T* out) {
  using Acc = AccumulatorT<T>;
  Acc acc = 0;
  for (int64_t j = begin; j < end; ++j) {
    acc +=
        toAccumulator<Acc>(values[static_cast<int64_t>(wordLow(sortedMembers[j])) * rowSize + e]);
  }
  out[static_cast<int64_t>(wordHigh(sortedMembers[begin])) * rowSize + e] = fromAccumulator<T>(acc);
}

}  // namespace zen::cuda::hp
