// The process sets this rank knows (core/process_set_table.h).
#include "core/process_set_table.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace zen {

int rankInSet(const std::vector<int32_t>& members, int rank) {
  const auto it = std::lower_bound(members.begin(), members.end(), rank);
  return it != members.end() && *it == rank ? static_cast<int>(it - members.begin()) : -1;
}

void ProcessSetTable::add(int32_t id, std::vector<int32_t> members) {
  std::lock_guard<std::mutex> lock(mu_);
  sets_[id] = std::move(members);
}

void ProcessSetTable::remove(int32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  sets_.erase(id);
}

std::vector<int32_t> ProcessSetTable::ranks(int32_t id) const {
  if (id == kGlobalProcessSet) {
    std::vector<int32_t> all(static_cast<size_t>(jobSize_));
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = sets_.find(id);
  return it == sets_.end() ? std::vector<int32_t>{} : it->second;
}

std::optional<SetPlace> ProcessSetTable::place(int32_t id) const {
  if (id == kGlobalProcessSet) return SetPlace{jobRank_, jobSize_};
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = sets_.find(id);
  if (it == sets_.end()) return std::nullopt;
  const int rank = rankInSet(it->second, jobRank_);
  if (rank < 0) return std::nullopt;
  return SetPlace{rank, static_cast<int>(it->second.size())};
}

bool ProcessSetTable::contains(int32_t id) const {
  if (id == kGlobalProcessSet) return true;
  std::lock_guard<std::mutex> lock(mu_);
  return sets_.count(id) != 0;
}

}  // namespace zen
