// Gaussian-process regression with an RBF kernel (controller/gaussian_process.h).

#include "controller/gaussian_process.h"

#include <Eigen/Cholesky>
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace zen::controller {
namespace {

// Added to the diagonal on top of the noise when the Cholesky fails (samples so close that K
// is singular to rounding): grows tenfold per retry.
constexpr double kFirstJitter = 1e-10;
constexpr double kLastJitter = 1e-2;

Eigen::MatrixXd kernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, double lengthScale) {
  Eigen::MatrixXd k(a.rows(), b.rows());
  const double scale = -0.5 / (lengthScale * lengthScale);
  for (Eigen::Index i = 0; i < a.rows(); ++i) {
    for (Eigen::Index j = 0; j < b.rows(); ++j) {
      k(i, j) = std::exp(scale * (a.row(i) - b.row(j)).squaredNorm());
    }
  }
  return k;
}

}  // namespace

struct GaussianProcess::State {
  Eigen::MatrixXd x;  // n x d
  Eigen::LLT<Eigen::MatrixXd> llt;
  Eigen::VectorXd alpha;  // (K + noise I)^-1 y, y standardized
  double lengthScale = 1;
  double yMean = 0;
  double yScale = 1;
};

const std::vector<double>& GaussianProcess::defaultLengthScales() {
  static const std::vector<double> scales = {0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0};
  return scales;
}

GaussianProcess::GaussianProcess(double noise, std::vector<double> lengthScales)
    : noise_(noise), lengthScales_(std::move(lengthScales)) {
  if (lengthScales_.empty()) lengthScales_ = defaultLengthScales();
}

GaussianProcess::~GaussianProcess() = default;
GaussianProcess::GaussianProcess(GaussianProcess&&) noexcept = default;
GaussianProcess& GaussianProcess::operator=(GaussianProcess&&) noexcept = default;

void GaussianProcess::fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  state_.reset();
  const auto n = static_cast<Eigen::Index>(std::min(x.size(), y.size()));
  if (n == 0) return;
  const auto d = static_cast<Eigen::Index>(x[0].size());
  auto state = std::make_unique<State>();
  state->x.resize(n, d);
  Eigen::VectorXd targets(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < d; ++j) state->x(i, j) = x[i][j];
    targets(i) = y[i];
  }
  state->yMean = targets.mean();
  const double variance = (targets.array() - state->yMean).square().sum() / n;
  // Constant targets (or one sample): scale 1, so they are centred but not blown up.
  state->yScale = variance > 0 ? std::sqrt(variance) : 1.0;
  const Eigen::VectorXd standardized = (targets.array() - state->yMean) / state->yScale;

  // Log marginal likelihood = -y^T alpha / 2 - sum(log diag L) - n log(2 pi) / 2; the last
  // term is the same for every length scale.
  double bestLml = -std::numeric_limits<double>::infinity();
  for (double lengthScale : lengthScales_) {
    const Eigen::MatrixXd k = kernel(state->x, state->x, lengthScale);
    Eigen::LLT<Eigen::MatrixXd> llt;
    for (double jitter = 0; jitter <= kLastJitter;
         jitter = jitter == 0 ? kFirstJitter : jitter * 10) {
      llt.compute(k + Eigen::MatrixXd::Identity(n, n) * (noise_ + jitter));
      if (llt.info() == Eigen::Success) break;
    }
    if (llt.info() != Eigen::Success) continue;
    const Eigen::VectorXd alpha = llt.solve(standardized);
    const Eigen::MatrixXd l = llt.matrixL();
    const double lml = -0.5 * standardized.dot(alpha) - l.diagonal().array().log().sum();
    if (lml > bestLml) {
      bestLml = lml;
      state->lengthScale = lengthScale;
      state->llt = std::move(llt);
      state->alpha = alpha;
    }
  }
  // Every Cholesky failed (not possible with noise > 0 and the jitter): keep the prior.
  if (bestLml == -std::numeric_limits<double>::infinity()) return;
  state_ = std::move(state);
}

GaussianProcess::Prediction GaussianProcess::predict(const std::vector<double>& x) const {
  if (!state_) return Prediction{0, 1};
  Eigen::MatrixXd point(1, state_->x.cols());
  for (Eigen::Index j = 0; j < point.cols(); ++j) point(0, j) = x[j];
  const Eigen::VectorXd kStar = kernel(state_->x, point, state_->lengthScale).col(0);
  const double mean = kStar.dot(state_->alpha);
  const Eigen::VectorXd v = state_->llt.matrixL().solve(kStar);
  const double variance = std::max(0.0, 1.0 - v.squaredNorm());
  return Prediction{mean * state_->yScale + state_->yMean, std::sqrt(variance) * state_->yScale};
}

size_t GaussianProcess::numSamples() const {
  return state_ ? static_cast<size_t>(state_->x.rows()) : 0;
}

double GaussianProcess::lengthScale() const {
  return state_ ? state_->lengthScale : 0;
}

double GaussianProcess::targetScale() const {
  return state_ ? state_->yScale : 1;
}

}  // namespace zen::controller
