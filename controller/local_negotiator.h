#pragma once

// Every rank's half of the negotiation (Horovod's ComputeResponseList, worker side, and its
// CacheCoordinator), rank 0 included. It owns the rank's response cache and the requests the
// rank has posted but not yet seen completed. A cycle, with the channel calls in between made
// by the background loop:
//
//   bits = beginCycle(shutdown, now)      classify queued requests: cache hit / miss / stale
//   anded = AND-allreduce(bits)           one collective, every cycle
//   path = applyAnded(anded)              erase stale entries, take the hits common to all
//   fast: plan = fastPathPlan()           no rank has anything uncached: the plan comes from
//                                         the cache alone, identical everywhere
//   slow: send slowPathRequests() to rank 0; rank 0 runs Coordinator::computeResponses with
//         every list and cachedResponses(); plan = the broadcast ResponseList
//   finishCycle(plan)                     cache the new responses, forget completed names
//
// All ranks apply the same cache operations in the same order (erase stale bits ascending,
// get common hits ascending, put the slow path plan's responses in order), so bit positions
// agree. While any rank is joined the fast path is off (controller/cache_bits.h says why).
//
// Process sets: the negotiator learns them (id -> members) from the kAddProcessSet and
// kRemoveProcessSet responses of the plans it finishes. It caches every set's responses, its
// own or not, and reports the entries of sets it is not a member of as hits every cycle, so
// that a hit bit survives the AND once every *member* has posted the name: the fast path
// serves sets as it serves the job. A set's removal erases its entries on every rank, in the
// same plan position, so bit positions stay in step.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "controller/cache_bits.h"
#include "controller/clock.h"
#include "controller/response_cache.h"
#include "core/message.h"
#include "core/process_sets.h"
#include "core/status.h"

namespace zen::controller {

struct LocalOptions {
  int rank = 0;
  int size = 1;
  int cacheCapacity = 1024;                           // ZEN_CACHE_CAPACITY
  int64_t fusionThresholdBytes = int64_t{128} << 20;  // ZEN_FUSION_THRESHOLD (fast path)
  // A cache hit still waiting for other ranks after this long is renegotiated through rank 0,
  // so that rank 0's stall inspector can name the missing ranks (cached tensors never reach
  // its table otherwise). ZEN_STALL_CHECK_TIME_SECONDS; 0 never.
  double stallCheckSeconds = 60.0;
};

enum class CyclePath { kFast, kSlow };

class LocalNegotiator {
 public:
  explicit LocalNegotiator(LocalOptions options);

  // A request from this rank's framework. Fails at once, on this rank, for a malformed request,
  // a name already in flight on this rank (Horovod's duplicate-name error), a post after join,
  // or a set this rank does not know or is not in. A request of a set carries this rank's
  // position in the set as its rank (as enqueue checked it, core/runtime.h); set 0's, and
  // kAddProcessSet's and kRemoveProcessSet's (posted on the job), the job rank.
  Status post(const Request& request, TimePoint now);

  BitVector beginCycle(bool shutdownRequested, TimePoint now);
  // The next cycle takes the slow path on every rank (rank 0 has parameters to send).
  void forceSlowPath() { forceSlowPath_ = true; }
  // Fails only if the vector does not fit this rank's cache (the ranks diverged: a bug).
  Result<CyclePath> applyAnded(const BitVector& anded);
  // Some rank asked to shut down (known after applyAnded on either path).
  bool shutdownAgreed() const { return shutdownAgreed_; }

  ResponseList fastPathPlan() const;
  // The requests rank 0 has not seen yet; each is sent once.
  RequestList slowPathRequests();
  // The responses of the entries hit on every rank this cycle, in bit order.
  const std::vector<Response>& cachedResponses() const { return cachedResponses_; }

  // Also switches to the plan's parameters, when it carries the autotuner's.
  void finishCycle(const ResponseList& plan);

  bool joined() const { return joined_; }
  // Posted and not yet completed by a response, on this rank.
  size_t inFlight() const { return inFlight_.size(); }
  const ResponseCache& cache() const { return cache_; }
  // What the fast path fuses up to: ZEN_FUSION_THRESHOLD, or the autotuner's latest.
  int64_t fusionThresholdBytes() const { return options_.fusionThresholdBytes; }
  // The sets this rank knows after the plans it has finished.
  const ProcessSets& processSets() const { return sets_; }

 private:
  struct Queued {
    Request request;
    TimePoint firstSeen;
    int hitBit = -1;  // this cycle: the cache bit it hit, or -1
  };

  CacheKey keyFor(const Response& response, size_t i) const;

  LocalOptions options_;
  ResponseCache cache_;
  ProcessSets sets_;
  std::vector<Queued> queued_;     // not yet sent to rank 0 nor served from the cache
  std::vector<Request> uncached_;  // classified this cycle, for slowPathRequests
  std::unordered_map<std::string, Request> inFlight_;
  std::vector<Response> cachedResponses_;
  bool shutdownRequested_ = false;
  bool shutdownAgreed_ = false;
  bool joined_ = false;
  bool forceSlowPath_ = false;
  CyclePath lastPath_ = CyclePath::kSlow;
};

}  // namespace zen::controller
