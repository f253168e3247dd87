// The straw-man partitioner of the Zen paper's Appendix A (kept for the ablation only).
//
// Steps: for each entry, slot = owner * slotsPerPart + h(pos) mod slotsPerPart; if the slot
// holds another index, overwrite it (the earlier index and its row are lost); if it holds
// the same index, sum. Then compact the occupied slots per owner. Single pass, single thread.
// Wire bytes for owner p: count(p) * (4 + rowBytes), minus whatever was lost.
#include "core/strawman_partitioner.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/hash.h"
#include "core/row_sum.h"

namespace zen {

double strawmanExpectedLoss(double load) {
  if (load <= 0) return 0.0;
  return 1.0 - (1.0 - std::exp(-load)) / load;
}

Status strawmanPartition(const IndexMap& map,
                         const SparseView& in,
                         int64_t slotsPerPart,
                         uint64_t seed,
                         PushLists* out,
                         PartitionStats* stats) {
  ZEN_RETURN_IF_ERROR(validateSparse(in));
  ZEN_CHECK_ARG(slotsPerPart >= 1, "slots per part must be positive, got {}", slotsPerPart);
  const int64_t n = map.numParts();
  const size_t rowBytes = in.rowBytes();
  constexpr int64_t kNone = -1;
  std::vector<int64_t> slotIndex(static_cast<size_t>(n * slotsPerPart), kNone);
  std::vector<std::byte> slotRow(slotIndex.size() * rowBytes);
  const HashFamily hash(1, seed);
  int64_t duplicates = 0;
  for (int64_t i = 0; i < in.nnz; ++i) {
    const auto place = map.place(in.indices[i]);
    const size_t s = place.owner * slotsPerPart + hash.probe(0, place.pos, slotsPerPart);
    std::byte* row = slotRow.data() + s * rowBytes;
    if (slotIndex[s] == in.indices[i]) {
      const std::byte* rows[2] = {row, in.row(i)};
      std::vector<std::byte> sum(rowBytes);
      sumRows(
          in.dtype, in.rowSize, 2, [&](int64_t r) { return rows[r]; }, sum.data());
      std::memcpy(row, sum.data(), rowBytes);
      ++duplicates;
      continue;
    }
    slotIndex[s] = in.indices[i];  // overwrite: the straw-man's defect
    std::memcpy(row, in.row(i), rowBytes);
  }
  out->offsets.assign(n + 1, 0);
  out->positions.clear();
  out->values.clear();
  out->dtype = in.dtype;
  out->rowSize = in.rowSize;
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t j = 0; j < slotsPerPart; ++j) {
      const size_t s = p * slotsPerPart + j;
      if (slotIndex[s] == kNone) continue;
      out->positions.push_back(static_cast<uint32_t>(map.localPos(slotIndex[s])));
      const std::byte* row = slotRow.data() + s * rowBytes;
      out->values.insert(out->values.end(), row, row + rowBytes);
    }
    out->offsets[p + 1] = static_cast<int64_t>(out->positions.size());
  }
  if (stats != nullptr) {
    *stats = PartitionStats{};
    stats->input = in.nnz;
    stats->unique = out->total();
    stats->duplicates = duplicates;
    stats->lost = in.nnz - duplicates - out->total();
    stats->scratchBytes = slotIndex.size() * sizeof(int64_t) + slotRow.size();
  }
  return Status::ok();
}

}  // namespace zen
