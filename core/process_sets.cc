// The id -> members map of the process sets a rank knows (core/process_sets.h).

#include "core/process_sets.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace zen {

int rankInSet(const std::vector<int32_t>& members, int rank) {
  const auto it = std::lower_bound(members.begin(), members.end(), rank);
  return it != members.end() && *it == rank ? static_cast<int>(it - members.begin()) : -1;
}

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
  return m == nullptr ? -1 : rankInSet(*m, jobRank);
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

void ProcessSetTable::learn(const Response& response) {
  std::lock_guard<std::mutex> lock(mu_);
  sets_.learn(response);
}

std::vector<int32_t> ProcessSetTable::ranks(int32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<int32_t>* m = sets_.members(id);
  return m == nullptr ? std::vector<int32_t>{} : *m;
}

std::optional<SetPlace> ProcessSetTable::place(int32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int rank = sets_.position(id, jobRank_);
  if (rank < 0) return std::nullopt;
  return SetPlace{rank, static_cast<int>(sets_.members(id)->size())};
}

bool ProcessSetTable::contains(int32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return sets_.contains(id);
}

}  // namespace zen
