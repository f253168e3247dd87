// Gaussian-process regression: interpolation, uncertainty, standardization, the length scale.

#include "controller/gaussian_process.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace zen::controller {
namespace {

double smooth(double x) {
  return std::sin(6 * x) + 0.5 * x;
}

struct Samples {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
};

// n evenly spaced samples of f over [0, 1], times scale.
template <typename F>
Samples sample(F f, int n, double scale = 1.0) {
  Samples s;
  for (int i = 0; i < n; ++i) {
    const double x = static_cast<double>(i) / (n - 1);
    s.x.push_back({x});
    s.y.push_back(scale * f(x));
  }
  return s;
}

TEST(GaussianProcess, PriorBeforeAnyFit) {
  GaussianProcess gp(0.8);
  const auto p = gp.predict({0.3});
  EXPECT_EQ(p.mean, 0);
  EXPECT_EQ(p.stddev, 1);
  EXPECT_EQ(gp.numSamples(), 0u);
}

TEST(GaussianProcess, InterpolatesASmoothFunction) {
  GaussianProcess gp(1e-6);
  const Samples s = sample(smooth, 9);
  gp.fit(s.x, s.y);
  ASSERT_EQ(gp.numSamples(), 9u);
  for (size_t i = 0; i < s.x.size(); ++i) {
    const auto p = gp.predict(s.x[i]);
    EXPECT_NEAR(p.mean, s.y[i], 1e-3) << "at x = " << s.x[i][0];
    EXPECT_LT(p.stddev, 1e-2) << "at x = " << s.x[i][0];
  }
  // Midpoints between samples: close to the function (it is smooth at this spacing).
  for (size_t i = 0; i + 1 < s.x.size(); ++i) {
    const double mid = 0.5 * (s.x[i][0] + s.x[i + 1][0]);
    EXPECT_NEAR(gp.predict({mid}).mean, smooth(mid), 0.05) << "at x = " << mid;
  }
}

TEST(GaussianProcess, UncertainFarFromTheSamples) {
  GaussianProcess gp(1e-6, {0.3});
  gp.fit({{0.0, 0.0}, {0.1, 0.0}, {0.0, 0.1}, {0.1, 0.1}}, {1.0, 2.0, 3.0, 5.0});
  const double scale = gp.targetScale();
  EXPECT_LT(gp.predict({0.05, 0.05}).stddev, 0.2 * scale);
  // Far away the posterior is the prior: the targets' mean, their standard deviation.
  const auto near = gp.predict({0.3, 0.3});
  EXPECT_GT(near.stddev, 0.2 * scale);
  const auto far = gp.predict({1.0, 1.0});
  EXPECT_GT(far.stddev, near.stddev);
  EXPECT_GT(far.stddev, 0.9 * scale);
  EXPECT_NEAR(far.mean, 11.0 / 4, 0.1 * scale);
}

TEST(GaussianProcess, StandardizesLargeTargets) {
  // Bytes per second: the same function at 1e9 is fit the same way, and the noise keeps its
  // meaning (a relative error, not swamped by the magnitude).
  const Samples small = sample(smooth, 7);
  const Samples large = sample([](double x) { return 3e9 + 1e9 * smooth(x); }, 7);
  GaussianProcess a(0.01);
  GaussianProcess b(0.01);
  a.fit(small.x, small.y);
  b.fit(large.x, large.y);
  EXPECT_EQ(a.lengthScale(), b.lengthScale());
  EXPECT_NEAR(b.targetScale(), 1e9 * a.targetScale(), 1e-3 * b.targetScale());
  for (double x : {0.0, 0.23, 0.5, 0.81, 1.0}) {
    const auto pa = a.predict({x});
    const auto pb = b.predict({x});
    EXPECT_NEAR(pb.mean, 3e9 + 1e9 * pa.mean, 1e-6 * 1e9) << "at x = " << x;
    EXPECT_NEAR(pb.stddev, 1e9 * pa.stddev, 1e-6 * 1e9) << "at x = " << x;
    EXPECT_NEAR(pb.mean, 3e9 + 1e9 * smooth(x), 0.15e9) << "at x = " << x;
  }
}

TEST(GaussianProcess, NoiseSmoothsInsteadOfInterpolating) {
  // Alternating noise on a line: a noisy fit follows the line, a noiseless one the zigzag.
  Samples s;
  for (int i = 0; i < 11; ++i) {
    const double x = i / 10.0;
    s.x.push_back({x});
    s.y.push_back(x + (i % 2 == 0 ? 0.1 : -0.1));
  }
  GaussianProcess noisy(0.1);  // about the noise's variance over the targets'
  GaussianProcess exact(1e-8, {0.1});
  noisy.fit(s.x, s.y);
  exact.fit(s.x, s.y);
  double noisyError = 0;
  double exactError = 0;
  for (size_t i = 0; i < s.x.size(); ++i) {
    noisyError += std::abs(noisy.predict(s.x[i]).mean - s.x[i][0]);
    exactError += std::abs(exact.predict(s.x[i]).mean - s.x[i][0]);
  }
  EXPECT_NEAR(exactError, 1.1, 1e-3);  // 11 samples, each 0.1 off the line
  EXPECT_LT(noisyError, 0.5 * exactError);
}

TEST(GaussianProcess, LengthScaleFollowsTheData) {
  // Maximum likelihood: a slowly varying function gets a long scale, a fast one a short one.
  GaussianProcess slow(1e-4);
  GaussianProcess fast(1e-4);
  const Samples a = sample([](double x) { return x * x; }, 12);
  const Samples b = sample([](double x) { return std::sin(25 * x); }, 12);
  slow.fit(a.x, a.y);
  fast.fit(b.x, b.y);
  EXPECT_GT(slow.lengthScale(), fast.lengthScale());
  EXPECT_LE(fast.lengthScale(), 0.15);
}

TEST(GaussianProcess, DuplicateSamplesDoNotBreakTheFit) {
  GaussianProcess gp(1e-12);
  gp.fit({{0.5}, {0.5}, {0.2}}, {1.0, 1.0, 0.0});
  const auto p = gp.predict({0.5});
  EXPECT_TRUE(std::isfinite(p.mean));
  EXPECT_NEAR(p.mean, 1.0, 1e-3);
}

}  // namespace
}  // namespace zen::controller
