// Bayesian optimization: finds known maxima, beats random search on the same budget,
// deterministic for a seed, never proposes a sampled point, stays on the grid.

#include "controller/bayesian_optimization.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <vector>

namespace zen::controller {
namespace {

using Point = std::vector<double>;
using Function = std::function<double(const Point&)>;
using Dimension = BayesianOptimization::Dimension;

// 1-D: a broad peak at 62 and a lower one at 110 (a local maximum to get stuck on).
double oneDim(const Point& x) {
  return std::exp(-std::pow((x[0] - 62) / 15, 2) / 2) +
         0.6 * std::exp(-std::pow((x[0] - 110) / 6, 2) / 2);
}
constexpr double kOneDimBestX = 62;

// 2-D, the tuner's box (MiB, ms): the peak at (40, 20), value 1.
double twoDim(const Point& x) {
  return std::exp(-std::pow((x[0] - 40) / 30, 2) / 2 - std::pow((x[1] - 20) / 25, 2) / 2);
}

struct Search {
  std::vector<Point> points;  // every point evaluated, the starting ones first
  double best = -1;
  Point bestX;
};

Search runBayes(const std::vector<Dimension>& dims,
                const Function& f,
                const std::vector<Point>& start,
                int proposals,
                double noise,
                uint64_t seed) {
  BayesianOptimization bo(dims, noise, seed);
  Search run;
  auto evaluate = [&](const Point& x) {
    const double y = f(x);
    bo.addSample(x, y);
    run.points.push_back(x);
    if (y > run.best) {
      run.best = y;
      run.bestX = x;
    }
  };
  for (const Point& x : start) evaluate(x);
  for (int i = 0; i < proposals; ++i) {
    const auto x = bo.nextSample();
    if (!x) break;
    evaluate(*x);
  }
  return run;
}

// The same budget spent on uniform random points, from the same seed.
double randomSearch(const std::vector<Dimension>& dims,
                    const Function& f,
                    const std::vector<Point>& start,
                    int proposals,
                    uint64_t seed) {
  std::mt19937_64 random(seed);
  double best = -1;
  for (const Point& x : start) best = std::max(best, f(x));
  for (int i = 0; i < proposals; ++i) {
    Point x;
    for (const Dimension& d : dims) {
      x.push_back(std::uniform_real_distribution<double>(d.lower, d.upper)(random));
    }
    best = std::max(best, f(x));
  }
  return best;
}

TEST(BayesianOptimization, FindsTheMaximumIn1D) {
  const std::vector<Dimension> dims = {{0, 128, 0}};
  const std::vector<Point> start = {{128}, {4}};
  double bayesRegret = 0;
  double randomRegret = 0;
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    const Search run = runBayes(dims, oneDim, start, 10, 1e-4, seed);
    EXPECT_NEAR(run.bestX[0], kOneDimBestX, 2.0) << "seed " << seed;
    bayesRegret += 1 - run.best;
    randomRegret += 1 - randomSearch(dims, oneDim, start, 10, seed);
  }
  // Summed over the seeds: the search is clearly better than luck.
  EXPECT_LT(bayesRegret, 0.2 * randomRegret) << bayesRegret << " vs random " << randomRegret;
}

TEST(BayesianOptimization, FindsTheMaximumIn2DWithTheTunersGrid) {
  const std::vector<Dimension> dims = {{0, 128, 1.0 / 1024}, {1, 100, 0.1}};
  // The tuner's start: the defaults, then Horovod's seed points.
  const std::vector<Point> start = {{128, 1}, {4, 5}, {32, 50}, {16, 25}, {8, 10}};
  double bayesRegret = 0;
  double randomRegret = 0;
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    const Search run = runBayes(dims, twoDim, start, 15, 1e-4, seed);
    EXPECT_GT(run.best, 0.97) << "seed " << seed << ": best at " << run.bestX[0] << ", "
                              << run.bestX[1];
    bayesRegret += 1 - run.best;
    randomRegret += 1 - randomSearch(dims, twoDim, start, 15, seed);
  }
  EXPECT_LT(bayesRegret, 0.5 * randomRegret) << bayesRegret << " vs random " << randomRegret;
}

TEST(BayesianOptimization, ImprovesWithTheDefaultNoise) {
  // The default noise (0.8) trusts single samples less: it still beats random search.
  const std::vector<Dimension> dims = {{0, 128, 1.0 / 1024}, {1, 100, 0.1}};
  const std::vector<Point> start = {{128, 1}, {4, 5}, {32, 50}, {16, 25}, {8, 10}};
  double bayesRegret = 0;
  double randomRegret = 0;
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    bayesRegret += 1 - runBayes(dims, twoDim, start, 15, 0.8, seed).best;
    randomRegret += 1 - randomSearch(dims, twoDim, start, 15, seed);
  }
  EXPECT_LT(bayesRegret, randomRegret) << bayesRegret << " vs random " << randomRegret;
}

