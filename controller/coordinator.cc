// Rank 0's slow-path cycle: table -> validated, ordered, fused plan (controller/coordinator.h).

#include "controller/coordinator.h"

#include <algorithm>

#include "controller/fusion_planner.h"
#include "controller/validation.h"

namespace zen::controller {

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(options),
      table_(options.size),
      stall_(StallOptions{options.stallCheckSeconds, options.stallShutdownSeconds}) {}

ResponseList Coordinator::computeResponses(const std::vector<RequestList>& fromEachRank,
                                           TimePoint now,
                                           const std::vector<Response>& cachedHits) {
  ResponseList out;
  const int ranks = std::min(static_cast<int>(fromEachRank.size()), options_.size);
  for (int r = 0; r < ranks; ++r) {
    const RequestList& list = fromEachRank[static_cast<size_t>(r)];
    out.shutdown = out.shutdown || list.shutdown;
    for (Request request : list.requests) {
      request.rank = r;
      if (request.op == OpType::kJoin) {
        (void)table_.join(r);  // r is in range
      } else {
        (void)table_.add(request, now);  // r is in range and the op is not kJoin
      }
    }
  }

  std::vector<Response> responses = cachedHits;
  for (const auto& [name, entry] : table_.takeReady()) {
    responses.push_back(buildResponse(name, entry, table_.joinedRanks()));
  }
  if (table_.allJoined()) {
    Response join;
    join.type = ResponseType::kJoin;
    join.tensorNames = {kJoinTensorName};
    join.lastJoinedRank = table_.lastJoinedRank();
    responses.push_back(std::move(join));
    table_.clearJoin();
  }
  out.responses = fuseResponses(std::move(responses), options_.fusionThresholdBytes);

  inspectStalls(now);
  out.shutdown = out.shutdown || stallShutdown_;
  return out;
}

const StallReport& Coordinator::inspectStalls(TimePoint now) {
  lastStall_ = stall_.check(table_, now);
  stallShutdown_ = stallShutdown_ || lastStall_.shutdown;
  return lastStall_;
}

}  // namespace zen::controller
