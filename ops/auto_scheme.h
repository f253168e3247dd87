#pragma once

// ZEN_SCHEME=auto (ALGORITHMS.md §2): the paper profiles the first iterations and keeps the
// faster of Balanced Parallelism (zen) and Hierarchical Centralization (hc). Which one wins
// depends on density, overlap and densification, which only the data shows.
//
// Per bucket signature (its tensor names, rows and dtype: the same on every rank, since every
// rank runs the same plan), the first 2P calls that exchange rows alternate zen, hc, zen, ...;
// each rank keeps the fastest time it saw per scheme (the first call also pays for allocation).
// After the 2P-th, one allreduce of those times (summed over ranks, so identical bits
// everywhere) picks the scheme for every later call: all ranks decide the same, which a rank's
// own clock could not guarantee. P = 0 means auto is zen without profiling.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/config.h"
#include "core/message.h"
#include "core/status.h"
#include "ops/transport.h"

namespace zen::ops {

class AutoScheme {
 public:
  // profileCalls = P; signatures beyond maxKeys run zen without profiling (a bound on memory
  // when bucket compositions keep changing; deterministic, so ranks still agree).
  explicit AutoScheme(int profileCalls, size_t maxKeys = 4096);

  // The bucket's signature.
  static std::string key(const Response& response);

  // The scheme for this bucket's next call.
  Scheme next(const std::string& key) const;

  // After a successful call of `scheme` (the one next() gave) that exchanged rows, taking
  // `seconds` on this rank. Every rank calls it for the same calls in the same order: the
  // P-th sample of hc makes it a collective over `transport` (one allreduce of two doubles).
  Status record(const std::string& key, Scheme scheme, double seconds, Transport& transport);

  // The agreed choice, once profiling ended.
  std::optional<Scheme> chosen(const std::string& key) const;

 private:
  struct Profile {
    int samples = 0;          // calls recorded so far
    double best[2] = {0, 0};  // fastest seconds of zen, hc on this rank
    std::optional<Scheme> chosen;
  };

  const int profileCalls_;
  const size_t maxKeys_;
  std::unordered_map<std::string, Profile> profiles_;
};

}  // namespace zen::ops
