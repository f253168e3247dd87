// The CUDA executor's pool of completion events (cuda/event_pool.h).
#include "cuda/event_pool.h"

#include <utility>

namespace zen::cuda {

EventPool::EventPool(Create create, Destroy destroy, size_t maxIdle)
    : create_(std::move(create)), destroy_(std::move(destroy)), maxIdle_(maxIdle) {}

EventPool::~EventPool() {
  for (void* e : idle_) destroy_(e);
}

Result<void*> EventPool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      void* e = idle_.back();
      idle_.pop_back();
      return e;
    }
  }
  Result<void*> made = create_();
  if (made.isOk()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++created_;
  }
  return made;
}

void EventPool::release(void* event, bool reusable) {
  if (event == nullptr) return;
  if (reusable) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < maxIdle_) {
      idle_.push_back(event);
      return;
    }
  }
  destroy_(event);
}

size_t EventPool::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

size_t EventPool::created() const {
  std::lock_guard<std::mutex> lock(mu_);
  return created_;
}

}  // namespace zen::cuda
