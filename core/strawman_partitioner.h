#pragma once

#include <cstdint>

#include "core/index_map.h"
#include "core/push_lists.h"
#include "core/status.h"
#include "core/tensor.h"

namespace zen {

// The straw-man of the Zen paper's Appendix A, kept for the ablation: ONE hash into
// numParts * slotsPerPart slots, a collision overwrites the earlier index. It loses
// L(a) = 1 - (1 - e^-a) / a of the distinct indices at load a = nnz / slots
// (17.6% at a = 0.4, 4.8% at a = 0.1); stats->lost counts them. Never use it for training.
Status strawmanPartition(const IndexMap& map,
                         const SparseView& in,
                         int64_t slotsPerPart,
                         uint64_t seed,
                         PushLists* out,
                         PartitionStats* stats);

// The closed-form expected loss L(a).
double strawmanExpectedLoss(double load);

}  // namespace zen
