#pragma once

// ZEN_SCHEME=auto (ALGORITHMS.md §2): the paper profiles the first iterations and keeps the
// faster of Balanced Parallelism (zen) and Hierarchical Centralization (hc). Which one wins
// depends on density, overlap and densification, which only the data shows. We also profile
// agsparse (ZEN_AUTO_SCHEMES, default zen,hc,agsparse): at few ranks and few rows its single
// allgather beats both (docs/BENCHMARKS.md). Every candidate is lossless and serves both the
// sparse and the dense output, so none is ever excluded for a bucket's output mode.
//
// Per bucket signature (its tensor names, rows and dtype: the same on every rank, since every
// rank runs the same plan), the first k x P calls that exchange rows run the k candidates
// round-robin (zen, hc, agsparse, zen, ...); each rank keeps the fastest time it saw per
// candidate (the first call also pays for allocation). After the last, one allreduce of the k
// times (summed over ranks, so identical bits everywhere) picks the scheme for every later
// call, a tie going to the earlier candidate: all ranks decide the same, which a rank's own
// clock could not guarantee. P = 0 or a single candidate: the first candidate, unprofiled.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/config.h"
#include "core/message.h"
#include "core/status.h"
#include "ops/transport.h"

namespace zen::ops {

struct SyncStats;  // ops/sparse_allreduce.h

class AutoScheme {
 public:
  // candidates: the schemes profiled, in profiling and tie-break order (Config::parse checks
  // ZEN_AUTO_SCHEMES; an empty list means zen). profileCalls = P; signatures beyond maxKeys run
  // the first candidate without profiling (a bound on memory when bucket compositions keep
  // changing; deterministic, so ranks still agree).
  AutoScheme(std::vector<Scheme> candidates, int profileCalls, size_t maxKeys = 4096);

  // The bucket's signature.
  static std::string key(const Response& response);

  // The scheme for this bucket's next call.
  Scheme next(const std::string& key) const;

  // After a successful call of `scheme` (the one next() gave) that exchanged rows, taking
  // `seconds` on this rank. Every rank calls it for the same calls in the same order: the
  // last profiling call makes it a collective over `transport` (one allreduce of k doubles).
  Status record(const std::string& key, Scheme scheme, double seconds, Transport& transport);
  // The same from a successful call's stats (the scheme that ran, its seconds); a call that
  // exchanged no rows (totalNnz 0, identical on every rank) is no sample and changes nothing.
  Status record(const std::string& key, const SyncStats& stats, Transport& transport);

  // The agreed choice, once profiling ended.
  std::optional<Scheme> chosen(const std::string& key) const;

  const std::vector<Scheme>& candidates() const { return candidates_; }

 private:
  struct Profile {
    int samples = 0;           // calls recorded so far
    std::vector<double> best;  // fastest seconds per candidate on this rank
    std::optional<Scheme> chosen;
  };

  bool profiles() const { return profileCalls_ > 0 && candidates_.size() > 1; }

  const std::vector<Scheme> candidates_;
  const int profileCalls_;
  const size_t maxKeys_;
  std::unordered_map<std::string, Profile> profiles_;
};

}  // namespace zen::ops
