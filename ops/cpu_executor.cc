// Runs one response of the plan on the CPU (ops/cpu_executor.h). Bytes on the wire per rank
// are the collective's: the sparse scheme's (ops/sparse_allreduce_<scheme>.cc), the ring
// allreduce's 2(n-1)/n of the bucket, the allgatherv's n-1 copies of this rank's rows, the
// root's n-1 copies of a broadcast.
#include "ops/cpu_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>

#include "ops/adasum.h"
#include "ops/alltoall.h"
#include "ops/exchange_checks.h"
#include "ops/reduce.h"
#include "ops/reducescatter.h"
#include "ops/sparse_rows.h"

namespace zen::ops {
namespace {

using TimePoint = Clock::time_point;

void addPhase(BucketReport* report, std::string name, TimePoint start, TimePoint end) {
  report->phases.push_back(ExecPhase{std::move(name), start, end});
}

// The schemes' phase names as timeline phases: Algorithm 1 is HASH (ARCHITECTURE.md
// "Timeline"); the rest upper-cased ("push" -> PUSH, "step 1 dense" -> STEP_1_DENSE).
std::string timelinePhase(const std::string& name) {
  if (name == "partition") return "HASH";
  std::string out = name;
  for (char& c : out) c = c == ' ' ? '_' : static_cast<char>(std::toupper(c));
  return out;
}

std::string bucketNames(const Response& r) {
  std::string out;
  const size_t shown = std::min<size_t>(r.tensorNames.size(), 4);
  for (size_t i = 0; i < shown; ++i) out += fmt::format("{}'{}'", i ? ", " : "", r.tensorNames[i]);
  if (r.tensorNames.size() > shown)
    out += fmt::format(" and {} more", r.tensorNames.size() - shown);
  return out;
}

size_t trailingBytes(const TensorShape& shape, DataType dtype) {
  size_t elements = 1;
  for (int d = 1; d < shape.rank(); ++d) elements *= static_cast<size_t>(shape.dim(d));
  return elements * dataTypeSize(dtype);
}

}  // namespace

CpuExecutorOptions CpuExecutorOptions::fromConfig(const Config& config) {
  CpuExecutorOptions o;
  o.scheme = config.scheme;
  o.autoProfileCalls = config.autoProfileCalls;
  o.autoSchemes = config.autoSchemes;
  o.seed = config.seed;
  o.hashFunctions = config.hashFunctions;
  o.memoryFactor = config.hashMemoryFactor;
  o.threads = config.threads;
  return o;
}

CpuExecutor::CpuExecutor(std::unique_ptr<Transport> transport, CpuExecutorOptions options)
    : CpuExecutor(std::move(transport), options, std::make_shared<ThreadPool>(options.threads)) {}

CpuExecutor::CpuExecutor(std::unique_ptr<Transport> transport,
                         CpuExecutorOptions options,
                         std::shared_ptr<ThreadPool> pool)
    : transport_(std::move(transport)),
      options_(options),
      pool_(std::move(pool)),
      autoScheme_(options.autoSchemes, options.autoProfileCalls) {}

Status CpuExecutor::addProcessSet(int32_t id, const std::vector<int32_t>& members) {
  ZEN_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, transport_->subset(members, id));
  sets_[id] = std::unique_ptr<CpuExecutor>(new CpuExecutor(std::move(transport), options_, pool_));
  return Status::ok();
}

void CpuExecutor::removeProcessSet(int32_t id) {
  sets_.erase(id);
}

Status CpuExecutor::execute(const Response& response,
                            const std::vector<TensorEntry*>& entries,
                            BucketReport* report) {
  if (response.processSet != kGlobalProcessSet) {
    const auto set = sets_.find(response.processSet);
    if (set == sets_.end()) {
      return ZEN_ERROR(StatusCode::kInternal, "{}: rank {} has no process set {}",
                       responseTypeName(response.type), transport_->rank(), response.processSet);
    }
    return set->second->run(response, entries, report);
  }
  return run(response, entries, report);
}

