#pragma once

// Rank 0's half of a slow-path cycle (Horovod's ComputeResponseList, coordinator branch): merge
// every rank's RequestList into the message tables, turn the names that became ready into
// responses (or error responses) in one global order, fuse them, run the stall inspector and
// OR the shutdown flags. The result is broadcast and executed by every rank, so that order is
// the only order:
//
//   1. cached hits, in bit order;
//   2. the names that became ready in this cycle, set by set in ascending id (the job's table,
//      set 0, first), sorted by name within a set. A request rank 0 refuses on arrival (its
//      set does not exist, or the poster is not a member) fails with its set's names. When a
//      kAddProcessSet is answered the set's table starts empty; when a kRemoveProcessSet is,
//      the set's names that became ready in this cycle run first, then every name still
//      pending in it fails, then the removal: nothing of the set follows it;
//   3. the join response, once every rank of the job has joined.
//
// Process sets (core/message.h): one MessageTable per set, in the set's terms (its size, ranks
// as positions in its members), so a name is ready once every member has posted it, and the
// same name may be pending in several sets. A request from job rank r for set s goes into
// set s's table as rank position(s, r); responses and errors carry processSet = s.
// Registration requests live in the job's table and need a real post from every rank
// (controller/set_registration.h). Join is the job's: a joined rank stands in for itself in
// every set it belongs to, and the join completes (and is cleared everywhere) only when every
// rank of the job has joined.

#include <cstdint>
#include <map>
#include <vector>

#include "controller/clock.h"
#include "controller/message_table.h"
#include "controller/stall_inspector.h"
#include "core/message.h"
#include "core/process_sets.h"

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

  // The autotuner's threshold, from the plan that carried it on.
  void setFusionThreshold(int64_t bytes) { options_.fusionThresholdBytes = bytes; }

  // Runs the stall inspector over every set's table. computeResponses does it on the slow
  // path; on the fast path the loop calls it on rank 0 (the tables may still hold names some
  // ranks never posted).
  const StallReport& inspectStalls(TimePoint now);
  // What the stall inspector said last; the loop logs a non-empty warning.
  const StallReport& lastStallReport() const { return lastStall_; }
  // A stall outlived ZEN_STALL_SHUTDOWN_TIME_SECONDS: rank 0 keeps asking for shutdown (its
  // shutdown bit on the fast path, the ResponseList flag on the slow path) until all stop.
  bool stallShutdown() const { return stallShutdown_; }
  // The job's table (set 0).
  const MessageTable& table() const { return tables_.at(kGlobalProcessSet); }
  // Set `id`'s table, nullptr for a set that does not exist.
  const MessageTable* table(int32_t id) const;
  const ProcessSets& processSets() const { return sets_; }

 private:
  using BySet = std::map<int32_t, std::vector<Response>>;

  // Files job rank r's request in its set's table, or an error in `refused` for a set that
  // does not exist or a rank that is not a member.
  void route(Request request, int rank, TimePoint now, BySet* refused);
  void join(int rank);
  // The job's table's ready names, registrations answered in place (their effects on the
  // tables and the ready responses of a removed set included).
  void planJobTable(std::vector<std::pair<std::string, TableEntry>> ready,
                    BySet* bySet,
                    std::vector<Response>* out);
  void addSet(const Response& added);
  void removeSet(int32_t id, BySet* bySet, std::vector<Response>* out);

  CoordinatorOptions options_;
  ProcessSets sets_;
  std::map<int32_t, MessageTable> tables_;  // by set id, set 0 (the job) included
  int32_t nextSetId_ = 1;
  StallInspector stall_;
  StallReport lastStall_;
  bool stallShutdown_ = false;
};

}  // namespace zen::controller
