// Rank 0's slow-path cycle: tables -> validated, ordered, fused plan (controller/coordinator.h).

#include "controller/coordinator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <utility>

#include "controller/fusion_planner.h"
#include "controller/set_registration.h"
#include "controller/validation.h"

namespace zen::controller {
namespace {

// An error of the job's table reaches every rank holding the name under the set it posted it
// on: a kRemoveProcessSet is posted on the set it removes, and ranks may disagree on that.
void appendPerPostedSet(const Response& error,
                        const TableEntry& entry,
                        std::vector<Response>* out) {
  std::set<int32_t> postedOn;
  for (const Request* q : postersOf(entry)) postedOn.insert(q->processSet);
  if (postedOn.empty()) postedOn.insert(kGlobalProcessSet);
  for (int32_t set : postedOn) {
    out->push_back(error);
    out->back().processSet = set;
  }
}

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(options),
      sets_(options.size),
      stall_(StallOptions{options.stallCheckSeconds, options.stallShutdownSeconds}) {
  tables_.emplace(kGlobalProcessSet, MessageTable(options.size));
}

const MessageTable* Coordinator::table(int32_t id) const {
  auto it = tables_.find(id);
  return it == tables_.end() ? nullptr : &it->second;
}

void Coordinator::route(Request request, int rank, TimePoint now, BySet* refused) {
  const int32_t set = isRegistration(request.op) ? kGlobalProcessSet : request.processSet;
  auto it = tables_.find(set);
  const int position = sets_.position(set, rank);
  if (it == tables_.end() || position < 0) {
    std::string why =
        it == tables_.end()
            ? fmt::format("process set {}, which does not exist (never added, or removed)", set)
            : fmt::format("process set {}, whose members are job ranks [{}]: it is not one", set,
                          fmt::join(*sets_.members(set), ", "));
    Response error = errorResponse(
        request.name,
        fmt::format("tensor '{}': job rank {} posted it for {}", request.name, rank, why));
    error.processSet = set;
    (*refused)[set].push_back(std::move(error));
    return;
  }
  request.rank = position;
  (void)it->second.add(request, now);  // position is in range and the op is not kJoin
}

void Coordinator::join(int rank) {
  for (auto& [id, table] : tables_) {
    const int position = sets_.position(id, rank);
    if (position >= 0) (void)table.join(position);
  }
}

ResponseList Coordinator::computeResponses(const std::vector<RequestList>& fromEachRank,
                                           TimePoint now,
                                           const std::vector<Response>& cachedHits) {
  ResponseList out;
  BySet bySet;  // set id -> its responses of this cycle, refused requests first
  const int ranks = std::min(static_cast<int>(fromEachRank.size()), options_.size);
  for (int r = 0; r < ranks; ++r) {
    const RequestList& list = fromEachRank[static_cast<size_t>(r)];
    out.shutdown = out.shutdown || list.shutdown;
    for (const Request& request : list.requests) {
      if (request.op == OpType::kJoin) {
        join(r);
      } else {
        route(request, r, now, &bySet);
      }
    }
  }
  // A refused request's error completes the name on every rank holding it in that set, so
  // the members' posts of it are gone too.
  for (const auto& [id, errors] : bySet) {
    auto it = tables_.find(id);
    if (it == tables_.end()) continue;
    for (const Response& e : errors) it->second.erase(e.tensorNames.front());
  }
  for (auto& [id, table] : tables_) {
    if (id == kGlobalProcessSet) continue;
    const std::vector<int32_t>& members = *sets_.members(id);
    for (const auto& [name, entry] : table.takeReady()) {
      Response r = buildResponse(name, entry, table.joinedRanks());
      r.processSet = id;
      if (r.type == ResponseType::kError) {
        r.errorMessage += fmt::format(
            " (process set {}: ranks are positions in its members, "
            "job ranks [{}])",
            id, fmt::join(members, ", "));
      }
      bySet[id].push_back(std::move(r));
    }
  }
  for (auto& [id, group] : bySet) {
    std::stable_sort(group.begin(), group.end(), [](const Response& a, const Response& b) {
      return a.tensorNames.front() < b.tensorNames.front();
    });
  }

  std::vector<Response> responses = cachedHits;
  MessageTable& job = tables_.at(kGlobalProcessSet);
  planJobTable(job.takeReady(), &bySet, &responses);
  for (auto& [id, group] : bySet) {
    for (Response& r : group) responses.push_back(std::move(r));
  }
  if (job.allJoined()) {
    Response done;
    done.type = ResponseType::kJoin;
    done.tensorNames = {kJoinTensorName};
    done.lastJoinedRank = job.lastJoinedRank();
    responses.push_back(std::move(done));
    for (auto& [id, table] : tables_) table.clearJoin();
  }
  out.responses = fuseResponses(std::move(responses), options_.fusionThresholdBytes);

  inspectStalls(now);
  out.shutdown = out.shutdown || stallShutdown_;
  return out;
}

void Coordinator::planJobTable(std::vector<std::pair<std::string, TableEntry>> ready,
                               BySet* bySet,
                               std::vector<Response>* out) {
  const MessageTable& job = tables_.at(kGlobalProcessSet);
  for (const auto& [name, entry] : ready) {
    const std::vector<const Request*> posters = postersOf(entry);
    const OpType op = posters.empty() ? OpType::kAllreduce : posters.front()->op;
    Response r;
    if (op == OpType::kAddProcessSet) {
      r = addSetResponse(name, entry, sets_, nextSetId_);
      if (r.type == ResponseType::kAddProcessSet) {
        ++nextSetId_;
        addSet(r);
      }
    } else if (op == OpType::kRemoveProcessSet) {
      r = removeSetResponse(name, entry, sets_);
      if (r.type == ResponseType::kRemoveProcessSet) removeSet(r.processSet, bySet, out);
    } else {
      r = buildResponse(name, entry, job.joinedRanks());
    }
    if (r.type == ResponseType::kError) {
      appendPerPostedSet(r, entry, out);
    } else {
      out->push_back(std::move(r));
    }
  }
}

void Coordinator::addSet(const Response& added) {
  const MessageTable& job = tables_.at(kGlobalProcessSet);
  MessageTable table(static_cast<int>(added.members.size()));
  for (size_t p = 0; p < added.members.size(); ++p) {
    if (job.joined(added.members[p])) (void)table.join(static_cast<int>(p));
  }
  sets_.add(added.processSet, added.members);
  tables_.emplace(added.processSet, std::move(table));
}

void Coordinator::removeSet(int32_t id, BySet* bySet, std::vector<Response>* out) {
  // What became ready in the set this cycle still runs, before the set goes.
  auto group = bySet->find(id);
  if (group != bySet->end()) {
    for (Response& r : group->second) out->push_back(std::move(r));
    bySet->erase(group);
  }
  auto table = tables_.find(id);
  const std::vector<int32_t>& members = *sets_.members(id);
  for (const auto& [name, entry] : table->second.takeAll()) {
    out->push_back(removedWhilePending(name, entry, id, members));
  }
  tables_.erase(table);
  sets_.remove(id);
}

const StallReport& Coordinator::inspectStalls(TimePoint now) {
  std::vector<StallTable> views;
  for (const auto& [id, table] : tables_) {
    views.push_back(StallTable{id, &table, sets_.members(id)});
  }
  lastStall_ = stall_.check(views, now);
  stallShutdown_ = stallShutdown_ || lastStall_.shutdown;
  return lastStall_;
}

}  // namespace zen::controller
