#pragma once

// Rank 0's message table (Horovod's MessageTable): tensor name -> the request each rank has
// posted for it, with the time the name was first seen (for the stall inspector). A name is
// ready once every rank has posted it or has joined; join state lives here too, because a
// join can make names ready that were waiting only for the joining rank. Rank 0 keeps one
// table per process set (controller/coordinator.h), in the set's terms: size is the set's,
// ranks are positions in its members.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "controller/clock.h"
#include "core/message.h"
#include "core/status.h"

namespace zen::controller {

struct TableEntry {
  std::vector<std::optional<Request>> byRank;  // indexed by rank
  int posted = 0;
  TimePoint firstSeen;
  // Ranks that posted the name again while it was pending; the name then fails on every rank
  // instead of pairing one rank's step s with another's step s+1.
  std::vector<int> duplicateRanks;
  // kAddProcessSet / kRemoveProcessSet: every rank must post it itself (a join does not
  // stand in), since each rank registers the set when it executes the response.
  bool needsEveryRank = false;
};

class MessageTable {
 public:
  explicit MessageTable(int size);

  int size() const { return size_; }

  // Records request.rank's request; `now` stamps a name seen for the first time. kJoin is not
  // a table entry (use join()).
  Status add(const Request& request, TimePoint now);

  // Marks a rank as joined: it counts as having posted every name until the join completes.
  Status join(int rank);
  bool joined(int rank) const { return joined_[rank]; }
  const std::vector<bool>& joinedRanks() const { return joined_; }
  int joinedCount() const { return joinedCount_; }
  bool allJoined() const { return joinedCount_ == size_; }
  // The rank whose join completed the set (what join() returns everywhere); -1 before.
  int lastJoinedRank() const { return lastJoinedRank_; }
  // Forgets the join state once the join response is out.
  void clearJoin();

  // Rank r has posted the entry's name, or has joined and may stand in for it.
  bool counts(const TableEntry& entry, int rank) const;

  // Removes the names that are ready now and returns them sorted by name, the tie-break that
  // makes the global order independent of the order in which ranks posted.
  std::vector<std::pair<std::string, TableEntry>> takeReady();

  const std::map<std::string, TableEntry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  // Removes every pending name (a removed set's; the caller fails them) and returns them.
  std::map<std::string, TableEntry> takeAll();
  // Removes one pending name, if there (it failed on every rank by other means).
  void erase(const std::string& name) { entries_.erase(name); }

 private:
  bool isReady(const TableEntry& entry) const;

  int size_;
  std::map<std::string, TableEntry> entries_;
  std::set<std::string> touched_;  // names to re-check in takeReady
  bool joinSinceLastCheck_ = false;
  std::vector<bool> joined_;
  int joinedCount_ = 0;
  int lastJoinedRank_ = -1;
};

}  // namespace zen::controller
