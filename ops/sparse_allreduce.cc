// The sparse allreduce dispatcher (CONVENTIONS.md §2): validate, agree, short-circuit, pick.
//
// Steps on every rank:
//   1. local checks: CPU tensor, known dtype / op / scheme, rowSize in [1, 2^31], buffers, and
//      every index in [0, numRows) (the first bad one is named).
//   2. size == 1: coalesce (dense scheme: densify) locally; Average divides by 1. No wire.
//   3. every rank's call summary (ops/call_summary.h; ops/wire_format.h CallInfo: shape, dtype,
//      op, scheme, seed, nnz and, on failure, the error) reaches every rank in the call's first
//      collective, one alltoallv on every scheme. zen, agsparse and blocks carry it at the head
//      of their first message (zen's and blocks' Push, agsparse's gather): no round of its own.
//      hc and dense send it alone first (their first exchange cannot carry it: see
//      call_summary.h). Every rank sees every failure and every disagreement before it reads a
//      payload, so all return the same kInvalidArgument naming the rank; none is left waiting
//      in a collective the others never enter.
//   4. no non-zero on any rank: empty (or zero dense) output, no more wire. The folding
//      schemes learn it in their first exchange, which then carried the summaries only, and
//      stop there.
//   5. kAuto resolves to zen (the paper's winner in practice; the CPU executor chooses among
//      zen, hc and agsparse by profiling, ops/auto_scheme.h); run the scheme; fill SyncStats.
// Rounds per call: zen 2 (Push, Pull), agsparse 1, blocks 2 (Push, Pull); hc and dense 1 +
// their own.
// Bytes on the wire per rank: (n - 1) x 56 sent and received for the summaries (plus the error
// text, padded to 8 bytes, when a rank failed), then the scheme's payloads (see its file).
#include "ops/sparse_allreduce.h"

#include <fmt/format.h>

#include "core/nonzero.h"
#include "ops/call_summary.h"
#include "ops/sparse_rows.h"

