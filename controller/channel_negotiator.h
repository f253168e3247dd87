#pragma once

// core's Negotiator over a ControlChannel: one rank's LocalNegotiator and, on rank 0, the
// Coordinator, driven through exactly the cycle of test/controller/sim_cluster.h
// (docs/negotiation.md "One cycle"):
//
//   bits = local.beginCycle(shutdown, now)         rank 0 ORs in a stall shutdown
//   channel.allreduceAnd(bits)                     every cycle
//   path = local.applyAnded(bits)
//   fast: plan = local.fastPathPlan()              rank 0: inspectStalls(now)
//   slow: channel.gather(encode(local.slowPathRequests()))
//         rank 0: plan = coordinator.computeResponses(lists, now, local.cachedResponses())
//         channel.broadcast(encode(plan))
//   local.finishCycle(plan)
//
// Rank 0 logs the stall inspector's warning (it names the missing ranks).

#include <spdlog/logger.h>

#include <memory>
#include <optional>

#include "controller/coordinator.h"
#include "controller/local_negotiator.h"
#include "controller/parameter_manager.h"
#include "core/config.h"
#include "core/negotiator.h"

namespace zen::controller {

struct NegotiatorOptions {
  int rank = 0;
  int size = 1;
  int cacheCapacity = 1024;
  int64_t fusionThresholdBytes = int64_t{128} << 20;
  double stallCheckSeconds = 60.0;
  double stallShutdownSeconds = 0.0;

  static NegotiatorOptions fromConfig(const Config& config, int rank, int size);
};

// ZEN_AUTOTUNE*'s options: the configured knobs are the first point, those set explicitly
// stay fixed.
AutotuneOptions autotuneOptionsFrom(const Config& config);

class ChannelNegotiator final : public Negotiator {
 public:
  // tuner: rank 0's autotuner (ZEN_AUTOTUNE), or null. The parameters it picks go to every
  // rank in the next plan (that cycle takes the slow path), and every rank switches to them
  // when it finishes that plan: the fast path's fusion stays the same on every rank.
  ChannelNegotiator(NegotiatorOptions options,
                    std::shared_ptr<spdlog::logger> log,
                    std::unique_ptr<ParameterManager> tuner = nullptr);

  Status check(const Request& request, int size) const override;
  Status post(const Request& request, TimePoint now) override;
  Result<CycleResult> runCycle(ControlChannel& channel,
                               bool shutdownRequested,
                               TimePoint now) override;

  const LocalNegotiator& local() const { return local_; }

 private:
  Result<ResponseList> slowPath(ControlChannel& channel, TimePoint now, CycleResult* out);
  void applyParameters(const ResponseList& plan, TimePoint now);

  NegotiatorOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  LocalNegotiator local_;
  std::optional<Coordinator> coordinator_;            // rank 0 only
  std::unique_ptr<ParameterManager> tuner_;           // rank 0 with ZEN_AUTOTUNE
  std::optional<TunedParameters> pendingParameters_;  // rank 0: for the next plan
  bool warnedEvictions_ = false;
};

}  // namespace zen::controller
