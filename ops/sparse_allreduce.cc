// The sparse allreduce dispatcher (CONVENTIONS.md §2): validate, agree, short-circuit, pick.
//
// Steps on every rank:
//   1. local checks: CPU tensor, known dtype / op / scheme, rowSize in [1, 2^31], buffers, and
//      every index in [0, numRows) (the first bad one is named).
//   2. size == 1: coalesce (dense scheme: densify) locally; Average divides by 1. No wire.
//   3. one allgatherv of every rank's call summary (ops/wire_format.h CallInfo: shape, dtype,
//      op, scheme, seed, nnz and, on failure, the error). Every rank sees every failure and
//      every disagreement, so all return the same kInvalidArgument naming the rank; none is
//      left waiting in a collective the others never enter.
//   4. no non-zero on any rank: empty (or zero dense) output, no more wire.
//   5. kAuto resolves to zen (the paper's winner in practice; the CPU executor chooses among
//      zen, hc and agsparse by profiling, ops/auto_scheme.h); run the scheme; fill SyncStats.
// Bytes on the wire per rank: (n - 1) x 56 sent and received in step 3 (plus the error text
// when a rank failed), then the scheme's (see its file).
#include "ops/sparse_allreduce.h"

#include <fmt/format.h>

#include "core/nonzero.h"
#include "ops/sparse_rows.h"
#include "ops/wire_format.h"

