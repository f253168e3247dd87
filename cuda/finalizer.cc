// The CUDA executor's finalizer thread (cuda/finalizer.h).
#include "cuda/finalizer.h"

#include <utility>

namespace zen::cuda {

Finalizer::Finalizer(double timeoutSeconds, std::chrono::microseconds pollInterval)
    : timeout_(timeoutSeconds), pollInterval_(pollInterval), thread_([this] { run(); }) {}

Finalizer::~Finalizer() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Finalizer::add(std::string what, Poll poll, PendingInput pendingInput, Done done) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(
        Item{std::move(what), std::move(poll), std::move(pendingInput), std::move(done), deadline});
  }
  cv_.notify_all();
}

void Finalizer::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return items_.empty() && !busy_; });
}

size_t Finalizer::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return items_.size() + (busy_ ? 1 : 0);
}

void Finalizer::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !items_.empty(); });
    if (items_.empty()) return;  // stop_ and nothing left
    Item item = std::move(items_.front());
    items_.pop_front();
    busy_ = true;
    lock.unlock();
    // The head item first: the stream ends work in order, so later items wait behind it.
    Status status;
    Fault fault = Fault::kNone;
    for (;;) {
      Status error;
      const State state = item.poll(&error);
      if (state == State::kDone) break;
      if (state == State::kFailed) {
        status =
            error.isOk() ? Status(StatusCode::kInternal, item.what + ": the device failed") : error;
        fault = Fault::kDevice;
        break;
      }
      if (std::chrono::steady_clock::now() >= item.deadline) {
        status = timedOut(item, &fault);
        break;
      }
      std::this_thread::sleep_for(pollInterval_);
    }
    item.done(status, fault);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

Status Finalizer::timedOut(const Item& item, Fault* fault) {
  *fault = Fault::kInputs;
  if (!stuck_.empty()) {
    return ZEN_ERROR(StatusCode::kTimeout,
                     "{}: not run within {} s: it queues on the stream behind {}, which was never "
                     "ready (the framework's work on it has not finished)",
                     item.what, timeout_.count(), stuck_);
  }
  const std::string input = item.pendingInput ? item.pendingInput() : std::string();
  if (!input.empty()) {
    stuck_ = fmt::format("the input '{}' of {}", input, item.what);
    return ZEN_ERROR(StatusCode::kTimeout,
                     "{}: its input '{}' was not ready within {} s (its ready event: the "
                     "framework's work on it has not finished), so none of its collective ran",
                     item.what, input, timeout_.count());
  }
  *fault = Fault::kDevice;
  return ZEN_ERROR(StatusCode::kTimeout,
                   "{}: the device did not finish within {} s (a hung collective, or a peer that "
                   "never joined it)",
                   item.what, timeout_.count());
}

}  // namespace zen::cuda
