// The plain baseline for Algorithm 1: sort entries by (owner, local position), then sum runs.
//
// Steps: place every entry (one IndexMap::place each), std::sort the (owner, pos, entry)
// keys, walk them once writing positions and summed rows. O(nnz log nnz), one thread,
// scratch 16 bytes per entry. Wire bytes for owner p: count(p) * (4 + rowBytes).
#include "core/sort_partitioner.h"

#include <algorithm>
#include <vector>

#include "core/row_sum.h"

namespace zen {

Status sortPartition(const IndexMap& map,
                     const SparseView& in,
                     PushLists* out,
                     PartitionStats* stats) {
  ZEN_RETURN_IF_ERROR(validateSparse(in));
  const int64_t n = map.numParts();
  struct Key {
    uint64_t place;  // owner * chunk + pos: sorts by owner, then position
    int64_t entry;
    bool operator<(const Key& o) const {
      return place != o.place ? place < o.place : entry < o.entry;
    }
  };
  std::vector<Key> keys(in.nnz);
  for (int64_t i = 0; i < in.nnz; ++i) {
    const auto pl = map.place(in.indices[i]);
    keys[i] = Key{pl.owner * map.chunk() + pl.pos, i};
  }
  std::sort(keys.begin(), keys.end());
  const size_t rowBytes = in.rowBytes();
  out->offsets.assign(n + 1, 0);
  out->positions.clear();
  out->values.clear();
  out->values.reserve(keys.size() * rowBytes);
  out->dtype = in.dtype;
  out->rowSize = in.rowSize;
  for (size_t j = 0; j < keys.size();) {
    size_t end = j + 1;
    while (end < keys.size() && keys[end].place == keys[j].place) ++end;
    const auto owner = static_cast<int64_t>(keys[j].place / map.chunk());
    out->positions.push_back(static_cast<uint32_t>(keys[j].place % map.chunk()));
    ++out->offsets[owner + 1];
    out->values.resize(out->values.size() + rowBytes);
    sumRows(
        in.dtype, in.rowSize, static_cast<int64_t>(end - j),
        [&](int64_t r) { return in.row(keys[j + r].entry); },
        out->values.data() + out->values.size() - rowBytes);
    j = end;
  }
  for (int64_t p = 0; p < n; ++p) out->offsets[p + 1] += out->offsets[p];
  if (stats != nullptr) {
    *stats = PartitionStats{};
    stats->input = in.nnz;
    stats->unique = out->total();
    stats->duplicates = in.nnz - out->total();
    stats->scratchBytes = keys.capacity() * sizeof(Key);
  }
  return Status::ok();
}

}  // namespace zen
