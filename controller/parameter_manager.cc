// The autotuner: samples, points, the search and the log (controller/parameter_manager.h).

#include "controller/parameter_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include "controller/bayesian_optimization.h"
#include "controller/median.h"

namespace zen::controller {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kKiBPerMiB = 1024.0;
constexpr double kCycleResolutionMs = 0.1;
// Horovod's seed points (fusion MiB, cycle ms), tried after the configured values.
constexpr std::pair<double, double> kSeedPoints[] = {{4, 5}, {32, 50}, {16, 25}, {8, 10}};

}  // namespace

Result<std::unique_ptr<ParameterManager>> ParameterManager::create(const AutotuneOptions& options) {
  ZEN_CHECK_ARG(options.warmupSamples >= 0, "ZEN_AUTOTUNE_WARMUP_SAMPLES must be >= 0, got {}",
                options.warmupSamples);
  ZEN_CHECK_ARG(options.stepsPerSample >= 1, "ZEN_AUTOTUNE_STEPS_PER_SAMPLE must be >= 1, got {}",
                options.stepsPerSample);
  ZEN_CHECK_ARG(options.maxSamples >= 1, "ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES must be >= 1, got {}",
                options.maxSamples);
  ZEN_CHECK_ARG(options.gaussianProcessNoise > 0 && std::isfinite(options.gaussianProcessNoise),
                "ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE must be > 0, got {}",
                options.gaussianProcessNoise);
  ZEN_CHECK_ARG(options.confirmPairs >= 0, "ZEN_AUTOTUNE_CONFIRM_PAIRS must be >= 0, got {}",
                options.confirmPairs);
  ZEN_CHECK_ARG(options.initial.fusionThresholdBytes >= 0,
                "the autotuner's initial fusion threshold must be >= 0 bytes, got {}",
                options.initial.fusionThresholdBytes);
  ZEN_CHECK_ARG(options.initial.cycleTimeMs >= 0 && std::isfinite(options.initial.cycleTimeMs),
                "the autotuner's initial cycle time must be >= 0 ms, got {}",
                options.initial.cycleTimeMs);
  std::unique_ptr<ParameterManager> manager(new ParameterManager(options));
  if (!options.logPath.empty()) {
    manager->log_.open(options.logPath, std::ios::out | std::ios::trunc);
    if (!manager->log_.is_open()) {
      return ZEN_ERROR(StatusCode::kIoError,
                       "cannot open the autotune log '{}' (ZEN_AUTOTUNE_LOG): {}", options.logPath,
                       std::strerror(errno));
    }
    manager->log_ << "point,fusion_threshold_bytes,cycle_time_ms,bytes_per_second\n";
    manager->log_.flush();
  }
  return manager;
}

ParameterManager::ParameterManager(const AutotuneOptions& options)
    : options_(options), current_(options.initial), warmupLeft_(options.warmupSamples) {
  std::vector<BayesianOptimization::Dimension> dimensions;
  if (options_.tuneFusionThreshold) dimensions.push_back({0.0, kMaxFusionMiB, 1.0 / kKiBPerMiB});
  if (options_.tuneCycleTime) dimensions.push_back({kMinCycleMs, kMaxCycleMs, kCycleResolutionMs});
  if (dimensions.empty()) {
    done_ = true;  // nothing to tune
    return;
  }
  optimizer_ = std::make_unique<BayesianOptimization>(
      std::move(dimensions), options_.gaussianProcessNoise, options_.seed, kMinSeparation);
  for (const auto& [mib, ms] : kSeedPoints) {
    TunedParameters seed = options_.initial;
    if (options_.tuneFusionThreshold) seed.fusionThresholdBytes = static_cast<int64_t>(mib * kMiB);
    if (options_.tuneCycleTime) seed.cycleTimeMs = ms;
    seeds_.push_back(seed);
  }
}

ParameterManager::~ParameterManager() = default;

std::vector<double> ParameterManager::toPoint(const TunedParameters& p) const {
  std::vector<double> x;
  if (options_.tuneFusionThreshold) x.push_back(static_cast<double>(p.fusionThresholdBytes) / kMiB);
  if (options_.tuneCycleTime) x.push_back(p.cycleTimeMs);
  return x;
}

TunedParameters ParameterManager::fromPoint(const std::vector<double>& x) const {
  TunedParameters p = options_.initial;
  size_t j = 0;
  if (options_.tuneFusionThreshold) {
    const double kib = std::clamp(std::round(x[j++] * kKiBPerMiB), 0.0, kMaxFusionMiB * kKiBPerMiB);
    p.fusionThresholdBytes = static_cast<int64_t>(kib) * 1024;
  }
  if (options_.tuneCycleTime) {
    const double tenths = std::round(x[j++] / kCycleResolutionMs);
    p.cycleTimeMs = std::clamp(tenths / 10.0, kMinCycleMs, kMaxCycleMs);
  }
  return p;
}

