// Algorithm 1 on the GPU (ALGORITHMS.md §3): lock-free hierarchical hashing with bounded
// serial memory, compaction fused into the per-owner lists, and duplicates summed in entry
// order so the result equals the CPU partitioner's bit for bit.
//
// Steps for nnz entries and n owners, r1 = memoryFactor * nnz / n parallel slots and r2
// serial entries per owner (hash_partition_steps.h holds each thread's share of a step):
//   A. claim (a thread per entry): owner and position from the IndexMap, k probes, each an
//      atomicCAS of the 64-bit slot word (position << 32 | entry) from all-ones. A duplicate
//      index becomes a member of its slot's group; after k failures an atomic counter per
//      owner hands out its serial memory, and past r2 only counts.
//   B. stream-compact the occupied slot ids (cub::DeviceSelect) and read the counters back
//      (sync 1). An out-of-range index ends the call; a serial count above r2 (overflow)
//      redoes A with a larger r2 (nextSerialCapacity). Nothing was written past any buffer,
//      nothing is lost.
//   C. spill: gather the serial entries as (owner, position) keys, radix-sort, mark and scan
//      the distinct ones.
//   D. layout (one block): occupied slots per owner by binary search in the compacted ids,
//      then offsets: owner p's list is its occupied slots, then its distinct spilled positions.
//   E. scatter (the fused compaction): every occupied slot writes its position and, unless
//      duplicated, its claimer's row into the owner's list; duplicated slots and spilled
//      entries become members (output row << 32 | entry).
//   F. sum: radix-sort the members, select group starts, one warp per group sums the rows in
//      entry order in the accumulator type (fp32 for fp16/bf16) and rounds once. Groups of
//      more than 32 entries with rows under 32 elements use a fixed lane split and shuffle
//      tree instead: deterministic, exact for integer-valued data, but rounded in another
//      order than the CPU. Then the offsets go back to the host (sync 2).
// Memory traffic per entry: 8 bytes of index read, an 8-byte CAS per probe, 12 bytes of
// slot words set and scanned (factor 1.5), 4 + rowBytes written to the lists and rowBytes
// read; a duplicated or spilled entry adds about 40 bytes of sorted keys and its row read
// once more. Scratch: about 40 bytes per entry (gpu_plan.h), kept across calls.
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <vector>

#include "cuda/device_util.cuh"
#include "cuda/gpu_hash_partitioner.h"
#include "cuda/gpu_plan.h"
#include "cuda/hash_partition_steps.h"
#include "cuda/scan.h"
#include "cuda/stream_wait.h"