namespace zen::ops {
namespace {

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Status checkOutputTensors(const SparseAllreduceOptions& o) {
  const SparseView& in = o.input;
  if (o.denseOutputTensors.empty()) return Status::ok();
  ZEN_CHECK_ARG(o.denseOutput, "dense output tensors are given but the output is sparse");
  int64_t elements = 0;
  for (size_t i = 0; i < o.denseOutputTensors.size(); ++i) {
    const DenseView& out = o.denseOutputTensors[i];
    ZEN_CHECK_ARG(out.data != nullptr || out.shape.numElements() == 0,
                  "dense output tensor {} has no data", i);
    ZEN_CHECK_ARG(out.device.kind == Device::Kind::kCpu,
                  "dense output tensor {} is on {}; the CPU sparse allreduce needs host memory", i,
                  out.device.toString());
    ZEN_CHECK_ARG(out.dtype == in.dtype && out.shape.numElements() % in.rowSize == 0,
                  "dense output tensor {} ({} {}) is no whole number of rows of {} {}", i,
                  out.shape.numElements(), dataTypeName(out.dtype), in.rowSize,
                  dataTypeName(in.dtype));
    elements += out.shape.numElements();
  }
  ZEN_CHECK_ARG(elements == in.numRows * in.rowSize,
                "the dense output tensors hold {} elements, not {} rows of {}", elements,
                in.numRows, in.rowSize);
  return Status::ok();
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
  ZEN_CHECK_ARG(resolveScheme(o.scheme) != Scheme::kZen || in.nnz < (int64_t{1} << 32) - 1,
                "{} entries exceed zen's 2^32 - 1 per call", in.nnz);
  ZEN_RETURN_IF_ERROR(checkOutputTensors(o));
  return validateSparse(in);
}

// Step 2 (and the math of every scheme at n = 1).
Status runLocal(const SparseAllreduceOptions& o, Scheme scheme, SparseAllreduceResult* result) {
  SparseTensor coalesced;
  ZEN_RETURN_IF_ERROR(coalesceRows({o.input}, 1, &coalesced, coalesceScratch(o)));
  if (scheme != Scheme::kDense) {
    result->stats.outputNnz = coalesced.nnz();
    if (o.denseOutput) {
      scatterToDense(coalesced, denseOutputRows(o, result), o.pool);
      result->sparse = emptyLike(o.input);
    } else {
      result->sparse = std::move(coalesced);
    }
    return Status::ok();
  }
  scatterToDense(coalesced, denseOutputRows(o, result), o.pool);
  if (o.denseOutput) {
    result->sparse = emptyLike(o.input);
    result->stats.outputNnz = o.input.numRows;
    return Status::ok();
  }
  DenseView view;  // the sparse output's dense sum is result->dense, one block
  view.data = result->dense.data();
  view.dtype = o.input.dtype;
  view.shape = TensorShape({o.input.numRows, o.input.rowSize});
  ZEN_RETURN_IF_ERROR(extractNonzeroRows(view, &result->sparse));
  result->dense.clear();
  result->stats.outputNnz = result->sparse.nnz();
  return Status::ok();
}

// The schemes whose first exchange carries the call summary (steps 3-4 inside them).
bool foldsSummary(Scheme scheme) {
  return scheme == Scheme::kZen || scheme == Scheme::kAgSparse || scheme == Scheme::kBlocks;
}

Status runFolded(const SparseAllreduceOptions& o,
                 Scheme scheme,
                 const CallInfo& summary,
                 SparseAllreduceResult* result) {
  switch (scheme) {
    case Scheme::kZen:
      return sparseAllreduceZen(o, summary, result);
    case Scheme::kAgSparse:
      return sparseAllreduceAgSparse(o, summary, result);
    case Scheme::kBlocks:
      return sparseAllreduceBlocks(o, summary, result);
    default:
      break;
  }
  return ZEN_ERROR(StatusCode::kInternal, "sparse allreduce: scheme {} does not fold the summary",
                   schemeName(scheme));
}

// After the dispatcher's summary round.
Status runScheme(const SparseAllreduceOptions& o, Scheme scheme, SparseAllreduceResult* result) {
  switch (scheme) {
    case Scheme::kDense:
      return sparseAllreduceDense(o, result);
    case Scheme::kHc:
      return sparseAllreduceHc(o, result);
    default:
      break;
  }
  return ZEN_ERROR(StatusCode::kInternal, "sparse allreduce: unresolved scheme {}",
                   schemeName(scheme));
}

// Step 4: nobody sent anything.
void emptyResult(const SparseAllreduceOptions& o, Scheme scheme, SparseAllreduceResult* result) {
  result->sparse = emptyLike(o.input);
  if (o.denseOutput) {
    zeroedDenseOutput(o, result);
    result->stats.outputNnz = scheme == Scheme::kDense ? o.input.numRows : 0;
  }
}

}  // namespace

DenseRows denseOutputRows(const SparseAllreduceOptions& options, SparseAllreduceResult* result) {
  const SparseView& in = options.input;
  const size_t rowBytes = in.rowBytes();
  if (options.denseOutputTensors.empty()) {
    // Zeroed by the vector (the schemes may rely on the zeroed one being so).
    result->dense.assign(static_cast<size_t>(in.numRows) * rowBytes, std::byte{0});
    return DenseRows(result->dense.data(), in.numRows, rowBytes);
  }
  std::vector<DensePiece> pieces;
  int64_t row = 0;
  for (const DenseView& t : options.denseOutputTensors) {
    const int64_t rows = t.shape.numElements() / in.rowSize;
    pieces.push_back(DensePiece{row, rows, static_cast<std::byte*>(t.data)});
    row += rows;
  }
  return DenseRows(std::move(pieces), rowBytes);
}

DenseRows zeroedDenseOutput(const SparseAllreduceOptions& options, SparseAllreduceResult* result) {
  DenseRows out = denseOutputRows(options, result);
  if (!options.denseOutputTensors.empty()) out.zero(options.pool);
  return out;
}

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
  const Scheme scheme = resolveScheme(options.scheme);
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
  } else if (foldsSummary(scheme)) {
    status = runFolded(options, scheme, describeCall(options, t.rank(), local), result);
    if (status.isOk() && result->stats.totalNnz == 0) emptyResult(options, scheme, result);
  } else {
    int64_t totalNnz = 0;
    status = agreeOnCall(t, describeCall(options, t.rank(), local), &totalNnz);
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
