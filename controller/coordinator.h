#pragma once

// Rank 0's half of a slow-path cycle (Horovod's ComputeResponseList, coordinator branch): merge
// every rank's RequestList into the message table, turn the names that became ready into
// responses (or error responses) in one global order, fuse them, run the stall inspector and
// OR the shutdown flags. The result is broadcast and executed by every rank, so that order is
// the only order: cached hits first (bit order), then names that became ready in this cycle
// sorted by name, then the join response if every rank has joined.

#include <cstdint>
#include <vector>

#include "controller/clock.h"
#include "controller/message_table.h"
#include "controller/stall_inspector.h"
#include "core/message.h"

namespace zen::controller {

struct CoordinatorOptions {
  int size = 1;
  int64_t fusionThresholdBytes = int64_t{128} << 20;  // ZEN_FUSION_THRESHOLD
  double stallCheckSeconds = 60.0;                    // ZEN_STALL_CHECK_TIME_SECONDS
  double stallShutdownSeconds = 0.0;                  // ZEN_STALL_SHUTDOWN_TIME_SECONDS
};

class Coordinator {
 public:
  explicit Coordinator(CoordinatorOptions options);

  // fromEachRank[r] is rank r's list (the channel knows the sender, so a request's rank field
  // is taken from its position). cachedHits: the single-tensor responses of the entries hit on
  // every rank this cycle (LocalNegotiator::cachedResponses()), planned first.
  ResponseList computeResponses(const std::vector<RequestList>& fromEachRank,
                                TimePoint now,
                                const std::vector<Response>& cachedHits = {});

  // Runs the stall inspector. computeResponses does it on the slow path; on the fast path the
  // loop calls it on rank 0 (the table may still hold names some ranks never posted).
  const StallReport& inspectStalls(TimePoint now);
  // What the stall inspector said last; the loop logs a non-empty warning.
  const StallReport& lastStallReport() const { return lastStall_; }
  // A stall outlived ZEN_STALL_SHUTDOWN_TIME_SECONDS: rank 0 keeps asking for shutdown (its
  // shutdown bit on the fast path, the ResponseList flag on the slow path) until all stop.
  bool stallShutdown() const { return stallShutdown_; }
  const MessageTable& table() const { return table_; }

 private:
  CoordinatorOptions options_;
  MessageTable table_;
  StallInspector stall_;
  StallReport lastStall_;
  bool stallShutdown_ = false;
};

}  // namespace zen::controller
