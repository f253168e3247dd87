#pragma once

// Bayesian optimization (Horovod's optim/bayesian_optimization.cc): maximizes an expensive,
// noisy function over a box. A Gaussian process (controller/gaussian_process.h) models the
// samples so far; the next point is the one of greatest expected improvement over the best
// predicted mean at a sample, mu*:
//
//   EI(x) = (mu(x) - mu* - xi) Phi(z) + sigma(x) phi(z),  z = (mu(x) - mu* - xi) / sigma(x),
//
// in standardized units (xi = 0.01 of the targets' standard deviation). The maximum is
// searched over kCandidates pseudo-random points (std::mt19937_64 seeded once, so a seed gives
// the same proposals) and refined by a pattern search around the kRefined best. A point on a
// dimension's grid (Dimension::resolution) is snapped to it, and a point that is a sample
// already (the same grid point, or within 1e-9 of the box's width) is never proposed, nor one
// within minSeparation of a sample in every dimension (a fraction of the box's width: with
// noisy scores, a point next to one already scored teaches nothing).

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "controller/gaussian_process.h"

namespace zen::controller {

class BayesianOptimization {
 public:
  struct Dimension {
    double lower = 0;
    double upper = 1;
    double resolution = 0;  // > 0: proposals are lower + k * resolution
  };

  static constexpr int kCandidates = 4096;
  static constexpr int kRefined = 8;
  static constexpr double kXi = 0.01;

  // Dimensions must have lower < upper (the caller validates).
  BayesianOptimization(std::vector<Dimension> dimensions,
                       double noise,
                       uint64_t seed,
                       double minSeparation = 0);

  // x in the caller's units; it may lie outside the box (a starting point the user chose).
  void addSample(const std::vector<double>& x, double y);
  // The point to try next, in the caller's units; nullopt when every grid point of the box has
  // been sampled (only a coarse grid can run out).
  std::optional<std::vector<double>> nextSample();

 private:
  std::vector<double> normalize(const std::vector<double>& x) const;
  std::vector<double> denormalize(const std::vector<double>& unit) const;
  // Onto the grid and into the box, in [0, 1] units.
  std::vector<double> snap(std::vector<double> unit) const;
  bool isSampled(const std::vector<double>& unit) const;
  double expectedImprovementUnit(const std::vector<double>& unit) const;
  void refit();

  std::vector<Dimension> dimensions_;
  double minSeparation_;
  std::mt19937_64 random_;
  GaussianProcess gp_;
  std::vector<std::vector<double>> samples_;  // normalized
  std::vector<double> values_;
  double bestMean_ = 0;  // mu*: the largest predicted mean at a sample
};

}  // namespace zen::controller
