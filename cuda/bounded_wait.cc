#include "cuda/bounded_wait.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace zen::cuda {

Status pollUntil(const std::function<PollState(Status* failure)>& poll,
                 double timeoutSeconds,
                 const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(std::max(0.0, timeoutSeconds)));
  auto sleep = std::chrono::microseconds(10);
  for (;;) {
    Status failure;
    switch (poll(&failure)) {
      case PollState::kDone:
        return Status::ok();
      case PollState::kFailed:
        if (failure.isOk()) {
          return ZEN_ERROR(StatusCode::kInternal, "{} failed (no detail)", what);
        }
        return failure;
      case PollState::kPending:
        break;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return ZEN_ERROR(StatusCode::kTimeout, "{} did not complete within {} s", what,
                       timeoutSeconds);
    }
    if (now - start < std::chrono::microseconds(100)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, std::chrono::microseconds(1000));
    }
  }
}

}  // namespace zen::cuda