TEST(BayesianOptimization, DeterministicForASeed) {
  const std::vector<Dimension> dims = {{0, 128, 1.0 / 1024}, {1, 100, 0.1}};
  const std::vector<Point> start = {{128, 1}, {4, 5}};
  const Search a = runBayes(dims, twoDim, start, 12, 0.8, 42);
  const Search b = runBayes(dims, twoDim, start, 12, 0.8, 42);
  EXPECT_EQ(a.points, b.points);
  const Search c = runBayes(dims, twoDim, start, 12, 0.8, 43);
  EXPECT_NE(a.points, c.points);  // the seed matters
}

TEST(BayesianOptimization, NeverProposesASampledPoint) {
  // Continuous, and a function flat enough that EI would gladly resample its maximum.
  const std::vector<Dimension> dims = {{0, 1, 0}, {0, 1, 0}};
  const Search run = runBayes(
      dims, [](const Point& x) { return -std::abs(x[0] - 0.5); }, {{0.5, 0.5}}, 30, 0.8, 7);
  ASSERT_EQ(run.points.size(), 31u);
  EXPECT_EQ(std::set<Point>(run.points.begin(), run.points.end()).size(), run.points.size());
}

// With a minimum separation, no proposal lies within it of an earlier point in every
// dimension; without one (the same function, seed and start), some would.
TEST(BayesianOptimization, KeepsItsMinimumSeparation) {
  const std::vector<Dimension> dims = {{0, 128, 1.0 / 1024}, {1, 100, 0.1}};
  const Function f = [](const Point& x) { return 10.0 - std::abs(x[0] - 128) / 64 - x[1] / 50; };
  auto closest = [&](const std::vector<Point>& points) {
    double nearest = 1;
    for (size_t i = 1; i < points.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        double apart = 0;  // L-infinity, in fractions of the box
        for (size_t d = 0; d < dims.size(); ++d) {
          apart = std::max(apart,
                           std::abs(points[i][d] - points[j][d]) / (dims[d].upper - dims[d].lower));
        }
        nearest = std::min(nearest, apart);
      }
    }
    return nearest;
  };
  BayesianOptimization separated(dims, 0.8, 3, 0.02);
  BayesianOptimization plain(dims, 0.8, 3);
  std::vector<Point> withSeparation = {{128, 1}}, without = {{128, 1}};
  separated.addSample(withSeparation[0], f(withSeparation[0]));
  plain.addSample(without[0], f(without[0]));
  for (int i = 0; i < 15; ++i) {
    for (auto [bo, points] : {std::pair{&separated, &withSeparation}, {&plain, &without}}) {
      const auto x = bo->nextSample();
      ASSERT_TRUE(x.has_value());
      bo->addSample(*x, f(*x));
      points->push_back(*x);
    }
  }
  EXPECT_GE(closest(withSeparation), 0.02);
  EXPECT_LT(closest(without), 0.02);
}

TEST(BayesianOptimization, ExhaustsACoarseGridWithoutRepeating) {
  // 11 grid points: 10 proposals after the start cover them, then there is nothing left.
  const std::vector<Dimension> dims = {{0, 10, 1}};
  BayesianOptimization bo(dims, 0.8, 3);
  bo.addSample({4.2}, 1.0);  // off the grid: its nearest grid point, 4, counts as sampled
  std::set<double> seen;
  for (int i = 0; i < 10; ++i) {
    const auto x = bo.nextSample();
    ASSERT_TRUE(x.has_value()) << "proposal " << i;
    const double v = (*x)[0];
    EXPECT_EQ(v, std::round(v)) << "off the grid";
    EXPECT_NE(v, 4.0);
    EXPECT_TRUE(seen.insert(v).second) << v << " proposed twice";
    bo.addSample(*x, -std::abs(v - 7));
  }
  EXPECT_FALSE(bo.nextSample().has_value());
}

TEST(BayesianOptimization, ProposalsStayOnTheGridAndInTheBox) {
  const std::vector<Dimension> dims = {{0, 128, 1.0 / 1024}, {1, 100, 0.1}};
  // The maximum lies outside the box, so the search presses against its edges.
  const Search run = runBayes(
      dims, [](const Point& x) { return x[0] + x[1]; }, {{64, 50}}, 15, 0.8, 9);
  for (const Point& x : run.points) {
    EXPECT_GE(x[0], 0);
    EXPECT_LE(x[0], 128);
    EXPECT_GE(x[1], 1);
    EXPECT_LE(x[1], 100);
    EXPECT_NEAR(x[0] * 1024, std::round(x[0] * 1024), 1e-6);
    EXPECT_NEAR(x[1] * 10, std::round(x[1] * 10), 1e-6);
  }
  EXPECT_GT(run.best, 0.95 * 228);
}

}  // namespace
}  // namespace zen::controller