namespace zen::cuda {
namespace {

using ull = unsigned long long;

enum Slot : int {
  kSlotWordsSlot = 1,
  kSerialSlot,
  kCountersSlot,
  kOccListSlot,
  kMembersSlot,
  kMembersAltSlot,
  kSpillKeysSlot,
  kSpillKeysAltSlot,
  kSpillEntriesSlot,
  kSpillEntriesAltSlot,
  kHeadsSlot,
  kHeadRankSlot,
  kLayoutSlot,
  kGroupStartsSlot,
};
enum PinnedSlot : int { kCountersPinned = 0, kUploadPinned = 1, kResultPinned = 2 };

// With r2 doubling up to nnz this is never reached; it only turns a bug into an error.
constexpr int kMaxAttempts = 40;

__global__ void claimKernel(hp::ClaimArgs args, int64_t nnz) {
  for (int64_t i = globalThread(); i < nnz; i += gridThreads()) hp::claimEntry(args, i);
}

struct Occupied {
  const ull* slots;
  __device__ bool operator()(uint32_t s) const { return slots[s] != hp::kEmptySlot; }
};

struct GroupHead {
  const ull* members;
  __device__ bool operator()(uint32_t j) const { return hp::isGroupHead(members, j); }
};

__global__ void gatherSpillKernel(uint64_t r2,
                                  const ull* serial,
                                  const ull* counters,
                                  const int64_t* spillStart,
                                  ull* keys,
                                  uint32_t* entries,
                                  int64_t serialSlots) {
  for (int64_t t = globalThread(); t < serialSlots; t += gridThreads()) {
    hp::gatherSpill(r2, serial, counters, spillStart, keys, entries, t);
  }
}

__global__ void spillHeadsKernel(const ull* sortedKeys, int64_t spillTotal, int64_t* heads) {
  for (int64_t j = globalThread(); j <= spillTotal; j += gridThreads()) {
    heads[j] = hp::spillHead(sortedKeys, spillTotal, j);
  }
}

// One block: per-owner occupied counts in parallel, then the offsets by thread 0.
__global__ void layoutKernel(hp::Layout l, int64_t* spillUnique) {
  for (int p = static_cast<int>(threadIdx.x); p <= l.numParts; p += blockDim.x) {
    hp::occupiedBefore(l, p);
  }
  __syncthreads();
  if (threadIdx.x == 0) *spillUnique = hp::prefixOffsets(l);
}

// A thread per (occupied slot, unit of its row).
template <typename Unit>
__global__ void slotRowsKernel(hp::Layout l,
                               const ull* slots,
                               const Unit* values,
                               Unit* outValues,
                               uint32_t* positions,
                               int64_t unitsPerRow) {
  const int64_t total = l.occupied * unitsPerRow;
  for (int64_t t = globalThread(); t < total; t += gridThreads()) {
    const int64_t k = t / unitsPerRow;
    const int64_t u = t - k * unitsPerRow;
    const hp::SlotRow r = hp::slotRow(l, slots, k);
    if (u == 0) positions[r.outRow] = r.position;
    if (r.source >= 0) outValues[r.outRow * unitsPerRow + u] = values[r.source * unitsPerRow + u];
  }
}

__global__ void dupMembersKernel(hp::Layout l, ull* members, int64_t count) {
  for (int64_t d = globalThread(); d < count; d += gridThreads()) hp::dupMemberRow(l, members, d);
}

__global__ void spillMembersKernel(hp::Layout l,
                                   const ull* sortedKeys,
                                   const uint32_t* sortedEntries,
                                   uint32_t* positions,
                                   ull* spillMembers,
                                   int64_t spillTotal) {
  for (int64_t j = globalThread(); j < spillTotal; j += gridThreads()) {
    hp::spillMemberRow(l, sortedKeys, sortedEntries, positions, spillMembers, j);
  }
}

template <typename Acc>
__device__ __forceinline__ Acc warpSum(Acc v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
  return v;
}

// A warp per group of sorted members [starts[g], starts[g + 1]).
template <typename T>
__global__ void groupSumKernel(const ull* members,
                               int64_t memberCount,
                               const uint32_t* starts,
                               const ull* counters,
                               const T* values,
                               int64_t rowSize,
                               T* out) {
  using Acc = AccumulatorT<T>;
  const auto groups = static_cast<int64_t>(counters[hp::kGroups]);
  const int lane = laneId();
  const int64_t warps = gridThreads() / 32;
  for (int64_t g = globalThread() / 32; g < groups; g += warps) {
    const int64_t begin = starts[g];
    const int64_t end = g + 1 < groups ? static_cast<int64_t>(starts[g + 1]) : memberCount;
    if (rowSize >= 32 || end - begin <= 32) {
      // Lanes over elements, entries in order: the CPU's summation order.
      for (int64_t e = lane; e < rowSize; e += 32) {
        hp::sumGroupElement(values, rowSize, members, begin, end, e, out);
      }
      continue;
    }
    // A large group of short rows: lanes over entries, then a fixed shuffle tree.
    const auto row = static_cast<int64_t>(hp::wordHigh(members[begin]));
    for (int64_t e = 0; e < rowSize; ++e) {
      Acc acc = 0;
      for (int64_t j = begin + lane; j < end; j += 32) {
        acc +=
            toAccumulator<Acc>(values[static_cast<int64_t>(hp::wordLow(members[j])) * rowSize + e]);
      }
      acc = warpSum(acc);
      if (lane == 0) out[row * rowSize + e] = fromAccumulator<T>(acc);
    }
  }
}

// CUDA events around the phases when the caller asked for times.
class PhaseEvents {
 public:
  ~PhaseEvents() {
    for (cudaEvent_t e : events_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
  Status create() {
    for (cudaEvent_t& e : events_) ZEN_CHECK_CUDA(cudaEventCreate(&e));
    return Status::ok();
  }
  bool on() const { return events_[0] != nullptr; }
  Status record(int i, cudaStream_t stream) {
    if (on()) ZEN_CHECK_CUDA(cudaEventRecord(events_[i], stream));
    return Status::ok();
  }
  Status elapsed(int from, int to, float* ms) const {
    if (on()) ZEN_CHECK_CUDA(cudaEventElapsedTime(ms, events_[from], events_[to]));
    return Status::ok();
  }

 private:
  cudaEvent_t events_[3] = {};
};

}  // namespace

GpuHashPartitioner::GpuHashPartitioner(const IndexMap& map, HashPartitionOptions options)
    : map_(map),
      options_(options),
      hashes_(std::clamp(options.hashFunctions, 1, HashFamily::kMaxFunctions), options.seed) {}

Status GpuHashPartitioner::partition(const SparseView& in,
                                     GpuPushLists* out,
                                     cudaStream_t stream,
                                     PartitionStats* stats,
                                     GpuPartitionTimes* times) {
  ZEN_CHECK_ARG(out != nullptr, "the GPU partitioner needs an output");
  ZEN_RETURN_IF_ERROR(checkPartitionInput(map_, in, Device::Kind::kCuda, kMaxPartitionEntries));

  const int n = map_.numParts();
  const int64_t nnz = in.nnz;
  const HashPartitionPlan plan = planHashPartition(nnz, n, options_);
  const int numCounters = hp::countersFor(n);
  const int sm = workspace_.smCount();
  lastAttempts_ = 0;
  PhaseEvents events;
  if (times != nullptr) ZEN_RETURN_IF_ERROR(events.create());

  // Layout buffer: offsets (n + 1), spill unique (1), spill start (n + 1), occupied before
  // (n + 1), spill base (n); the first n + 2 go back to the host in one copy.
  int64_t* layoutBuf = nullptr;
  ZEN_RETURN_IF_ERROR(workspace_.device(kLayoutSlot, 4 * (n + 1), &layoutBuf));
  int64_t* offsets = layoutBuf;
  int64_t* spillUnique = layoutBuf + n + 1;
  int64_t* spillStart = spillUnique + 1;
  int64_t* occBefore = spillStart + n + 1;
  int64_t* spillBase = occBefore + n + 1;
  int64_t* result = nullptr;
  ZEN_RETURN_IF_ERROR(workspace_.pinned(kResultPinned, n + 2, &result));

  if (nnz == 0) {
    out->dtype = in.dtype;
    out->rowSize = in.rowSize;
    out->deviceIndex = in.device.index;
    out->offsets.assign(n + 1, 0);
    ZEN_RETURN_IF_ERROR(out->deviceOffsets.reserve((n + 1) * sizeof(int64_t)));
    ZEN_CHECK_CUDA(
        cudaMemsetAsync(out->deviceOffsets.data(), 0, (n + 1) * sizeof(int64_t), stream));
    ZEN_RETURN_IF_ERROR(
        waitStream(stream, workspace_.waitTimeoutSeconds(), "the GPU partitioner's empty offsets"));
    if (stats != nullptr) *stats = PartitionStats{};
    return Status::ok();
  }

  ull* slots = nullptr;
  ull* counters = nullptr;
  ull* members = nullptr;
  uint32_t* occList = nullptr;
  ull* hostCounters = nullptr;
  ZEN_RETURN_IF_ERROR(workspace_.device(kSlotWordsSlot, plan.slots, &slots));
  ZEN_RETURN_IF_ERROR(workspace_.device(kCountersSlot, numCounters, &counters));
  ZEN_RETURN_IF_ERROR(workspace_.device(kMembersSlot, nnz, &members));
  ZEN_RETURN_IF_ERROR(workspace_.device(kOccListSlot, std::min(nnz, plan.slots), &occList));
  ZEN_RETURN_IF_ERROR(workspace_.pinned(kCountersPinned, numCounters, &hostCounters));

  // A and B, redone with more serial memory until no owner overflowed it.
  int64_t r2 = plan.r2;
  int64_t overflowed = 0;
  ull* serial = nullptr;
  for (;;) {
    ++lastAttempts_;
    ZEN_RETURN_IF_ERROR(workspace_.device(kSerialSlot, n * r2, &serial));
    ZEN_CHECK_CUDA(cudaMemsetAsync(slots, 0xff, plan.slots * sizeof(ull), stream));
    ZEN_CHECK_CUDA(cudaMemsetAsync(counters, 0, numCounters * sizeof(ull), stream));
    ZEN_CHECK_CUDA(cudaMemsetAsync(counters + hp::kBadEntry, 0xff, sizeof(ull), stream));
    ZEN_RETURN_IF_ERROR(events.record(0, stream));
    const hp::ClaimArgs args{map_,
                             hashes_,
                             in.indices,
                             static_cast<uint64_t>(plan.r1),
                             static_cast<uint64_t>(r2),
                             slots,
                             serial,
                             counters,
                             members};
    claimKernel<<<gridBlocks(nnz, kBlockThreads, sm), kBlockThreads, 0, stream>>>(args, nnz);
    ZEN_CHECK_LAUNCH("claimKernel");
    ZEN_RETURN_IF_ERROR(events.record(1, stream));

    size_t tempBytes = 0;
    const thrust::counting_iterator<uint32_t> slotIds(0);
    ZEN_CHECK_CUDA(cub::DeviceSelect::If(nullptr, tempBytes, slotIds, occList,
                                         counters + hp::kOccupied, plan.slots, Occupied{slots},
                                         stream));
    void* temp = nullptr;
    ZEN_RETURN_IF_ERROR(workspace_.deviceBytes(Workspace::kCubSlot, tempBytes, &temp));
    ZEN_CHECK_CUDA(cub::DeviceSelect::If(temp, tempBytes, slotIds, occList,
                                         counters + hp::kOccupied, plan.slots, Occupied{slots},
                                         stream));
    ZEN_CHECK_CUDA(cudaMemcpyAsync(hostCounters, counters, numCounters * sizeof(ull),
                                   cudaMemcpyDeviceToHost, stream));
    ZEN_RETURN_IF_ERROR(waitStream(stream, workspace_.waitTimeoutSeconds(),
                                   "the GPU partitioner's claim counters"));

    if (hostCounters[hp::kBadEntry] != hp::kEmptySlot) {
      const auto entry = static_cast<int64_t>(hostCounters[hp::kBadEntry]);
      int64_t idx = 0;  // on the own stream, idle after the wait above (an error path only)
      ZEN_CHECK_CUDA(cudaMemcpyAsync(&idx, in.indices + entry, sizeof(int64_t),
                                     cudaMemcpyDeviceToHost, stream));
      ZEN_RETURN_IF_ERROR(
          waitStream(stream, workspace_.waitTimeoutSeconds(), "the GPU partitioner's bad index"));
      return ZEN_ERROR(StatusCode::kInvalidArgument,
                       "index {} at position {} is out of range [0, {})", idx, entry, in.numRows);
    }
    int64_t maxNeed = 0;
    for (int p = 0; p < n; ++p) {
      maxNeed = std::max(maxNeed, static_cast<int64_t>(hostCounters[hp::kSerialCounts + p]));
    }
    if (maxNeed <= r2) break;
    for (int p = 0; p < n; ++p) {
      overflowed +=
          std::max<int64_t>(0, static_cast<int64_t>(hostCounters[hp::kSerialCounts + p]) - r2);
    }
    if (lastAttempts_ >= kMaxAttempts) {
      return ZEN_ERROR(StatusCode::kInternal,
                       "serial memory still overflowed after {} claim passes (r2 {}, need {})",
                       lastAttempts_, r2, maxNeed);
    }
    r2 = nextSerialCapacity(r2, maxNeed, nnz);
  }

  const auto dupMembers = static_cast<int64_t>(hostCounters[hp::kDupMembers]);
  const auto occupied = static_cast<int64_t>(hostCounters[hp::kOccupied]);
  int64_t* upload = nullptr;
  ZEN_RETURN_IF_ERROR(workspace_.pinned(kUploadPinned, n + 1, &upload));
  upload[0] = 0;
  for (int p = 0; p < n; ++p) {
    upload[p + 1] = upload[p] + static_cast<int64_t>(hostCounters[hp::kSerialCounts + p]);
  }
  const int64_t spillTotal = upload[n];
  const int64_t capacity = occupied + spillTotal;  // distinct indices <= this

  // Valid input: from here on the output is written.
  out->dtype = in.dtype;
  out->rowSize = in.rowSize;
  out->deviceIndex = in.device.index;
  ZEN_RETURN_IF_ERROR(out->reserve(capacity));
  ZEN_RETURN_IF_ERROR(out->deviceOffsets.reserve((n + 1) * sizeof(int64_t)));
  auto* positions = out->positions.as<uint32_t>();
  ZEN_CHECK_CUDA(cudaMemcpyAsync(spillStart, upload, (n + 1) * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, stream));

  hp::Layout layout{occList,  occupied,   static_cast<uint64_t>(plan.r1),
                    n,        spillTotal, spillStart,
                    nullptr,  offsets,    occBefore,
                    spillBase};
  // C. Spill.
  ull* sortedKeys = nullptr;
  uint32_t* sortedEntries = nullptr;
  if (spillTotal > 0) {
    ull* keys[2] = {};
    uint32_t* entries[2] = {};
    int64_t* heads = nullptr;
    int64_t* headRank = nullptr;
    ZEN_RETURN_IF_ERROR(workspace_.device(kSpillKeysSlot, spillTotal, &keys[0]));
    ZEN_RETURN_IF_ERROR(workspace_.device(kSpillKeysAltSlot, spillTotal, &keys[1]));
    ZEN_RETURN_IF_ERROR(workspace_.device(kSpillEntriesSlot, spillTotal, &entries[0]));
    ZEN_RETURN_IF_ERROR(workspace_.device(kSpillEntriesAltSlot, spillTotal, &entries[1]));
    ZEN_RETURN_IF_ERROR(workspace_.device(kHeadsSlot, spillTotal + 1, &heads));
    ZEN_RETURN_IF_ERROR(workspace_.device(kHeadRankSlot, spillTotal + 1, &headRank));
    const int64_t serialSlots = n * r2;
    gatherSpillKernel<<<gridBlocks(serialSlots, kBlockThreads, sm), kBlockThreads, 0, stream>>>(
        static_cast<uint64_t>(r2), serial, counters, spillStart, keys[0], entries[0], serialSlots);
    ZEN_CHECK_LAUNCH("gatherSpillKernel");
    cub::DoubleBuffer<ull> keyBuf(keys[0], keys[1]);
    cub::DoubleBuffer<uint32_t> entryBuf(entries[0], entries[1]);
    const int endBit = 32 + plan.ownerBits;
    size_t tempBytes = 0;
    ZEN_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, tempBytes, keyBuf, entryBuf, spillTotal,
                                                   0, endBit, stream));
    void* temp = nullptr;
    ZEN_RETURN_IF_ERROR(workspace_.deviceBytes(Workspace::kCubSlot, tempBytes, &temp));
    ZEN_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(temp, tempBytes, keyBuf, entryBuf, spillTotal, 0,
                                                   endBit, stream));
    sortedKeys = keyBuf.Current();
    sortedEntries = entryBuf.Current();
    spillHeadsKernel<<<gridBlocks(spillTotal + 1, kBlockThreads, sm), kBlockThreads, 0, stream>>>(
        sortedKeys, spillTotal, heads);
    ZEN_CHECK_LAUNCH("spillHeadsKernel");
    ZEN_RETURN_IF_ERROR(exclusiveSum(heads, headRank, spillTotal + 1, &workspace_, stream));
    layout.headRank = headRank;
  }

