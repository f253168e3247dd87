#pragma once

// What the background loop needs from the negotiation protocol (controller/ implements it:
// controller/channel_negotiator.h). The loop owns the threads and the clock; the negotiator
// owns the protocol state and is driven by the background thread only, except check().

#include <chrono>
#include <string>
#include <vector>

#include "core/control_channel.h"
#include "core/message.h"
#include "core/status.h"

namespace zen {

// Rank r's request for `name` reached rank 0's table (rank 0 only): the timeline's
// per-rank tick on the tensor's NEGOTIATE phase.
struct NegotiationTick {
  std::string name;
  int rank = 0;
};

struct CycleResult {
  ResponseList plan;                     // what every rank executes now, in this order
  bool fastPath = false;                 // the plan came from the response cache alone
  std::vector<std::string> cachedNames;  // tensors of the plan served from the cache
  std::vector<NegotiationTick> ticks;    // rank 0, slow path
  std::string stallWarning;              // rank 0: the stall inspector spoke this cycle
  bool stallShutdown = false;            // rank 0: asking for shutdown after a stall
};

class Negotiator {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Negotiator() = default;

  // Checks one request on its own (shape against op, root in range, ...). Stateless and
  // thread-safe: called by enqueue on the framework's thread, so a bad call fails at once.
  // size: the ranks of the request's process set (its rank numbers are within the set).
  virtual Status check(const Request& request, int size) const = 0;
  // Hands a request to the protocol; background thread.
  virtual Status post(const Request& request, TimePoint now) = 0;
  // One negotiation cycle over the channel (collective): every rank gets the same plan.
  // shutdownRequested: this rank wants to stop (user request or a local failure). An error
  // is the channel's: the ranks can no longer agree on anything.
  virtual Result<CycleResult> runCycle(ControlChannel& channel,
                                       bool shutdownRequested,
                                       TimePoint now) = 0;
};

}  // namespace zen
