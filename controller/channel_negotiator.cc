// One negotiation cycle over a control channel (controller/channel_negotiator.h).
#include "controller/channel_negotiator.h"

#include <utility>

#include "controller/validation.h"
#include "core/message_codec.h"

namespace zen::controller {

NegotiatorOptions NegotiatorOptions::fromConfig(const Config& config, int rank, int size) {
  NegotiatorOptions o;
  o.rank = rank;
  o.size = size;
  o.cacheCapacity = config.cacheCapacity;
  o.fusionThresholdBytes = config.fusionThresholdBytes;
  o.stallCheckSeconds = config.stallCheckSeconds;
  o.stallShutdownSeconds = config.stallShutdownSeconds;
  return o;
}

AutotuneOptions autotuneOptionsFrom(const Config& config) {
  AutotuneOptions a;
  a.initial = TunedParameters{config.fusionThresholdBytes, config.cycleTimeMs};
  a.tuneFusionThreshold = !config.fusionThresholdSet;
  a.tuneCycleTime = !config.cycleTimeSet;
  a.warmupSamples = config.autotuneWarmupSamples;
  a.stepsPerSample = config.autotuneStepsPerSample;
  a.maxSamples = config.autotuneMaxSamples;
  a.gaussianProcessNoise = config.autotuneNoise;
  a.confirmPairs = config.autotuneConfirmPairs;
  a.logPath = config.autotuneLog;
  a.seed = config.seed;
  return a;
}

namespace {

LocalOptions localOptions(const NegotiatorOptions& o) {
  LocalOptions l;
  l.rank = o.rank;
  l.size = o.size;
  l.cacheCapacity = o.cacheCapacity;
  l.fusionThresholdBytes = o.fusionThresholdBytes;
  l.stallCheckSeconds = o.stallCheckSeconds;
  return l;
}

}  // namespace

ChannelNegotiator::ChannelNegotiator(NegotiatorOptions options,
                                     std::shared_ptr<spdlog::logger> log,
                                     std::unique_ptr<ParameterManager> tuner)
    : options_(options),
      log_(std::move(log)),
      local_(localOptions(options)),
      tuner_(options.rank == 0 ? std::move(tuner) : nullptr) {
  if (options_.rank == 0) {
    CoordinatorOptions c;
    c.size = options_.size;
    c.fusionThresholdBytes = options_.fusionThresholdBytes;
    c.stallCheckSeconds = options_.stallCheckSeconds;
    c.stallShutdownSeconds = options_.stallShutdownSeconds;
    coordinator_.emplace(c);
  }
}

Status ChannelNegotiator::check(const Request& request, int size) const {
  return checkRequest(request, size);
}

Status ChannelNegotiator::post(const Request& request, TimePoint now) {
  return local_.post(request, now);
}

Result<CycleResult> ChannelNegotiator::runCycle(ControlChannel& channel,
                                                bool shutdownRequested,
                                                TimePoint now) {
  CycleResult out;
  out.stallShutdown = coordinator_ && coordinator_->stallShutdown();
  if (pendingParameters_) local_.forceSlowPath();
  BitVector bits = local_.beginCycle(shutdownRequested || out.stallShutdown, now);
  ZEN_RETURN_IF_ERROR(channel.allreduceAnd(&bits));
  ZEN_ASSIGN_OR_RETURN(CyclePath path, local_.applyAnded(bits));
  out.fastPath = path == CyclePath::kFast;
  for (const Response& r : local_.cachedResponses()) {
    out.cachedNames.insert(out.cachedNames.end(), r.tensorNames.begin(), r.tensorNames.end());
  }
  if (out.fastPath) {
    out.plan = local_.fastPathPlan();
    if (coordinator_) out.stallWarning = coordinator_->inspectStalls(now).warning;
  } else {
    ZEN_ASSIGN_OR_RETURN(out.plan, slowPath(channel, now, &out));
  }
  local_.finishCycle(out.plan);
  applyParameters(out.plan, now);
  if (!out.stallWarning.empty()) log_->warn("{}", out.stallWarning);
  if (!warnedEvictions_ && local_.cache().evictions() > 0) {
    warnedEvictions_ = true;
    log_->warn(
        "the response cache is full and evicts entries (ZEN_CACHE_CAPACITY={}): raise it "
        "above the number of tensors posted per step to keep the fast path",
        options_.cacheCapacity);
  }
  return out;
}

Result<ResponseList> ChannelNegotiator::slowPath(ControlChannel& channel,
                                                 TimePoint now,
                                                 CycleResult* out) {
  std::vector<std::vector<uint8_t>> gathered;
  ZEN_RETURN_IF_ERROR(channel.gather(encodeRequestList(local_.slowPathRequests()), &gathered));
  std::vector<uint8_t> planBytes;
  if (coordinator_) {
    std::vector<RequestList> lists;
    for (size_t r = 0; r < gathered.size(); ++r) {
      Result<RequestList> list = decodeRequestList(gathered[r]);
      if (!list.isOk()) {
        return ZEN_ERROR(StatusCode::kIoError, "rank {} sent a bad request list: {}", r,
                         list.status().message());
      }
      for (const Request& q : list.value().requests) {
        out->ticks.push_back(NegotiationTick{q.name, static_cast<int>(r)});
      }
      lists.push_back(std::move(list).value());
    }
    ResponseList plan = coordinator_->computeResponses(lists, now, local_.cachedResponses());
    plan.parameters = pendingParameters_;
    pendingParameters_.reset();
    out->stallWarning = coordinator_->lastStallReport().warning;
    planBytes = encodeResponseList(plan);
  }
  ZEN_RETURN_IF_ERROR(channel.broadcast(&planBytes));
  Result<ResponseList> plan = decodeResponseList(planBytes);
  if (!plan.isOk()) {
    return ZEN_ERROR(StatusCode::kIoError, "rank 0 sent a bad plan: {}", plan.status().message());
  }
  return plan;
}

// Every rank, once it has finished the plan (the local negotiator took the fast path's
// threshold); rank 0 then scores the plan or, for one that carried parameters, starts sampling
// them.
void ChannelNegotiator::applyParameters(const ResponseList& plan, TimePoint now) {
  if (plan.parameters) {
    if (coordinator_) coordinator_->setFusionThreshold(plan.parameters->fusionThresholdBytes);
    log_->debug("autotune: fusion threshold {} bytes, cycle time {} ms",
                plan.parameters->fusionThresholdBytes, plan.parameters->cycleTimeMs);
  }
  if (!tuner_) return;
  if (plan.parameters) return tuner_->applied(now);
  const bool wasDone = tuner_->done();
  pendingParameters_ = tuner_->update(plan, now);
  if (tuner_->done() && !wasDone) {
    const TunedParameters& best = pendingParameters_ ? *pendingParameters_ : tuner_->current();
    log_->info("autotune: done after {} points: fusion threshold {} bytes, cycle time {} ms",
               tuner_->scored().size(), best.fusionThresholdBytes, best.cycleTimeMs);
  }
}

}  // namespace zen::controller
