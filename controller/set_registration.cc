// kAddProcessSet / kRemoveProcessSet entries -> responses (controller/set_registration.h).

#include "controller/set_registration.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "controller/validation.h"

namespace zen::controller {
namespace {

// What is wrong with a member list for a job of `size` ranks, "" when nothing.
std::string membersProblem(const std::vector<int32_t>& members, int size) {
  if (members.empty()) return "no ranks";
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= size) {
      return fmt::format("rank {}, outside the job's [0, {})", members[i], size);
    }
    if (i > 0 && members[i] <= members[i - 1]) {
      return fmt::format("ranks that are not strictly ascending ({} after {})", members[i],
                         members[i - 1]);
    }
  }
  return "";
}

}  // namespace

Response addSetResponse(const std::string& name,
                        const TableEntry& entry,
                        const ProcessSets& sets,
                        int32_t newId) {
  if (auto msg = entryProblem(name, entry)) return errorResponse(name, std::move(*msg));
  const std::vector<int32_t>& members = postersOf(entry).front()->members;
  const int size = static_cast<int>(entry.byRank.size());
  const std::string problem = membersProblem(members, size);
  if (!problem.empty()) {
    return errorResponse(name, fmt::format("'{}': add_process_set with members [{}]: {}", name,
                                           fmt::join(members, ", "), problem));
  }
  if (auto existing = sets.findByMembers(members)) {
    return errorResponse(
        name, fmt::format("'{}': process set {} already has members [{}] (as in Horovod, two "
                          "sets may not have the same ranks)",
                          name, *existing, fmt::join(members, ", ")));
  }
  Response r;
  r.type = ResponseType::kAddProcessSet;
  r.tensorNames = {name};
  r.processSet = newId;
  r.members = members;
  return r;
}

Response removeSetResponse(const std::string& name,
                           const TableEntry& entry,
                           const ProcessSets& sets) {
  if (auto msg = entryProblem(name, entry)) return errorResponse(name, std::move(*msg));
  const int32_t id = postersOf(entry).front()->processSet;
  if (id == kGlobalProcessSet || !sets.contains(id)) {
    return errorResponse(
        name, fmt::format("'{}': process set {} {}", name, id,
                          id == kGlobalProcessSet ? "is the whole job and cannot be removed"
                                                  : "does not exist (never added, or removed)"));
  }
  Response r;
  r.type = ResponseType::kRemoveProcessSet;
  r.tensorNames = {name};
  r.processSet = id;
  return r;
}

Response removedWhilePending(const std::string& name,
                             const TableEntry& entry,
                             int32_t id,
                             const std::vector<int32_t>& members) {
  std::vector<int> posted;
  std::vector<int> waiting;
  for (size_t p = 0; p < entry.byRank.size() && p < members.size(); ++p) {
    (entry.byRank[p] ? posted : waiting).push_back(members[p]);
  }
  std::string message = fmt::format("process set {} was removed while '{}' was pending on job {}",
                                    id, name, formatRanks(posted));
  if (!waiting.empty()) message += fmt::format(" (waiting for job {})", formatRanks(waiting));
  Response r = errorResponse(name, std::move(message));
  r.processSet = id;
  return r;
}

}  // namespace zen::controller