Status CpuExecutor::run(const Response& response,
                        const std::vector<TensorEntry*>& entries,
                        BucketReport* report) {
  ZEN_CHECK_ARG(entries.size() == response.tensorNames.size() &&
                    response.shapes.size() == response.tensorNames.size(),
                "{}: {} entries and {} shapes for {} tensors", responseTypeName(response.type),
                entries.size(), response.shapes.size(), response.tensorNames.size());
  for (const TensorEntry* e : entries) {
    ZEN_CHECK_ARG(e == nullptr || e->request.device.kind == Device::Kind::kCpu,
                  "tensor '{}' is on {}; the CPU executor needs host memory", e->request.name,
                  e->request.device.toString());
  }
  if (response.type == ResponseType::kSparseAllreduce) {
    // The bucket's index space: tensor i's rows start at rowOffsets[i], back to back.
    ZEN_CHECK_ARG(response.rowOffsets.size() == response.tensorNames.size(),
                  "sparse bucket: {} row offsets for {} tensors", response.rowOffsets.size(),
                  response.tensorNames.size());
    int64_t rows = 0;
    for (size_t i = 0; i < response.shapes.size(); ++i) {
      ZEN_CHECK_ARG(response.rowOffsets[i] == rows,
                    "sparse bucket: tensor {} starts at row {}, "
                    "expected {}",
                    i, response.rowOffsets[i], rows);
      rows += response.shapes[i].numRows();
    }
    ZEN_CHECK_ARG(response.totalRows == rows, "sparse bucket: {} total rows, expected {}",
                  response.totalRows, rows);
  }
  for (size_t i = 0; i < response.shapes.size(); ++i) {
    report->denseBytes += denseBytes(response, i);
  }
  const TransportCounters before = transport_->counters();
  Status status;
  switch (response.type) {
    case ResponseType::kAllreduce:
      status = allreduce(response, entries, report);
      break;
    case ResponseType::kSparseAllreduce:
      status = sparse(response, entries, report);
      break;
    case ResponseType::kAllgather:
      status = allgather(response, entries, report);
      break;
    case ResponseType::kBroadcast:
      status = broadcast(response, entries, report);
      break;
    case ResponseType::kAlltoall:
      status = alltoall(response, entries, report);
      break;
    case ResponseType::kReducescatter:
      status = reducescatter(response, entries, report);
      break;
    default:
      return ZEN_ERROR(StatusCode::kInternal, "the executor got a {} response",
                       responseTypeName(response.type));
  }
  if (report->bytesSent == 0 && report->bytesReceived == 0) {
    const TransportCounters after = transport_->counters();
    report->bytesSent = after.totalSent() - before.totalSent();
    report->bytesReceived = after.totalReceived() - before.totalReceived();
  }
  if (status.isOk()) return status;
  return Status(status.code(), fmt::format("{} of {}: {}", responseTypeName(response.type),
                                           bucketNames(response), status.message()));
}

Status CpuExecutor::allreduce(const Response& r,
                              const std::vector<TensorEntry*>& entries,
                              BucketReport* report) {
  if (r.reduceOp == ReduceOp::kAdasum) return adasum(r, entries, report);
  report->scheme = "allreduce";
  const size_t elementSize = dataTypeSize(r.dtype);
  const int divisor = r.reduceOp == zen::ReduceOp::kAverage ? transport_->size() : 1;
  size_t count = 0;
  for (const TensorShape& shape : r.shapes) count += static_cast<size_t>(shape.numElements());
  report->rows = static_cast<int64_t>(count);

  auto start = Clock::now();
  // One tensor of this rank: in place in its output, no fusion buffer.
  TensorEntry* only = entries.size() == 1 ? entries.front() : nullptr;
  void* buffer = nullptr;
  if (only != nullptr) {
    buffer = only->output.data;
    if (buffer != only->input.data && count > 0) {
      std::memcpy(buffer, only->input.data, count * elementSize);
    }
  } else {
    if (fusion_.size() < count * elementSize) fusion_.resize(count * elementSize);
    size_t at = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      const size_t bytes = static_cast<size_t>(r.shapes[i].numElements()) * elementSize;
      if (entries[i] != nullptr && bytes > 0) {
        std::memcpy(fusion_.data() + at, entries[i]->input.data, bytes);
      } else {
        // Joined: contributes op's identity (zeros for sum and average).
        fillIdentity(fusion_.data() + at, static_cast<size_t>(r.shapes[i].numElements()), r.dtype,
                     r.reduceOp);
      }
      at += bytes;
    }
    buffer = fusion_.data();
  }
  addPhase(report, "FUSE", start, Clock::now());

  start = Clock::now();
  const ReduceOp op = r.reduceOp == ReduceOp::kAverage ? ReduceOp::kSum : r.reduceOp;
  ZEN_RETURN_IF_ERROR(transport_->allreduce(buffer, count, r.dtype, op));
  divideInPlace(buffer, count, r.dtype, divisor);
  addPhase(report, wirePhaseName(*transport_, "allreduce"), start, Clock::now());

  if (only != nullptr) return Status::ok();
  start = Clock::now();
  size_t at = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const size_t bytes = static_cast<size_t>(r.shapes[i].numElements()) * elementSize;
    if (entries[i] != nullptr && bytes > 0) {
      std::memcpy(entries[i]->output.data, fusion_.data() + at, bytes);
    }
    at += bytes;
  }
  addPhase(report, "UNFUSE", start, Clock::now());
  return Status::ok();
}

