// The GPU sparse allreduce dispatcher (gpu_sparse_allreduce.h): local checks, nonzero
// extraction of a dense input, the call summary every rank allgathers through NCCL, the
// all-zero short-circuit, then one scheme file. Also the steps two schemes share.
#include "cuda/gpu_sparse_allreduce.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "cuda/cuda_check.h"
#include "cuda/elementwise.h"
#include "cuda/gpu_sparse_allreduce_internal.h"
#include "cuda/gpu_sparse_plan.h"
#include "cuda/index_map_kernels.h"

namespace zen::cuda {

size_t GpuSparseAllreduceWorkspace::State::heldBytes() const {
  size_t bytes = scratch.heldBytes() + extractor.scratchBytes() + blocks.heldBytes();
  if (partitioner != nullptr) bytes += partitioner->scratchBytes();
  for (const DeviceBuffer* b :
       {&extracted.indices,   &extracted.values, &lists.positions, &lists.values,
        &lists.deviceOffsets, &encoded.bitmap,   &encoded.values,  &recvPositions,
        &recvValues,          &recvIndices,      &owners,          &positions,
        &pullBitmaps,         &pullValues,       &denseScratch,    &summary,
        &hcIndices[0],        &hcIndices[1],     &hcValues[0],     &hcValues[1]}) {
    bytes += b->capacity();
  }
  return bytes;
}

GpuSparseAllreduceWorkspace::GpuSparseAllreduceWorkspace() = default;
GpuSparseAllreduceWorkspace::~GpuSparseAllreduceWorkspace() = default;

GpuSparseAllreduceWorkspace::State& GpuSparseAllreduceWorkspace::state() {
  if (state_ == nullptr) state_ = std::make_unique<State>();
  return *state_;
}

size_t GpuSparseAllreduceWorkspace::heldBytes() const {
  return state_ == nullptr ? 0 : state_->heldBytes();
}

GpuPhaseClock::GpuPhaseClock(ops::SyncStats* stats) : stats_(stats), last_(ops::Clock::now()) {}

void GpuPhaseClock::mark(const char* phase) {
  const auto now = ops::Clock::now();
  stats_->phases.emplace_back(phase, std::chrono::duration<double>(now - last_).count());
  last_ = now;
}

Status aggregateWhole(const std::vector<SparseView>& inputs,
                      GpuSparseAllreduceWorkspace::State& st,
                      cudaStream_t stream) {
  ZEN_CHECK_ARG(!inputs.empty(), "aggregateWhole: no input");
  const SparseView& first = inputs.front();
  ZEN_CHECK_ARG(static_cast<uint64_t>(first.numRows) <= std::numeric_limits<uint32_t>::max(),
                "the GPU agsparse, hc and dense schemes take at most 2^32 - 1 rows, found {}",
                first.numRows);
  const IndexMap map(static_cast<uint64_t>(first.numRows), 1, 0);
  ZEN_RETURN_IF_ERROR(st.aggregator.reset(map, 0, first.dtype, first.rowSize, stream));
  int64_t most = 0;
  for (const SparseView& in : inputs) most = std::max(most, in.nnz);
  if (most == 0) return Status::ok();
  const size_t n = static_cast<size_t>(most);
  ZEN_RETURN_IF_ERROR(st.owners.reserve(n * sizeof(uint32_t)));
  ZEN_RETURN_IF_ERROR(st.positions.reserve(n * sizeof(uint32_t)));
  ZEN_RETURN_IF_ERROR(st.summary.reserve(sizeof(unsigned long long)));
  auto* bad = st.summary.as<unsigned long long>();
  // Stream order: each view's positions are read by its add() before the next view's
  // placement overwrites them.
  for (const SparseView& in : inputs) {
    if (in.nnz == 0) continue;
    ZEN_CHECK_CUDA(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));
    ZEN_RETURN_IF_ERROR(launchPlaceIndices(map, in.indices, in.nnz, st.owners.as<uint32_t>(),
                                           st.positions.as<uint32_t>(), bad, stream));
    ZEN_RETURN_IF_ERROR(
        st.aggregator.add(st.positions.as<const uint32_t>(), in.values, in.nnz, stream));
  }
  return Status::ok();
}

