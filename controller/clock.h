#pragma once

// The controller never reads a clock: the background loop passes "now" into every call that
// needs time (first-seen stamps, stall checks), so the protocol is deterministic under test.

#include <chrono>

namespace zen::controller {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

inline double secondsBetween(TimePoint from, TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace zen::controller
