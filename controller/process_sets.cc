// The id -> members map of the process sets a rank knows (controller/process_sets.h).

#include "controller/process_sets.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace zen::controller {

ProcessSets::ProcessSets(int jobSize) {
  std::vector<int32_t> job(static_cast<size_t>(jobSize));
  std::iota(job.begin(), job.end(), 0);
  sets_.emplace(kGlobalProcessSet, std::move(job));
}

const std::vector<int32_t>* ProcessSets::members(int32_t id) const {
  auto it = sets_.find(id);
  return it == sets_.end() ? nullptr : &it->second;
}

int ProcessSets::position(int32_t id, int jobRank) const {
  const std::vector<int32_t>* m = members(id);
  if (m == nullptr) return -1;
  auto it = std::lower_bound(m->begin(), m->end(), jobRank);
  return it != m->end() && *it == jobRank ? static_cast<int>(it - m->begin()) : -1;
}

std::optional<int32_t> ProcessSets::findByMembers(const std::vector<int32_t>& members) const {
  for (const auto& [id, m] : sets_) {
    if (m == members) return id;
  }
  return std::nullopt;
}

void ProcessSets::add(int32_t id, std::vector<int32_t> members) {
  sets_[id] = std::move(members);
}

void ProcessSets::remove(int32_t id) {
  if (id != kGlobalProcessSet) sets_.erase(id);
}

void ProcessSets::learn(const Response& response) {
  if (response.type == ResponseType::kAddProcessSet) add(response.processSet, response.members);
  if (response.type == ResponseType::kRemoveProcessSet) remove(response.processSet);
}

int32_t requestSetOf(const Response& response) {
  return response.type == ResponseType::kAddProcessSet ? kGlobalProcessSet : response.processSet;
}

bool isRegistration(OpType op) {
  return op == OpType::kAddProcessSet || op == OpType::kRemoveProcessSet;
}

bool isRegistration(ResponseType type) {
  return type == ResponseType::kAddProcessSet || type == ResponseType::kRemoveProcessSet;
}

}  // namespace zen::controller