Status decodeWhole(const GpuSchemeCall& call, double scale, GpuSparseAllreduceResult* result) {
  GpuSparseAllreduceWorkspace::State& st = *call.state;
  const SparseView& in = call.input;
  const cudaStream_t stream = call.options->stream;
  const IndexMap map(static_cast<uint64_t>(in.numRows), 1, 0);
  ZEN_RETURN_IF_ERROR(gpuEncode(st.aggregator, scale, &st.encoded, &st.scratch, stream));
  if (call.options->denseOutput) {
    const DenseView& out = call.denseOut;
    ZEN_CHECK_CUDA(cudaMemsetAsync(out.data, 0, out.bytes(), stream));
    return gpuDecodeToDense(map, 0, st.encoded.bitmap.as<const uint8_t>(), st.encoded.bitmapBytes,
                            st.encoded.values.data(), st.encoded.valueBytes(), in.dtype, in.rowSize,
                            out, &st.scratch, stream);
  }
  GpuSparse& s = result->sparse;
  s.numRows = in.numRows;
  s.rowSize = in.rowSize;
  s.dtype = in.dtype;
  s.deviceIndex = in.device.index;
  ZEN_RETURN_IF_ERROR(s.reserve(std::max<int64_t>(st.encoded.count, 1)));
  s.nnz = st.encoded.count;
  return gpuDecodeToSparse(map, 0, st.encoded.bitmap.as<const uint8_t>(), st.encoded.bitmapBytes,
                           st.encoded.values.data(), st.encoded.valueBytes(), in.dtype, in.rowSize,
                           s.indices.as<int64_t>(), s.values.data(), &st.scratch, stream);
}

