// The alltoall's device layout (cuda/alltoall_plan.h).
#include "cuda/alltoall_plan.h"

#include <utility>

#include "ops/exchange_checks.h"

namespace zen::cuda {

Result<AlltoallPlan> planAlltoall(const Response& response,
                                  const std::vector<TensorEntry*>& entries,
                                  int ranks,
                                  int rank) {
  ZEN_ASSIGN_OR_RETURN(ops::AlltoallRows rows, ops::checkAlltoall(response, entries, ranks, rank));
  AlltoallPlan p;
  p.rowBytes = rows.rowBytes;
  p.sendOffset.assign(rows.sendRows.size() + 1, 0);
  p.recvOffset.assign(rows.recvRows.size() + 1, 0);
  for (size_t q = 0; q < rows.sendRows.size(); ++q) {
    p.sendOffset[q + 1] = p.sendOffset[q] + static_cast<size_t>(rows.sendRows[q]) * p.rowBytes;
    p.recvOffset[q + 1] = p.recvOffset[q] + static_cast<size_t>(rows.recvRows[q]) * p.rowBytes;
  }
  p.receivedSplits = std::move(rows.recvRows);
  p.outputShape = std::move(rows.outputShape);
  return p;
}

}  // namespace zen::cuda