  // D. Layout.
  layoutKernel<<<1, kBlockThreads, 0, stream>>>(layout, spillUnique);
  ZEN_CHECK_LAUNCH("layoutKernel");

  // E. Scatter occupied slots (positions and undisputed rows), then the members.
  const size_t rowBytes = in.rowBytes();
  const int unit = copyUnitBytes(rowBytes, reinterpret_cast<uintptr_t>(in.values),
                                 reinterpret_cast<uintptr_t>(out->values.data()));
  const int64_t unitsPerRow = static_cast<int64_t>(rowBytes) / unit;
  ZEN_RETURN_IF_ERROR(dispatchUnit(unit, [&](auto tag) -> Status {
    using Unit = decltype(tag);
    slotRowsKernel<Unit>
        <<<gridBlocks(occupied * unitsPerRow, kBlockThreads, sm), kBlockThreads, 0, stream>>>(
            layout, slots, static_cast<const Unit*>(in.values), out->values.as<Unit>(), positions,
            unitsPerRow);
    ZEN_CHECK_LAUNCH("slotRowsKernel");
    return Status::ok();
  }));
  if (dupMembers > 0) {
    dupMembersKernel<<<gridBlocks(dupMembers, kBlockThreads, sm), kBlockThreads, 0, stream>>>(
        layout, members, dupMembers);
    ZEN_CHECK_LAUNCH("dupMembersKernel");
  }
  if (spillTotal > 0) {
    spillMembersKernel<<<gridBlocks(spillTotal, kBlockThreads, sm), kBlockThreads, 0, stream>>>(
        layout, sortedKeys, sortedEntries, positions, members + dupMembers, spillTotal);
    ZEN_CHECK_LAUNCH("spillMembersKernel");
  }