Status CpuExecutor::adasum(const Response& r,
                           const std::vector<TensorEntry*>& entries,
                           BucketReport* report) {
  report->scheme = "adasum";
  AdasumOptions o;
  o.transport = transport_.get();
  o.dtype = r.dtype;
  o.scratch = &adasumScratch_;
  o.phases = &report->phases;
  for (size_t i = 0; i < entries.size(); ++i) {
    // Each tensor keeps its own bounds in the fused bucket: dot products are per tensor.
    AdasumTensor x;
    x.count = static_cast<size_t>(r.shapes[i].numElements());
    if (entries[i] != nullptr) {
      x.input = entries[i]->input.data;
      x.output = entries[i]->output.data;
    }
    report->rows += static_cast<int64_t>(x.count);
    o.tensors.push_back(x);
  }
  return ops::adasum(o);
}

Status CpuExecutor::sparse(const Response& r,
                           const std::vector<TensorEntry*>& entries,
                           BucketReport* report) {
  auto start = Clock::now();
  std::string badIndex;
  SparseAllreduceOptions o;
  o.transport = transport_.get();
  o.input = sparseBucket_.fuse(r, entries, &badIndex);
  o.op = r.reduceOp;
  const bool autoScheme = options_.scheme == Scheme::kAuto;
  const std::string autoKey = autoScheme ? AutoScheme::key(r) : std::string();
  o.scheme = autoScheme ? autoScheme_.next(autoKey) : options_.scheme;
  o.seed = options_.seed;
  o.hashFunctions = options_.hashFunctions;
  o.memoryFactor = options_.memoryFactor;
  o.pool = pool_.get();
  o.workspace = &workspace_;
  // A bucket whose tensors all have dense outputs (top-k compressed gradients, densified
  // embedding gradients): the scheme writes them in place, without the sorted sparse result
  // and the split. Their rows follow each other in the bucket as the tensors do.
  const bool inPlace = std::all_of(entries.begin(), entries.end(), [](const TensorEntry* e) {
    return e != nullptr && e->output.data != nullptr;
  });
  if (inPlace) {
    o.denseOutput = true;
    for (const TensorEntry* e : entries) o.denseOutputTensors.push_back(e->output);
  }
  report->nnz = o.input.nnz;
  report->rows = r.totalRows;
  addPhase(report, "FUSE", start, Clock::now());

  start = Clock::now();
  const Status status = sparseAllreduce(o, &sparseResult_);
  const SyncStats& stats = sparseResult_.stats;
  auto at = start;
  for (const auto& [name, seconds] : stats.phases) {
    const auto end =
        at + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    addPhase(report, timelinePhase(name), at, end);
    at = end;
  }
  report->scheme = schemeName(stats.scheme);
  report->imbalance = stats.imbalance;
  report->bytesSent = stats.bytesSent;
  report->bytesReceived = stats.bytesReceived;
  if (!status.isOk()) {
    if (badIndex.empty()) return status;
    return Status(status.code(), fmt::format("{} (here: {})", status.message(), badIndex));
  }
  if (autoScheme) ZEN_RETURN_IF_ERROR(autoScheme_.record(autoKey, stats, *transport_));

  if (inPlace) return Status::ok();
  start = Clock::now();
  SparseBucket::split(r, entries, sparseResult_.sparse, pool_.get());
  addPhase(report, "UNFUSE", start, Clock::now());
  return Status::ok();
}

