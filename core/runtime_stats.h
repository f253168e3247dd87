#pragma once

// Counters the runtime keeps, per tensor name and in total, readable at any time through
// Runtime::stats(): what the tests check (fusion, the cache fast path) and what a user
// inspects without a timeline.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/message.h"

namespace zen {

struct TensorStats {
  uint64_t completed = 0;  // operations of this name that succeeded
  uint64_t failed = 0;
  uint64_t cacheHits = 0;  // times its response came from the response cache
  // Its share of its buckets' data-plane bytes, by dense bytes.
  uint64_t bytesSent = 0;
  uint64_t bytesReceived = 0;
  std::map<std::string, double> phaseSeconds;  // NEGOTIATE, QUEUE, FUSE, PUSH, ...
  std::string lastScheme;
  double lastImbalance = 1.0;
  int64_t lastNnz = 0;
  int64_t lastBucket = -1;    // index of the bucket it last ran in (same on every rank)
  size_t lastBucketSize = 0;  // tensors in that bucket
};

struct RuntimeStats {
  uint64_t cycles = 0;
  uint64_t fastPathCycles = 0;  // plan from the cache alone: one AND, no gather
  uint64_t slowPathCycles = 0;
  uint64_t cacheHits = 0;        // tensors served from the response cache
  uint64_t bucketsExecuted = 0;  // data-plane collectives run (fused or not)
  uint64_t tensorsExecuted = 0;  // tensors in them
  uint64_t completed = 0;        // handles completed successfully (joins, barriers included)
  uint64_t failed = 0;
  uint64_t bytesSent = 0;  // data plane, this rank
  uint64_t bytesReceived = 0;
  std::map<std::string, double> phaseSeconds;       // summed over buckets
  std::map<std::string, uint64_t> bucketsByScheme;  // "zen", "ring allreduce", ...
  double maxImbalance = 1.0;
  uint64_t stallWarnings = 0;  // rank 0
  std::string lastStallWarning;
  // ZEN_AUTOTUNE: the plans that carried new parameters, and the latest (none: the configured
  // ZEN_FUSION_THRESHOLD and ZEN_CYCLE_TIME hold). The same on every rank.
  uint64_t parameterUpdates = 0;
  std::optional<TunedParameters> tunedParameters;
  std::map<std::string, TensorStats> tensors;
};

}  // namespace zen
