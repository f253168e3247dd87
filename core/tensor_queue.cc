// Pending entries by name, and the new ones for the next cycle (core/tensor_queue.h).
#include "core/tensor_queue.h"

#include <utility>

namespace zen {

Status TensorQueue::add(std::vector<std::unique_ptr<TensorEntry>> entries) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_.isOk()) return closed_;
    std::set<std::string> names;
    for (const auto& e : entries) {
      const std::string& name = e->request.name;
      ZEN_CHECK_ARG(
          entries_.count(name) == 0 && names.insert(name).second,
          "tensor '{}' is already in flight on rank {}: a name can be posted again only after "
          "its previous operation has completed",
          name, rank_);
      ZEN_CHECK_ARG(!joined_,
                    "tensor '{}': rank {} has joined and cannot post until every rank has joined",
                    name, rank_);
    }
    for (auto& e : entries) {
      if (e->request.op == OpType::kJoin) joined_ = true;
      fresh_.push_back(e.get());
      std::string name = e->request.name;
      entries_.emplace(std::move(name), std::move(e));
    }
  }
  cv_.notify_all();
  return Status::ok();
}

void TensorQueue::waitForWork(std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, until, [&] { return !fresh_.empty() || interrupted_; });
}

void TensorQueue::interrupt() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    interrupted_ = true;
  }
  cv_.notify_all();
}

std::vector<TensorEntry*> TensorQueue::takeNew() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TensorEntry*> out;
  out.swap(fresh_);
  return out;
}

TensorEntry* TensorQueue::take(const std::string& name, int32_t processSet) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second->request.processSet != processSet ||
      !taken_.insert(it->second.get()).second) {
    return nullptr;
  }
  return it->second.get();
}

std::unique_ptr<TensorEntry> TensorQueue::remove(const std::string& name,
                                                 const TensorEntry* entry) {
  if (entry == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.get() != entry) return nullptr;
  std::unique_ptr<TensorEntry> removed = std::move(it->second);
  entries_.erase(it);
  taken_.erase(entry);
  for (auto f = fresh_.begin(); f != fresh_.end(); ++f) {
    if (*f == entry) {
      fresh_.erase(f);
      break;
    }
  }
  return removed;
}

void TensorQueue::joinCompleted() {
  std::lock_guard<std::mutex> lock(mu_);
  joined_ = false;
}

std::vector<std::unique_ptr<TensorEntry>> TensorQueue::close(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_.isOk()) closed_ = why;
  std::vector<std::unique_ptr<TensorEntry>> out;
  for (auto& kv : entries_) out.push_back(std::move(kv.second));
  entries_.clear();
  fresh_.clear();
  taken_.clear();
  return out;
}

size_t TensorQueue::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace zen
