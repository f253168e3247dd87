#pragma once

// The process sets a rank knows (core/message.h "Process sets"): id -> members, the job's ranks
// in the set, ascending. Set 0 (the job) is always there. Rank 0's coordinator registers sets
// as it answers kAddProcessSet; every LocalNegotiator learns them from the plans it finishes
// (learn()), in plan order, so all ranks hold the same sets after the same cycle; the
// Runtime's ProcessSetTable does the same for enqueue, which runs on the framework's threads.

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "core/message.h"

namespace zen {

// rank's position in `members` (ascending), or -1.
int rankInSet(const std::vector<int32_t>& members, int rank);

class ProcessSets {
 public:
  explicit ProcessSets(int jobSize);

  // The set's members, or nullptr for an id never added or already removed.
  const std::vector<int32_t>* members(int32_t id) const;
  bool contains(int32_t id) const { return members(id) != nullptr; }
  // jobRank's position in the set (its rank within the set), or -1: not a member, or no set.
  int position(int32_t id, int jobRank) const;
  // The set with exactly these members (set 0 for the whole job), if any.
  std::optional<int32_t> findByMembers(const std::vector<int32_t>& members) const;
  // Every set, ascending id, set 0 first.
  const std::map<int32_t, std::vector<int32_t>>& all() const { return sets_; }

  void add(int32_t id, std::vector<int32_t> members);
  void remove(int32_t id);
  // Applies a kAddProcessSet or kRemoveProcessSet response; ignores any other.
  void learn(const Response& response);

 private:
  std::map<int32_t, std::vector<int32_t>> sets_;
};

// The set a response completes requests of: kAddProcessSet's requests were posted on set 0
// (the response names the new set), every other response's on its processSet.
int32_t requestSetOf(const Response& response);

// kAddProcessSet and kRemoveProcessSet: negotiated on set 0 by every rank of the job.
bool isRegistration(OpType op);
bool isRegistration(ResponseType type);

// Where a rank sits in a process set.
struct SetPlace {
  int rank = 0;  // within the set
  int size = 1;
};

// One rank's ProcessSets for the Runtime, thread-safe: the background thread adds and removes
// sets as it executes the plan; enqueue reads them on the framework's threads.
class ProcessSetTable {
 public:
  ProcessSetTable(int jobRank, int jobSize) : jobRank_(jobRank), sets_(jobSize) {}

  void learn(const Response& response);
  // The set's ranks in the job, ascending; empty for an unknown id.
  std::vector<int32_t> ranks(int32_t id) const;
  // This rank's place in set `id`; nullopt when the set is unknown or this rank is not in it.
  std::optional<SetPlace> place(int32_t id) const;
  bool contains(int32_t id) const;

 private:
  const int jobRank_;
  mutable std::mutex mu_;
  ProcessSets sets_;
};

}  // namespace zen
