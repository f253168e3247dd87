#pragma once

// zen-bench's measurement, independent of how the ranks were started: every rank builds its
// input, runs each scheme (warm-up, then timed iterations), checks its result against the
// dense scheme's, and the samples of all ranks are gathered over the transport itself so
// that rank 0 can print the table (zen_bench_report.h).

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/dtype.h"
#include "core/status.h"
#include "ops/sparse_allreduce.h"
#include "ops/transport.h"

namespace zen::bench {

// What a call produces: the sparse result; the dense tensor, written in place (as the
// runtime's buckets of dense outputs); or the sparse result split into the dense tensor
// afterwards (as the runtime's buckets with a sparse output, ops/cpu_sparse_bucket.h).
enum class BenchOutput { kSparse, kDense, kSplit };
const char* benchOutputName(BenchOutput output);

struct BenchOptions {
  std::vector<Scheme> schemes;  // in table order
  // auto (ops/auto_scheme.h): k x P profiling calls before the warm-up, then the chosen scheme.
  std::vector<Scheme> autoSchemes = defaultAutoSchemes();
  int autoProfileCalls = kDefaultAutoProfileCalls;
  std::string transport = "inprocess";
  bool mpiThreadMultiple = true;  // mpi: the thread level asked for (the library's default)
  int ranks = 8;                  // threads (in-process, TCP over loopback)
  int threads = 1;      // CPU threads per rank for the schemes (the runtime's ZEN_THREADS pool)
  bool phases = false;  // print each scheme's phases under the table
  int64_t rows = 1'000'000;  // |G|
  int64_t rowSize = 1;
  int tensors = 1;  // dense and split outputs: the rows as this many tensors (a fused bucket)
  std::vector<double> densities = {0.01};
  double overlap = 0.0;  // fraction of each rank's rows taken from one shared pool
  bool zipf = false;
  double zipfS = 1.1;
  DataType dtype = DataType::kFloat32;
  ops::ReduceOp op = ops::ReduceOp::kSum;
  BenchOutput output = BenchOutput::kDense;
  int iters = 20;
  int warmup = 5;
  uint64_t seed = 1;
  double linkGbps = 0.0;  // > 0: add the modeled time (busiest rank's bytes / link)
  double timeoutSeconds = 120.0;
  std::string json;  // file for the JSON rows, empty: none
};

// One rank's measurement of one (density, scheme); means per iteration.
struct Sample {
  double seconds = 0;
  double bytesSent = 0;
  double bytesReceived = 0;
  double imbalance = 0;
  double inputNnz = 0;    // distinct rows of this rank's input
  double outputNnz = 0;   // rows of the result (stats.outputNnz)
  double wrong = 0;       // elements that differ from the dense scheme's result
  double autoChoice = 0;  // auto: the Scheme it settled on, as a number (gathered as doubles)
  // The scheme's own phases (SyncStats::phases: zen's partition, push, aggregate, pull,
  // decode, ...), mean seconds per iteration; names as fixed arrays, the samples being
  // gathered as bytes. Phases past kMaxPhases are left out.
  static constexpr int kMaxPhases = 8;
  int phaseCount = 0;
  double phaseSeconds[kMaxPhases] = {};
  char phaseNames[kMaxPhases][16] = {};
};

// The schemes that run: the requested ones, with dense first even when not requested (it is
// the reference for #wrong and speedup).
std::vector<Scheme> runOrder(const BenchOptions& options);

// Runs every density x runOrder() on this rank and gathers the samples of all ranks:
// (*all)[rank][k], k over densities x runOrder() in that order. Every rank gets all of them.
Status runRank(ops::Transport& transport,
               const BenchOptions& options,
               std::vector<std::vector<Sample>>* all);

}  // namespace zen::bench
