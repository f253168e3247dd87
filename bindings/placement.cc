// Placement and the homogeneity of the hosts (bindings/placement.h).
#include "bindings/placement.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace zen::bindings {

Placement placementFor(const Config& config, int rank, int size, std::string backend) {
  Placement p;
  p.rank = rank;
  p.size = size;
  p.backend = std::move(backend);
  // Nothing said: every rank on one host.
  p.localRank = config.localRank.value_or(config.mpiLocalRank.value_or(rank));
  p.localSize = config.localSize.value_or(config.mpiLocalSize.value_or(size));
  p.localSize = std::max(p.localSize, 1);
  // Without zenrun's cross placement: hosts filled in rank order (-map-by slot).
  p.crossRank = config.crossRank.value_or(rank / p.localSize);
  p.crossSize = config.crossSize.value_or((size + p.localSize - 1) / p.localSize);
  return p;
}

Result<bool> hostsHomogeneous(const Config& config, ops::Transport& control) {
  const int32_t localSize = placementFor(config, control.rank(), control.size(), "").localSize;
  // The largest local size and the negated smallest, in one reduction.
  int32_t extremes[2] = {localSize, -localSize};
  ZEN_RETURN_IF_ERROR(control.allreduce(extremes, 2, DataType::kInt32, ReduceOp::kMax));
  return extremes[0] == -extremes[1];
}

}  // namespace zen::bindings
