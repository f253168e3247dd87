// zen-bench's per-rank loop (see zen_bench_run.h). Inputs: integer-valued rows (exact sums
// in every dtype, so every scheme's result must equal the dense scheme's bit for bit), a
// shared pool for --overlap, uniform or Zipf-skewed indices.
#include "tools/zen_bench_run.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <unordered_set>

#include "ops/auto_scheme.h"
#include "ops/cpu_sparse_bucket.h"
#include "ops/sparse_rows.h"
#include "test/common/sparse_inputs.h"

namespace zen::bench {
namespace {

using ops::Clock;

// Draws distinct rows into *out until it holds `count`, skipping `taken` (and adding to it).
// Zipf's tail is thin: after many repeats the draws turn uniform so that count is reached.
void drawDistinct(const BenchOptions& o,
                  int64_t count,
                  std::mt19937_64& rng,
                  std::unordered_set<int64_t>* taken,
                  std::vector<int64_t>* out) {
  std::uniform_int_distribution<int64_t> uniform(0, o.rows - 1);
  int64_t misses = 0;
  const int64_t target = static_cast<int64_t>(out->size()) + count;
  while (static_cast<int64_t>(out->size()) < target) {
    const bool zipf = o.zipf && misses < 50 * count;
    const int64_t idx = zipf ? testing::zipfDraw(o.rows, o.zipfS, rng) : uniform(rng);
    if (taken->insert(idx).second) {
      out->push_back(idx);
    } else {
      ++misses;
    }
  }
}

// This rank's input: round(density |G|) distinct rows, the first round(overlap nnz) of them
// the same on every rank (a shared pool), the rest drawn with a per-rank seed.
SparseTensor makeInput(const BenchOptions& o, double density, int rank) {
  const auto nnz =
      std::clamp<int64_t>(std::llround(density * static_cast<double>(o.rows)), 0, o.rows);
  const auto shared =
      std::clamp<int64_t>(std::llround(o.overlap * static_cast<double>(nnz)), 0, nnz);
  std::unordered_set<int64_t> taken;
  taken.reserve(static_cast<size_t>(nnz) * 2);
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(nnz));
  std::mt19937_64 poolRng(o.seed);
  drawDistinct(o, shared, poolRng, &taken, &indices);
  std::mt19937_64 rng(o.seed * 7919 + 1 + static_cast<uint64_t>(rank));
  drawDistinct(o, nnz - shared, rng, &taken, &indices);
  std::shuffle(indices.begin(), indices.end(), rng);
  return testing::makeSparse(std::move(indices), o.rows, o.rowSize, o.dtype, rng);
}

// The result as dense bytes: the output tensor, or the sparse result scattered.
std::vector<std::byte> denseOf(const ops::SparseAllreduceResult& r,
                               const std::vector<std::byte>* outputTensor) {
  if (outputTensor != nullptr) return *outputTensor;
  std::vector<std::byte> dense(static_cast<size_t>(r.sparse.numRows) * r.sparse.rowBytes());
  ops::scatterToDense(r.sparse,
                      ops::DenseRows(dense.data(), r.sparse.numRows, r.sparse.rowBytes()));
  return dense;
}

// Elements whose bits differ (the reference is the dense scheme's result).
int64_t countWrong(const std::vector<std::byte>& got,
                   const std::vector<std::byte>& want,
                   size_t elementSize) {
  if (got.size() != want.size()) return static_cast<int64_t>(want.size() / elementSize);
  int64_t wrong = 0;
  for (size_t i = 0; i < want.size(); i += elementSize) {
    wrong += std::memcmp(got.data() + i, want.data() + i, elementSize) != 0 ? 1 : 0;
  }
  return wrong;
}

// Adds one call's phases to the sample's sums (names from the call, cut to fit).
void addPhases(const ops::SyncStats& stats, Sample* sample) {
  const int count = std::min<int>(static_cast<int>(stats.phases.size()), Sample::kMaxPhases);
  sample->phaseCount = std::max(sample->phaseCount, count);
  for (int i = 0; i < count; ++i) {
    const std::string& name = stats.phases[i].first;
    const size_t length = std::min(name.size(), sizeof(sample->phaseNames[i]) - 1);
    std::memcpy(sample->phaseNames[i], name.data(), length);
    sample->phaseNames[i][length] = '\0';
    sample->phaseSeconds[i] += stats.phases[i].second;
  }
}

// The dense output as o.tensors tensors of consecutive rows in `data` (a fused bucket's).
std::vector<DenseView> outputTensors(const BenchOptions& o, std::byte* data) {
  std::vector<DenseView> tensors;
  const int64_t perTensor = o.rows / o.tensors;
  for (int i = 0; i < o.tensors; ++i) {
    const int64_t first = i * perTensor;
    const int64_t rows = i + 1 == o.tensors ? o.rows - first : perTensor;
    tensors.push_back(
        DenseView{data + static_cast<size_t>(first * o.rowSize) * dataTypeSize(o.dtype), o.dtype,
                  TensorShape({rows, o.rowSize}), Device::cpu()});
  }
  return tensors;
}

// outputTensor: the dense output's memory (null for a sparse output).
Status runScheme(ops::Transport& t,
                 const BenchOptions& o,
                 const SparseTensor& input,
                 Scheme scheme,
                 ThreadPool* pool,
                 ops::SparseAllreduceWorkspace* workspace,
                 std::vector<std::byte>* outputTensor,
                 ops::SparseAllreduceResult* last,
                 Sample* sample) {
  ops::SparseAllreduceOptions options;
  options.transport = &t;
  options.pool = pool;
  options.input = input.view();
  options.op = o.op;
  options.scheme = scheme;
  const std::vector<DenseView> tensors =
      outputTensor != nullptr ? outputTensors(o, outputTensor->data()) : std::vector<DenseView>();
  options.denseOutput = o.output == BenchOutput::kDense;
  if (options.denseOutput) options.denseOutputTensors = tensors;
  options.workspace = workspace;
  // kSplit: the split of a bucket of these tensors.
  Response bucket;
  bucket.dtype = o.dtype;
  bucket.rowSize = o.rowSize;
  bucket.totalRows = o.rows;
  std::vector<TensorEntry> entryMemory(tensors.size());
  std::vector<TensorEntry*> entries;
  int64_t row = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    bucket.shapes.push_back(tensors[i].shape);
    bucket.rowOffsets.push_back(row);
    row += tensors[i].shape.numRows();
    entryMemory[i].output = tensors[i];
    entries.push_back(&entryMemory[i]);
  }
  auto call = [&]() -> Status {
    Status s = ops::sparseAllreduce(options, last);
    if (!s.isOk()) {
      return ZEN_ERROR(s.code(), "rank {}, scheme {}: {}", t.rank(), schemeName(options.scheme),
                       s.toString());
    }
    if (o.output == BenchOutput::kSplit) {
      const auto start = Clock::now();
      ops::SparseBucket::split(bucket, entries, last->sparse, pool);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      last->stats.phases.emplace_back("split", seconds);
    }
    return s;
  };
  if (scheme == Scheme::kAuto) {
    // As the executor profiles a bucket (untimed here, so that the timed loop measures what a
    // training run gets after its first k x P steps); every rank ends with the same choice.
    ops::AutoScheme profiler(o.autoSchemes, o.autoProfileCalls);
    const std::string key = "bench";
    const size_t profiling = o.autoSchemes.size() * static_cast<size_t>(o.autoProfileCalls);
    for (size_t i = 0; i < profiling && !profiler.chosen(key); ++i) {
      options.scheme = profiler.next(key);
      ZEN_RETURN_IF_ERROR(call());
      ZEN_RETURN_IF_ERROR(profiler.record(key, last->stats, t));
    }
    options.scheme = profiler.next(key);
    sample->autoChoice = static_cast<double>(options.scheme);
  }
  for (int i = 0; i < o.warmup; ++i) ZEN_RETURN_IF_ERROR(call());
  ZEN_RETURN_IF_ERROR(t.barrier());  // start the timed loop together
  const auto start = Clock::now();
  for (int i = 0; i < o.iters; ++i) {
    ZEN_RETURN_IF_ERROR(call());
    sample->bytesSent += static_cast<double>(last->stats.bytesSent);
    sample->bytesReceived += static_cast<double>(last->stats.bytesReceived);
    sample->imbalance += last->stats.imbalance;
    addPhases(last->stats, sample);
  }
  sample->seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double iters = std::max(1, o.iters);
  sample->seconds /= iters;
  sample->bytesSent /= iters;
  sample->bytesReceived /= iters;
  sample->imbalance /= iters;
  for (int i = 0; i < sample->phaseCount; ++i) sample->phaseSeconds[i] /= iters;
  sample->inputNnz = static_cast<double>(input.nnz());
  sample->outputNnz = static_cast<double>(last->stats.outputNnz);
  return Status::ok();
}

}  // namespace