bool ParameterManager::isScored(const TunedParameters& p) const {
  return std::any_of(scored_.begin(), scored_.end(),
                     [&](const auto& point) { return point.first == p; });
}

void ParameterManager::restartSample(TimePoint now) {
  sampleStart_ = now;
  sampleBytes_ = 0;
  timesPlanned_.clear();
}

bool ParameterManager::count(const ResponseList& plan) {
  bool reached = false;
  for (const Response& response : plan.responses) {
    if (response.processSet != kGlobalProcessSet || !carriesTensors(response.type)) continue;
    for (size_t i = 0; i < response.tensorNames.size(); ++i) {
      sampleBytes_ += denseBytes(response, i);
      if (++timesPlanned_[response.tensorNames[i]] >= options_.stepsPerSample) reached = true;
    }
  }
  return reached;
}

std::optional<TunedParameters> ParameterManager::update(const ResponseList& plan, TimePoint now) {
  if (done_ || waitingForApply_) return std::nullopt;
  if (!sampleStart_) {
    // The first call: the configured values have been in effect all along, the sample starts
    // now; this plan's work was done before it.
    restartSample(now);
    return std::nullopt;
  }
  if (!count(plan)) return std::nullopt;
  double seconds = secondsBetween(*sampleStart_, now);
  if (seconds <= 0) seconds = 1e-9;
  const double score = static_cast<double>(sampleBytes_) / seconds;
  restartSample(now);
  if (warmupLeft_ > 0) {
    --warmupLeft_;
    return std::nullopt;
  }
  if (confirmation_) return confirmSample(score);
  pointSamples_.push_back(score);
  if (pointSamples_.size() < static_cast<size_t>(kSamplesPerPoint)) return std::nullopt;
  const double pointScore = median(std::move(pointSamples_));
  pointSamples_.clear();
  return scorePoint(pointScore);
}

void ParameterManager::applied(TimePoint now) {
  if (done_ || !waitingForApply_) return;
  waitingForApply_ = false;
  restartSample(now);
}

std::optional<TunedParameters> ParameterManager::scorePoint(double score) {
  logRow(std::to_string(scored_.size()), current_, score);
  scored_.emplace_back(current_, score);
  optimizer_->addSample(toPoint(current_), score);
  std::optional<TunedParameters> next;
  if (scored_.size() < static_cast<size_t>(options_.maxSamples)) next = nextPoint();
  if (!next) return endSearch();
  return moveTo(*next);
}

std::optional<TunedParameters> ParameterManager::nextPoint() {
  while (nextSeed_ < seeds_.size()) {
    const TunedParameters& seed = seeds_[nextSeed_++];
    if (!isScored(seed)) return seed;
  }
  const std::optional<std::vector<double>> x = optimizer_->nextSample();
  if (!x) return std::nullopt;  // every point of the grid scored: nothing left to try
  return fromPoint(*x);
}

std::optional<TunedParameters> ParameterManager::endSearch() {
  // The first of equal scores: the earlier point, the configured values before a proposal.
  const auto best =
      std::max_element(scored_.begin(), scored_.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  // Point 0 is the configured values, the incumbent.
  if (options_.confirmPairs == 0 || best->first == scored_[0].first) return finish(best->first);
  confirmation_.emplace(best->first, scored_[0].first, options_.confirmPairs);
  return confirmAt(confirmation_->next());
}

std::optional<TunedParameters> ParameterManager::confirmSample(double score) {
  logRow(confirmation_->candidateNext() ? "confirm_candidate" : "confirm_incumbent", current_,
         score);
  confirmation_->add(score);
  if (!confirmation_->complete()) return confirmAt(confirmation_->next());
  logRow("confirm_ratio", confirmation_->candidate(), confirmation_->medianRatio());
  return finish(confirmation_->kept());
}

std::optional<TunedParameters> ParameterManager::confirmAt(const TunedParameters& p) {
  std::optional<TunedParameters> next = moveTo(p);
  // The sample after a switch carries the previous point's tail (steps in flight under it) and
  // would always count against the second point of a pair: discarded, as the warm-up.
  if (next) warmupLeft_ = kSettleSamples;
  return next;
}

std::optional<TunedParameters> ParameterManager::finish(const TunedParameters& kept) {
  done_ = true;
  const auto point = std::find_if(scored_.begin(), scored_.end(), [&](const auto& scoredPoint) {
    return scoredPoint.first == kept;
  });
  logRow("best", kept, point->second);
  return moveTo(kept);
}

std::optional<TunedParameters> ParameterManager::moveTo(const TunedParameters& p) {
  if (p == current_) return std::nullopt;
  current_ = p;
  waitingForApply_ = true;
  return current_;
}

void ParameterManager::logRow(const std::string& point, const TunedParameters& p, double score) {
  if (!log_.is_open()) return;
  log_ << fmt::format("{},{},{:.6g},{:.6g}\n", point, p.fusionThresholdBytes, p.cycleTimeMs, score);
  log_.flush();
}

}  // namespace zen::controller
