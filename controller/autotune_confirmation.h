#pragma once

// The autotuner's confirmation (Zen's own; Horovod has none), after the search
// (controller/parameter_manager.h): the search's best point (the candidate) against the
// configured values (the incumbent) in `pairs` pairs of ordinary samples, one of each point
// back to back. The candidate is kept only if it wins every pair (ratio
// score(candidate) / score(incumbent) > 1) and the median ratio exceeds 1 + kConfirmMargin;
// else the incumbent is. Every pair, because a pair's noise is itself several percent: on the
// word-level LM a candidate that runs the very same buckets as the configured values (any
// fusion threshold above the model's 8 MB) scored 1.02, 0.95 and 1.47 in its pairs, and the
// median alone kept it; a candidate with no real effect wins all of 3 pairs 1 time in 8.
//
// Why: the score of one point drifts within a run (warm caches, the allocator, the machine) by
// up to 2x, more than the knobs' effect (5-9 %; docs/BENCHMARKS.md "Autotune"), and the search
// compares scores taken up to the whole run apart. A pair's samples are adjacent (but for the
// one the manager discards after a switch), so its ratio carries a sample's drift, not the
// run's. The order alternates from pair to pair (A B, B A, A B, ...: candidate first, then
// incumbent first), so a linear drift's share is equal and opposite in consecutive pairs and
// cancels in an even number of pairs; an odd number keeps one pair's share, and the first pair
// runs the candidate first so that share counts against the candidate while scores rise, as
// they do while a job warms up.
//
// Only the search's best is confirmed, not the runner-up after it: under drift the search's
// ranking is what cannot be trusted, and each further candidate costs 2 x pairs samples and
// one more chance for noise to pass the margin.
//
// A pair in which the incumbent scored 0 has ratio infinity (1 when both did): no bytes moved.

#include <cstddef>
#include <utility>
#include <vector>

#include "core/message.h"

namespace zen::controller {

class AutotuneConfirmation {
 public:
  // A median ratio within 1 % of 1 is a tie, and a tie keeps the configured values, the ones
  // the user chose: the effects worth a change were 5-9 % (docs/BENCHMARKS.md), while a
  // smaller margin lets the noise left in the median of a few pairs pick the change.
  static constexpr double kConfirmMargin = 0.01;

  // pairs >= 1; candidate != incumbent.
  AutotuneConfirmation(const TunedParameters& candidate,
                       const TunedParameters& incumbent,
                       int pairs);

  const TunedParameters& candidate() const { return candidate_; }
  const TunedParameters& incumbent() const { return incumbent_; }
  // Whether the next sample is the candidate's: A B, B A, A B, ...
  bool candidateNext() const;
  const TunedParameters& next() const { return candidateNext() ? candidate_ : incumbent_; }
  // The score (bytes per second) of the sample taken at next().
  void add(double score);
  bool complete() const { return samples_.size() == 2 * pairs_; }
  // The samples so far, in the order taken: the point and its score.
  const std::vector<std::pair<TunedParameters, double>>& samples() const { return samples_; }
  // score(candidate) / score(incumbent) of each complete pair, in order.
  std::vector<double> ratios() const;
  // complete() only: the median of ratios(), and the point kept: the candidate when every
  // ratio exceeds 1 and the median 1 + kConfirmMargin.
  double medianRatio() const;
  const TunedParameters& kept() const;

 private:
  TunedParameters candidate_;
  TunedParameters incumbent_;
  size_t pairs_;
  std::vector<std::pair<TunedParameters, double>> samples_;
};

}  // namespace zen::controller