const char* benchOutputName(BenchOutput output) {
  switch (output) {
    case BenchOutput::kSparse:
      return "sparse";
    case BenchOutput::kDense:
      return "dense";
    case BenchOutput::kSplit:
      return "split";
  }
  return "?";
}

std::vector<Scheme> runOrder(const BenchOptions& options) {
  std::vector<Scheme> order = {Scheme::kDense};
  for (Scheme s : options.schemes) {
    if (s != Scheme::kDense) order.push_back(s);
  }
  return order;
}

Status runRank(ops::Transport& t, const BenchOptions& o, std::vector<std::vector<Sample>>* all) {
  ZEN_CHECK_ARG(o.iters >= 1, "--iters must be at least 1, got {}", o.iters);
  const std::vector<Scheme> order = runOrder(o);
  const size_t elementSize = dataTypeSize(o.dtype);
  ZEN_CHECK_ARG(o.threads >= 1, "--threads must be at least 1, got {}", o.threads);
  // As the CPU executor: the rank's own thread plus threads - 1 workers (none for 1).
  std::unique_ptr<ThreadPool> pool;
  if (o.threads > 1) pool = std::make_unique<ThreadPool>(o.threads);
  ops::SparseAllreduceWorkspace workspace;
  const bool toTensor = o.output != BenchOutput::kSparse;
  std::vector<std::byte> outputTensor;
  if (toTensor) outputTensor.resize(static_cast<size_t>(o.rows * o.rowSize) * elementSize);
  std::vector<std::byte>* output = toTensor ? &outputTensor : nullptr;
  std::vector<Sample> mine;
  for (double density : o.densities) {
    const SparseTensor input = makeInput(o, density, t.rank());
    std::vector<std::byte> reference;
    for (Scheme scheme : order) {
      Sample sample;
      ops::SparseAllreduceResult last;
      // Poisoned: a scheme must write every element, whatever the last one left there.
      std::fill(outputTensor.begin(), outputTensor.end(), std::byte{0xa5});
      ZEN_RETURN_IF_ERROR(
          runScheme(t, o, input, scheme, pool.get(), &workspace, output, &last, &sample));
      std::vector<std::byte> dense = denseOf(last, output);
      if (scheme == Scheme::kDense) {
        reference = std::move(dense);
      } else {
        sample.wrong = static_cast<double>(countWrong(dense, reference, elementSize));
      }
      mine.push_back(sample);
    }
  }
  std::vector<ops::ByteVector> gathered;
  ZEN_RETURN_IF_ERROR(t.allgatherv(mine.data(), mine.size() * sizeof(Sample), &gathered));
  all->assign(gathered.size(), std::vector<Sample>(mine.size()));
  for (size_t r = 0; r < gathered.size(); ++r) {
    ZEN_CHECK_ARG(gathered[r].size() == mine.size() * sizeof(Sample),
                  "rank {} reported {} bytes of samples, expected {}", r, gathered[r].size(),
                  mine.size() * sizeof(Sample));
    std::memcpy((*all)[r].data(), gathered[r].data(), gathered[r].size());
  }
  return Status::ok();
}

}  // namespace zen::bench
