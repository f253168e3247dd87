#pragma once

#include "core/index_map.h"
#include "core/push_lists.h"
#include "core/status.h"
#include "core/tensor.h"

namespace zen {

// The plain baseline for Algorithm 1: compute every entry's (owner, local position), sort by
// it, sum runs of equal positions. Lossless and simple, O(nnz log nnz) and single-threaded;
// the benchmark measures Algorithm 1 against it.
Status sortPartition(const IndexMap& map,
                     const SparseView& in,
                     PushLists* out,
                     PartitionStats* stats);

}  // namespace zen
