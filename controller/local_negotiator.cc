// Every rank's half of a cycle: classify, bit vector, plan upkeep (controller/local_negotiator.h).

#include "controller/local_negotiator.h"

#include <utility>

#include "controller/fusion_planner.h"
#include "controller/validation.h"

namespace zen::controller {
namespace {

OpType opTypeFor(ResponseType type) {
  switch (type) {
    case ResponseType::kSparseAllreduce:
      return OpType::kSparseAllreduce;
    case ResponseType::kAllgather:
      return OpType::kAllgather;
    case ResponseType::kBroadcast:
      return OpType::kBroadcast;
    case ResponseType::kJoin:
      return OpType::kJoin;
    case ResponseType::kBarrier:
      return OpType::kBarrier;
    case ResponseType::kAlltoall:
      return OpType::kAlltoall;
    case ResponseType::kReducescatter:
      return OpType::kReducescatter;
    case ResponseType::kAddProcessSet:
      return OpType::kAddProcessSet;
    case ResponseType::kRemoveProcessSet:
      return OpType::kRemoveProcessSet;
    case ResponseType::kAllreduce:
    case ResponseType::kError:
      break;
  }
  return OpType::kAllreduce;
}

}  // namespace

LocalNegotiator::LocalNegotiator(LocalOptions options)
    : options_(options), cache_(options.cacheCapacity), sets_(options.size) {}

Status LocalNegotiator::post(const Request& request, TimePoint now) {
  const int32_t set = isRegistration(request.op) ? kGlobalProcessSet : request.processSet;
  const std::vector<int32_t>* members = sets_.members(set);
  ZEN_CHECK_ARG(members != nullptr,
                "tensor '{}': process set {} does not exist on rank {} (never added, or removed)",
                request.name, set, options_.rank);
  const int position = sets_.position(set, options_.rank);
  ZEN_CHECK_ARG(position >= 0, "tensor '{}': rank {} is not a member of process set {}",
                request.name, options_.rank, set);
  ZEN_CHECK_ARG(request.rank == position,
                "tensor '{}': posted as rank {} on rank {} (rank {} in process set {})",
                request.name, request.rank, options_.rank, position, set);
  ZEN_RETURN_IF_ERROR(checkRequest(request, static_cast<int>(members->size())));
  ZEN_CHECK_ARG(!joined_,
                "tensor '{}': rank {} has joined and cannot post until every rank has joined",
                request.name, options_.rank);
  ZEN_CHECK_ARG(inFlight_.count(request.name) == 0,
                "tensor '{}' is already in flight on rank {}: a name can be posted again only "
                "after its previous operation has completed",
                request.name, options_.rank);
  inFlight_.emplace(request.name, request);
  queued_.push_back(Queued{request, now, -1});
  if (request.op == OpType::kJoin) joined_ = true;
  return Status::ok();
}

BitVector LocalNegotiator::beginCycle(bool shutdownRequested, TimePoint now) {
  shutdownRequested_ = shutdownRequested;
  LocalCacheBits local;
  local.shutdown = shutdownRequested;
  local.joined = joined_;
  std::vector<Queued> waiting;
  for (Queued& q : queued_) {
    q.hitBit = -1;
    if (cache_.enabled() && isCacheable(responseTypeFor(q.request.op))) {
      const ResponseCache::Lookup found = cache_.lookup(q.request);
      if (found.state == ResponseCache::State::kHit) {
        const bool stalled = options_.stallCheckSeconds > 0 &&
                             secondsBetween(q.firstSeen, now) >= options_.stallCheckSeconds;
        if (!stalled) {
          q.hitBit = found.bit;
          local.hits.push_back(found.bit);
          waiting.push_back(std::move(q));
          continue;
        }
        // Cached names never reach rank 0's table; drop the entry so that this one does and
        // the stall inspector can name who is missing.
        local.invalid.push_back(found.bit);
      } else if (found.state == ResponseCache::State::kInvalid) {
        local.invalid.push_back(found.bit);
      }
    }
    uncached_.push_back(std::move(q.request));
  }
  queued_ = std::move(waiting);
  // Entries of sets this rank is not in: it reports them as hits, so that the AND says
  // "every member posted it" (it skips them at run time). Walks only sets with entries.
  for (const auto& [set, bits] : cache_.setBits()) {
    if (sets_.position(set, options_.rank) < 0) {
      local.hits.insert(local.hits.end(), bits.begin(), bits.end());
    }
  }
  local.uncachedInQueue = !uncached_.empty() || forceSlowPath_;
  forceSlowPath_ = false;
  local.invalidInQueue = !local.invalid.empty();
  return encodeCacheBits(local, cache_.numBits());
}

Result<CyclePath> LocalNegotiator::applyAnded(const BitVector& anded) {
  const int numBits = cache_.numBits();
  ZEN_ASSIGN_OR_RETURN(GlobalCacheBits global, decodeCacheBits(anded, numBits));
  shutdownAgreed_ = global.shutdown;

  std::vector<bool> stale(static_cast<size_t>(numBits), false);
  std::vector<bool> common(static_cast<size_t>(numBits), false);
  for (int b : global.invalid) {
    cache_.erase(b);
    stale[static_cast<size_t>(b)] = true;
  }
  cachedResponses_.clear();
  for (int b : global.commonHits) {
    if (!cache_.hasBit(b)) continue;
    cachedResponses_.push_back(cache_.get(b));
    common[static_cast<size_t>(b)] = true;
  }

  // Hits served now leave the queue; hits on erased entries, and while a rank is joined all
  // other hits, go to rank 0 this cycle (both force the slow path on every rank).
  std::vector<Queued> waiting;
  for (Queued& q : queued_) {
    const auto bit = static_cast<size_t>(q.hitBit);
    if (q.hitBit >= 0 && common[bit]) continue;
    if (q.hitBit < 0 || stale[bit] || global.someoneJoined) {
      uncached_.push_back(std::move(q.request));
    } else {
      waiting.push_back(std::move(q));
    }
  }
  queued_ = std::move(waiting);

  const bool slow = global.uncachedInQueue || global.invalidInQueue || global.someoneJoined;
  lastPath_ = slow ? CyclePath::kSlow : CyclePath::kFast;
  return lastPath_;
}

ResponseList LocalNegotiator::fastPathPlan() const {
  ResponseList plan;
  plan.responses = fuseResponses(cachedResponses_, options_.fusionThresholdBytes);
  plan.shutdown = shutdownAgreed_;
  return plan;
}

RequestList LocalNegotiator::slowPathRequests() {
  RequestList list;
  list.requests = std::move(uncached_);
  uncached_.clear();
  list.shutdown = shutdownRequested_;
  return list;
}

CacheKey LocalNegotiator::keyFor(const Response& response, size_t i) const {
  const std::string& name = response.tensorNames[i];
  auto it = inFlight_.find(name);
  if (it != inFlight_.end() && it->second.processSet == response.processSet) {
    return CacheKey::of(it->second);
  }
  // A joined rank, or a rank not in the response's set, posted nothing: key it on the
  // response. Should a joined rank later post the name with different parameters, the entry
  // goes stale and is renegotiated once.
  CacheKey key;
  key.processSet = response.processSet;
  key.name = name;
  key.op = opTypeFor(response.type);
  key.dtype = response.dtype;
  key.shape = response.shapes[i];
  const int position = sets_.position(response.processSet, options_.rank);
  if (position >= 0 && static_cast<size_t>(position) < response.devices.size()) {
    key.device = response.devices[static_cast<size_t>(position)];
  }
  key.reduceOp = response.reduceOp;
  key.rootRank = response.rootRank;
  key.rowSize = response.rowSize;
  return key;
}

void LocalNegotiator::finishCycle(const ResponseList& plan) {
  // The fast path's responses came from the cache and are already there.
  const bool fromCache = lastPath_ == CyclePath::kFast;
  for (const Response& response : plan.responses) {
    if (response.type == ResponseType::kJoin) joined_ = false;
    if (!fromCache && cache_.enabled() && isCacheable(response.type)) {
      for (size_t i = 0; i < response.tensorNames.size() && i < response.shapes.size(); ++i) {
        cache_.put(splitResponse(response, i), keyFor(response, i));
      }
    }
    // A name completes here only for the set it was posted on: another set's response of
    // the same name is not this rank's.
    const int32_t set = requestSetOf(response);
    for (const auto& name : response.tensorNames) {
      auto it = inFlight_.find(name);
      if (it != inFlight_.end() && it->second.processSet == set) inFlight_.erase(it);
    }
    if (response.type == ResponseType::kRemoveProcessSet) cache_.eraseSet(response.processSet);
    sets_.learn(response);
  }
  uncached_.clear();
  cachedResponses_.clear();
  if (plan.parameters) options_.fusionThresholdBytes = plan.parameters->fusionThresholdBytes;
}

}  // namespace zen::controller