  // F. Sum the groups.
  const int64_t memberCount = dupMembers + spillTotal;
  if (memberCount > 0) {
    ull* membersAlt = nullptr;
    uint32_t* groupStarts = nullptr;
    ZEN_RETURN_IF_ERROR(workspace_.device(kMembersAltSlot, memberCount, &membersAlt));
    ZEN_RETURN_IF_ERROR(workspace_.device(kGroupStartsSlot, memberCount, &groupStarts));
    cub::DoubleBuffer<ull> memberBuf(members, membersAlt);
    const int endBit = 32 + bitWidth(static_cast<uint64_t>(capacity));
    size_t tempBytes = 0;
    ZEN_CHECK_CUDA(cub::DeviceRadixSort::SortKeys(nullptr, tempBytes, memberBuf, memberCount, 0,
                                                  endBit, stream));
    void* temp = nullptr;
    ZEN_RETURN_IF_ERROR(workspace_.deviceBytes(Workspace::kCubSlot, tempBytes, &temp));
    ZEN_CHECK_CUDA(
        cub::DeviceRadixSort::SortKeys(temp, tempBytes, memberBuf, memberCount, 0, endBit, stream));
    const ull* sorted = memberBuf.Current();
    const thrust::counting_iterator<uint32_t> memberIds(0);
    tempBytes = 0;
    ZEN_CHECK_CUDA(cub::DeviceSelect::If(nullptr, tempBytes, memberIds, groupStarts,
                                         counters + hp::kGroups, memberCount, GroupHead{sorted},
                                         stream));
    ZEN_RETURN_IF_ERROR(workspace_.deviceBytes(Workspace::kCubSlot, tempBytes, &temp));
    ZEN_CHECK_CUDA(cub::DeviceSelect::If(temp, tempBytes, memberIds, groupStarts,
                                         counters + hp::kGroups, memberCount, GroupHead{sorted},
                                         stream));
    ZEN_RETURN_IF_ERROR(dispatchDataType(in.dtype, [&](auto tag) -> Status {
      using T = decltype(tag);
      groupSumKernel<T>
          <<<gridBlocks(memberCount * 32, kBlockThreads, sm), kBlockThreads, 0, stream>>>(
              sorted, memberCount, groupStarts, counters, static_cast<const T*>(in.values),
              in.rowSize, out->values.as<T>());
      ZEN_CHECK_LAUNCH("groupSumKernel");
      return Status::ok();
    }));
  }
  ZEN_RETURN_IF_ERROR(events.record(2, stream));

  ZEN_CHECK_CUDA(cudaMemcpyAsync(out->deviceOffsets.data(), offsets, (n + 1) * sizeof(int64_t),
                                 cudaMemcpyDeviceToDevice, stream));
  ZEN_CHECK_CUDA(
      cudaMemcpyAsync(result, offsets, (n + 2) * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  ZEN_RETURN_IF_ERROR(
      waitStream(stream, workspace_.waitTimeoutSeconds(), "the GPU partitioner's offsets"));
  out->offsets.assign(result, result + n + 1);

  if (times != nullptr) {
    ZEN_RETURN_IF_ERROR(events.elapsed(0, 1, &times->claimMs));
    ZEN_RETURN_IF_ERROR(events.elapsed(1, 2, &times->compactMs));
  }
  if (stats != nullptr) {
    stats->input = nnz;
    stats->unique = out->total();
    stats->duplicates = nnz - out->total();
    stats->spilled = result[n + 1];
    stats->overflowed = overflowed;
    stats->lost = 0;
    stats->scratchBytes = workspace_.heldBytes();
  }
  return Status::ok();
}

}  // namespace zen::cuda
