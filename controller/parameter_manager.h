#pragma once

// The autotuner (Horovod's ParameterManager, ZEN_AUTOTUNE=1 / zenrun --autotune), run by
// rank 0 alone. It scores the knobs every rank must share, the fusion threshold and the cycle
// time (core/message.h TunedParameters), by the bytes the job moves per second, and looks for
// the best with Bayesian optimization (controller/bayesian_optimization.h: a Gaussian process
// and expected improvement, as Horovod's):
//
//   1. warm-up: the first warmupSamples samples, at the configured values, are discarded;
//   2. the configured values are the first point, then Horovod's seed points, then the points
//      the optimization proposes, maxSamples points in all, each scored as the median of
//      kSamplesPerPoint samples;
//   3. confirmation (Zen's own; controller/autotune_confirmation.h says why): unless the best
//      point scored (the candidate) is the configured values (the incumbent), confirmPairs pairs
//      of samples, one of each point back to back, in the order A B, B A, A B, ... (A: the
//      candidate; after each switch, kSettleSamples samples are discarded first, so a switch's
//      tail never counts against the second point of a pair); the candidate is kept only if it
//      wins every pair and the median of the pairs' ratios score(candidate) / score(incumbent)
//      exceeds 1 + kConfirmMargin, else the incumbent is. confirmPairs 0: the best point scored is
//      kept directly (Horovod's choice). Tuning stops.
//
// A sample runs from the moment a point is in effect on every rank (applied()) until some
// tensor name has been planned stepsPerSample times more (a training step posts each name
// once); its score is the dense bytes of the global set's data-plane responses planned in
// that time, per second. A knob fixed by the user (ZEN_FUSION_THRESHOLD, ZEN_CYCLE_TIME set)
// is never changed. Ranges: fusion threshold [0, 128] MiB (0: no fusion), cycle time [1, 100]
// ms, searched in MiB and ms and rounded to whole KiB and 0.1 ms.
//
// ZEN_AUTOTUNE_LOG: a CSV file, one row per point once scored, one per confirmation sample
// (confirm_candidate / confirm_incumbent, in the order taken), a confirm_ratio row (the
// candidate, and in the last column the median of the pairs' ratios, not bytes per second),
// and last the point kept, with its score from the search (its point row's):
//   point,fusion_threshold_bytes,cycle_time_ms,bytes_per_second
//   0,134217728,1,2.5e+08
//   ...
//   19,16777216,5,3.1e+08
//   confirm_candidate,16777216,5,3.2e+08
//   confirm_incumbent,134217728,1,3e+08
//   confirm_incumbent,134217728,1,3.1e+08
//   confirm_candidate,16777216,5,3.3e+08
//   confirm_candidate,16777216,5,3.3e+08
//   confirm_incumbent,134217728,1,3.1e+08
//   confirm_ratio,16777216,5,1.06452
//   best,16777216,5,3.1e+08
// Without a confirmation (confirmPairs 0, or the configured values scored best) the point rows
// are followed by the best row alone.

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "controller/autotune_confirmation.h"
#include "controller/clock.h"
#include "core/message.h"
#include "core/status.h"

namespace zen::controller {

class BayesianOptimization;

struct AutotuneOptions {
  TunedParameters initial;            // the configured values: the first point
  bool tuneFusionThreshold = true;    // false: ZEN_FUSION_THRESHOLD was set
  bool tuneCycleTime = true;          // false: ZEN_CYCLE_TIME was set
  int warmupSamples = 3;              // ZEN_AUTOTUNE_WARMUP_SAMPLES
  int stepsPerSample = 10;            // ZEN_AUTOTUNE_STEPS_PER_SAMPLE
  int maxSamples = 20;                // ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES: points scored
  double gaussianProcessNoise = 0.8;  // ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE
  int confirmPairs = 3;               // ZEN_AUTOTUNE_CONFIRM_PAIRS; 0: no confirmation
  std::string logPath;                // ZEN_AUTOTUNE_LOG; empty: no log
  uint64_t seed = 0;                  // the optimization's random candidates
};

class ParameterManager {
 public:
  static constexpr int kSamplesPerPoint = 3;
  // Samples discarded after each switch of the confirmation (controller/parameter_manager.cc).
  static constexpr int kSettleSamples = 1;
  static constexpr double kMaxFusionMiB = 128.0;
  static constexpr double kMinCycleMs = 1.0;
  static constexpr double kMaxCycleMs = 100.0;
  // The optimizer proposes no point within 2 % of a range of one scored in every knob (with
  // noisy scores, 128 MiB - 1 KiB next to 128 MiB teaches nothing).
  static constexpr double kMinSeparation = 0.02;

