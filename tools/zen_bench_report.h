#pragma once

// zen-bench's output: one table row per (density, scheme) in nccl-tests style, and the same
// rows as JSON.

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tools/zen_bench_run.h"

namespace zen::bench {

// A table row: the ranks' samples reduced (means over ranks, modeled time from the busiest).
struct Row {
  double density = 0;
  Scheme scheme = Scheme::kDense;
  double sizeBytes = 0;  // dense-equivalent bytes |G| * rowSize * dtype size
  double count = 0;      // elements of the dense tensor
  double inputNnz = 0;   // mean over ranks
  double outputNnz = 0;
  double seconds = 0;  // mean over ranks of the mean iteration time
  double algbw = 0;    // GB/s: sizeBytes / seconds
  double busbw = 0;    // algbw * 2 (n - 1) / n
  double wirebw = 0;   // GB/s: mean bytes sent per rank / seconds
  double bytesPerRank = 0;
  double busiestBytes = 0;  // max over ranks of max(sent, received)
  double imbalance = 0;
  double speedup = 0;  // dense time / this time
  double modelSeconds = 0;
  double modelSpeedup = 0;
  double wrong = 0;  // summed over ranks
  // auto: the scheme every rank settled on; kAuto when the ranks disagree (a bug).
  Scheme autoChoice = Scheme::kAuto;
  // The scheme's phases (rank 0's names), mean seconds per call over ranks.
  std::vector<std::pair<std::string, double>> phases;
};

// all[rank][k] as runRank returns it; rows for the requested schemes only.
std::vector<Row> reduceSamples(const BenchOptions& options,
                               int ranks,
                               const std::vector<std::vector<Sample>>& all);

void printTable(std::FILE* out,
                const BenchOptions& options,
                int ranks,
                const std::string& transportName,
                const std::vector<Row>& rows);

Status writeJson(const std::string& path,
                 const BenchOptions& options,
                 int ranks,
                 const std::string& transportName,
                 const std::vector<Row>& rows);

}  // namespace zen::bench
