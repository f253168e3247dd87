#pragma once

// Gaussian-process regression (Horovod's optim/gaussian_process.cc), the autotuner's model of
// bytes per second over the knobs (controller/bayesian_optimization.h):
//
//   kernel  k(a, b) = exp(-|a - b|^2 / (2 l^2)) over inputs scaled to [0, 1]^d, unit variance;
//   fit     K + noise I = L L^T (Cholesky), alpha = (K + noise I)^-1 y;
//   predict mean = k*^T alpha, variance = 1 - |L^-1 k*|^2 (of the latent function).
//
// Targets are standardized (mean 0, standard deviation 1) inside, so `noise` (the variance
// added to K's diagonal, ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE) means the same for 1e3 and 1e9
// bytes per second; predictions come back in the targets' units. The length scale l is the one
// of a small grid that maximizes the log marginal likelihood of the samples: a fixed one would
// either smooth over a narrow optimum or make a broad one look like noise, and with the few
// dozen samples the tuner takes, a grid costs less than a gradient optimizer and cannot fail to
// converge. Eigen stays inside the .cc file (the state is behind a pointer).

#include <memory>
#include <vector>

namespace zen::controller {

class GaussianProcess {
 public:
  struct Prediction {
    double mean = 0;
    double stddev = 0;
  };

  static const std::vector<double>& defaultLengthScales();

  explicit GaussianProcess(double noise, std::vector<double> lengthScales = defaultLengthScales());
  ~GaussianProcess();
  GaussianProcess(GaussianProcess&&) noexcept;
  GaussianProcess& operator=(GaussianProcess&&) noexcept;

  // x: n points of the same dimension d; y: their n targets. Replaces any earlier fit.
  void fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y);
  // The posterior at x; before any fit (or with no samples) the prior, mean 0 and stddev 1.
  Prediction predict(const std::vector<double>& x) const;

  size_t numSamples() const;
  double lengthScale() const;  // the grid's choice; 0 before a fit
  // The standard deviation the targets were divided by (1 when they do not vary).
  double targetScale() const;

 private:
  struct State;
  double noise_;
  std::vector<double> lengthScales_;
  std::unique_ptr<State> state_;
};

}  // namespace zen::controller
