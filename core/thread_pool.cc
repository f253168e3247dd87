#include "core/thread_pool.h"

namespace zen {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::runTasks() {
  std::unique_lock<std::mutex> lock(mu_);
  while (nextTask_ < numTasks_) {
    const int64_t task = nextTask_++;
    const auto* fn = fn_;
    lock.unlock();
    (*fn)(task);
    lock.lock();
    if (++finished_ == numTasks_) done_.notify_all();
  }
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    runTasks();
  }
}

void ThreadPool::parallelFor(int64_t numTasks, const std::function<void(int64_t)>& fn) {
  if (numTasks <= 0) return;
  if (workers_.empty() || numTasks == 1) {
    for (int64_t t = 0; t < numTasks; ++t) fn(t);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    numTasks_ = numTasks;
    nextTask_ = 0;
    finished_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  runTasks();
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return finished_ == numTasks_; });
  fn_ = nullptr;
  numTasks_ = 0;
}

}  // namespace zen
