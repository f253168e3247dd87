// Completion of one operation (core/handle.h).
#include "core/handle.h"

#include <chrono>

namespace zen {

void HandleState::complete(Status status) {
  if (callback_) callback_(status, result_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(status);
    done_ = true;
  }
  cv_.notify_all();
}

bool HandleState::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

Status HandleState::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

Status HandleState::wait(double timeoutSeconds) const {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::duration<double>(timeoutSeconds), [&] { return done_; })) {
    return ZEN_ERROR(StatusCode::kTimeout, "operation still pending after {} s", timeoutSeconds);
  }
  return status_;
}

Status Handle::wait(double timeoutSeconds) const {
  if (!state_) return ZEN_ERROR(StatusCode::kFailedPrecondition, "wait on an empty handle");
  return state_->wait(timeoutSeconds);
}

}  // namespace zen
