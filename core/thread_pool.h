#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zen {

// A fixed set of worker threads for the CPU algorithms. parallelFor runs fn(task) for every
// task in [0, numTasks) on the workers and the calling thread, and returns when all are done.
// One parallelFor at a time per pool (the daemon's background thread owns it).
class ThreadPool {
 public:
  // threads <= 0 means std::thread::hardware_concurrency(). The caller counts as one thread.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void parallelFor(int64_t numTasks, const std::function<void(int64_t task)>& fn);

 private:
  void workerLoop();
  void runTasks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t numTasks_ = 0;
  int64_t nextTask_ = 0;
  int64_t finished_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace zen
