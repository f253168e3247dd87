// The autotuner's confirmation: ABBA pairs and the median ratio
// (controller/autotune_confirmation.h).

#include "controller/autotune_confirmation.h"

#include <algorithm>
#include <limits>

#include "controller/median.h"

namespace zen::controller {
namespace {

// Pair p runs the candidate first when p is even: A B, B A, A B, ...
bool candidateFirst(size_t pair) {
  return pair % 2 == 0;
}

}  // namespace

AutotuneConfirmation::AutotuneConfirmation(const TunedParameters& candidate,
                                           const TunedParameters& incumbent,
                                           int pairs)
    : candidate_(candidate), incumbent_(incumbent), pairs_(static_cast<size_t>(pairs)) {}

bool AutotuneConfirmation::candidateNext() const {
  const size_t k = samples_.size();
  return (k % 2 == 0) == candidateFirst(k / 2);
}

void AutotuneConfirmation::add(double score) {
  samples_.emplace_back(next(), score);
}

std::vector<double> AutotuneConfirmation::ratios() const {
  std::vector<double> r;
  for (size_t k = 0; k + 1 < samples_.size(); k += 2) {
    const bool first = candidateFirst(k / 2);
    const double candidate = samples_[first ? k : k + 1].second;
    const double incumbent = samples_[first ? k + 1 : k].second;
    if (incumbent > 0) {
      r.push_back(candidate / incumbent);
    } else {
      r.push_back(candidate > 0 ? std::numeric_limits<double>::infinity() : 1.0);
    }
  }
  return r;
}

double AutotuneConfirmation::medianRatio() const {
  return median(ratios());
}

const TunedParameters& AutotuneConfirmation::kept() const {
  const std::vector<double> r = ratios();
  const bool everyPair = std::all_of(r.begin(), r.end(), [](double x) { return x > 1; });
  return everyPair && median(r) > 1 + kConfirmMargin ? candidate_ : incumbent_;
}

}  // namespace zen::controller
