#pragma once

// The process sets this rank knows (core/message.h "Process sets"), Horovod's
// ProcessSetTable: the background thread adds and removes them as it executes the plan's
// kAddProcessSet / kRemoveProcessSet responses; enqueue reads them on the framework's threads
// to place a request in its set.

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "core/message.h"

namespace zen {

// Where a rank sits in a process set.
struct SetPlace {
  int rank = 0;  // within the set
  int size = 1;
};

// rank's position in `members` (ascending), or -1.
int rankInSet(const std::vector<int32_t>& members, int rank);

class ProcessSetTable {
 public:
  // The job is set 0: jobRank of jobSize.
  ProcessSetTable(int jobRank, int jobSize) : jobRank_(jobRank), jobSize_(jobSize) {}

  void add(int32_t id, std::vector<int32_t> members);
  void remove(int32_t id);
  // The set's ranks in the job, ascending; empty for an unknown id. Set 0: every rank.
  std::vector<int32_t> ranks(int32_t id) const;
  // This rank's place in set `id`; nullopt when the set is unknown or this rank is not in it.
  std::optional<SetPlace> place(int32_t id) const;
  bool contains(int32_t id) const;

 private:
  const int jobRank_;
  const int jobSize_;
  mutable std::mutex mu_;
  std::map<int32_t, std::vector<int32_t>> sets_;  // set 0 is implicit
};

}  // namespace zen