namespace {

bool validDtype(DataType d) {
  return static_cast<uint8_t>(d) <= static_cast<uint8_t>(DataType::kInt64);
}

// Local checks; *input becomes the device COO tensor to reduce.
Status prepareInput(const GpuSparseAllreduceOptions& o,
                    GpuSparseAllreduceWorkspace::State& st,
                    SparseView* input) {
  const int device = o.comm->deviceIndex();
  const bool dense = o.denseInput.data != nullptr;
  if (dense) {
    ZEN_CHECK_ARG(o.input.indices == nullptr && o.input.values == nullptr && o.input.nnz == 0,
                  "gpu sparse allreduce: pass a sparse input or a dense input, not both");
    ZEN_CHECK_ARG(o.denseInput.device == Device::cuda(device),
                  "gpu sparse allreduce: dense input on {}, the communicator is on cuda:{}",
                  o.denseInput.device.toString(), device);
    ZEN_CHECK_ARG(validDtype(o.denseInput.dtype), "gpu sparse allreduce: bad dtype {}",
                  static_cast<int>(o.denseInput.dtype));
    ZEN_RETURN_IF_ERROR(st.extractor.extract(o.denseInput, &st.extracted, o.stream));
    *input = st.extracted.view();
    return Status::ok();
  }
  const SparseView& in = o.input;
  ZEN_CHECK_ARG(in.device == Device::cuda(device),
                "gpu sparse allreduce: input on {}, the communicator is on cuda:{}",
                in.device.toString(), device);
  ZEN_CHECK_ARG(validDtype(in.dtype), "gpu sparse allreduce: bad dtype {}",
                static_cast<int>(in.dtype));
  ZEN_CHECK_ARG(in.rowSize >= 1 && in.numRows >= 0 && in.nnz >= 0,
                "gpu sparse allreduce: numRows {}, rowSize {}, nnz {}", in.numRows, in.rowSize,
                in.nnz);
  ZEN_CHECK_ARG(in.nnz == 0 || (in.indices != nullptr && in.values != nullptr),
                "gpu sparse allreduce: null buffers for {} entries", in.nnz);
  *input = in;
  return Status::ok();
}

// Allgathers every rank's call summary; the same verdict on every rank.
Status agreeOnCall(const GpuSparseAllreduceOptions& o,
                   const SparseView& in,
                   GpuSparseAllreduceWorkspace::State& st,
                   uint64_t* totalNnz) {
  NcclComm& comm = *o.comm;
  const int n = comm.size();
  const size_t sumBytes = sizeof(GpuCallSummary);
  const size_t badOffset = (n + 1) * sumBytes;
  ZEN_RETURN_IF_ERROR(st.summary.reserve(badOffset + 2 * sizeof(unsigned long long)));
  ZEN_RETURN_IF_ERROR(st.hostSummary.reserve(badOffset + 2 * sizeof(unsigned long long)));
  auto* dev = st.summary.as<unsigned char>();
  auto* host = st.hostSummary.as<unsigned char>();
  auto* devBad = reinterpret_cast<unsigned long long*>(dev + badOffset);
  auto* hostBad = reinterpret_cast<unsigned long long*>(host + badOffset);

  // The first out-of-range entry, and its index.
  *hostBad = ~0ull;
  if (in.nnz > 0) {
    ZEN_CHECK_CUDA(cudaMemsetAsync(devBad, 0xff, sizeof(unsigned long long), o.stream));
    ZEN_RETURN_IF_ERROR(launchFindBadIndex(in.indices, in.nnz, in.numRows, devBad, o.stream));
    ZEN_CHECK_CUDA(cudaMemcpyAsync(hostBad, devBad, sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost, o.stream));
    ZEN_RETURN_IF_ERROR(comm.wait(o.stream, "index check"));
  }
  GpuCallSummary mine;
  mine.numRows = static_cast<uint64_t>(in.numRows);
  mine.rowSize = static_cast<uint64_t>(in.rowSize);
  mine.dtype = static_cast<uint64_t>(in.dtype);
  mine.op = static_cast<uint64_t>(o.op);
  mine.scheme = static_cast<uint64_t>(o.scheme);
  mine.seed = o.seed;
  mine.nnz = static_cast<uint64_t>(in.nnz);
  if (*hostBad != ~0ull) {
    mine.badEntry = *hostBad;
    // On the own stream (idle after the wait above), not the legacy default stream, which
    // would also wait for the framework's work there; hostBad[1] is the pinned slot for it.
    ZEN_CHECK_CUDA(cudaMemcpyAsync(hostBad + 1, in.indices + *hostBad, sizeof(int64_t),
                                   cudaMemcpyDeviceToHost, o.stream));
    ZEN_RETURN_IF_ERROR(comm.wait(o.stream, "bad index read"));
    int64_t index = 0;
    std::memcpy(&index, hostBad + 1, sizeof(index));
    mine.badIndex = index;
  }
  std::memcpy(host, &mine, sumBytes);
  ZEN_CHECK_CUDA(cudaMemcpyAsync(dev, host, sumBytes, cudaMemcpyHostToDevice, o.stream));
  ZEN_RETURN_IF_ERROR(comm.allgather(dev, dev + sumBytes, sumBytes, o.stream));
  ZEN_CHECK_CUDA(cudaMemcpyAsync(host + sumBytes, dev + sumBytes, n * sumBytes,
                                 cudaMemcpyDeviceToHost, o.stream));
  ZEN_RETURN_IF_ERROR(comm.wait(o.stream, "call summary allgather"));
  std::vector<GpuCallSummary> all(static_cast<size_t>(n));
  std::memcpy(all.data(), host + sumBytes, n * sumBytes);
  return checkGpuCallSummaries(all, totalNnz);
}

Status runSparseAllreduce(const GpuSparseAllreduceOptions& o, GpuSparseAllreduceResult* result) {
  ZEN_CHECK_ARG(o.comm != nullptr && result != nullptr,
                "gpu sparse allreduce: null communicator or result");
  const auto start = ops::Clock::now();
  result->stats = ops::SyncStats{};
  result->sparse.nnz = 0;
  NcclComm& comm = *o.comm;
  ZEN_CHECK_CUDA(cudaSetDevice(comm.deviceIndex()));
  ZEN_RETURN_IF_ERROR(comm.init());
  const ops::TransportCounters before = comm.counters();

  GpuSparseAllreduceWorkspace::State local;
  GpuSparseAllreduceWorkspace::State& st = o.workspace != nullptr ? o.workspace->state() : local;
  // The kernels' own waits for the stream (counts, verdicts) get the communicator's bound.
  st.scratch.setWaitTimeout(comm.timeoutSeconds());
  st.extractor.setWaitTimeout(comm.timeoutSeconds());
  GpuSchemeCall call;
  call.options = &o;
  call.state = &st;
  ZEN_RETURN_IF_ERROR(prepareInput(o, st, &call.input));
  const SparseView& in = call.input;

  // Where the dense output goes.
  if (o.denseOutput) {
    if (o.denseOutputView.data != nullptr) {
      const DenseView& v = o.denseOutputView;
      ZEN_CHECK_ARG(v.dtype == in.dtype && v.numRows() == in.numRows && v.rowSize() == in.rowSize &&
                        v.device == in.device,
                    "gpu sparse allreduce: dense output {} [{} x {}] on {}, expected {} [{} x {}] "
                    "on {}",
                    dataTypeName(v.dtype), v.numRows(), v.rowSize(), v.device.toString(),
                    dataTypeName(in.dtype), in.numRows, in.rowSize, in.device.toString());
      call.denseOut = v;
    } else {
      DenseView v;
      v.dtype = in.dtype;
      v.shape = TensorShape({in.numRows, in.rowSize});
      v.device = in.device;
      ZEN_RETURN_IF_ERROR(result->dense.reserve(std::max<size_t>(v.bytes(), 1)));
      v.data = result->dense.data();
      call.denseOut = v;
    }
  }

  uint64_t totalNnz = 0;
  ZEN_RETURN_IF_ERROR(agreeOnCall(o, in, st, &totalNnz));
  ZEN_ASSIGN_OR_RETURN(const Scheme scheme, resolveGpuScheme(o.scheme));
  result->stats.scheme = scheme;

  if (totalNnz == 0) {
    if (o.denseOutput) {
      ZEN_CHECK_CUDA(cudaMemsetAsync(call.denseOut.data, 0, call.denseOut.bytes(), o.stream));
      result->stats.outputNnz = scheme == Scheme::kDense ? in.numRows : 0;
    }
    result->sparse.numRows = in.numRows;
    result->sparse.rowSize = in.rowSize;
    result->sparse.dtype = in.dtype;
    result->sparse.deviceIndex = in.device.index;
    result->sparse.nnz = 0;
    ZEN_RETURN_IF_ERROR(comm.wait(o.stream, "zero output"));
  } else {
    switch (scheme) {
      case Scheme::kDense:
        ZEN_RETURN_IF_ERROR(gpuSparseAllreduceDense(call, result));
        break;
      case Scheme::kAgSparse:
        ZEN_RETURN_IF_ERROR(gpuSparseAllreduceAgSparse(call, result));
        break;
      case Scheme::kHc:
        ZEN_RETURN_IF_ERROR(gpuSparseAllreduceHc(call, result));
        break;
      case Scheme::kBlocks:
        ZEN_RETURN_IF_ERROR(gpuSparseAllreduceBlocks(call, result));
        break;
      default:
        ZEN_RETURN_IF_ERROR(gpuSparseAllreduceZen(call, result));
        break;
    }
    // The schemes end with the decode (or extraction) still queued after their last wait;
    // the contract is complete outputs at return (the executor ends a bucket with an in-place
    // dense output right away, the tests read results on another stream).
    ZEN_RETURN_IF_ERROR(comm.wait(o.stream, "the output's decode"));
  }
  const ops::TransportCounters after = comm.counters();
  result->stats.bytesSent = after.totalSent() - before.totalSent();
  result->stats.bytesReceived = after.totalReceived() - before.totalReceived();
  result->stats.seconds = std::chrono::duration<double>(ops::Clock::now() - start).count();
  return Status::ok();
}

}  // namespace

Status gpuSparseAllreduce(const GpuSparseAllreduceOptions& o, GpuSparseAllreduceResult* result) {
  const Status s = runSparseAllreduce(o, result);
  // A kernel's own bounded stream wait timed out (NcclComm's waits abort by themselves): the
  // stream may hold NCCL kernels that never end, and aborting the communicator ends them.
  if (s.code() == StatusCode::kTimeout && o.comm != nullptr) o.comm->abort(s);
  return s;
}

}  // namespace zen::cuda