namespace zen::ops {
namespace {

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Scheme resolve(Scheme scheme) {
  return scheme == Scheme::kAuto ? Scheme::kZen : scheme;
}

Status checkLocal(const SparseAllreduceOptions& o) {
  const SparseView& in = o.input;
  ZEN_CHECK_ARG(in.device.kind == Device::Kind::kCpu,
                "the input is on {}; the CPU sparse allreduce needs host memory",
                in.device.toString());
  ZEN_CHECK_ARG(in.dtype <= DataType::kInt64, "unknown dtype code {}", static_cast<int>(in.dtype));
  ZEN_CHECK_ARG(o.op == ReduceOp::kSum || o.op == ReduceOp::kAverage,
                "sparse allreduce reduces with sum or average, not {} (op code {})",
                reduceOpName(o.op), static_cast<int>(o.op));
  ZEN_CHECK_ARG(o.scheme <= Scheme::kDense, "unknown scheme {}", static_cast<int>(o.scheme));
  ZEN_CHECK_ARG(in.rowSize >= 1 && in.rowSize <= kMaxWireRowSize,
                "row size must be in [1, {}], got {}", kMaxWireRowSize, in.rowSize);
  ZEN_CHECK_ARG(resolve(o.scheme) != Scheme::kZen || in.nnz < (int64_t{1} << 32) - 1,
                "{} entries exceed zen's 2^32 - 1 per call", in.nnz);
  return validateSparse(in);
}

// Step 2 (and the math of every scheme at n = 1).
Status runLocal(const SparseAllreduceOptions& o, Scheme scheme, SparseAllreduceResult* result) {
  SparseTensor coalesced;
  ZEN_RETURN_IF_ERROR(coalesceRows({o.input}, 1, &coalesced, coalesceScratch(o)));
  if (scheme != Scheme::kDense) {
    result->stats.outputNnz = coalesced.nnz();
    if (o.denseOutput) {
      scatterToDense(coalesced, &result->dense);
      result->sparse = emptyLike(o.input);
    } else {
      result->sparse = std::move(coalesced);
    }
    return Status::ok();
  }
  scatterToDense(coalesced, &result->dense);
  if (o.denseOutput) {
    result->sparse = emptyLike(o.input);
    result->stats.outputNnz = o.input.numRows;
    return Status::ok();
  }
  DenseView view;
  view.data = result->dense.data();
  view.dtype = o.input.dtype;
  view.shape = TensorShape({o.input.numRows, o.input.rowSize});
  ZEN_RETURN_IF_ERROR(extractNonzeroRows(view, &result->sparse));
  result->dense.clear();
  result->stats.outputNnz = result->sparse.nnz();
  return Status::ok();
}

CallInfo describe(const SparseAllreduceOptions& o, int rank, const Status& local) {
  CallInfo info;
  info.rank = rank;
  info.op = o.op;
  info.scheme = o.scheme;
  info.failed = !local.isOk();
  info.denseOutput = o.denseOutput;
  info.dtype = o.input.dtype;
  info.rowSize = o.input.rowSize;
  info.numRows = o.input.numRows;
  info.nnz = o.input.nnz;
  info.seed = o.seed;
  info.message = local.message();
  // Garbage the summary cannot carry only travels in a failed one.
  if (info.failed) {
    if (info.op > ReduceOp::kAverage) info.op = ReduceOp::kSum;
    if (info.scheme > Scheme::kDense) info.scheme = Scheme::kAuto;
  }
  return info;
}

// Step 3: the first call-wide error, identical on every rank; *totalNnz on success.
Status agree(const SparseAllreduceOptions& o, const Status& local, int64_t* totalNnz) {
  Transport& t = *o.transport;
  ByteVector mine;
  encodeCallInfo(describe(o, t.rank(), local), &mine);
  std::vector<ByteVector> all;
  ZEN_RETURN_IF_ERROR(t.allgatherv(mine.data(), mine.size(), &all));

  std::vector<CallInfo> infos;
  std::string failures;
  for (int p = 0; p < t.size(); ++p) {
    Result<CallInfo> info = decodeCallInfo(all[p].data(), all[p].size(), p);
    if (!info.isOk()) {
      return ZEN_ERROR(StatusCode::kIoError, "sparse allreduce: call summary from rank {}: {}", p,
                       info.status().message());
    }
    if (info.value().failed) {
      failures +=
          fmt::format("{}rank {}: {}", failures.empty() ? "" : "; ", p, info.value().message);
    }
    infos.push_back(std::move(info).value());
  }
  if (!failures.empty()) {
    return ZEN_ERROR(StatusCode::kInvalidArgument, "sparse allreduce: {}", failures);
  }
  const CallInfo& first = infos[0];
  *totalNnz = 0;
  for (const CallInfo& info : infos) {
    const int p = info.rank;
    ZEN_CHECK_ARG(info.numRows == first.numRows && info.rowSize == first.rowSize,
                  "sparse allreduce: rank {} passed {} rows x {}, rank 0 {} rows x {}", p,
                  info.numRows, info.rowSize, first.numRows, first.rowSize);
    ZEN_CHECK_ARG(info.dtype == first.dtype, "sparse allreduce: rank {} passed dtype {}, rank 0 {}",
                  p, dataTypeName(info.dtype), dataTypeName(first.dtype));
    ZEN_CHECK_ARG(info.op == first.op, "sparse allreduce: rank {} asked for {}, rank 0 for {}", p,
                  reduceOpName(info.op), reduceOpName(first.op));
    ZEN_CHECK_ARG(info.scheme == first.scheme,
                  "sparse allreduce: rank {} asked for scheme {}, rank 0 for {}", p,
                  schemeName(info.scheme), schemeName(first.scheme));
    ZEN_CHECK_ARG(resolve(first.scheme) != Scheme::kZen || info.seed == first.seed,
                  "sparse allreduce: rank {} uses zen seed {:#x}, rank 0 {:#x}", p, info.seed,
                  first.seed);
    *totalNnz += info.nnz;
  }
  return Status::ok();
}

Status runScheme(const SparseAllreduceOptions& o, Scheme scheme, SparseAllreduceResult* result) {
  switch (scheme) {
    case Scheme::kZen:
      return sparseAllreduceZen(o, result);
    case Scheme::kAgSparse:
      return sparseAllreduceAgSparse(o, result);
    case Scheme::kDense:
      return sparseAllreduceDense(o, result);
    case Scheme::kHc:
      return sparseAllreduceHc(o, result);
    case Scheme::kBlocks:
      return sparseAllreduceBlocks(o, result);
    case Scheme::kAuto:
      break;
  }
  return ZEN_ERROR(StatusCode::kInternal, "sparse allreduce: unresolved scheme {}",
                   schemeName(scheme));
}

// Step 4: nobody sent anything.
void emptyResult(const SparseAllreduceOptions& o, Scheme scheme, SparseAllreduceResult* result) {
  result->sparse = emptyLike(o.input);
  if (o.denseOutput) {
    result->dense.assign(static_cast<size_t>(o.input.numRows) * o.input.rowBytes(), std::byte{0});
    result->stats.outputNnz = scheme == Scheme::kDense ? o.input.numRows : 0;
  }
}

}  // namespace

SparseAllreduceWorkspace::SparseAllreduceWorkspace() = default;
SparseAllreduceWorkspace::~SparseAllreduceWorkspace() = default;

CoalesceScratch& SparseAllreduceWorkspace::coalesce() {
  if (coalesce_ == nullptr) coalesce_ = std::make_unique<CoalesceScratch>();
  return *coalesce_;
}

Status sparseAllreduce(const SparseAllreduceOptions& options, SparseAllreduceResult* result) {
  ZEN_CHECK_ARG(result != nullptr, "sparse allreduce needs a result");
  ZEN_CHECK_ARG(options.transport != nullptr, "sparse allreduce needs a transport");
  Transport& t = *options.transport;
  const auto start = Clock::now();
  const TransportCounters before = t.counters();
  const Scheme scheme = resolve(options.scheme);
  // Keep the result's capacity across calls; only its contents are reset.
  result->sparse.indices.clear();
  result->sparse.values.clear();
  result->sparse.numRows = options.input.numRows;
  result->sparse.rowSize = options.input.rowSize;
  result->sparse.dtype = options.input.dtype;
  result->dense.clear();
  result->stats = SyncStats{};
  result->stats.scheme = scheme;

  const Status local = checkLocal(options);
  Status status;
  if (t.size() == 1) {
    status = local.isOk()
                 ? runLocal(options, scheme, result)
                 : ZEN_ERROR(local.code(), "sparse allreduce: rank 0: {}", local.message());
    result->stats.phases.emplace_back("local", secondsSince(start));
  } else {
    int64_t totalNnz = 0;
    status = agree(options, local, &totalNnz);
    result->stats.totalNnz = totalNnz;
    result->stats.phases.emplace_back("validate", secondsSince(start));
    if (status.isOk() && totalNnz == 0) {
      emptyResult(options, scheme, result);
    } else if (status.isOk()) {
      status = runScheme(options, scheme, result);
    }
  }

  const TransportCounters after = t.counters();
  result->stats.bytesSent = after.totalSent() - before.totalSent();
  result->stats.bytesReceived = after.totalReceived() - before.totalReceived();
  result->stats.seconds = secondsSince(start);
  return status;
}

}  // namespace zen::ops
