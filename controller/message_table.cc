// Rank 0's name -> per-rank requests table and join state (controller/message_table.h).

#include "controller/message_table.h"

#include "core/process_sets.h"

namespace zen::controller {

MessageTable::MessageTable(int size) : size_(size), joined_(static_cast<size_t>(size), false) {}

Status MessageTable::add(const Request& request, TimePoint now) {
  ZEN_CHECK_ARG(request.rank >= 0 && request.rank < size_,
                "tensor '{}': request from rank {} outside [0, {})", request.name, request.rank,
                size_);
  ZEN_CHECK_ARG(request.op != OpType::kJoin, "join requests are not table entries");
  auto [it, inserted] = entries_.try_emplace(request.name);
  TableEntry& entry = it->second;
  if (inserted) {
    entry.byRank.resize(static_cast<size_t>(size_));
    entry.firstSeen = now;
  }
  entry.needsEveryRank = entry.needsEveryRank || isRegistration(request.op);
  auto& slot = entry.byRank[static_cast<size_t>(request.rank)];
  if (slot.has_value()) {
    entry.duplicateRanks.push_back(request.rank);
  } else {
    slot = request;
    ++entry.posted;
  }
  touched_.insert(request.name);
  return Status::ok();
}

Status MessageTable::join(int rank) {
  ZEN_CHECK_ARG(rank >= 0 && rank < size_, "join from rank {} outside [0, {})", rank, size_);
  if (!joined_[static_cast<size_t>(rank)]) {
    joined_[static_cast<size_t>(rank)] = true;
    ++joinedCount_;
    lastJoinedRank_ = rank;
    joinSinceLastCheck_ = true;
  }
  return Status::ok();
}

void MessageTable::clearJoin() {
  joined_.assign(static_cast<size_t>(size_), false);
  joinedCount_ = 0;
  lastJoinedRank_ = -1;
}

bool MessageTable::counts(const TableEntry& entry, int rank) const {
  const auto r = static_cast<size_t>(rank);
  return entry.byRank[r].has_value() || (joined_[r] && !entry.needsEveryRank);
}

bool MessageTable::isReady(const TableEntry& entry) const {
  if (entry.needsEveryRank) return entry.posted == size_;
  if (entry.posted + joinedCount_ < size_) return false;  // cheap common case
  for (int r = 0; r < size_; ++r) {
    if (!counts(entry, r)) return false;
  }
  return true;
}

std::map<std::string, TableEntry> MessageTable::takeAll() {
  std::map<std::string, TableEntry> all;
  all.swap(entries_);
  touched_.clear();
  return all;
}

std::vector<std::pair<std::string, TableEntry>> MessageTable::takeReady() {
  // A join can complete any pending name, otherwise only names posted since the last call.
  std::set<std::string> candidates;
  if (joinSinceLastCheck_) {
    for (const auto& kv : entries_) candidates.insert(kv.first);
  } else {
    candidates.swap(touched_);
  }
  touched_.clear();
  joinSinceLastCheck_ = false;

  std::vector<std::pair<std::string, TableEntry>> ready;
  for (const auto& name : candidates) {
    auto it = entries_.find(name);
    if (it == entries_.end() || !isReady(it->second)) continue;
    ready.emplace_back(name, std::move(it->second));
    entries_.erase(it);
  }
  return ready;
}

}  // namespace zen::controller
