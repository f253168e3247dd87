// Bayesian optimization by expected improvement (controller/bayesian_optimization.h).

#include "controller/bayesian_optimization.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace zen::controller {
namespace {

// The pattern search's first step and where it stops, in [0, 1] units.
constexpr double kFirstStep = 0.05;
constexpr double kLastStep = 1e-4;
// Moves per pattern search at most: each raises EI, this only bounds a long climb.
constexpr int kMaxMoves = 200;
// Continuous dimensions: closer than this (in [0, 1] units) is the same point.
constexpr double kSamePoint = 1e-9;
constexpr double kPi = 3.14159265358979323846;

double normalCdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

double normalPdf(double z) {
  return std::exp(-0.5 * z * z) / std::sqrt(2.0 * kPi);
}

}  // namespace

BayesianOptimization::BayesianOptimization(std::vector<Dimension> dimensions,
                                           double noise,
                                           uint64_t seed,
                                           double minSeparation)
    : dimensions_(std::move(dimensions)),
      minSeparation_(minSeparation),
      random_(seed),
      gp_(noise) {}

std::vector<double> BayesianOptimization::normalize(const std::vector<double>& x) const {
  std::vector<double> unit(dimensions_.size());
  for (size_t j = 0; j < dimensions_.size(); ++j) {
    const Dimension& d = dimensions_[j];
    unit[j] = (x[j] - d.lower) / (d.upper - d.lower);
  }
  return unit;
}

std::vector<double> BayesianOptimization::denormalize(const std::vector<double>& unit) const {
  std::vector<double> x(dimensions_.size());
  for (size_t j = 0; j < dimensions_.size(); ++j) {
    const Dimension& d = dimensions_[j];
    x[j] = d.lower + unit[j] * (d.upper - d.lower);
    if (d.resolution > 0) {
      // Whole steps from lower, so the caller's own rounding lands on the same value.
      x[j] = d.lower + std::round((x[j] - d.lower) / d.resolution) * d.resolution;
    }
    x[j] = std::clamp(x[j], d.lower, d.upper);
  }
  return x;
}

std::vector<double> BayesianOptimization::snap(std::vector<double> unit) const {
  for (size_t j = 0; j < dimensions_.size(); ++j) {
    const Dimension& d = dimensions_[j];
    unit[j] = std::clamp(unit[j], 0.0, 1.0);
    if (d.resolution > 0) {
      const double step = d.resolution / (d.upper - d.lower);
      // The last whole step may fall short of upper: stay within the box.
      unit[j] = std::min(std::round(unit[j] / step), std::floor(1.0 / step + 1e-9)) * step;
    }
  }
  return unit;
}

bool BayesianOptimization::isSampled(const std::vector<double>& unit) const {
  for (const std::vector<double>& s : samples_) {
    bool same = true;
    for (size_t j = 0; j < dimensions_.size() && same; ++j) {
      const Dimension& d = dimensions_[j];
      const double tolerance = std::max(
          d.resolution > 0 ? 0.5 * d.resolution / (d.upper - d.lower) : kSamePoint, minSeparation_);
      same = std::abs(unit[j] - s[j]) < tolerance;
    }
    if (same) return true;
  }
  return false;
}

void BayesianOptimization::addSample(const std::vector<double>& x, double y) {
  samples_.push_back(normalize(x));
  values_.push_back(y);
  refit();
}

void BayesianOptimization::refit() {
  gp_.fit(samples_, values_);
  // mu*, the best predicted mean at a sample rather than the best value seen: with noisy
  // scores one lucky sample would otherwise make every other point look hopeless.
  bestMean_ = -std::numeric_limits<double>::infinity();
  for (const std::vector<double>& s : samples_)
    bestMean_ = std::max(bestMean_, gp_.predict(s).mean);
  if (samples_.empty()) bestMean_ = 0;
}

double BayesianOptimization::expectedImprovementUnit(const std::vector<double>& unit) const {
  const GaussianProcess::Prediction p = gp_.predict(unit);
  const double scale = gp_.targetScale();
  const double sigma = p.stddev / scale;
  if (sigma < 1e-12) return 0;
  const double improvement = (p.mean - bestMean_) / scale - kXi;
  const double z = improvement / sigma;
  return improvement * normalCdf(z) + sigma * normalPdf(z);
}

std::optional<std::vector<double>> BayesianOptimization::nextSample() {
  const size_t dims = dimensions_.size();
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  struct Scored {
    double ei;
    std::vector<double> unit;
  };
  std::vector<Scored> candidates;
  candidates.reserve(kCandidates);
  for (int c = 0; c < kCandidates; ++c) {
    std::vector<double> unit(dims);
    for (double& u : unit) u = uniform(random_);
    unit = snap(std::move(unit));
    if (isSampled(unit)) continue;
    candidates.push_back(Scored{expectedImprovementUnit(unit), std::move(unit)});
  }
  if (candidates.empty()) return std::nullopt;
  // Highest EI first; ties (flat EI far from every sample) keep the drawing order.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Scored& a, const Scored& b) { return a.ei > b.ei; });
  candidates.resize(std::min<size_t>(candidates.size(), kRefined));

  // Pattern search from each: move to the best neighbour one step away along an axis, halve
  // the step when none is better.
  Scored best = candidates.front();
  for (Scored point : candidates) {
    int moves = 0;
    for (double step = kFirstStep; step >= kLastStep && moves < kMaxMoves;) {
      Scored next = point;
      for (size_t j = 0; j < dims; ++j) {
        for (double sign : {-1.0, 1.0}) {
          std::vector<double> unit = point.unit;
          unit[j] += sign * step;
          unit = snap(std::move(unit));
          if (isSampled(unit)) continue;
          const double ei = expectedImprovementUnit(unit);
          if (ei > next.ei) next = Scored{ei, std::move(unit)};
        }
      }
      if (next.unit == point.unit) {
        step /= 2;
      } else {
        point = std::move(next);
        ++moves;
      }
    }
    if (point.ei > best.ei) best = std::move(point);
  }
  return denormalize(best.unit);
}

}  // namespace zen::controller