  // kInvalidArgument for options out of range; kIoError when the log cannot be opened. A
  // configured value must be >= 0 (a fixed knob may be anything valid); a tuned knob's
  // configured value outside its range is still the first point: the baseline the job ran
  // with, which the search then leaves for points inside the range.
  static Result<std::unique_ptr<ParameterManager>> create(const AutotuneOptions& options);
  ~ParameterManager();

  // Rank 0, after every cycle, with the plan every rank executes. Returns the parameters that
  // every rank must switch to, when a point is scored and the next one (or, at the end, the
  // best) differs from the current one. Until applied() is called, nothing is sampled.
  std::optional<TunedParameters> update(const ResponseList& plan, TimePoint now);
  // The parameters update() returned are in effect on every rank from `now`.
  void applied(TimePoint now);

  const TunedParameters& current() const { return current_; }
  bool done() const { return done_; }
  // Points scored so far by the search, in order, with their scores (bytes per second).
  const std::vector<std::pair<TunedParameters, double>>& scored() const { return scored_; }
  // The confirmation, from the end of the search; null when it did not run.
  const AutotuneConfirmation* confirmation() const {
    return confirmation_ ? &*confirmation_ : nullptr;
  }

 private:
  explicit ParameterManager(const AutotuneOptions& options);

  // The point of the tuned knobs, in MiB and ms, and back (rounded, clamped, fixed knobs at
  // their configured values).
  std::vector<double> toPoint(const TunedParameters& p) const;
  TunedParameters fromPoint(const std::vector<double>& x) const;
  bool isScored(const TunedParameters& p) const;
  void restartSample(TimePoint now);
  // Counts the plan into the sample; true when some name reached stepsPerSample plans.
  bool count(const ResponseList& plan);
  std::optional<TunedParameters> scorePoint(double score);
  std::optional<TunedParameters> nextPoint();
  // After the last point: the confirmation, or the end.
  std::optional<TunedParameters> endSearch();
  std::optional<TunedParameters> confirmSample(double score);
  std::optional<TunedParameters> finish(const TunedParameters& kept);
  // Makes p current; the parameters for update() to return, none when p is current already.
  std::optional<TunedParameters> moveTo(const TunedParameters& p);
  // moveTo() in the confirmation: after a switch, kSettleSamples samples are discarded.
  std::optional<TunedParameters> confirmAt(const TunedParameters& p);
  void logRow(const std::string& point, const TunedParameters& p, double score);

  AutotuneOptions options_;
  TunedParameters current_;
  bool done_ = false;
  bool waitingForApply_ = false;
  std::vector<std::pair<TunedParameters, double>> scored_;
  std::vector<TunedParameters> seeds_;  // Horovod's, in order; nextSeed_ is the next to try
  size_t nextSeed_ = 0;
  std::unique_ptr<BayesianOptimization> optimizer_;  // null when both knobs are fixed
  std::optional<AutotuneConfirmation> confirmation_;
  std::ofstream log_;
  // The sample in progress.
  std::optional<TimePoint> sampleStart_;
  int64_t sampleBytes_ = 0;
  std::unordered_map<std::string, int> timesPlanned_;
  int warmupLeft_ = 0;
  std::vector<double> pointSamples_;
};

}  // namespace zen::controller