Status CpuExecutor::allgather(const Response& r,
                              const std::vector<TensorEntry*>& entries,
                              BucketReport* report) {
  report->scheme = "allgather";
  const int n = transport_->size();
  const int me = transport_->rank();
  const size_t tensors = entries.size();
  ZEN_CHECK_ARG(r.gatherRows.size() == tensors * static_cast<size_t>(n),
                "allgather: {} row counts for {} tensors of {} ranks", r.gatherRows.size(), tensors,
                n);
  auto rowsOf = [&](size_t i, int rank) {
    return static_cast<size_t>(
        r.gatherRows[i * static_cast<size_t>(n) + static_cast<size_t>(rank)]);
  };
  std::vector<size_t> rowBytes(tensors);
  for (size_t i = 0; i < tensors; ++i) rowBytes[i] = trailingBytes(r.shapes[i], r.dtype);

  auto start = Clock::now();
  size_t mine = 0;
  for (size_t i = 0; i < tensors; ++i) mine += rowsOf(i, me) * rowBytes[i];
  if (fusion_.size() < mine) fusion_.resize(mine);
  size_t at = 0;
  for (size_t i = 0; i < tensors; ++i) {
    const size_t bytes = rowsOf(i, me) * rowBytes[i];
    if (entries[i] != nullptr && bytes > 0) {
      std::memcpy(fusion_.data() + at, entries[i]->input.data, bytes);
    }
    at += bytes;
  }
  addPhase(report, "FUSE", start, Clock::now());

  start = Clock::now();
  std::vector<ByteVector> gathered;
  ZEN_RETURN_IF_ERROR(transport_->allgatherv(fusion_.data(), mine, &gathered));
  addPhase(report, wirePhaseName(*transport_, "allgather"), start, Clock::now());

  start = Clock::now();
  for (int p = 0; p < n; ++p) {
    size_t expected = 0;
    for (size_t i = 0; i < tensors; ++i) expected += rowsOf(i, p) * rowBytes[i];
    if (gathered[static_cast<size_t>(p)].size() != expected) {
      return ZEN_ERROR(StatusCode::kIoError, "allgather: rank {} sent {} bytes, the plan says {}",
                       p, gathered[static_cast<size_t>(p)].size(), expected);
    }
  }
  std::vector<size_t> cursor(static_cast<size_t>(n), 0);  // where tensor i starts in each part
  for (size_t i = 0; i < tensors; ++i) {
    OpResult* out = entries[i] != nullptr ? &entries[i]->handle->result() : nullptr;
    if (out != nullptr) {
      out->gatheredShape = r.shapes[i];
      out->gathered.resize(static_cast<size_t>(r.shapes[i].numElements()) * dataTypeSize(r.dtype));
    }
    size_t written = 0;
    for (int p = 0; p < n; ++p) {
      const size_t bytes = rowsOf(i, p) * rowBytes[i];
      if (out != nullptr && bytes > 0) {
        std::memcpy(out->gathered.data() + written,
                    gathered[static_cast<size_t>(p)].data() + cursor[static_cast<size_t>(p)],
                    bytes);
      }
      written += bytes;
      cursor[static_cast<size_t>(p)] += bytes;
    }
  }
  addPhase(report, "UNFUSE", start, Clock::now());
  return Status::ok();
}

Status CpuExecutor::alltoall(const Response& r,
                             const std::vector<TensorEntry*>& entries,
                             BucketReport* report) {
  report->scheme = "alltoall";
  ZEN_ASSIGN_OR_RETURN(AlltoallRows rows,
                       checkAlltoall(r, entries, transport_->size(), transport_->rank()));
  TensorEntry* e = entries.front();
  AlltoallOptions o;
  o.transport = transport_.get();
  o.input = e->input.data;
  o.rowBytes = rows.rowBytes;
  o.sendRows = std::move(rows.sendRows);
  o.recvRows = rows.recvRows;
  o.phases = &report->phases;
  OpResult& out = e->handle->result();
  ZEN_RETURN_IF_ERROR(ops::alltoall(o, &out.gathered));
  out.gatheredShape = std::move(rows.outputShape);
  out.receivedSplits = std::move(rows.recvRows);
  report->rows = out.gatheredShape.dim(0);
  return Status::ok();
}

Status CpuExecutor::reducescatter(const Response& r,
                                  const std::vector<TensorEntry*>& entries,
                                  BucketReport* report) {
  report->scheme = "reducescatter";
  ReducescatterOptions o;
  // A joined rank's tensors have no input or output: it contributes the op's identity and
  // keeps nothing.
  ZEN_ASSIGN_OR_RETURN(o.tensors, checkReducescatter(r, entries));
  o.transport = transport_.get();
  o.dtype = r.dtype;
  o.op = r.reduceOp;
  o.scratch = &fusion_;
  o.phases = &report->phases;
  for (const ReducescatterTensor& x : o.tensors) report->rows += x.rows;
  return ops::reducescatter(o);
}

Status CpuExecutor::broadcast(const Response& r,
                              const std::vector<TensorEntry*>& entries,
                              BucketReport* report) {
  report->scheme = "broadcast";
  TensorEntry* e = entries.front();
  const size_t bytes = static_cast<size_t>(denseBytes(r, 0));
  void* data = nullptr;
  if (e != nullptr) {
    data = e->output.data;
    if (transport_->rank() == r.rootRank && data != e->input.data && bytes > 0) {
      std::memcpy(data, e->input.data, bytes);
    }
  } else {
    if (fusion_.size() < bytes) fusion_.resize(bytes);  // joined: receive and drop
    data = fusion_.data();
  }
  const auto start = Clock::now();
  ZEN_RETURN_IF_ERROR(transport_->broadcast(data, bytes, r.rootRank));
  addPhase(report, wirePhaseName(*transport_, "broadcast"), start, Clock::now());
  return Status::ok();
}

}  // namespace zen::ops
