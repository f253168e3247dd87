#pragma once

// What the background loop needs from the data plane (ops/cpu_executor.h implements it on the
// CPU): run one response of the plan, a single tensor or a fused bucket, over this rank's
// entries. Joins, barriers and error responses never reach it; the loop completes those.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/message.h"
#include "core/status.h"
#include "core/tensor_queue.h"

namespace zen {

struct ExecPhase {
  std::string name;  // FUSE, HASH, PUSH, AGGREGATE, PULL, DECODE, ALLREDUCE, UNFUSE, ...
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::time_point end;
};

// What one bucket did on this rank: the timeline's phases and arguments, the stats' counters.
struct BucketReport {
  std::vector<ExecPhase> phases;  // in order, FUSE first
  uint64_t bytesSent = 0;         // data-plane payload bytes of this bucket
  uint64_t bytesReceived = 0;
  std::string scheme;      // the sparse scheme that ran, or the dense collective
  double imbalance = 1.0;  // the scheme's max/mean load (sparse)
  int64_t nnz = 0;         // rows this rank contributed (sparse)
  int64_t rows = 0;        // rows of the bucket's (virtual) tensor
  int64_t denseBytes = 0;  // dense bytes of the bucket, what the fusion threshold counts
};

class Executor {
 public:
  virtual ~Executor() = default;

  // entries[i] is this rank's entry for response.tensorNames[i], or null when this rank has
  // joined and did not post it: it then contributes zeros (allreduce), no rows (sparse,
  // allgather) or receives into scratch memory (broadcast). Outputs go into the entries
  // (output views, the handle's OpResult). An error fails the whole bucket; kIoError,
  // kTimeout and kAborted mean this rank's data plane is broken for good.
  virtual Status execute(const Response& response,
                         const std::vector<TensorEntry*>& entries,
                         BucketReport* report) = 0;
};

}  // namespace zen
